---@meta mk.home
-- engine/runtime.c: where the engine's files are.

---@class mk.home
---@field home string the engine home (MKENGINE_HOME, else the source or install tree)
---@field version string
local home = {}

--- `home .. "/" .. rel`.
---@param rel string
---@return string
function home.path(rel) end

return home

---@meta mk.home
-- engine/runtime.c: where the engine's files are.

---@class mk.home
---@field home string the engine home (MKENGINE_HOME, else the source or install tree)
---@field version string
---@field exe string? the running mkengine executable
---@field exe_dir string? its directory (a build tree, or <prefix>/bin)
local home = {}

--- A helper program of the running engine, found relative to its
--- executable: `exe_dir/build_rel` (a build tree, whatever its name), else
--- `exe_dir/../install_rel` (installed under a prefix). Absolute path, or
--- nil when neither exists.
---@param build_rel string?
---@param install_rel string?
---@return string?
function home.helper(build_rel, install_rel) end

--- `home .. "/" .. rel`.
---@param rel string
---@return string
function home.path(rel) end

return home

---@meta mk.proc
-- engine/proc.c + engine/exec/mk-exec.c (docs/api/proc.md). Waits: call inside a task.

---@class mk.proc
local proc = {}

---@class mk.proc.opts
---@field argv string[] program and arguments; no shell
---@field cwd string|nil
---@field env table<string, string|number|false>|nil applied over the engine's environment; false removes
---@field clear_env boolean|nil
---@field stdin string|nil
---@field timeout number|nil seconds of wall time
---@field max_output integer|nil bytes kept per stream (default 64 MiB)
---@field limits {mem_mb: number?, cpu_s: number?, nproc: integer?, fsize_mb: number?}|nil
---@field sandbox table|nil options of mk.services.sandbox.wrap

---@class mk.proc.result
---@field status "exited"|"signaled"|"timeout"
---@field code integer|nil
---@field signal integer|nil
---@field stdout string
---@field stderr string
---@field truncated boolean|nil
---@field wall_s number
---@field cpu_s number
---@field max_rss_kb integer
---@field pid integer

---@param opts mk.proc.opts
---@return mk.proc.result|nil
---@return mk.err|nil err kind "spawn" when nothing could run
function proc.run(opts) end

return proc

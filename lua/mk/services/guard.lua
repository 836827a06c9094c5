--- mk.services.guard: run Lua code the engine does not trust (a task's
--- task.lua) with a bound on its CPU time and on the memory it allocates,
--- so an endless loop or a runaway allocation ends in a clear error instead
--- of a hung or swapping engine. CPU time is checked by a count hook every
--- few thousand VM instructions; memory by a ceiling on the engine's Lua
--- allocator (mk.limits). The code must not wait on engine primitives.
local limits = require("mk.limits")

local M = {}

M.defaults = { cpu_s = 10, mem_mb = 512 }

--- Call fn(...) under the bounds. Returns true, results... or false, err
--- with err = {kind = "limit", message} naming `what` when a bound was
--- passed, or false, the error fn raised.
---@param what string names the code in messages ("examples/x/task.lua")
---@param o table|nil {cpu_s = 10, mem_mb = 512}
function M.call(what, o, fn, ...)
  o = o or {}
  local cpu_s, mem_mb = o.cpu_s or M.defaults.cpu_s, o.mem_mb or M.defaults.mem_mb
  local hit
  local t0 = os.clock()
  local old_hook, old_mask, old_count = debug.gethook()
  debug.sethook(function()
    if os.clock() - t0 > cpu_s then
      hit = string.format("%s ran for more than %gs of CPU time (an endless loop?)", what, cpu_s)
      error(hit, 0)
    end
  end, "", 10000)
  collectgarbage()
  local used = limits.memory()
  local _, prev_limit = limits.memory(used + math.floor(mem_mb * 1048576))
  local r = table.pack(pcall(fn, ...))
  limits.memory(prev_limit)
  debug.sethook(old_hook, old_mask, old_count)
  if r[1] then return table.unpack(r, 1, r.n) end
  local err = r[2]
  if hit then return false, { kind = "limit", message = hit } end
  if err == "not enough memory" or (type(err) == "string" and err:find("not enough memory", 1, true)) then
    collectgarbage()
    return false, { kind = "limit", message = string.format("%s allocated more than %g MB", what, mem_mb) }
  end
  return false, err
end

return M

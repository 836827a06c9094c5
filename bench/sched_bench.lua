-- Scheduler benchmark: cost of spawn+finish, and 10,000 tasks each
-- sleeping 1 s (wall time and peak RSS of the whole engine process).
-- Run: build/mkengine script bench/sched_bench.lua [N]
local task = require "mk.services.task"

local function peak_rss_mb()
  local f = io.open("/proc/self/status")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmHWM:%s*(%d+)")) / 1024
end

local n = tonumber(arg[1]) or 10000

local t0 = task.now()
local sleepers = {}
for i = 1, n do sleepers[i] = task.spawn(task.sleep, 1.0) end
task.gather(sleepers)
local dt = task.now() - t0
print(string.format("%d tasks sleeping 1 s: wall %.3f s, peak RSS %.1f MB", n, dt, peak_rss_mb() or -1))

-- spawn + finish: tasks that return at once
local rounds = 100000
t0 = task.now()
local hs = {}
for i = 1, rounds do hs[i] = task.spawn(function() return i end) end
for i = 1, rounds do task.await(hs[i]) end
dt = task.now() - t0
print(string.format("spawn+finish+await: %d tasks in %.3f s = %.2f us/task", rounds, dt, dt / rounds * 1e6))

return 0

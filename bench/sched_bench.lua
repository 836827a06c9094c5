-- Scheduler benchmark: cost of spawn+finish, and 10,000 tasks each
-- sleeping 1 s (wall time and peak RSS of the whole engine process),
-- R rounds of each; medians with their spread and the machine's state.
-- Run: build/mkengine script bench/sched_bench.lua [N=10000] [R=3]
local task = require "mk.services.task"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local function peak_rss_mb()
  local f = io.open("/proc/self/status")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmHWM:%s*(%d+)")) / 1024
end

local n = tonumber(arg[1]) or 10000
local R = tonumber(arg[2]) or 3
local machine = stats.machine()

local walls, spawns = {}, {}
local rounds = 100000
for r = 1, R do
  local t0 = task.now()
  local sleepers = {}
  for i = 1, n do sleepers[i] = task.spawn(task.sleep, 1.0) end
  task.gather(sleepers)
  walls[r] = task.now() - t0
end
local hwm = peak_rss_mb() -- before the spawn rounds, which hold 100,000 handles

-- spawn + finish: tasks that return at once
for r = 1, R do
  local t0 = task.now()
  local hs = {}
  for i = 1, rounds do hs[i] = task.spawn(function() return i end) end
  for i = 1, rounds do task.await(hs[i]) end
  spawns[r] = (task.now() - t0) / rounds
end
print(string.format("%d tasks sleeping 1 s: wall %s (target < 1.2 s); peak RSS %.1f MB (target < 50)", n,
  stats.fmt(walls, 1, "s"), hwm or -1))
print(string.format("spawn+finish+await of %d tasks: %s per task", rounds, stats.fmt(spawns, 1e6, "us")))
stats.report(machine)
return 0

-- Scheduler demo: many tasks waiting at once, a timeout and a semaphore.
-- Run: build/mkengine script examples/scheduler_demo.lua
local task = require "mk.services.task"

local t0 = task.now()
local sem = task.semaphore(4) -- at most 4 "device runs" at once
local hs = {}
for i = 1, 2000 do
  hs[i] = task.spawn(function()
    task.sleep(0.5) -- e.g. waiting for an LLM
    return sem:with(function()
      task.sleep(0.001) -- e.g. holding the device
      return i
    end)
  end)
end
local results = task.gather(hs)
print(string.format("2000 tasks finished in %.2f s (last result %d)", task.now() - t0, results[2000]))
print("timeout:", task.timeout(0.1, task.sleep, 10))
return 0

-- Report benchmark: time to load and render the HTML report of a synthetic
-- run with N nodes (default 5000), R times (default 3), and the page size.
-- Run: build/mkengine script bench/report_bench.lua [N] [R]
local fs = require "mk.fs"
local task = require "mk.services.task"
local fakerun = dofile("tests/lua/lib/fakerun.lua")
local report = require "mk.study.report"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local n = tonumber(arg[1]) or 5000
local R = tonumber(arg[2]) or 3
local machine = stats.machine()
local dir = fs.tmpdir("mk-report-bench-")
fakerun.make { dir = dir .. "/run", nodes = n, best = 3, seed = 5 }
local loads, renders, size = {}, {}, 0
for r = 1, R do
  local t0 = task.now()
  local data = assert(report.load(dir .. "/run"))
  local t1 = task.now()
  local html = report.html(data)
  loads[r], renders[r], size = t1 - t0, task.now() - t1, #html
end
print(string.format("report of a %d-node run: load %s, render %s, page %.2f MB", n, stats.fmt(loads, 1, "s"),
  stats.fmt(renders, 1, "s"), size / 1e6))
fs.rm_rf(dir)
stats.report(machine)

-- Report benchmark: time to load and render the HTML report of a synthetic
-- run with N nodes (default 5000), and the page size.
-- Run: build/mkengine script bench/report_bench.lua [N]
local fs = require "mk.fs"
local task = require "mk.services.task"
local fakerun = dofile("tests/lua/lib/fakerun.lua")
local report = require "mk.study.report"

local n = tonumber(arg[1]) or 5000
local dir = fs.tmpdir("mk-report-bench-")
fakerun.make { dir = dir .. "/run", nodes = n, best = 3, seed = 5 }
local t0 = task.now()
local data = assert(report.load(dir .. "/run"))
local t1 = task.now()
local html = report.html(data)
local t2 = task.now()
print(string.format("report of a %d-node run: load %.3f s, render %.3f s, page %.2f MB",
  n, t1 - t0, t2 - t1, #html / 1e6))
fs.rm_rf(dir)

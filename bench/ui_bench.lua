-- Benchmark of the run viewer's engine side (issue 23: serving a run must
-- not slow the search: engine CPU with the page open ≤ 2 % over the same
-- run without it; a 10,000-node graph's page usable within 2 s; the page
-- side is bench/ui_bench.py, in Chromium).
--
--   mkengine script bench/ui_bench.lua              tick cost + state of a 10,000-node run
--   mkengine script bench/ui_bench.lua make DIR N   (internal: write an N-node run to DIR)
--
-- Figures: the engine CPU of one viewer tick on a run that did not change
-- (what an open page costs between nodes: one stat per watched file,
-- 10 ticks a second), of one tick that reads one new node, and of the first
-- load and the `state` message of a 10,000-node run (what opening the page
-- costs the engine).
local fs = require "mk.fs"
local json = require "cjson"
local rundir = require "mk.search.rundir"
local runs = require "mk.ui.runs"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

-- A run of n nodes: a tree where node i hangs under a random earlier node,
-- every node with a 2 KB kernel, a plan, metrics and a node event.
local function make(dir, n)
  local run = assert(rundir.create { dir = dir, strategy = "evolve", task = "bench" })
  local spent = 0
  run.spent = function() return { tokens = spent, usd = spent * 1e-6, device_s = spent / 1e4 } end
  local nodes = {}
  math.randomseed(7)
  for i = 1, n do
    local code = string.format("/* candidate %d */\n", i) .. string.rep("  acc += x[i] * w[i];\n", 90)
    local parent = i > 1 and nodes[math.random(math.max(1, i - 200), i - 1)] or nil
    spent = spent + 1500
    local ok = i % 4 ~= 0
    nodes[i] = assert(run.graph:add { parents = { parent }, kind = i == 1 and "reference" or "implement",
      key = "k" .. i, files = { ["kernel.c"] = code }, plan = "plan " .. i, status = ok and "ok" or "incorrect",
      metrics = { latency_s = 1e-3 / (1 + (i % 97) / 50), speedup = ok and (1 + (i % 97) / 50) or nil } })
  end
  run:close()
end

local function usage_per(fn, reps)
  local c0 = os.clock()
  for _ = 1, reps do fn() end
  return (os.clock() - c0) / reps
end

local function main()
  local before = stats.machine()
  local N = 10000
  local dir = fs.tmpdir("mk-ui-bench") .. "/run"
  local t0 = os.clock()
  make(dir, N)
  print(string.format("made a %d-node run in %.1f s CPU", N, os.clock() - t0))
  local loads, states, sizes = {}, {}, {}
  for r = 1, 3 do
    local c0 = os.clock()
    local w = runs.watch(dir)
    w:poll()
    loads[r] = os.clock() - c0
    c0 = os.clock()
    local text = json.encode(w:state())
    states[r] = os.clock() - c0
    sizes[r] = #text / 1e6
  end
  print("first load of the run (engine CPU): " .. stats.fmt(loads, 1e3, "ms"))
  print("the page's state message (engine CPU): " .. stats.fmt(states, 1e3, "ms") .. string.format(", %.1f MB", sizes[1]))
  local w = runs.watch(dir)
  w:poll()
  local idle = {}
  for r = 1, 5 do idle[r] = usage_per(function() w:poll() end, 20000) end
  print("tick on an unchanged run (engine CPU): " .. stats.fmt(idle, 1e6, "µs"))
  print(string.format("  at 10 ticks a second: %.3f %% of one core per open run", stats.median(idle) * 10 * 100))
  local run = assert(rundir.open(dir))
  run.spent = function() return { tokens = 1, usd = 0, device_s = 0 } end
  local grow = {}
  for r = 1, 200 do
    assert(run.graph:add { parents = { "n0001" }, kind = "implement", key = "g" .. r, files = { ["kernel.c"] = "int x;\n" },
      metrics = { latency_s = 1e-3, speedup = 1 } })
    local c0 = os.clock()
    w:poll()
    grow[r] = os.clock() - c0
  end
  run:close()
  print("tick that reads one new node and its event (engine CPU): " .. stats.fmt(grow, 1e6, "µs"))
  stats.report(before)
  fs.rm_rf(dir:match("^(.*)/run$"))
end

if arg[1] == "make" then
  make(assert(arg[2], "make DIR N"), math.tointeger(tonumber(arg[3])) or 10000)
else
  main()
end

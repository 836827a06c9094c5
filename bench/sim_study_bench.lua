-- Where the time of a simulated study goes (issue 33): one bench of the
-- simulated suite run in this process, with a sampling profiler: every
-- COUNT Lua instructions a hook charges the CPU time since the last sample
-- to the innermost frame of a known room of the engine (the git graph, the
-- run directory and its events, prompt building, retrieval, the simulated
-- model and device, the evaluation service, ...). Time spent in C (libgit2,
-- zlib, cjson, file writes) is charged to the Lua frame that called it,
-- which is where the next sample lands. Every task coroutine sets the hook
-- as it starts (mk.sched.spawn is wrapped), so the whole bench is sampled.
--   mkengine script bench/sim_study_bench.lua [STRATEGY=parallel] [REPEAT=1] [COUNT=200] [OUT=/tmp/...]
-- COUNT=0: no profiler (the bench's own CPU and wall).
-- Prints wall and CPU per run, per node, the share of each room, the top
-- functions, and the machine's state. The whole four-strategy study's time
-- is `mkengine script bench/sim_calibrate.lua study --repeat 5`.
local bench = require "mk.study.bench"
local fs = require "mk.fs"
local home = require "mk.home"
local task_lib = require "mk.services.task"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local STRATEGY = arg[1] or "parallel"
local K = tonumber(arg[2]) or 1
local COUNT = tonumber(arg[3]) or 200
local OUT = arg[4] or string.format("%s/mk-sim-profile-%d", os.getenv("TMPDIR") or "/tmp", os.time())

-- Rooms by source path, innermost frame first; the first match names the room.
local ROOMS = {
  { "mk/search/graph.lua", "graph: node commits (git objects, refs, index)" },
  { "mk/services/llm/providers/sim.lua", "simulated model (reading prompts, answers)" },
  { "mk/services/sim/", "simulated model and device rules" },
  { "targets/sim/", "simulated device" },
  { "mk/services/retrieve.lua", "knowledge-base retrieval" },
  { "mk/services/template.lua", "prompt templates" },
  { "agents/", "sub-agents (prompt building, reply parsing)" },
  { "mk/search/rundir.lua", "run directory: events, run.json, summary" },
  { "mk/services/llm", "LLM client (ledger, cost)" },
  { "mk/eval.lua", "evaluation service" },
  { "mk/eval/", "evaluation service" },
  { "mk/search/context.lua", "ctx (steps, records, Auto)" },
  { "mk/search/runner.lua", "runner (open, freeze, held-out, summary)" },
  { "mk/search/", "search (budget, ledger, ask)" },
  { "mk/study/", "bench bookkeeping (results.json)" },
  { "mk/services/text.lua", "UTF-8 cleaning of what is written as JSON (events, index)" },
  { "mk/services/rng.lua", "seeded generators (FNV hashing of keys)" },
  { "mk/services/util.lua", "util (deep copies, files keys)" },
  { "mk/services/task.lua", "scheduler (Lua side)" },
  { "mk/services/", "other services (workdirs, json, ...)" },
  { "strategies/", "strategy code" },
}

local by_room, by_fn, last = {}, {}, nil

local function room_of()
  local fn_name
  for level = 3, 60 do
    local info = debug.getinfo(level, "Sn")
    if not info then break end
    local src = info.source
    if not fn_name and src:sub(1, 1) == "@" then
      fn_name = string.format("%s:%s", src:match("([^/]+/[^/]+)$") or src, info.name or info.linedefined)
    end
    for _, r in ipairs(ROOMS) do
      if src:find(r[1], 1, true) then return r[2], fn_name end
    end
  end
  return "other (C entry, loop)", fn_name or "?"
end

local function sample()
  local now = os.clock()
  if last then
    local room, fn = room_of()
    by_room[room] = (by_room[room] or 0) + (now - last)
    by_fn[fn] = (by_fn[fn] or 0) + (now - last)
  end
  last = os.clock() -- the hook's own time is not charged
end

local m = stats.machine()
local nodes = 0
local t0, c0 = task_lib.now(), os.clock()
-- a new coroutine inherits the C hook but not the Lua function (ldblib keeps it per
-- thread): every task sets it first
local sched = require "mk.sched"
local spawn = sched.spawn
sched.spawn = function(fn, ...)
  return spawn(function(...)
    debug.sethook(sample, "", COUNT)
    return fn(...)
  end, ...)
end
if COUNT > 0 then debug.sethook(sample, "", COUNT) else sched.spawn = spawn end
local res = assert(bench.run { suite = home.path("examples/suites/sim-jaxbench"), strategy = STRATEGY, repeats = K,
  model = "sim", out = OUT, concurrency = 4 })
debug.sethook()
sched.spawn = spawn
local wall, cpu = task_lib.now() - t0, os.clock() - c0
for _, row in ipairs(res.tasks) do
  for _, r in ipairs(row.runs) do nodes = nodes + (tonumber(r.nodes) or 0) end
end
local runs = #res.tasks * K

local total = 0
for _, v in pairs(by_room) do total = total + v end
total = math.max(total, 1e-9)
print(string.format("%s, %d runs, %d nodes: wall %.1f s, CPU %.1f s (%s; %.1f ms CPU a run, %.2f ms a node)",
  STRATEGY, runs, nodes, wall, cpu, COUNT > 0 and "profiled, so slower" or "no profiler", 1000 * cpu / runs,
  1000 * cpu / nodes))
local rooms = {}
for k, v in pairs(by_room) do rooms[#rooms + 1] = { k, v } end
table.sort(rooms, function(a, b) return a[2] > b[2] end)
for _, r in ipairs(rooms) do print(string.format("  %5.1f %%  %6.2f s  %s", 100 * r[2] / total, r[2], r[1])) end
local fns = {}
for k, v in pairs(by_fn) do fns[#fns + 1] = { k, v } end
table.sort(fns, function(a, b) return a[2] > b[2] end)
print("top functions (innermost Lua frame):")
for i = 1, math.min(12, #fns) do print(string.format("  %5.1f %%  %s", 100 * fns[i][2] / total, fns[i][1])) end
stats.report(m)
fs.rm_rf(OUT) -- ~500 files a run
return 0

-- Evaluation cost of the Pallas target (results in BENCHMARKS.md,
-- "## Evaluation (target `pallas`)").
--   mkengine script bench/pallas_eval_bench.lua [POOL] [ROUNDS] [SESSIONS]
-- Evaluates the correct kernels of the rmsnorm bank with mk.eval (compile,
-- search tests with the separate check, bench with its check; no tuning),
-- ROUNDS times each (a fresh evaluator per round, so nothing is cached; all
-- closed at the end, as a run keeps its harness processes), with
-- POOL pre-started harness processes (0 = every step a fresh process that
-- imports JAX). Each candidate's steps run in one process of its own, its
-- checks in one light process; SESSIONS = 0 gives every step a pre-started
-- process of its own instead (the model before issue 24). Per candidate it
-- prints the wall time, the candidate's own time (what the harness measured
-- for lowering, compiling and calling the candidate, summed over its steps)
-- and their difference: the engine-side overhead (process start, JAX
-- import, input loading, the check processes, the engine itself), split
-- into the time outside the harness's steps and its set-up inside them.
local fs = require "mk.fs"
local task_lib = require "mk.services.task"
local targets = require "mk.eval.targets"
local pallas = targets.get("pallas")
local eval = require "mk.eval"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local pool = tonumber(arg and arg[1]) or 1
local rounds = tonumber(arg and arg[2]) or 2
pallas.max_sessions = tonumber(arg and arg[3]) or pallas.max_sessions -- 0: no sessions (one step per process)
local TASK = "examples/tasks/pallas/rmsnorm"
local KERNELS = { "pallas_rows", "pallas_dma", "pallas_big_rows", "pallas_two_pass" }
pallas.pool_size = pool

-- The candidate's own seconds, from the harness's answers, and where the
-- rest went: `outside` = the engine's wall time of each step minus the time
-- the harness spent in it (process start or wait for a pre-started one,
-- JAX import still running, the request and answer, exit); `inside` = the
-- harness's time in the step minus the candidate's own (task, inputs,
-- backend set-up, writing outputs, the check's comparison).
local own, acc = 0, nil
local function new_acc() return { outside = 0, inside = 0, steps = {}, pids = {} } end
pallas.on_result = function(sub, r)
  local o = 0
  if sub == "compile" or sub == "bench" then o = (r.lower_s or 0) + (r.compile_s or 0) + (r.calls_s or 0) end
  if sub == "run" then o = (r.compile_s or 0) + (r.calls_s or 0) end
  own = own + o
  if acc and r.step_s then
    acc.outside = acc.outside + math.max(0, (r.wall_s or 0) - r.step_s)
    acc.inside = acc.inside + math.max(0, r.step_s - o)
    acc.steps[#acc.steps + 1] = string.format("%s%s (%.2f+%.2f)", sub,
      r.session_step and ("#" .. math.tointeger(r.session_step)) or "", math.max(0, (r.wall_s or 0) - r.step_s),
      math.max(0, r.step_s - o))
    acc.pids[tostring(r.process)] = true
  end
end

local machine = stats.machine()
local task = assert(targets.load_task(TASK))
task.seeds, task.heldout_seeds = { 0 }, {}
local tests = fs.tmpdir("mk-pallas-bench-tests")
local prep = eval.new(task, { tests_dir = tests .. "/t" })
prep:freeze()
prep:baseline()
print(string.format("pool %d, sessions %d, %d round(s), task %s, frozen cases %d (test scale factor: %s)", pool,
  pallas.max_sessions, rounds, TASK,
  #prep.frozen.cases, tostring(prep.frozen.test_scale and prep.frozen.test_scale.factor)))
local walls, overheads, outsides, insides, evs = {}, {}, {}, {}, {}
for r = 1, rounds do
  local ev = eval.new(task, { tests_dir = tests .. "/t", bench = { min_reps = 3, max_reps = 3, warmup = 1 } })
  ev.base = prep.base
  for _, k in ipairs(KERNELS) do
    local src = assert(fs.read(TASK .. "/scripted/" .. k .. ".py"))
    own, acc = 0, new_acc()
    local t0 = task_lib.now()
    local res = ev:evaluate(src, { tune = false })
    local wall = task_lib.now() - t0
    assert(res.status == "ok", k .. ": " .. tostring(res.message))
    walls[#walls + 1], overheads[#overheads + 1] = wall, wall - own
    outsides[#outsides + 1], insides[#insides + 1] = acc.outside, acc.inside
    local tm = res.timing or {}
    local np = 0
    for _ in pairs(acc.pids) do np = np + 1 end
    print(string.format("  round %d %-16s wall %.2f s, candidate's own %.2f s, overhead %.2f s "
      .. "(compile %.2f, test %.2f, bench %.2f, check %.2f, queue %.2f, engine %.2f)", r, k, wall, own, wall - own,
      tm.compile_s or 0, tm.test_s or 0, tm.bench_s or 0, tm.check_s or 0, tm.queue_s or 0, tm.engine_s or 0))
    print(string.format("    overhead: outside the steps %.2f s, harness set-up inside them %.2f s, the rest %.2f s; "
      .. "steps (outside+set-up s) %s in %d processes", acc.outside, acc.inside, wall - own - acc.outside - acc.inside,
      table.concat(acc.steps, ", "), np))
  end
  evs[#evs + 1] = ev -- closed at the end: closing one ends every pre-started process, which a run keeps
end
for _, ev in ipairs(evs) do ev:close() end
print(string.format("per candidate: wall %s, engine-side overhead %s (goal 0.5 s; pool %d; warm/cold steps %d/%d)",
  stats.fmt(walls, 1, "s"), stats.fmt(overheads, 1, "s"), pool, pallas.pool_stats.warm, pallas.pool_stats.cold))
print(string.format("  of which outside the steps %s, harness set-up inside them %s", stats.fmt(outsides, 1, "s"),
  stats.fmt(insides, 1, "s")))
prep:close()
fs.rm_rf(tests)
stats.report(machine)

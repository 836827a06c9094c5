-- Evaluation cost of the Pallas target (results in BENCHMARKS.md,
-- "## Evaluation (target `pallas`)").
--   mkengine script bench/pallas_eval_bench.lua [POOL] [ROUNDS]
-- Evaluates the correct kernels of the rmsnorm bank with mk.eval (compile,
-- search tests with the separate check, bench with its check; no tuning),
-- ROUNDS times each (a fresh evaluator per round, so nothing is cached), with
-- POOL pre-started harness processes (0 = every step a fresh process that
-- imports JAX). Per candidate it prints the wall time, the candidate's own
-- time (what the harness measured for lowering, compiling and calling the
-- candidate, summed over its steps) and their difference: the engine-side
-- overhead (process start, JAX import, input loading, the check processes,
-- the engine itself).
local fs = require "mk.fs"
local task_lib = require "mk.services.task"
local targets = require "mk.eval.targets"
local pallas = targets.get("pallas")
local eval = require "mk.eval"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local pool = tonumber(arg and arg[1]) or 1
local rounds = tonumber(arg and arg[2]) or 2
local TASK = "examples/tasks/pallas/rmsnorm"
local KERNELS = { "pallas_rows", "pallas_dma", "pallas_big_rows", "pallas_two_pass" }
pallas.pool_size = pool

-- The candidate's own seconds, from the harness's answers.
local own = 0
pallas.on_result = function(sub, r)
  if sub == "compile" or sub == "bench" then own = own + (r.lower_s or 0) + (r.compile_s or 0) + (r.calls_s or 0) end
  if sub == "run" then own = own + (r.compile_s or 0) + (r.calls_s or 0) end
end

local machine = stats.machine()
local task = assert(targets.load_task(TASK))
task.seeds, task.heldout_seeds = { 0 }, {}
local tests = fs.tmpdir("mk-pallas-bench-tests")
local prep = eval.new(task, { tests_dir = tests .. "/t" })
prep:freeze()
prep:baseline()
print(string.format("pool %d, %d round(s), task %s, frozen cases %d (test scale factor: %s)", pool, rounds, TASK,
  #prep.frozen.cases, tostring(prep.frozen.test_scale and prep.frozen.test_scale.factor)))
local walls, overheads = {}, {}
for r = 1, rounds do
  local ev = eval.new(task, { tests_dir = tests .. "/t", bench = { min_reps = 3, max_reps = 3, warmup = 1 } })
  ev.base = prep.base
  for _, k in ipairs(KERNELS) do
    local src = assert(fs.read(TASK .. "/scripted/" .. k .. ".py"))
    own = 0
    local t0 = task_lib.now()
    local res = ev:evaluate(src, { tune = false })
    local wall = task_lib.now() - t0
    assert(res.status == "ok", k .. ": " .. tostring(res.message))
    walls[#walls + 1], overheads[#overheads + 1] = wall, wall - own
    local tm = res.timing or {}
    print(string.format("  round %d %-16s wall %.2f s, candidate's own %.2f s, overhead %.2f s "
      .. "(compile %.2f, test %.2f, bench %.2f, check %.2f, queue %.2f, engine %.2f)", r, k, wall, own, wall - own,
      tm.compile_s or 0, tm.test_s or 0, tm.bench_s or 0, tm.check_s or 0, tm.queue_s or 0, tm.engine_s or 0))
  end
  ev:close()
end
print(string.format("per candidate: wall %s, engine-side overhead %s (goal 0.5 s; pool %d; warm/cold steps %d/%d)",
  stats.fmt(walls, 1, "s"), stats.fmt(overheads, 1, "s"), pool, pallas.pool_stats.warm, pallas.pool_stats.cold))
prep:close()
fs.rm_rf(tests)
stats.report(machine)

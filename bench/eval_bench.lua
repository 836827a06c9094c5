-- Benchmarks of the evaluation path (results in BENCHMARKS.md, "## Evaluation").
--   mkengine script bench/eval_bench.lua [ROWS COLS THREADS REPEATS]
-- 1. Stability: the same rmsnorm kernel benchmarked REPEATS times (each a
--    fresh runner process, 0.5 s of timed calls): medians and their spread.
-- 2. Overhead: full evaluate()s (compile, search tests, bench, profile), 3
--    fresh sources, with the evaluator's timing breakdown.
local fs = require "mk.fs"
local task_lib = require "mk.services.task"
local c = require("mk.eval.targets").get("c")
local eval = require "mk.eval"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local rows = tonumber(arg and arg[1]) or 1024
local cols = tonumber(arg and arg[2]) or 1024
local threads = tonumber(arg and arg[3]) or 1
local repeats = tonumber(arg and arg[4]) or 10
local RMS = "examples/tasks/c/rmsnorm"

local machine = stats.machine()
local ev = eval.new(RMS, { bench_sizes = { rows = rows, cols = cols }, threads = threads,
  bench = { min_time = 0.5 } })
local t0 = task_lib.now()
ev:freeze()
print(string.format("freeze at %dx%d: %.2f s (%d input sets)", rows, cols, task_lib.now() - t0, ev.frozen.meta.sets))
t0 = task_lib.now()
local base = ev:baseline()
print(string.format("baseline: %.3f ms median, %.2f s wall", base.latency_s * 1e3, task_lib.now() - t0))

local src = fs.read(RMS .. "/scripted/simd.c")
local build = c.compile(ev.task, { ["kernel.c"] = src }, ev.root .. "/stab", {})
assert(build.status == "ok", build.message)
local meds, mins, p10s, unds = {}, {}, {}, {}
for i = 1, repeats do
  local r = c.bench(ev.task, build, { tests_dir = ev.tests_dir, min_time = 0.5, threads = threads })
  assert(r.status == "ok", r.message)
  meds[i], mins[i], p10s[i], unds[i] = r.latency_s, r.min_s, r.p10_s, r.median_undisturbed_s
  print(string.format("  run %2d: median %.4f ms (undisturbed calls %.4f), p10 %.4f, min %.4f, spread %.0f%%, "
    .. "%d reps, %d undisturbed", i, r.latency_s * 1e3, r.median_undisturbed_s * 1e3, r.p10_s * 1e3, r.min_s * 1e3,
    100 * r.spread, r.reps, r.undisturbed))
end
local function stability(name, xs)
  local mid = stats.median(xs)
  local worst = 0
  for _, m in ipairs(xs) do worst = math.max(worst, math.abs(m - mid) / mid) end
  print(string.format("stability of the %s: %s, max deviation from their median %.1f%% (goal 3%%)", name,
    stats.fmt(xs, 1e3, "ms"), 100 * worst))
end
stability("median", meds)
stability("median of undisturbed calls", unds)
stability("p10", p10s)
stability("min", mins)

-- overhead of a full evaluation, 3 fresh sources: the evaluator's own
-- breakdown (`timing`; its steps overlap, so they need not add up to wall)
local KEYS = { "compile_s", "test_s", "bench_s", "check_s", "queue_s", "engine_s" }
local walls, parts = {}, {}
for i = 1, 3 do
  t0 = task_lib.now()
  local r = ev:evaluate(src .. string.format("\n/* fresh copy %d: not in the evaluator's cache */\n", i),
    { profile = true })
  walls[i] = task_lib.now() - t0
  assert(r.status == "ok", r.message)
  for _, k in ipairs(KEYS) do
    parts[k] = parts[k] or {}
    table.insert(parts[k], (r.timing or {})[k] or 0)
  end
end
local ps = {}
for _, k in ipairs(KEYS) do ps[#ps + 1] = k:gsub("_s$", "") .. " " .. string.format("%.3f", stats.median(parts[k])) end
print(string.format("evaluate: wall %s; medians in s: %s", stats.fmt(walls, 1, "s"), table.concat(ps, ", ")))
ev:close()
stats.report(machine)

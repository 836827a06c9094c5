-- Benchmarks of the evaluation path (results in BENCHMARKS.md, "## Evaluation").
--   mkengine script bench/eval_bench.lua [ROWS COLS THREADS REPEATS]
-- 1. Stability: the same rmsnorm kernel benchmarked REPEATS times (each a
--    fresh runner process, 0.5 s of timed calls): medians and their spread.
-- 2. Overhead: one full evaluate() (compile, search tests, bench, profile)
--    and what part of its wall time is not the compiler or candidate runs.
local fs = require "mk.fs"
local task_lib = require "mk.services.task"
local proc = require "mk.proc"
local c = require("mk.eval.targets").get("c")
local eval = require "mk.eval"

local rows = tonumber(arg and arg[1]) or 1024
local cols = tonumber(arg and arg[2]) or 1024
local threads = tonumber(arg and arg[3]) or 1
local repeats = tonumber(arg and arg[4]) or 10
local RMS = "examples/tasks/c/rmsnorm"

-- time every subprocess by program
local spent = {}
local orig_run = proc.run
proc.run = function(spec)
  local t0 = task_lib.now()
  local r, e = orig_run(spec)
  local prog = spec.argv[1]:match("[^/]+$")
  if prog == "cc" or prog == "gcc" then prog = "compiler" end
  spent[prog] = (spent[prog] or 0) + (task_lib.now() - t0)
  return r, e
end

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
  table.sort(xs)
  local mid = xs[(#xs + 1) // 2]
  local worst = 0
  for _, m in ipairs(xs) do worst = math.max(worst, math.abs(m - mid) / mid) end
  print(string.format("stability of the %s over %d runs: %.4f .. %.4f ms, max deviation from their median %.1f%%",
    name, #xs, xs[1] * 1e3, xs[#xs] * 1e3, 100 * worst))
end
stability("median", meds)
stability("median of undisturbed calls", unds)
stability("p10", p10s)
stability("min", mins)

-- overhead of one full evaluation
for k in pairs(spent) do spent[k] = 0 end
src = src .. "\n/* fresh copy: not in the evaluator's cache */\n"
t0 = task_lib.now()
local r = ev:evaluate(src, { profile = true })
local wall = task_lib.now() - t0
assert(r.status == "ok", r.message)
local cc, run, chk = spent.compiler or 0, spent["mkc-run"] or 0, spent["mkc-check"] or 0
print(string.format("evaluate: %.3f s wall = compiler %.3f s + candidate runs %.3f s + checker %.3f s + engine %.3f s",
  wall, cc, run, chk, wall - cc - run - chk))
print(string.format("overhead beyond compile + runs: %.3f s (checker included), %.1f%% of the evaluation",
  wall - cc - run, 100 * (wall - cc - run) / wall))
ev:close()

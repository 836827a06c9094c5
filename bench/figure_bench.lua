-- Repeatability of one kernel's figure on the C target (results in
-- BENCHMARKS.md, "## One kernel's figure").
--   mkengine script bench/figure_bench.lua [EVALUATIONS ROWS COLS RETAKES]
-- 1. The same kernel (rmsnorm's scripted simd.c) evaluated EVALUATIONS
--    times (default 10) as a run evaluates a candidate: a fresh source
--    each time (a comment differs: compiled, tested, benchmarked anew, not
--    profiled), the benchmark retaken RETAKES times (default 1, the
--    evaluator's) when the target flags contention. Each line shows the
--    figure with the contention figures of its benchmark: other processes'
--    CPU in cores, steal, the load average, the share of timed calls an
--    involuntary context switch interrupted.
-- 2. The spread of the figures: all of them, and the unflagged ones.
-- 3. What re-measuring costs: 3 re-measurements of the same build (what
--    ctx:remeasure and the runner's settling of a tie do), wall each.
local fs = require "mk.fs"
local task_lib = require "mk.services.task"
local eval = require "mk.eval"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local n = tonumber(arg and arg[1]) or 10
local rows = tonumber(arg and arg[2]) or 1024
local cols = tonumber(arg and arg[3]) or 1024
local retakes = tonumber(arg and arg[4]) or 1
local RMS = "examples/tasks/c/rmsnorm"

local machine = stats.machine()
local ev = eval.new(RMS, { bench_sizes = { rows = rows, cols = cols }, threads = 1, bench = { retakes = retakes } })
ev:freeze()
local base = ev:baseline()
print(string.format("rmsnorm %dx%d, baseline %.4f ms%s; %d evaluations of simd.c, retakes %d", rows, cols,
  base.latency_s * 1e3, base.contended and " (contended)" or "", n, retakes))

local src = fs.read(RMS .. "/scripted/simd.c")
local all, clean, flagged = {}, {}, 0
for i = 1, n do
  local t0 = task_lib.now()
  local r = ev:evaluate(src .. string.format("\n/* evaluation %d */\n", i), { profile = false })
  assert(r.status == "ok", r.message)
  local c = r.contention or {}
  all[#all + 1] = r.latency_s
  if r.contended then flagged = flagged + 1 else clean[#clean + 1] = r.latency_s end
  print(string.format("  %2d: %.4f ms %-9s others %.2f cores, steal %.0f %%, load %.2f, disturbed calls %.0f %%, "
    .. "retakes %d, %.1f s", i, r.latency_s * 1e3, r.contended and "FLAGGED" or "clean", c.other_cores or 0,
    100 * (c.steal or 0), c.load1 or 0, 100 * (c.disturbed or 0), r.retakes or 0, task_lib.now() - t0))
end

local function spread(name, xs)
  if #xs == 0 then
    print(name .. ": none")
    return
  end
  local mid = stats.median(xs)
  local worst = 0
  for _, x in ipairs(xs) do worst = math.max(worst, math.abs(x - mid) / mid) end
  print(string.format("%s: %s, max deviation from their median %.1f %%", name, stats.fmt(xs, 1e3, "ms"), 100 * worst))
end
spread("figures, all", all)
spread(string.format("figures, unflagged (%d of %d flagged)", flagged, n), clean)

-- the cost of one more sample of a kernel: a benchmark of its build
local walls = {}
local last = src .. string.format("\n/* evaluation %d */\n", n)
for i = 1, 3 do
  local t0 = task_lib.now()
  local r = ev:remeasure(last)
  assert(r.status == "ok", r.message)
  walls[i] = task_lib.now() - t0
end
print("one re-measurement (ctx:remeasure, settling a tie): wall " .. stats.fmt(walls, 1, "s"))
ev:close()
stats.report(machine)

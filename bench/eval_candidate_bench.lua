-- Evaluation of one candidate inside a run (issue 15 item 2): one evaluator
-- as `mkengine run` makes it (suite frozen and baseline measured first, not
-- timed), then N candidates of the task's scripted bank, each a source not
-- seen before, evaluated as a strategy does (profile on, no autotune).
--   mkengine script bench/eval_candidate_bench.lua [TASK] [ROWS COLS] [N=10] [GAP=0]
-- TASK defaults to examples/tasks/c/rmsnorm; ROWS COLS override its
-- benchmark size (- - keeps it). GAP: seconds between candidates, as the
-- model's reply takes inside a run (not counted in any candidate's time;
-- the evaluator uses it to make the next candidate's probes ahead). Prints each candidate's wall time, the CPU time of the
-- processes it ran (compiler, runner, checker, sandbox: from
-- /proc/self/stat, so it does not depend on other sessions' load), the
-- time breakdown (`timing`) when the engine reports one, and medians.
local fs = require "mk.fs"
local task_lib = require "mk.services.task"
local eval = require "mk.eval"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local TASK = arg and arg[1] or "examples/tasks/c/rmsnorm"
local rows, cols = tonumber(arg and arg[2]), tonumber(arg and arg[3])
local N = tonumber(arg and arg[4]) or 10
local GAP = tonumber(arg and arg[5]) or 0

-- CPU seconds of this process's waited-for children (utime + stime).
local function children_cpu()
  local s = fs.read("/proc/self/stat") or ""
  local rest = s:match("%) (.*)$") or ""
  local f = {}
  for x in rest:gmatch("%S+") do f[#f + 1] = x end
  -- after "pid (comm)": field 3 is f[1]; cutime and cstime are fields 16, 17
  return ((tonumber(f[14]) or 0) + (tonumber(f[15]) or 0)) / 100
end

local function median(xs) return stats.median(xs) or 0 end

local machine = stats.machine()
local opts = { suite_cache = true }
if rows and cols then opts.bench_sizes = { rows = rows, cols = cols } end
local ev = eval.new(TASK, opts)
local t0 = task_lib.now()
ev:freeze()
print(string.format("suite ready in %.2f s (%s, %d input sets)", task_lib.now() - t0,
  ev.frozen.fresh and "frozen now" or "cached, verified", ev.frozen.meta and ev.frozen.meta.sets or -1))
t0 = task_lib.now()
local base = ev:baseline()
print(string.format("baseline %.3f ms, measured in %.2f s", base.latency_s * 1e3, task_lib.now() - t0))

local bank = {}
for _, f in ipairs(fs.list(TASK .. "/scripted") or {}) do
  if f:match("%.c$") then bank[#bank + 1] = f end
end
table.sort(bank)
assert(#bank > 0, "no scripted bank in " .. TASK)

local walls, cpus, ok_walls, parts = {}, {}, {}, {}
local KEYS = { "compile_s", "test_s", "bench_s", "check_s", "queue_s", "setup_s", "engine_s" }
if GAP > 0 then print(string.format("%.1f s between candidates (the model's time in a run; not counted)", GAP)) end
local bparts = {}
for i = 1, N do
  if GAP > 0 then task_lib.sleep(GAP) end
  local name = bank[(i - 1) % #bank + 1]
  local src = fs.read(TASK .. "/scripted/" .. name) .. string.format("\n/* candidate %d %d */\n", i, os.time())
  local c0, w0 = children_cpu(), task_lib.now()
  local r = ev:evaluate(src, { tune = false, profile = true })
  local wall, cpu = task_lib.now() - w0, children_cpu() - c0
  walls[#walls + 1], cpus[#cpus + 1] = wall, cpu
  if r.status == "ok" then ok_walls[#ok_walls + 1] = wall end
  local tm = r.timing
  local line = ""
  if tm then
    local ps = {}
    for _, k in ipairs(KEYS) do
      parts[k] = parts[k] or {}
      parts[k][#parts[k] + 1] = tm[k] or 0
      ps[#ps + 1] = string.format("%s %.2f", k:gsub("_s$", ""), tm[k] or 0)
    end
    line = " = " .. table.concat(ps, ", ")
    if r.status == "ok" and tm.bench_parts then
      for k, v in pairs(tm.bench_parts) do
        bparts[k] = bparts[k] or {}
        bparts[k][#bparts[k] + 1] = v
      end
    end
  end
  print(string.format("%2d %-14s %-13s wall %6.2f s, child CPU %5.2f s%s", i, name, r.status, wall, cpu, line))
end
print(string.format("over %d candidates: wall %s, child CPU %s; correct ones: wall %s", N, stats.fmt(walls, 1, "s"),
  stats.fmt(cpus, 1, "s"), stats.fmt(ok_walls, 1, "s")))
if next(parts) then
  local ps = {}
  for _, k in ipairs(KEYS) do ps[#ps + 1] = string.format("%s %.2f", k, median(parts[k])) end
  print("medians: " .. table.concat(ps, ", "))
end
if next(bparts) then
  local ks, ps = {}, {}
  for k in pairs(bparts) do ks[#ks + 1] = k end
  table.sort(ks)
  for _, k in ipairs(ks) do ps[#ps + 1] = string.format("%s %.2f", k, median(bparts[k])) end
  print("correct ones, the benchmark process (medians): " .. table.concat(ps, ", "))
end
ev:close()
stats.report(machine)

-- Memory of the Pallas target's harness processes over a series of
-- candidates (results in BENCHMARKS.md, "Benchmark references").
--   TMPDIR=$(mktemp -d) mkengine script bench/pallas_memory_bench.lua [N] [TASK]
-- Evaluates N candidates (the tests' candidates of the tiny rmsnorm task,
-- right and wrong, in turn; or TASK's reference N times, each a new file)
-- with one evaluator, as a run does, and after each prints the harness
-- processes alive (found by their inbox under $TMPDIR, so set it to a
-- directory of this run's own), their resident memory in MiB, how many
-- processes served the candidate's steps and whether any of them had served
-- an earlier one (never: one process per candidate). Then the evaluator is
-- closed and what is left is counted (0).
local fs = require "mk.fs"
local targets = require "mk.eval.targets"
local pallas = targets.get("pallas")
local eval = require "mk.eval"

local n = tonumber(arg and arg[1]) or 8
local task_dir = arg and arg[2]
local marker = assert(os.getenv("TMPDIR"), "set TMPDIR to a directory of this run's own (the processes' marker)")
local CANDS = { "good.py", "wrong_eps.py", "leak_x64.py", "probe_x64.py", "zeros.py", "printer.py", "nan.py",
  "tunable_ok.py" }

-- Harness processes (the interpreter itself, not its mk-exec or bwrap
-- wrapper) whose command line names an inbox under the marker: pid -> MiB.
local function harness_processes()
  local out = {}
  for _, p in ipairs(fs.list("/proc") or {}) do
    if p:match("^%d+$") then
      local cmd = fs.read("/proc/" .. p .. "/cmdline") or ""
      local argv0 = cmd:match("^[^%z]*") or ""
      if cmd:find("harness\0worker\0--inbox\0" .. marker, 1, true) and not argv0:find("mk%-exec$")
          and not argv0:find("bwrap$") then
        local status = fs.read("/proc/" .. p .. "/status") or ""
        out[tonumber(p)] = (tonumber(status:match("VmRSS:%s*(%d+)")) or 0) / 1024
      end
    end
  end
  return out
end

local served = {} -- harness process id -> the candidate it served
local current
pallas.on_result = function(_, v)
  if v.process and v.session_step then
    if served[v.process] and served[v.process] ~= current then
      print(string.format("  process %s served candidate %s and now %s", v.process, served[v.process], current))
    end
    served[v.process] = current
  end
end

local task = task_dir and assert(targets.load_task(task_dir))
  or assert(targets.load_task("tests/python/tasks/tiny_rmsnorm"))
if not task_dir then task.seeds, task.heldout_seeds = { 0, 1 }, { 1001 } end
pallas.env = { JAX_PLATFORMS = "cpu" }
local ev = eval.new(task, { jobs = 1, bench = { min_reps = 3, max_reps = 3, warmup = 1 } })
ev:freeze()
ev:baseline()
print(string.format("%-3s %-16s %-12s %5s %9s %9s %7s", "#", "candidate", "status", "procs", "total_MiB",
  "max_MiB", "served"))
for i = 1, n do
  local name = task_dir and ("reference+" .. i) or CANDS[(i - 1) % #CANDS + 1]
  current = i .. ":" .. name
  local src = task_dir and (task.reference .. "\n# variant " .. i .. "\n")
    or assert(fs.read("tests/python/candidates/" .. name))
  local before = 0
  for _ in pairs(served) do before = before + 1 end
  local r = ev:evaluate(src, { tune = false })
  local after = 0
  for _ in pairs(served) do after = after + 1 end
  local procs, total, top = 0, 0, 0
  for _, mb in pairs(harness_processes()) do
    procs, total, top = procs + 1, total + mb, math.max(top, mb)
  end
  print(string.format("%-3d %-16s %-12s %5d %9.0f %9.0f %7d", i, name, r.status, procs, total, top, after - before))
end
ev:close()
local left = 0
for _ in pairs(harness_processes()) do left = left + 1 end
print(string.format("after close: %d harness processes", left))

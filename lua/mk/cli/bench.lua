--- mkengine bench SUITE STRATEGY: every task of a suite K times, median
--- run per task, metrics table (both geomeans side by side), results.json.
local cli = require("mk.cli")
local bench = require("mk.study.bench")
local budget_lib = require("mk.search.budget")
local progress = require("mk.services.progress")

local M = {
  summary = "run a strategy over a task suite K times; metrics table + results.json",
  usage = "usage: mkengine bench SUITE STRATEGY [--repeat K] [--out DIR] [--label NAME] [--concurrency N] [--set K=V]... "
    .. "[--model M] [--llm-config FILE] [--llm-cache rw|ro|off] [--seed N] [--jobs N] [--budget SPEC] [--workers FILE] "
    .. "[--mem-mb MB] [--task NAME]... [--quiet] [--json]",
  help = [[
SUITE is any directory of task directories (ours with task.lua, JAXBench
with baseline.py, MaxKernel with reference.py); STRATEGY a strategy name
or a path to a strategy file.
Each task runs K times (default 5); the median run per task counts.
Results go to DIR/results.json (default runs/bench-<time>-<strategy>/),
with one run directory per task and repeat (DIR/<task>/r<k>). Running the
same command with the same --out again resumes: finished runs are read,
interrupted ones resumed, missing ones started.

options:
  --repeat K        repeats per task (default 5)
  --out DIR         bench directory
  --label NAME      the name results, compare and reports show (default: the
                    strategy file's stem, "bandit" for my/bandit.lua)
  --concurrency N   runs at once (default 2; device timing is serialised by
                    the evaluation service, so this never skews latencies)
  --task NAME       only this task (repeatable)
  --set K=V, --model, --llm-config, --llm-cache, --seed (base; repeat k uses seed+k-1),
  --jobs, --budget tokens=..,usd=..,device_s=..,wall_s=.. (per run)
  --workers FILE   evaluate on the workers FILE.lua names (docs/workers.md)
  --mem-mb MB       memory limit of each harness process (pallas; default: the
                    memory available over jobs x concurrency + 1, at most 16384 MiB)
  --quiet           no status line
  --json            events as JSON lines on stdout, then the results as JSON]],
}

--- Parse "k=v" items of --set into a table (numbers and booleans converted).
function M.parse_set(list, usage)
  local set = {}
  for _, item in ipairs(list or {}) do
    local k, v = item:match("^([%w_%.%-]+)=(.*)$")
    if not k then cli.usage_error("--set needs KEY=VALUE, got '" .. item .. "'", usage) end
    if v == "true" then v = true elseif v == "false" then v = false
    else v = math.tointeger(tonumber(v)) or tonumber(v) or v end
    set[k] = v
  end
  return set
end

M.SPEC = {
  flags = { quiet = true, json = true },
  options = { ["repeat"] = "number", out = "string", label = "string", concurrency = "number", set = "list", model = "string",
              llm_config = "string", llm_cache = "string", seed = "number", jobs = "number", budget = "string", task = "list",
              workers = "string", mem_mb = "number" },
  short = { k = "repeat", o = "out", q = "quiet" },
}

function M.run(args)
  local opts, pos = cli.parse(args, M.SPEC, M.usage)
  if #pos < 2 then cli.usage_error("need SUITE and STRATEGY", M.usage) end
  if #pos > 2 then cli.usage_error("unexpected argument '" .. pos[3] .. "'", M.usage) end
  local K = opts["repeat"] or 5
  if not math.tointeger(K) or K < 1 then cli.usage_error("--repeat needs an integer >= 1", M.usage) end
  local conc = opts.concurrency or 2
  if not math.tointeger(conc) or conc < 1 then cli.usage_error("--concurrency needs an integer >= 1", M.usage) end
  if opts.llm_cache and not ({ rw = true, ro = true, off = true })[opts.llm_cache] then
    cli.usage_error("--llm-cache must be rw, ro or off", M.usage)
  end
  local budget = cli.parsed(opts.budget, budget_lib.parse, M.usage)
  local prog = progress.new { quiet = opts.quiet, json = opts.json }
  local res, err = bench.run {
    suite = pos[1], strategy = pos[2], repeats = math.tointeger(K), out = opts.out, label = opts.label,
    concurrency = math.tointeger(conc), set = M.parse_set(opts.set, M.usage), model = opts.model,
    llm_config = opts.llm_config, llm_cache = opts.llm_cache, seed = opts.seed and (math.tointeger(opts.seed) or opts.seed),
    jobs = opts.jobs and math.tointeger(opts.jobs), workers = opts.workers, mem_mb = opts.mem_mb,
    budget = budget, tasks = opts.task, progress = prog,
  }
  prog:finish()
  if not res then cli.input_error(err.message) end
  if opts.json then
    io.stdout:write(cli.json(res), "\n")
  else
    io.stdout:write(bench.format(res))
    io.stdout:write("results: ", res.out, "/results.json   report: mkengine report ", res.out, " -o report.html\n")
  end
  return (res.failed_runs or 0) > 0 and 1 or 0
end

return M

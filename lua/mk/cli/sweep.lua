--- mkengine sweep FILE.lua: run a sweep script (mk.run / mk.study.bench / mk.map
--- / mk.grid available as the table `mk`) and write one results table.
local cli = require("mk.cli")
local budget_lib = require("mk.search.budget")
local fs = require("mk.fs")
local progress = require("mk.services.progress")
local sweep = require("mk.study.sweep")

local M = {
  summary = "run a Lua sweep script (grids of runs/benches) and write one results table",
  usage = "usage: mkengine sweep FILE.lua [--out DIR] [--model M] [--llm-config FILE] [--budget SPEC] [--workers FILE] [--quiet] [--json] [-- ARGS...]",
  help = [[
The script runs with a table `mk` in its environment (docs/api/sweep.md):
  mk.run{strategy=, task=, set={...}, seed=, model=, budget=, label=} -> summary
  mk.study.bench{suite=, strategy=, repeat=, set=, ...}                     -> bench results
  mk.map(items, fn, {concurrency=4})  run calls concurrently (shared device slots, LLM cache)
  mk.grid{width={2,3}, depth={2,3}}   cartesian product;  mk.seeds(n[, base])
Results go to DIR/results.json (default runs/sweep-<time>-<name>/), one
directory per entry (DIR/<n>-<label>). Running again with the same --out
reads finished entries back, so an interrupted sweep resumes.
--model, --llm-config, --budget and --workers (evaluate on the workers a
file names, docs/workers.md) are defaults for every call that does not
set them. Arguments after -- are the script's `arg`.]],
}

function M.run(args)
  local opts, pos = cli.parse(args, {
    flags = { quiet = true, json = true },
    options = { out = "string", model = "string", llm_config = "string", budget = "string", workers = "string" },
    short = { o = "out", q = "quiet" },
  }, M.usage)
  local file = pos[1]
  if not file then cli.usage_error("missing FILE.lua", M.usage) end
  if not fs.exists(file) or fs.isdir(file) then cli.input_error("cannot open sweep script " .. file) end
  local name = file:match("([^/]+)%.lua$") or "sweep"
  local out = opts.out or string.format("runs/sweep-%s-%s", os.date("%Y%m%d-%H%M%S"), name)
  local defaults = { model = opts.model, llm_config = opts.llm_config, workers = opts.workers }
  defaults.budget = cli.parsed(opts.budget, budget_lib.parse, M.usage)
  local prog = progress.new { quiet = opts.quiet, json = opts.json, label = "sweep " .. name }
  prog:tick(1)
  local res, err = sweep.run_file(file, { out = out, defaults = defaults, progress = prog,
    args = table.move(pos, 2, #pos, 1, {}) })
  prog:finish()
  if not res then
    if err.kind == "bad_script" then cli.input_error(err.message) end
    io.stderr:write("mkengine: sweep script failed: ", err.message, "\n")
    if err.results then io.stdout:write(sweep.format(err.results)) end
    return 1
  end
  if opts.json then
    io.stdout:write(cli.json(res), "\n")
  else
    io.stdout:write(sweep.format(res))
    io.stdout:write("results: ", out, "/results.json   report: mkengine report ", out, " -o report.html\n")
  end
  return 0
end

return M

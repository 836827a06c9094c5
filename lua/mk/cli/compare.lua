--- mkengine compare DIR_A DIR_B [DIR_C ...]: is B better than A on this
--- suite, at the same spend, and how sure are we? (docs/comparing-strategies.md)
local cli = require("mk.cli")
local cjson = require("cjson")
local compare = require("mk.study.compare")
local fs = require("mk.fs")

local M = {
  summary = "compare strategies' benches at an equal budget, with bootstrap intervals",
  usage = "usage: mkengine compare DIR_A DIR_B [DIR_C ...] | SWEEP_DIR [--budget tokens=2M|usd=5|llm_s=..|device_s=600|wall_s=3600] "
    .. "[--seed N] [--replicates N] [--json] [-o report.html]",
  help = [[
Each DIR is a bench directory ('mkengine bench ... --out DIR') or a sweep
whose bench entries each count as one strategy; all of the same suite and
tasks. The first is A; every other one is a B compared with it.

Every run is cut at the budget after the fact, from its events.jsonl: a run
counts the best kernel it had found (and that the held-out check did not
reject) within the budget. Per task, the ratio of B's to A's median-repeat
speedup (failed = 1.0); their geometric mean with a bootstrap interval
(resampling tasks, and repeats within tasks; seeded, so the same inputs
print the same interval); wins/ties/losses per task (a tie when the repeat
ranges overlap); compiled/correct/fast_p of each at the budget, and what
each spent.

options:
  --budget SPEC     per-run budget, any of tokens, usd, llm_s, device_s,
                    wall_s (k/M suffixes; seconds also s/m/h). Default: on
                    tokens, the largest run of the bench whose largest run
                    spent least, so no run counts more than any other could
  --seed N          bootstrap seed (default 1)
  --replicates N    bootstrap replicates (default 2000)
  --json            print {budget, strategies, pairs, per_task} as JSON
  -o, --out FILE    also write an HTML report (anytime curves, per-task
                    ratio chart, verdict)
exit: 0 compared; 2 bad arguments, unreadable or incompatible benches]],
}

M.SPEC = {
  flags = { json = true },
  options = { budget = "string", seed = "number", replicates = "number", out = "string" },
  short = { o = "out" },
}

function M.run(args)
  local opts, pos = cli.parse(args, M.SPEC, M.usage)
  -- one path may be a sweep: its bench entries are the sides (compare.check counts them)
  if #pos < 1 then cli.usage_error("need two bench directories, or a sweep directory", M.usage) end
  local n = opts.replicates and math.tointeger(opts.replicates)
  if opts.replicates and (not n or n < 1) then cli.usage_error("--replicates needs an integer >= 1", M.usage) end
  local budget = cli.parsed(opts.budget, compare.parse_budget, M.usage)
  local strategies, err = compare.load(pos)
  if not strategies then cli.input_error(err.message) end
  local ok, cerr = compare.check(strategies)
  if not ok then cli.input_error(cerr.message) end
  local result, rerr = compare.run(strategies, { budget = budget, seed = opts.seed and (math.tointeger(opts.seed) or opts.seed),
    n = n })
  if not result then cli.input_error(rerr.message) end
  if opts.out then
    local html = compare.html(result, compare.curves(strategies))
    local wrote, werr = fs.write(opts.out, html, { atomic = true })
    if not wrote then cli.input_error("cannot write " .. opts.out .. ": " .. tostring(werr and werr.message or werr)) end
  end
  if opts.json then
    local j = cjson.new()
    j.encode_invalid_numbers("null")
    io.stdout:write((j.encode(result):gsub("\\/", "/")), "\n")
  else
    io.stdout:write(compare.format(result))
    if opts.out then io.stdout:write("report: ", opts.out, "\n") end
  end
  return 0
end

return M

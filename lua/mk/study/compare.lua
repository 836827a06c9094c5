--- mk.study.compare: is strategy B better than strategy A on a suite, at the same
--- spend, and how sure are we? Reads bench directories (or the bench
--- entries of a sweep), cuts every run at one budget after the fact from
--- its events.jsonl (anytime curves), pairs the strategies task by task and
--- puts a seeded bootstrap interval (over tasks, and repeats within tasks)
--- on the geometric mean of the per-task ratios. `mkengine compare` is a
--- thin command over this module (docs/api/compare.md).
---
--- This module loads and checks the benches and runs the comparison; it is
--- also the whole API, the functions of its parts included:
---   compare/budget.lua   the per-run budget: parse_budget, default_budget, budget_text
---   compare/anytime.lua  a run at any spend: trace, at_budget, log_grid, curve, curves
---   compare/stats.lua    what is computed: bootstrap, pair_stats, wtl, suggest_repeats, verdict
---   compare/text.lua     the comparison as text: format, notes, run_budget_note
---   compare/html.lua     the comparison as an HTML page: html
--- The computing functions take plain tables and do no I/O, so each figure
--- can be recomputed by hand; compare.load reads the directories.
local fs = require("mk.fs")
local metrics = require("mk.study.metrics")
local budget = require("mk.study.compare.budget")
local anytime = require("mk.study.compare.anytime")
local stats = require("mk.study.compare.stats")
local text = require("mk.study.compare.text")
local page = require("mk.study.compare.html")

local compare = {}

compare.RESOURCES = budget.RESOURCES
compare.fmt_amount, compare.budget_text = budget.fmt_amount, budget.budget_text
compare.parse_budget, compare.default_budget = budget.parse_budget, budget.default_budget
compare.trace, compare.at_budget = anytime.trace, anytime.at_budget
compare.log_grid, compare.curve, compare.curves = anytime.log_grid, anytime.curve, anytime.curves
compare.quantile, compare.bootstrap, compare.median_effective = stats.quantile, stats.bootstrap, stats.median_effective
compare.geomean_ratio, compare.wtl, compare.pair_stats = stats.geomean_ratio, stats.wtl, stats.pair_stats
compare.suggest_repeats, compare.verdict, compare.MAX_REPEATS = stats.suggest_repeats, stats.verdict, stats.MAX_REPEATS
compare.format, compare.notes, compare.run_budget_note = text.format, text.notes, text.run_budget_note
compare.html = page.page

local function num(x) return type(x) == "number" and x == x and x or nil end

-- Loading ---------------------------------------------------------------------------

-- results and summaries as every study module reads them; events as mk.study.report does
local read_json = require("mk.services.util").read_json
local read_events = require("mk.services.util").read_jsonl

local function input_err(msg) return nil, { kind = "bad_input", message = msg } end

-- One bench directory as a strategy entry {label, dir, results, tasks =
-- {{task, traces = {...}}}}.
local function load_bench(dir, label)
  local res = read_json(dir .. "/results.json")
  if not res then return input_err(dir .. " has no readable results.json (not a bench directory)") end
  if res.kind ~= "bench" then return input_err(dir .. "/results.json is not a bench's (kind " .. tostring(res.kind) .. ")") end
  local rd, rt = num(res.runs_done), num(res.runs_total)
  if rd and rt and rd < rt then
    return input_err(string.format("%s is incomplete (%d of %d runs): finish it by running the same bench command again",
      dir, rd, rt))
  end
  local tasks = {}
  for i, row in ipairs(res.tasks or {}) do
    local traces = {}
    for _, run in ipairs(row.runs or {}) do
      if run.status == "error" or not run.run_dir then
        return input_err(string.format("%s: run %s of task %s failed (%s): rerun the bench command to redo it",
          dir, tostring(run["repeat"]), row.task, tostring(run.error or run.status)))
      end
      local rdir = run.run_dir:sub(1, 1) == "/" and run.run_dir or (dir .. "/" .. run.run_dir)
      if not fs.exists(rdir .. "/events.jsonl") then
        return input_err(rdir .. " has no events.jsonl: cannot cut the run at a budget")
      end
      traces[#traces + 1] = compare.trace(read_events(rdir .. "/events.jsonl"), read_json(rdir .. "/summary.json"))
    end
    if #traces == 0 then return input_err(dir .. ": task " .. tostring(row.task) .. " has no finished run") end
    tasks[i] = { task = row.task, traces = traces }
  end
  if #tasks == 0 then return input_err(dir .. " holds no tasks") end
  return { label = label or res.strategy or dir, dir = dir, strategy = res.strategy, suite = res.suite_name or res.suite,
    model = res.model, results = res, tasks = tasks }
end

--- Load the strategies to compare: each path is a bench directory, or a
--- sweep (its directory or results.json) whose bench entries each become
--- one strategy. Labels are strategy names, made unique with the
--- directory's name. Returns {strategies...} | nil, {kind = "bad_input", message}.
---@param paths string[]
function compare.load(paths)
  local out = {}
  for _, p in ipairs(paths) do
    p = p:gsub("/+$", "")
    if not fs.exists(p) then return input_err(p .. " does not exist") end
    local file = fs.isdir(p) and (p .. "/results.json") or p
    local res = read_json(file)
    if res and res.kind == "sweep" then
      local base = file:match("^(.*)/[^/]*$") or "."
      local n = 0
      for _, e in ipairs(res.entries or {}) do
        if e.kind == "bench" and e.bench_dir then
          local s, err = load_bench(base .. "/" .. e.bench_dir, e.label)
          if not s then return nil, err end
          out[#out + 1] = s
          n = n + 1
        end
      end
      if n == 0 then return input_err(file .. " is a sweep without bench entries") end
    else
      local s, err = load_bench(fs.isdir(p) and p or (p:match("^(.*)/[^/]*$") or "."))
      if not s then return nil, err end
      out[#out + 1] = s
    end
  end
  local seen = {}
  for _, s in ipairs(out) do seen[s.label] = (seen[s.label] or 0) + 1 end
  for _, s in ipairs(out) do
    if seen[s.label] > 1 then s.label = s.label .. " (" .. (s.dir:match("([^/]+)$") or s.dir) .. ")" end
  end
  return out
end

--- Check that strategies can be compared: at least two, the same suite and
--- the same tasks. Returns true | nil, {kind = "incompatible", message}.
function compare.check(strategies)
  if #strategies < 2 then
    return nil, { kind = "incompatible", message = "need at least two benches to compare: two bench directories, "
      .. "or a sweep with two or more bench entries" }
  end
  local a = strategies[1]
  for i = 2, #strategies do
    local b = strategies[i]
    if a.suite ~= b.suite then
      return nil, { kind = "incompatible", message = string.format("different suites: %s ran %s, %s ran %s",
        a.dir, tostring(a.suite), b.dir, tostring(b.suite)) }
    end
    local names_a, names_b = {}, {}
    for _, t in ipairs(a.tasks) do names_a[t.task] = true end
    for _, t in ipairs(b.tasks) do names_b[t.task] = true end
    for n in pairs(names_a) do
      if not names_b[n] then
        return nil, { kind = "incompatible", message = string.format("task %s is in %s but not in %s: bench the same tasks", n, a.dir, b.dir) }
      end
    end
    for n in pairs(names_b) do
      if not names_a[n] then
        return nil, { kind = "incompatible", message = string.format("task %s is in %s but not in %s: bench the same tasks", n, b.dir, a.dir) }
      end
    end
  end
  return true
end

local function task_list(s)
  local list = {}
  for _, t in ipairs(s.tasks) do list[#list + 1] = t end
  table.sort(list, function(x, y) return x.task < y.task end)
  return list
end

-- effective speedups of a task's repeats, in repeat order
local function effs(outs)
  local xs = {}
  for k, o in ipairs(outs) do xs[k] = metrics.effective_speedup(o) end
  return xs
end

--- Compare loaded strategies (compare.load, compare.check); the first is
--- A, every other one is a B paired with it. opts: budget (limits table;
--- default compare.default_budget), seed, n (bootstrap replicates),
--- level. Returns the table `--json` prints: {budget = {limits, source,
--- text}, strategies = [...], pairs = [...], per_task = [...]}, or nil,
--- {kind = "incompatible", message}.
function compare.run(strategies, opts)
  opts = opts or {}
  local limits, source = opts.budget, "given"
  if not limits then limits, source = compare.default_budget(strategies), "default" end
  for k in pairs(limits) do
    if k == "device_s" then
      for _, s in ipairs(strategies) do
        for _, t in ipairs(s.tasks) do
          for _, tr in ipairs(t.traces) do
            if not tr.has.device_s then
              return nil, { kind = "incompatible", message = s.dir .. ": its runs do not record device seconds per node "
                .. "(runs made before node events carried `spent`); cut on tokens, usd, llm_s or wall_s" }
            end
          end
        end
      end
    end
  end
  local btext = compare.budget_text(limits)
  local result = { budget = { limits = limits, source = source, text = btext }, strategies = {}, pairs = {}, per_task = {} }
  local sides = {}
  local rlo, rhi
  for si, s in ipairs(strategies) do
    local tl = task_list(s)
    local side, rows, unverified, cut_runs, runs, rebuilt = {}, {}, 0, 0, 0, 0
    local spent, spent_cut = metrics.sum_costs({}), {}
    for k in pairs(limits) do spent_cut[k] = 0 end
    for ti, t in ipairs(tl) do
      local outs = {}
      for k, tr in ipairs(t.traces) do
        local o = compare.at_budget(tr, limits)
        outs[k] = o
        runs = runs + 1
        if o.unverified then unverified = unverified + 1 end
        if o.cut then cut_runs = cut_runs + 1 end
        if tr.rebuilt then rebuilt = rebuilt + 1 end
        for r in pairs(limits) do spent_cut[r] = spent_cut[r] + math.min(tr.total[r] or 0, limits[r]) end
      end
      rlo, rhi = math.min(rlo or #outs, #outs), math.max(rhi or #outs, #outs)
      side[ti] = { task = t.task, outs = outs }
      rows[ti] = metrics.task_row(t.task, outs)
    end
    for _, row in ipairs(s.results.tasks or {}) do spent = metrics.sum_costs({ spent, row.cost }) end
    spent.tokens = (spent.input_tokens or 0) + (spent.output_tokens or 0)
    local agg = metrics.aggregate(rows)
    sides[si] = side
    result.strategies[si] = {
      name = s.label, strategy = s.strategy, dir = s.dir, suite = s.suite, model = s.model, tasks = #tl,
      simulation = s.results and s.results.simulation, -- a simulated bench (docs/simulator.md)
      runs = runs, compiled = agg.compiled, correct = agg.correct, geomean_speedup = agg.geomean_speedup,
      geomean_speedup_floored = agg.geomean_speedup_floored, fast_p = agg.fast_p,
      spent = spent, spent_within_budget = spent_cut, runs_cut = cut_runs, unverified_runs = unverified,
      rebuilt_runs = rebuilt,
      run_budget = type(s.results.options) == "table" and s.results.options.budget or nil,
    }
  end
  local a = strategies[1]
  for si = 2, #strategies do
    local p = compare.pair_stats(sides[1], sides[si], { seed = opts.seed, n = opts.n, level = opts.level })
    local pair = { a = a.label, b = strategies[si].label, geomean_ratio = p.geomean_ratio, ci_low = p.ci_low,
      ci_high = p.ci_high, level = p.level, wins = p.wins, ties = p.ties, losses = p.losses, tasks = p.tasks,
      tasks_only = p.tasks_only, replicates = p.replicates }
    pair.suggest = compare.suggest_repeats(pair, rlo or 1)
    result.pairs[#result.pairs + 1] = pair
    for ti, pt in ipairs(p.per_task) do
      result.per_task[#result.per_task + 1] = { task = pt.task, a = a.label, b = pair.b, a_speedup = pt.a,
        b_speedup = pt.b, ratio = pt.ratio, ci_low = pt.ci_low, ci_high = pt.ci_high, outcome = pt.outcome,
        a_speedups = effs(sides[1][ti].outs), b_speedups = effs(sides[si][ti].outs) }
    end
    pair.repeats = { min = rlo, max = rhi }
    pair.verdict = compare.verdict(pair, { budget_text = btext, tasks = p.tasks, repeats_lo = rlo or 1,
      repeats_hi = rhi or 1, unverified = result.strategies[1].unverified_runs + result.strategies[si].unverified_runs })
  end
  return result
end

return compare

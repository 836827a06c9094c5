--- mk.study.compare: is strategy B better than strategy A on a suite, at the same
--- spend, and how sure are we? Reads bench directories (or the bench
--- entries of a sweep), cuts every run at one budget after the fact from
--- its events.jsonl (anytime curves), pairs the strategies task by task and
--- puts a seeded bootstrap interval (over tasks, and repeats within tasks)
--- on the geometric mean of the per-task ratios. `mkengine compare` is a
--- thin command over this module (docs/api/compare.md).
---
--- The computing functions (trace, at_budget, curve, bootstrap,
--- pair_stats, verdict, ...) take plain tables and do no I/O, so each figure
--- can be recomputed by hand; compare.load reads the directories.
local fs = require("mk.fs")
local html = require("mk.study.html")
local metrics = require("mk.study.metrics")
local rng_lib = require("mk.services.rng")
local budget_lib = require("mk.search.budget")

local compare = {}

--- The resources a budget can cut on, in the order reports show them.
compare.RESOURCES = { "tokens", "usd", "llm_s", "device_s", "wall_s" }
local KNOWN = { tokens = true, usd = true, llm_s = true, device_s = true, wall_s = true }

local NOT_COMPILED = { compile_error = true, rejected = true }

local function num(x) return type(x) == "number" and x == x and x or nil end

-- Anytime traces --------------------------------------------------------------

local SPENT_KEYS = { "tokens", "usd", "llm_s", "device_s" }

--- The trace of one run from its events (a list of decoded events.jsonl
--- lines, in file order) and its summary (may be nil): every candidate
--- node with what the run had spent when it was found, and whether the
--- held-out re-check confirmed it.
---
--- Spend at a node: the node event's `spent` record (tokens, usd, llm_s,
--- device_s: what the run's ctx had spent, earlier sessions included),
--- wall_s its `t`. Runs recorded while ctx counted only its own session
--- restart their counters after a `resume` event: a value below the last
--- one before the resume adds that one. Runs from before node events carried `spent`
--- get tokens, usd and llm_s summed over the `llm` events logged before the
--- node (`rebuilt = true`: the LLM ledger is process-wide, so runs that
--- ran at once in one bench process may have logged each other's calls)
--- and no device seconds (`has.device_s` false).
---
--- Returns {nodes = {{id, kind, status, speedup, compiled, correct,
--- verified = true|false|nil, at = {tokens, usd, llm_s, device_s, wall_s}}},
--- total = {tokens, usd, llm_s, device_s, wall_s}, has = {resource = bool},
--- rebuilt = bool}.
---@param events table[]
---@param summary table|nil
---@return table
function compare.trace(events, summary)
  if type(events) ~= "table" then error("compare.trace: events must be a list", 2) end
  local from_llm = { tokens = 0, usd = 0, llm_s = 0 }
  local base, last = { tokens = 0, usd = 0, llm_s = 0, device_s = 0 }, { tokens = 0, usd = 0, llm_s = 0, device_s = 0 }
  local resumed_at = {}
  local has_device, rebuilt = true, false
  local nodes, heldout = {}, {}
  for _, ev in ipairs(events) do
    local ty = ev.type
    if ty == "llm" or ty == "llm_call" then
      local u = type(ev.usage) == "table" and ev.usage or ev
      from_llm.tokens = from_llm.tokens + (num(u.input_tokens) or 0) + (num(u.output_tokens) or 0)
      from_llm.usd = from_llm.usd + (num(u.usd) or num(u.cost_usd) or num(ev.cost_usd) or 0)
      from_llm.llm_s = from_llm.llm_s + (num(ev.latency_s) or 0)
    elseif ty == "resume" then
      for _, k in ipairs(SPENT_KEYS) do resumed_at[k] = last[k] end
    elseif ty == "heldout" and ev.node ~= nil then
      heldout[tostring(ev.node)] = ev.correct == true
    elseif ty == "node" and ev.id ~= nil then
      local sp = type(ev.spent) == "table" and ev.spent or {}
      local at = { wall_s = num(ev.t) or 0 }
      for _, k in ipairs(SPENT_KEYS) do
        local v = num(sp[k])
        if v then
          if resumed_at[k] then -- the first node after a resume: did the counter restart?
            if base[k] + v < resumed_at[k] then base[k] = resumed_at[k] end
            resumed_at[k] = nil
          end
          at[k] = base[k] + v
          last[k] = at[k]
        elseif k == "device_s" then
          has_device = false
        else
          at[k] = from_llm[k]
          rebuilt = true
        end
      end
      if ev.kind ~= "reference" and ev.kind ~= "root" then
        local speedup = num(ev.speedup)
        nodes[#nodes + 1] = {
          id = tostring(ev.id), kind = ev.kind, status = ev.status, speedup = speedup,
          compiled = type(ev.status) == "string" and not NOT_COMPILED[ev.status],
          correct = ev.status == "ok" and speedup ~= nil and speedup > 0, at = at,
        }
      end
    end
  end
  for _, n in ipairs(nodes) do n.verified = heldout[n.id] end
  local c = type(summary) == "table" and type(summary.cost) == "table" and summary.cost or {}
  local total = {
    tokens = (num(c.input_tokens) or num(c.output_tokens)) and ((num(c.input_tokens) or 0) + (num(c.output_tokens) or 0))
      or last.tokens,
    usd = num(c.usd) or last.usd,
    llm_s = num(c.llm_s) or last.llm_s,
    device_s = num(c.device_s) or (has_device and last.device_s or nil),
    wall_s = num(c.wall_s) or (events[#events] and num(events[#events].t)) or 0,
  }
  -- a resumed run's summary counts only its last session; nodes before it
  -- show the run spent at least that much
  for _, n in ipairs(nodes) do
    for _, k in ipairs(compare.RESOURCES) do
      if n.at[k] and total[k] and n.at[k] > total[k] then total[k] = n.at[k] end
    end
  end
  return { nodes = nodes, total = total, rebuilt = rebuilt,
    has = { tokens = true, usd = true, llm_s = true, wall_s = true, device_s = has_device } }
end

--- Whether spend `at` fits every limit of `limits` ({resource = number}).
local function within(at, limits)
  for k, b in pairs(limits) do
    local v = at[k]
    if v == nil or v > b * (1 + 1e-12) then return false end
  end
  return true
end

--- The outcome of a run cut at a budget: the best correct node found
--- within every limit (nodes that failed the held-out re-check never
--- count; nodes never re-checked count but are flagged). Returns
--- {correct, compiled, speedup, node, unverified = bool, cut = bool (the
--- run spent more than the budget)} — shaped like a bench run outcome so
--- mk.metrics can rank and aggregate it.
---@param trace table from compare.trace
---@param limits table {tokens=, usd=, llm_s=, device_s=, wall_s=} (any subset; {} = no cut)
function compare.at_budget(trace, limits)
  local best, compiled = nil, false
  for _, n in ipairs(trace.nodes) do
    if within(n.at, limits) then
      if n.compiled then compiled = true end
      if n.correct and n.verified ~= false and (not best or n.speedup > best.speedup) then best = n end
    end
  end
  local cut = false
  for k, b in pairs(limits) do
    if (trace.total[k] or 0) > b * (1 + 1e-12) then cut = true end
  end
  return {
    correct = best ~= nil, compiled = compiled or best ~= nil, speedup = best and best.speedup,
    node = best and best.id, unverified = best ~= nil and best.verified == nil, cut = cut,
  }
end

-- The effective speedup of the median repeat (mk.study.metrics' lower median).
local function median_eff(outs)
  return metrics.effective_speedup(metrics.median_run(outs) or {})
end
compare.median_effective = median_eff

--- Budgets spaced evenly on a log scale from lo to hi (n points, n >= 2).
function compare.log_grid(lo, hi, n)
  n = n or 40
  if not (lo and hi and lo > 0 and hi > 0) then return {} end
  if hi <= lo then return { lo } end
  local out = {}
  for i = 0, n - 1 do out[#out + 1] = lo * (hi / lo) ^ (i / (n - 1)) end
  return out
end

--- Anytime curve of a task set for one resource: at each budget of the
--- grid, the geometric mean over tasks of the median repeat's effective
--- speedup (failed = 1.0, as mk.metrics), and the lowest and highest suite
--- geomean over repeat indexes (repeat k of every task; the spread a
--- single bench of one repeat could have shown).
---@param tasks table[] each {traces = {trace per repeat}}
---@param resource string
---@param grid number[]
---@return table points {{b, median, lo, hi}...}
function compare.curve(tasks, resource, grid)
  local pts = {}
  local kmax = 0
  for _, t in ipairs(tasks) do kmax = math.max(kmax, #t.traces) end
  for _, b in ipairs(grid) do
    local limits = { [resource] = b }
    local rows, per_k = {}, {}
    for ti, t in ipairs(tasks) do
      local outs = {}
      for k, tr in ipairs(t.traces) do outs[k] = compare.at_budget(tr, limits) end
      rows[ti] = median_eff(outs)
      for k = 1, kmax do
        per_k[k] = per_k[k] or {}
        local o = outs[k] or outs[#outs]
        per_k[k][ti] = o and metrics.effective_speedup(o) or 1.0
      end
    end
    local lo, hi
    for k = 1, kmax do
      local g = metrics.geomean(per_k[k])
      lo, hi = math.min(lo or g, g), math.max(hi or g, g)
    end
    pts[#pts + 1] = { b, metrics.geomean(rows), lo or 1.0, hi or 1.0 }
  end
  return pts
end

-- Bootstrap ---------------------------------------------------------------------

local function quantile(sorted, q)
  -- linear interpolation between order statistics (R's type 7)
  local n = #sorted
  if n == 0 then return nil end
  local h = (n - 1) * q + 1
  local lo = math.floor(h)
  local hi = math.min(lo + 1, n)
  return sorted[lo] + (h - lo) * (sorted[hi] - sorted[lo])
end
compare.quantile = quantile

--- A seeded, two-level bootstrap percentile interval. `units` is a list
--- (tasks); each unit is a list of groups (e.g. {repeats of A, repeats of
--- B}), each group a list of observations. One replicate draws #units units
--- with replacement and, unless opts.within == false, redraws every group's
--- observations with replacement inside each drawn unit (repeats within
--- tasks); `stat(replicate_units)` turns it into a number. Same inputs and
--- seed give the same interval.
---
--- opts: n (replicates, default 2000), level (default 0.95), seed
--- (default 1), within (default true).
--- Returns {estimate = stat(units), low, high, level, n, replicates =
--- sorted list}.
---@param units table[]
---@param stat fun(units: table[]): number
---@param opts table|nil
function compare.bootstrap(units, stat, opts)
  if type(units) ~= "table" or type(stat) ~= "function" then
    error("compare.bootstrap: (units, stat[, opts]) expected", 2)
  end
  opts = opts or {}
  local n = math.tointeger(opts.n or 2000)
  if not n or n < 1 then error("compare.bootstrap: opts.n must be an integer >= 1", 2) end
  local level = opts.level or 0.95
  local r = rng_lib.new(opts.seed or 1, "compare.bootstrap")
  local reps = {}
  local m = #units
  for i = 1, n do
    local sample = {}
    for u = 1, m do
      local unit = units[r:int(1, m)]
      if opts.within == false then
        sample[u] = unit
      else
        local groups = {}
        for g, obs in ipairs(unit) do
          local re = {}
          for j = 1, #obs do re[j] = obs[r:int(1, #obs)] end
          groups[g] = re
        end
        sample[u] = groups
      end
    end
    reps[i] = m > 0 and stat(sample) or stat({})
  end
  table.sort(reps)
  local a = (1 - level) / 2
  return { estimate = stat(units), low = quantile(reps, a), high = quantile(reps, 1 - a), level = level, n = n,
    replicates = reps }
end

-- Pairs ---------------------------------------------------------------------------

-- stat over units {{outs_a}, {outs_b}}: geomean of per-unit ratios
local function geomean_ratio(units)
  local xs = {}
  for i, u in ipairs(units) do xs[i] = median_eff(u[2]) / median_eff(u[1]) end
  return metrics.geomean(xs)
end
compare.geomean_ratio = geomean_ratio

--- Win, tie or loss of B against A on one task: a tie when the ranges of
--- their repeats' effective speedups overlap (ends included), a win when
--- all of B's repeats beat all of A's.
---@param outs_a table[] run outcomes of A's repeats
---@param outs_b table[]
---@return string "win"|"tie"|"loss"
function compare.wtl(outs_a, outs_b)
  local function range(outs)
    local lo, hi
    for _, o in ipairs(outs) do
      local e = metrics.effective_speedup(o)
      lo, hi = math.min(lo or e, e), math.max(hi or e, e)
    end
    return lo or 1.0, hi or 1.0
  end
  local alo, ahi = range(outs_a)
  local blo, bhi = range(outs_b)
  if blo > ahi then return "win" end
  if bhi < alo then return "loss" end
  return "tie"
end

--- Statistics of the pair (A, B) over tasks. tasks_a / tasks_b: lists in
--- the same task order, each {task = name, outs = {run outcome per repeat}}
--- (outcomes at the budget, e.g. from compare.at_budget). opts as
--- compare.bootstrap. Returns {geomean_ratio, ci_low, ci_high, level,
--- wins, ties, losses, tasks, tasks_only = {low, high} (the interval when
--- only tasks are resampled), per_task = {{task, ratio, ci_low, ci_high,
--- a, b, outcome}}}.
function compare.pair_stats(tasks_a, tasks_b, opts)
  opts = opts or {}
  if #tasks_a ~= #tasks_b then error("compare.pair_stats: both sides need the same tasks", 2) end
  local units = {}
  local per_task = {}
  local w, t, l = 0, 0, 0
  for i, ta in ipairs(tasks_a) do
    local tb = tasks_b[i]
    if ta.task ~= tb.task then error("compare.pair_stats: task " .. i .. " differs: " .. tostring(ta.task) .. " vs " .. tostring(tb.task), 2) end
    units[i] = { ta.outs, tb.outs }
    local o = compare.wtl(ta.outs, tb.outs)
    if o == "win" then w = w + 1 elseif o == "loss" then l = l + 1 else t = t + 1 end
    local one = compare.bootstrap({ units[i] }, geomean_ratio,
      { n = opts.n, level = opts.level, seed = (opts.seed or 1) .. "/" .. ta.task })
    per_task[i] = { task = ta.task, a = median_eff(ta.outs), b = median_eff(tb.outs), ratio = one.estimate,
      ci_low = one.low, ci_high = one.high, outcome = o }
  end
  local bs = compare.bootstrap(units, geomean_ratio, opts)
  local to = compare.bootstrap(units, geomean_ratio, { n = opts.n, level = opts.level, seed = opts.seed, within = false })
  return { geomean_ratio = bs.estimate, ci_low = bs.low, ci_high = bs.high, level = bs.level, replicates = bs.n,
    wins = w, ties = t, losses = l, tasks = #units, tasks_only = { low = to.low, high = to.high }, per_task = per_task }
end

--- How many repeats the interval suggests. The interval's half-width (on a
--- log scale) has a part from the spread between tasks (`tasks_only`) and a
--- part from the spread between repeats, which shrinks as 1/sqrt(K). If the
--- interval already excludes 1 nothing more is needed; if the between-task
--- part alone is wider than the observed effect, more repeats cannot settle
--- it (more tasks could). Otherwise the smallest K' whose interval would
--- exclude 1 if the effect stays as observed. A rough planning figure.
---@param pair table from compare.pair_stats
---@param k integer repeats per task now
---@return table {decided = bool, repeats = integer|nil, reason = string}
function compare.suggest_repeats(pair, k)
  local g, lo, hi = pair.geomean_ratio, pair.ci_low, pair.ci_high
  if lo > 1 or hi < 1 then return { decided = true, reason = "the interval excludes 1.0 already" } end
  local effect = math.abs(math.log(g))
  local half = (math.log(hi) - math.log(lo)) / 2
  local half_t = (math.log(pair.tasks_only.high) - math.log(pair.tasks_only.low)) / 2
  if effect < 1e-9 then
    return { decided = false, reason = "no difference observed: more repeats cannot show one" }
  end
  if half_t >= effect then
    return { decided = false, reason = "the spread between tasks alone is wider than the difference: more tasks, not repeats, could settle it" }
  end
  local var_rep = math.max(0, half * half - half_t * half_t)
  if var_rep <= 0 then
    return { decided = false, reason = "repeats add no spread: more tasks, not repeats, could settle it" }
  end
  local need = math.ceil(k * var_rep / (effect * effect - half_t * half_t))
  return { decided = false, repeats = math.max(need, k + 1),
    reason = string.format("about %d repeats per task, if the difference stays %.2fx", math.max(need, k + 1), g) }
end

-- Formatting ------------------------------------------------------------------------

local function fmt_amount(k, v)
  if k == "tokens" then
    if v >= 1e6 then return string.format("%.3g M tokens", v / 1e6) end
    if v >= 1e3 then return string.format("%.3g k tokens", v / 1e3) end
    return string.format("%d tokens", math.floor(v + 0.5))
  elseif k == "usd" then
    return string.format("$%.4g", v)
  end
  local label = ({ llm_s = "LLM", device_s = "device", wall_s = "wall" })[k] or k
  if v >= 3600 then return string.format("%.3g h %s", v / 3600, label) end
  if v >= 120 then return string.format("%.3g min %s", v / 60, label) end
  return string.format("%.3g s %s", v, label)
end
compare.fmt_amount = fmt_amount

--- The budget as words: "2 M tokens, 600 s device" (per run).
function compare.budget_text(limits)
  local bits = {}
  for _, k in ipairs(compare.RESOURCES) do
    if limits[k] then bits[#bits + 1] = fmt_amount(k, limits[k]) end
  end
  return #bits > 0 and (table.concat(bits, ", ") .. " per run") or "no budget cut"
end

local function span_text(lo, hi, unit)
  if lo == hi then return string.format("%d %s", lo, unit .. (lo == 1 and "" or "s")) end
  return string.format("%d–%d %ss", lo, hi, unit)
end

--- The plain-language verdict of one pair; it never claims more than the
--- interval: a direction only when the whole interval lies on one side of
--- 1.0. ctx: {budget_text, tasks, repeats_lo, repeats_hi, unverified (runs)}.
---@param p table a pair {a, b, geomean_ratio, ci_low, ci_high, level}
---@param ctx table
---@return string
function compare.verdict(p, ctx)
  local pct = string.format("%g %%", (p.level or 0.95) * 100)
  local where = string.format("at %s on %s, %s", ctx.budget_text, span_text(ctx.tasks, ctx.tasks, "task"),
    span_text(ctx.repeats_lo, ctx.repeats_hi, "repeat"))
  local s
  if p.ci_low > 1 then
    s = string.format("%s faster than %s by %.2f× (%s CI %.2f–%.2f) %s", p.b, p.a, p.geomean_ratio, pct, p.ci_low, p.ci_high, where)
  elseif p.ci_high < 1 then
    s = string.format("%s slower than %s by %.2f× (%s/%s = %.2f×, %s CI %.2f–%.2f) %s", p.b, p.a, 1 / p.geomean_ratio,
      p.b, p.a, p.geomean_ratio, pct, p.ci_low, p.ci_high, where)
  else
    s = string.format("no clear difference between %s and %s: %s/%s = %.2f× (%s CI %.2f–%.2f, includes 1.0) %s",
      p.b, p.a, p.b, p.a, p.geomean_ratio, pct, p.ci_low, p.ci_high, where)
  end
  if (ctx.unverified or 0) > 0 then
    s = s .. string.format(" (%s a node the held-out check never saw)",
      ctx.unverified == 1 and "1 run counts" or (ctx.unverified .. " runs count"))
  end
  return s
end

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
  if #strategies < 2 then return nil, { kind = "incompatible", message = "need at least two benches to compare" } end
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

--- Parse a budget: "tokens=2M,usd=5,llm_s=600,device_s=10m,wall_s=1h"
--- (numbers take k/M/G; seconds also s/m/h). Returns limits | nil, err.
function compare.parse_budget(text)
  local limits = {}
  for item in tostring(text):gmatch("[^,]+") do
    local k, v = item:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
    if not k then return nil, { kind = "bad_budget", message = "budget item '" .. item .. "' is not NAME=VALUE" } end
    if not KNOWN[k] then
      return nil, { kind = "bad_budget", message = "unknown budget '" .. k .. "' (known: tokens, usd, llm_s, device_s, wall_s)" }
    end
    -- mk.budget parses the run budgets; llm_s reads like device_s there
    local parsed, err = budget_lib.parse((k == "llm_s" and "device_s" or k) .. "=" .. v)
    if not parsed then return nil, { kind = "bad_budget", message = (err.message:gsub("device_s", k)) } end
    limits[k] = parsed[k == "llm_s" and "device_s" or k]
  end
  if next(limits) == nil then return nil, { kind = "bad_budget", message = "empty budget" } end
  return limits
end

--- The default budget: on tokens (wall seconds when a bench spent no
--- tokens), the largest per-run spend of the bench whose largest run spent
--- least, so no run of any strategy counts more than that.
function compare.default_budget(strategies)
  local resource = "tokens"
  for _, s in ipairs(strategies) do
    local any = false
    for _, t in ipairs(s.tasks) do
      for _, tr in ipairs(t.traces) do if (tr.total.tokens or 0) > 0 then any = true end end
    end
    if not any then resource = "wall_s" end
  end
  local b
  for _, s in ipairs(strategies) do
    local top = 0
    for _, t in ipairs(s.tasks) do
      for _, tr in ipairs(t.traces) do top = math.max(top, tr.total[resource] or 0) end
    end
    b = math.min(b or top, top)
  end
  return { [resource] = b }
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

--- The anytime curves of every strategy for every resource the runs
--- record (device_s only when all do): {resource = {label = points}} with
--- points from compare.curve on a log grid from the smallest non-zero spend
--- at any node to the largest run total. Resources nothing was spent on
--- are left out.
---@param strategies table[] from compare.load
---@param n integer|nil grid points (default 40)
function compare.curves(strategies, n)
  local out = {}
  for _, r in ipairs(compare.RESOURCES) do
    local lo, hi, ok = nil, 0, true
    for _, s in ipairs(strategies) do
      for _, t in ipairs(s.tasks) do
        for _, tr in ipairs(t.traces) do
          if not tr.has[r] then ok = false end
          hi = math.max(hi, tr.total[r] or 0)
          for _, nd in ipairs(tr.nodes) do
            local v = nd.at[r]
            if v and v > 0 then lo = math.min(lo or v, v) end
          end
        end
      end
    end
    if ok and lo and hi > 0 then
      local grid = compare.log_grid(lo, math.max(hi, lo), n or 40)
      out[r] = {}
      for _, s in ipairs(strategies) do out[r][s.label] = compare.curve(s.tasks, r, grid) end
    end
  end
  return out
end

-- Output -------------------------------------------------------------------------

local function fx(x) return x and string.format("%.2fx", x) or "-" end

local function tok(c) return (c.input_tokens or 0) + (c.output_tokens or 0) end

--- The comparison as plain text: the budget, one row per strategy (at the
--- budget), then per pair the per-task ratios, the verdict and what the
--- interval says about repeats.
---@param result table from compare.run
---@return string
function compare.format(result)
  local L = {}
  local b = result.budget
  L[#L + 1] = string.format("budget: %s (%s)", b.text, b.source == "default"
    and "default: the largest run of the bench that spent least, so no run counts more" or "given")
  local w = 8
  for _, s in ipairs(result.strategies) do w = math.max(w, #s.name) end
  local hdr = string.format("%-" .. w .. "s %5s %8s %7s %8s %8s %6s %8s %10s %10s %9s %9s",
    "strategy", "tasks", "compiled", "correct", "geomean", "floored", "fast_1", "runs cut", "unverified", "tokens", "USD", "device")
  L[#L + 1] = ""
  L[#L + 1] = hdr
  L[#L + 1] = string.rep("-", #hdr)
  for _, s in ipairs(result.strategies) do
    L[#L + 1] = string.format("%-" .. w .. "s %5d %8d %7d %8s %8s %6.2f %8s %10d %10d %9s %8.1fs", s.name, s.tasks,
      s.compiled, s.correct, fx(s.geomean_speedup), fx(s.geomean_speedup_floored), s.fast_p["1"] or 0,
      string.format("%d/%d", s.runs_cut, s.runs), s.unverified_runs, tok(s.spent), string.format("$%.4f", s.spent.usd or 0),
      s.spent.device_s or 0)
  end
  L[#L + 1] = "(figures at the budget: each run counts the best kernel found within it; tokens, USD, device: what the runs spent in all)"
  for _, note in ipairs(compare.notes(result.strategies)) do L[#L + 1] = note end
  for _, p in ipairs(result.pairs) do
    L[#L + 1] = ""
    L[#L + 1] = string.format("%s vs %s: per task, ratio of median-repeat speedups %s/%s (failed = 1.0)", p.b, p.a, p.b, p.a)
    local tw = 4
    for _, r in ipairs(result.per_task) do tw = math.max(tw, #r.task) end
    L[#L + 1] = string.format("  %-" .. tw .. "s %9s %9s %8s  %-15s %s", "task", "A", "B", "B/A", "CI (repeats)", "")
    for _, r in ipairs(result.per_task) do
      if r.b == p.b then
        L[#L + 1] = string.format("  %-" .. tw .. "s %9s %9s %8s  %-15s %s", r.task, fx(r.a_speedup), fx(r.b_speedup),
          fx(r.ratio), string.format("%.2f-%.2f", r.ci_low, r.ci_high), r.outcome)
      end
    end
    L[#L + 1] = string.format("geomean ratio %.2fx, %g %% CI %.2f-%.2f (bootstrap over tasks and repeats, %d replicates); "
      .. "wins %d, ties %d, losses %d of %d tasks", p.geomean_ratio, p.level * 100, p.ci_low, p.ci_high, p.replicates,
      p.wins, p.ties, p.losses, p.tasks)
    L[#L + 1] = "verdict: " .. p.verdict
    if p.suggest and not p.suggest.decided then L[#L + 1] = "repeats: " .. p.suggest.reason end
  end
  return table.concat(L, "\n") .. "\n"
end

--- Notes on what limits the comparison (a list of lines, maybe empty):
--- benches run under different `--budget`s (a run stopped by a smaller one
--- could not spend up to the compared budget), and runs whose spend per
--- node had to be rebuilt from llm events.
function compare.notes(strategies)
  local out = {}
  for _, s in ipairs(strategies) do -- simulated benches say so (mk.services.sim.task.note)
    if s.simulation then out[#out + 1] = s.simulation break end
  end
  local budget_note = compare.run_budget_note(strategies)
  if budget_note then out[#out + 1] = budget_note end
  local rebuilt, runs = 0, 0
  for _, s in ipairs(strategies) do rebuilt, runs = rebuilt + (s.rebuilt_runs or 0), runs + (s.runs or 0) end
  if rebuilt > 0 then
    out[#out + 1] = string.format("note: %d of %d runs predate per-node spend records: their tokens, USD and LLM seconds "
      .. "at each node are rebuilt from llm events, which runs going at once in one bench process can mix up "
      .. "(wall-second budgets are exact for them)", rebuilt, runs)
  end
  return out
end

--- The note on different `--budget`s of the benches, or nil.
function compare.run_budget_note(strategies)
  local texts, differ = {}, false
  for i, s in ipairs(strategies) do
    texts[i] = type(s.run_budget) == "table" and next(s.run_budget) and compare.budget_text(s.run_budget) or "no limit"
    if texts[i] ~= texts[1] then differ = true end
  end
  if not differ then return nil end
  local bits = {}
  for i, s in ipairs(strategies) do bits[i] = s.name .. ": " .. texts[i] end
  return "note: the benches ran under different --budget limits (" .. table.concat(bits, "; ")
    .. "); a run stopped by its own limit could not spend up to the compared budget"
end

-- A forest plot of per-task ratios with their intervals on a log axis, the
-- overall geomean and its interval last.
local function forest_svg(rows, overall, esc)
  local W, rowh, L, R, T = 560, 20, 150, 20, 24
  local lo, hi = 1, 1
  for _, r in ipairs(rows) do lo, hi = math.min(lo, r.ci_low, r.ratio), math.max(hi, r.ci_high, r.ratio) end
  lo, hi = math.min(lo, overall.ci_low), math.max(hi, overall.ci_high)
  lo, hi = lo / 1.15, hi * 1.15
  local n = #rows + 1
  local H = T + n * rowh + 34
  local function X(x) return L + math.log(x / lo) / math.log(hi / lo) * (W - L - R) end
  local out = { string.format('<svg class="chart forest" viewBox="0 0 %d %d" width="%d" height="%d" role="img">', W, H, W, H) }
  -- the finest tick set that keeps at most 9 labels on the axis
  local ticks
  for _, set in ipairs({ { 0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2 }, { 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4 },
                         { 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100 }, { 0.001, 0.01, 0.1, 1, 10, 100, 1000 } }) do
    ticks = {}
    for _, v in ipairs(set) do if v >= lo and v <= hi then ticks[#ticks + 1] = v end end
    local covers = set[1] <= lo and set[#set] >= hi
    if covers and #ticks <= 9 then break end
  end
  for _, v in ipairs(ticks) do
    out[#out + 1] = string.format('<line class="%s" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/><text class="tick" x="%.1f" y="%d" '
      .. 'text-anchor="middle">%g</text>', v == 1 and "hline" or "grid", X(v), X(v), T - 6, H - 30, X(v), H - 16, v)
  end
  local function row(i, label, r, cls)
    local y = T + (i - 0.5) * rowh
    out[#out + 1] = string.format('<text x="%d" y="%.1f" text-anchor="end"%s>%s</text>', L - 8, y + 4,
      cls and ' font-weight="600"' or "", esc(label))
    out[#out + 1] = string.format('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#1f77b4" stroke-width="2"/>',
      X(r.ci_low), X(r.ci_high), y, y)
    out[#out + 1] = string.format('<%s fill="%s"><title>%s: %.2f× (%.2f–%.2f)</title></%s>',
      cls and string.format('rect x="%.1f" y="%.1f" width="9" height="9"', X(r.ratio) - 4.5, y - 4.5)
        or string.format('circle cx="%.1f" cy="%.1f" r="4"', X(r.ratio), y),
      cls and "#d62728" or "#1f77b4", esc(label), r.ratio, r.ci_low, r.ci_high, cls and "rect" or "circle")
  end
  for i, r in ipairs(rows) do row(i, r.task, r) end
  row(n, "geomean", { ratio = overall.geomean_ratio, ci_low = overall.ci_low, ci_high = overall.ci_high }, true)
  out[#out + 1] = string.format('<text class="label" x="%d" y="%d" text-anchor="middle">ratio B/A (log scale; right of 1 = B faster)</text>',
    (L + W - R) // 2, H - 2)
  out[#out + 1] = "</svg>"
  return table.concat(out)
end

local RES_LABEL = { tokens = "tokens per run (input + output)", usd = "USD per run", llm_s = "LLM seconds per run",
  device_s = "device seconds per run", wall_s = "wall seconds per run" }

--- The comparison as one self-contained HTML page (mk.report's page):
--- verdicts, the strategies at the budget, anytime curves per resource
--- (median over repeats as a line, the spread as a band, log budget axis,
--- the budget marked), the per-task ratio chart with intervals and the
--- per-task table.
---@param result table from compare.run
---@param curves table from compare.curves
---@return string html
function compare.html(result, curves)
  local esc = html.escape
  local P = {}
  P[#P + 1] = "<h2>Verdict</h2>"
  for _, p in ipairs(result.pairs) do
    P[#P + 1] = '<p class="verdict"><b>' .. esc(p.verdict) .. "</b></p>"
    if p.suggest and not p.suggest.decided then P[#P + 1] = '<p class="sub">repeats: ' .. esc(p.suggest.reason) .. "</p>" end
  end
  P[#P + 1] = "<h2>At the budget</h2><p class=\"sub\">" .. esc(result.budget.text)
    .. (result.budget.source == "default" and " (default: the largest run of the bench that spent least)" or "")
    .. "; each run counts the best kernel found within it; spend columns: what the runs spent in all</p>"
  P[#P + 1] = "<table><tr><th>strategy</th><th>tasks</th><th>compiled</th><th>correct</th><th>geomean</th><th>floored</th>"
    .. "<th>fast_1</th><th>runs cut</th><th>unverified</th><th>tokens</th><th>USD</th><th>LLM s</th><th>device s</th><th>wall s</th></tr>"
  for _, s in ipairs(result.strategies) do
    local c = s.spent
    P[#P + 1] = string.format("<tr><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%.2f</td>"
      .. "<td>%d / %d</td><td>%d</td><td>%d</td><td>$%.4f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td></tr>",
      esc(s.name), s.tasks, s.compiled, s.correct, fx(s.geomean_speedup), fx(s.geomean_speedup_floored), s.fast_p["1"] or 0,
      s.runs_cut, s.runs, s.unverified_runs, tok(c), c.usd or 0, c.llm_s or 0, c.device_s or 0, c.wall_s or 0)
  end
  P[#P + 1] = "</table>"
  for _, note in ipairs(compare.notes(result.strategies)) do P[#P + 1] = '<p class="sub">' .. esc(note) .. "</p>" end
  P[#P + 1] = "<h2>Anytime curves</h2><p class=\"sub\">geomean over tasks of the median repeat's best correct speedup "
    .. "(failed = 1.0) within a budget per run; band: lowest to highest suite geomean over repeats</p>"
  local unv, runs = 0, 0
  for _, s in ipairs(result.strategies) do unv, runs = unv + s.unverified_runs, runs + s.runs end
  if unv > 0 then
    P[#P + 1] = string.format("<p class=\"sub\"><b>unverified nodes:</b> the runner re-checks only a run's final best "
      .. "kernel on held-out inputs; %d of %d runs count, at the budget, a node that check never saw, and the curves "
      .. "count such nodes too (nodes that failed it never count)</p>", unv, runs)
  end
  P[#P + 1] = "<div class=\"charts\">"
  for _, r in ipairs(compare.RESOURCES) do
    local by = curves and curves[r]
    if by then
      local series = {}
      for _, s in ipairs(result.strategies) do
        local pts, band = {}, {}
        for _, p in ipairs(by[s.name] or {}) do
          pts[#pts + 1] = { p[1], p[2], hide = true }
          band[#band + 1] = { p[1], p[3], p[4] }
        end
        series[#series + 1] = { name = s.name, points = pts, band = band }
      end
      local vl = result.budget.limits[r] and { { x = result.budget.limits[r], label = "budget" } } or nil
      P[#P + 1] = "<figure>" .. html.svg_chart { series = series, step = true, xlog = true, hlines = { 1 }, vlines = vl,
        xlabel = RES_LABEL[r], ylabel = "best speedup (×)" } .. "<figcaption>best correct speedup within a budget of "
        .. esc(RES_LABEL[r]) .. "</figcaption></figure>"
    end
  end
  P[#P + 1] = "</div>"
  for _, p in ipairs(result.pairs) do
    local rows = {}
    for _, r in ipairs(result.per_task) do if r.b == p.b then rows[#rows + 1] = r end end
    P[#P + 1] = string.format("<h2>%s vs %s per task</h2><p class=\"sub\">ratio of median-repeat speedups %s/%s; "
      .. "bars: %g %% bootstrap interval over repeats (per task) and over tasks and repeats (geomean)</p>",
      esc(p.b), esc(p.a), esc(p.b), esc(p.a), p.level * 100)
    P[#P + 1] = forest_svg(rows, p, esc)
    P[#P + 1] = string.format("<table><tr><th>task</th><th>%s</th><th>%s</th><th>ratio</th><th>interval</th><th>repeats %s</th>"
      .. "<th>repeats %s</th><th>outcome</th></tr>", esc(p.a), esc(p.b), esc(p.a), esc(p.b))
    for _, r in ipairs(rows) do
      local function list(xs)
        local t = {}
        for i, x in ipairs(xs) do t[i] = string.format("%.2f", x) end
        return table.concat(t, " ")
      end
      P[#P + 1] = string.format("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%.2f–%.2f</td><td>%s</td><td>%s</td>"
        .. "<td>%s</td></tr>", esc(r.task), fx(r.a_speedup), fx(r.b_speedup), fx(r.ratio), r.ci_low, r.ci_high,
        list(r.a_speedups), list(r.b_speedups), r.outcome)
    end
    P[#P + 1] = string.format("</table><p class=\"sub\">wins %d, ties %d (repeat ranges overlap), losses %d of %d tasks</p>",
      p.wins, p.ties, p.losses, p.tasks)
  end
  local names = {}
  for _, s in ipairs(result.strategies) do names[#names + 1] = s.name end
  local sub = string.format("suite <b>%s</b> · %s", esc(result.strategies[1].suite or "?"), esc(result.budget.text))
  return html.page("compare " .. table.concat(names, " vs "), sub, table.concat(P), {})
end

return compare

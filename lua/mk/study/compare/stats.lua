--- mk.study.compare.stats: the statistics of a paired comparison, on
--- plain tables and without I/O, so each figure can be recomputed by hand:
--- per-task ratios of median-repeat speedups, their geometric mean with a
--- seeded two-level bootstrap interval (over tasks, and repeats within
--- tasks), wins/ties/losses, how many repeats would settle it, and the
--- verdict in words, which never claims more than the interval.
local metrics = require("mk.study.metrics")
local rng_lib = require("mk.services.rng")

local stats = {}

-- The effective speedup of the median repeat (mk.study.metrics' lower median).
local function median_eff(outs)
  return metrics.effective_speedup(metrics.median_run(outs) or {})
end
stats.median_effective = median_eff

local function quantile(sorted, q)
  -- linear interpolation between order statistics (R's type 7)
  local n = #sorted
  if n == 0 then return nil end
  local h = (n - 1) * q + 1
  local lo = math.floor(h)
  local hi = math.min(lo + 1, n)
  return sorted[lo] + (h - lo) * (sorted[hi] - sorted[lo])
end
stats.quantile = quantile

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
function stats.bootstrap(units, stat, opts)
  if type(units) ~= "table" or type(stat) ~= "function" then
    error("stats.bootstrap: (units, stat[, opts]) expected", 2)
  end
  opts = opts or {}
  local n = math.tointeger(opts.n or 2000)
  if not n or n < 1 then error("stats.bootstrap: opts.n must be an integer >= 1", 2) end
  local level = opts.level or 0.95
  local r = rng_lib.new(opts.seed or 1, "stats.bootstrap")
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

-- stat over units {{outs_a}, {outs_b}}: geomean of per-unit ratios
local function geomean_ratio(units)
  local xs = {}
  for i, u in ipairs(units) do xs[i] = median_eff(u[2]) / median_eff(u[1]) end
  return metrics.geomean(xs)
end
stats.geomean_ratio = geomean_ratio

--- Win, tie or loss of B against A on one task: a tie when the ranges of
--- their repeats' effective speedups overlap (ends included), a win when
--- all of B's repeats beat all of A's.
---@param outs_a table[] run outcomes of A's repeats
---@param outs_b table[]
---@return string "win"|"tie"|"loss"
function stats.wtl(outs_a, outs_b)
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
--- stats.bootstrap. Returns {geomean_ratio, ci_low, ci_high, level,
--- wins, ties, losses, tasks, tasks_only = {low, high} (the interval when
--- only tasks are resampled), per_task = {{task, ratio, ci_low, ci_high,
--- a, b, outcome}}}.
function stats.pair_stats(tasks_a, tasks_b, opts)
  opts = opts or {}
  if #tasks_a ~= #tasks_b then error("stats.pair_stats: both sides need the same tasks", 2) end
  local units = {}
  local per_task = {}
  local w, t, l = 0, 0, 0
  for i, ta in ipairs(tasks_a) do
    local tb = tasks_b[i]
    if ta.task ~= tb.task then error("stats.pair_stats: task " .. i .. " differs: " .. tostring(ta.task) .. " vs " .. tostring(tb.task), 2) end
    units[i] = { ta.outs, tb.outs }
    local o = stats.wtl(ta.outs, tb.outs)
    if o == "win" then w = w + 1 elseif o == "loss" then l = l + 1 else t = t + 1 end
    local one = stats.bootstrap({ units[i] }, geomean_ratio,
      { n = opts.n, level = opts.level, seed = (opts.seed or 1) .. "/" .. ta.task })
    per_task[i] = { task = ta.task, a = median_eff(ta.outs), b = median_eff(tb.outs), ratio = one.estimate,
      ci_low = one.low, ci_high = one.high, outcome = o }
  end
  local bs = stats.bootstrap(units, geomean_ratio, opts)
  local to = stats.bootstrap(units, geomean_ratio, { n = opts.n, level = opts.level, seed = opts.seed, within = false })
  return { geomean_ratio = bs.estimate, ci_low = bs.low, ci_high = bs.high, level = bs.level, replicates = bs.n,
    wins = w, ties = t, losses = l, tasks = #units, tasks_only = { low = to.low, high = to.high }, per_task = per_task }
end

--- The most repeats per task suggest_repeats names (opts.max): beyond it a
--- run costs more than a repeat count can be a plan.
stats.MAX_REPEATS = 20

-- What tightens the interval when repeats cannot: more tasks shrink the
-- whole half-width as 1/sqrt(tasks) (about `tasks` of them would exclude
-- 1.0 at today's repeats, if the difference stays); when the spread
-- between repeats is most of it, so does a larger budget per run.
local function instead(half2, half_t2, effect, t, g)
  local n = t and math.ceil(t * half2 / (effect * effect))
  local more = n and string.format("about %d tasks at these repeats, if the difference stays %.2fx", n, g)
    or "more tasks"
  if half_t2 >= half2 - half_t2 then
    return "the spread between tasks is most of the interval: " .. more .. " would tighten it", n
  end
  return "the spread between repeats is most of the interval: " .. more .. ", or a larger budget per run "
    .. "(whose repeats then find kernels closer to each other) would tighten it", n
end

--- How many repeats the interval suggests. The interval's half-width (on a
--- log scale) has a part from the spread between tasks (`tasks_only`) and a
--- part from the spread between repeats, which shrinks as 1/sqrt(K). If the
--- interval already excludes 1 nothing more is needed; if the between-task
--- part alone is wider than the observed effect, more repeats cannot settle
--- it (more tasks could). Otherwise the smallest K' whose interval would
--- exclude 1 if the effect stays as observed, when it is at most opts.max
--- (stats.MAX_REPEATS); beyond that the difference is below what an
--- affordable number of repeats resolves, and the reason says what
--- tightens the interval instead (more tasks, about how many when
--- pair.tasks is known; a larger budget per run). A rough planning figure.
---@param pair table from stats.pair_stats
---@param k integer repeats per task now
---@param opts table|nil {max = integer}
---@return table {decided = bool, repeats = integer|nil, needed = integer|nil, tasks = integer|nil, reason = string}
function stats.suggest_repeats(pair, k, opts)
  local cap = opts and opts.max or stats.MAX_REPEATS
  local g, lo, hi = pair.geomean_ratio, pair.ci_low, pair.ci_high
  if lo > 1 or hi < 1 then return { decided = true, reason = "the interval excludes 1.0 already" } end
  local effect = math.abs(math.log(g))
  local half = (math.log(hi) - math.log(lo)) / 2
  local half_t = (math.log(pair.tasks_only.high) - math.log(pair.tasks_only.low)) / 2
  if effect < 1e-9 then
    return { decided = false, reason = "no difference observed: more repeats cannot show one" }
  end
  local tasks = pair.tasks and math.ceil(pair.tasks * half * half / (effect * effect))
  if half_t >= effect then
    return { decided = false, tasks = tasks, reason = "the spread between tasks alone is wider than the difference: "
      .. "more tasks, not repeats, could settle it" .. (tasks and string.format(" (about %d tasks, if the difference "
      .. "stays %.2fx)", tasks, g) or "") }
  end
  local var_rep = math.max(0, half * half - half_t * half_t)
  if var_rep <= 0 then
    return { decided = false, reason = "repeats add no spread: more tasks, not repeats, could settle it" }
  end
  local need = math.max(math.ceil(k * var_rep / (effect * effect - half_t * half_t)), k + 1)
  if need > cap then
    local why, n = instead(half * half, half_t * half_t, effect, pair.tasks, g)
    return { decided = false, needed = need, tasks = n, reason = string.format("the difference (%.2fx) is below what "
      .. "repeats can resolve: about %d per task would be needed, more than %d; %s", g, need, cap, why) }
  end
  return { decided = false, repeats = need,
    reason = string.format("about %d repeats per task, if the difference stays %.2fx", need, g) }
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
function stats.verdict(p, ctx)
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

return stats

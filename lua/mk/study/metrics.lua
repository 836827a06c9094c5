--- mk.study.metrics: the numbers a strategy comparison reports, as pure functions
--- over plain tables (no I/O), so every figure in a results table can be
--- recomputed by hand.
---
--- A *task row* is `{task=, compiled=bool, correct=bool, speedup=number|nil,
--- cost={...}}`: the outcome of one task (after picking the median run of its
--- repeats with `metrics.median_run`). Conventions (docs/api/metrics.md):
---   * geomean_speedup: geometric mean over ALL tasks; a task without a
---     correct kernel counts 1.0; a correct but slower kernel counts as
---     measured (e.g. 0.8).
---   * geomean_speedup_floored: the same with every task floored at 1.0 (the
---     MaxKernel paper's convention: a regression can always be rolled back
---     to the baseline).
---   * fast_p: share of ALL tasks that are correct with speedup strictly
---     greater than p (KernelBench: "faster than p x baseline"); a speedup of
---     exactly p does not count, so fast_1 counts only real wins and fast_0
---     is the share of correct tasks with a measured speedup.
---   * A row with `timing_kind = "interpret"` (a kernel run by an interpreter on
---     the host, e.g. Pallas TPU interpret mode) has no kernel timing: its
---     speedup counts 1.0 in the geomeans and only towards fast_0.
local figure = require("mk.search.figure")

local metrics = {}

metrics.P = { 0, 1, 1.5, 2 }

metrics.COST_KEYS = { "input_tokens", "output_tokens", "usd", "llm_s", "device_s", "wall_s" }

local function valid_speedup(s)
  return type(s) == "number" and s > 0 and s < math.huge and s == s
end

--- Whether a row's speedup is a kernel timing (not an interpreter's).
---@param row table task row
---@return boolean
function metrics.timed(row)
  return row.correct == true and valid_speedup(row.speedup) and row.timing_kind ~= "interpret"
end

--- The speedup a task contributes to the unfloored geomean: its measured
--- speedup when correct (and timed on a device), else 1.0.
---@param row table task row
---@return number
function metrics.effective_speedup(row)
  if metrics.timed(row) then return row.speedup end
  return 1.0
end

--- Geometric mean of a list of positive numbers (1.0 for an empty list).
---@param xs number[]
---@return number
function metrics.geomean(xs)
  if type(xs) ~= "table" then error("metrics.geomean: xs must be a list of numbers", 2) end
  if #xs == 0 then return 1.0 end
  local s = 0
  for i, x in ipairs(xs) do
    if not valid_speedup(x) then
      error("metrics.geomean: element " .. i .. " is not a positive finite number: " .. tostring(x), 2)
    end
    s = s + math.log(x)
  end
  return math.exp(s / #xs)
end

--- Geometric mean of effective speedups over all tasks; `floor` (a number,
--- usually 1.0) raises every task's value to at least that.
---@param rows table[] task rows
---@param floor number|nil
---@return number
function metrics.geomean_speedup(rows, floor)
  local xs = {}
  for i, r in ipairs(rows) do
    local s = metrics.effective_speedup(r)
    if floor and s < floor then s = floor end
    xs[i] = s
  end
  return metrics.geomean(xs)
end

--- Share (0..1) of all tasks that are correct with speedup > p (strict).
--- 0 for an empty list.
---@param rows table[]
---@param p number
---@return number
function metrics.fast_p(rows, p)
  if type(p) ~= "number" then error("metrics.fast_p: p must be a number", 2) end
  if #rows == 0 then return 0 end
  local n = 0
  for _, r in ipairs(rows) do
    if r.correct and valid_speedup(r.speedup) and r.speedup > p and (p == 0 or metrics.timed(r)) then n = n + 1 end
  end
  return n / #rows
end

--- fast_p over a list of thresholds, keyed by their names ("0", "1", "1.5",
--- "2"), and the curve as points {p, value} for plotting.
---@param rows table[]
---@param ps number[]|nil default metrics.P
---@return table by_name, table curve
function metrics.fast_table(rows, ps)
  local by, curve = {}, {}
  for _, p in ipairs(ps or metrics.P) do
    local v = metrics.fast_p(rows, p)
    by[metrics.p_name(p)] = v
    curve[#curve + 1] = { p = p, value = v }
  end
  return by, curve
end

--- The key under which fast_p is stored: 1 -> "1", 1.5 -> "1.5".
function metrics.p_name(p)
  if math.type(p) == "integer" or p == math.floor(p) then return string.format("%d", p) end
  return string.format("%g", p)
end

--- The fast_p curve sampled at thresholds `ps` (default: 0 to max speedup
--- in steps), as {p, value} points; a step function drawn in reports.
---@param rows table[]
---@param steps integer|nil number of samples (default 41)
function metrics.fast_curve(rows, steps)
  steps = steps or 41
  local top = 2
  for _, r in ipairs(rows) do
    if r.correct and valid_speedup(r.speedup) and r.speedup > top then top = r.speedup end
  end
  top = math.ceil(top * 1.05 * 4) / 4
  local pts = {}
  for i = 0, steps - 1 do
    local p = top * i / (steps - 1)
    pts[#pts + 1] = { p = p, value = metrics.fast_p(rows, p) }
  end
  return pts
end

--- The exact fast_p step function: points {p, value} at p = 0 and at every
--- distinct correct speedup s (where fast_p drops, since s is not > s),
--- ending at `xmax` (default: 1.1 x the largest speedup, at least 2). Draw
--- it as a step plot (hold each value until the next point's p).
---@param rows table[]
---@param xmax number|nil
function metrics.fast_steps(rows, xmax)
  local ss = {}
  local top = 2
  for _, r in ipairs(rows) do
    if r.correct and valid_speedup(r.speedup) then
      ss[#ss + 1] = r.speedup
      if r.speedup * 1.1 > top then top = r.speedup * 1.1 end
    end
  end
  table.sort(ss)
  local pts = { { p = 0, value = metrics.fast_p(rows, 0) } }
  for i, s in ipairs(ss) do
    if s ~= ss[i - 1] then pts[#pts + 1] = { p = s, value = metrics.fast_p(rows, s) } end
  end
  pts[#pts + 1] = { p = math.max(xmax or top, pts[#pts].p), value = pts[#pts].value }
  return pts
end

--- Count tasks that compiled / are correct.
---@param rows table[]
---@return integer compiled, integer correct
function metrics.counts(rows)
  local c, k = 0, 0
  for _, r in ipairs(rows) do
    if r.compiled or r.correct then c = c + 1 end
    if r.correct then k = k + 1 end
  end
  return c, k
end

--- Sum cost tables field by field (missing fields count 0). Returns a new
--- table with every key of metrics.COST_KEYS.
---@param costs table[]
---@return table
function metrics.sum_costs(costs)
  local out = {}
  for _, k in ipairs(metrics.COST_KEYS) do out[k] = 0 end
  for _, c in ipairs(costs) do
    if type(c) == "table" then
      for k, v in pairs(c) do
        if type(v) == "number" then out[k] = (out[k] or 0) + v end
      end
    end
  end
  for k, v in pairs(out) do
    if k:match("tokens$") then out[k] = math.tointeger(v) or v end
  end
  return out
end

--- The score by which repeats of one task are ranked: the speedup of a
--- correct run, 0 for a run without a correct kernel (ranks lowest).
local function run_score(r)
  if r.correct and valid_speedup(r.speedup) then return r.speedup end
  return 0
end

--- Pick the median run of a task's repeats: runs are ranked by speedup
--- (runs without a correct kernel lowest; ties keep their order), and the
--- run at position ceil(K/2) from the bottom counts (the lower median when
--- K is even, so the reported run is always one that happened). Returns the
--- run and its index in `runs`; nil for an empty list.
---@param runs table[] each {correct=, speedup=, ...}
---@return table|nil run, integer|nil index
function metrics.median_run(runs)
  if #runs == 0 then return nil end
  local idx = {}
  for i = 1, #runs do idx[i] = i end
  table.sort(idx, function(a, b)
    local sa, sb = run_score(runs[a]), run_score(runs[b])
    if sa ~= sb then return sa < sb end
    return a < b
  end)
  local i = idx[(#runs + 1) // 2]
  return runs[i], i
end

--- The median of a list of numbers (mean of the two middle values when
--- even; nil for an empty list): a kernel's figure takes the same one.
metrics.median = figure.median

--- Build the task row of one task from its repeats (run outcomes, each
--- `{correct, compiled, speedup, latency_s, cost, run_dir, ...}`).
--- The row carries the median run's outcome, the summed cost over all
--- repeats, and per-repeat details.
---@param task string
---@param runs table[]
---@return table row
function metrics.task_row(task, runs)
  local m, mi = metrics.median_run(runs)
  local costs, speedups, ncorrect, ncompiled = {}, {}, 0, 0
  for i, r in ipairs(runs) do
    costs[i] = r.cost
    if r.correct then ncorrect = ncorrect + 1 end
    if r.compiled or r.correct then ncompiled = ncompiled + 1 end
    speedups[i] = run_score(r)
  end
  m = m or {}
  return {
    task = task,
    repeats = #runs,
    median_repeat = mi,
    compiled = (m.compiled or m.correct) and true or false,
    correct = m.correct and true or false,
    speedup = valid_speedup(m.speedup) and m.correct and m.speedup or nil,
    latency_s = m.latency_s,
    timing_kind = m.timing_kind,
    baseline_latency_s = m.baseline_latency_s,
    correct_runs = ncorrect,
    compiled_runs = ncompiled,
    speedups = speedups,
    cost = metrics.sum_costs(costs),
    median_cost = metrics.sum_costs({ m.cost }),
  }
end

--- The floored geomean of each repeat index: repeat k of every task as if
--- it were the only run (a task without a k-th run, or without a correct
--- kernel in it, counts 1.0). The spread a bench of one repeat could have
--- shown: the published protocol reports it as a band over repeats.
---@param rows table[] task rows (their `speedups`, one per repeat, 0 = no correct kernel)
---@return number[] one geomean per repeat index
function metrics.repeat_geomeans(rows)
  local k = 0
  for _, r in ipairs(rows) do k = math.max(k, #(r.speedups or {})) end
  local out = {}
  for i = 1, k do
    local xs = {}
    for j, r in ipairs(rows) do
      local s = (r.speedups or {})[i]
      xs[j] = (valid_speedup(s) and r.timing_kind ~= "interpret") and math.max(1.0, s) or 1.0
    end
    out[i] = metrics.geomean(xs)
  end
  return out
end

--- Aggregate metrics over task rows: counts, both geomeans, fast_p, cost.
---@param rows table[]
---@return table
function metrics.aggregate(rows)
  local compiled, correct = metrics.counts(rows)
  local fast, curve = metrics.fast_table(rows)
  local costs, interpreted = {}, 0
  for i, r in ipairs(rows) do
    costs[i] = r.cost
    if r.correct and r.timing_kind == "interpret" then interpreted = interpreted + 1 end
  end
  return {
    tasks = #rows,
    interpret_timed = interpreted, -- correct tasks whose speedup is an interpreter's (counted 1.0)
    compiled = compiled,
    correct = correct,
    geomean_speedup = metrics.geomean_speedup(rows),
    geomean_speedup_floored = metrics.geomean_speedup(rows, 1.0),
    repeat_geomeans = metrics.repeat_geomeans(rows), -- floored, one per repeat index
    fast_p = fast,
    fast_p_points = curve,
    cost = metrics.sum_costs(costs),
  }
end

return metrics

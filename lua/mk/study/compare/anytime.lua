--- mk.study.compare.anytime: a run as it stood at any spend. The trace of
--- a run from its events (every candidate node with what the run had spent
--- when it was found), the run cut at a budget after the fact (the best
--- verified kernel found within it), and the anytime curves of a task set
--- over a log grid of budgets.
local figure = require("mk.search.figure")
local metrics = require("mk.study.metrics")
local RESOURCES = require("mk.study.compare.budget").RESOURCES
local median_eff = require("mk.study.compare.stats").median_effective

local anytime = {}

local NOT_COMPILED = { compile_error = true, rejected = true }

local function num(x) return type(x) == "number" and x == x and x or nil end

-- Anytime traces --------------------------------------------------------------

-- Each node counts its kernel's figure: the median of every measurement of
-- its source, however late in the run it was taken (mk.search.figure),
-- never the figure its node event carried when it was first measured; and
-- the held-out verdict of any node of the source.
local function pool_figures(nodes, pool, heldout)
  for _, n in ipairs(nodes) do
    local f, holder = pool:of(n.id)
    n.speedup = f and num(f.speedup)
    n.latency_s = f and num(f.latency_s)
    n.same_as = holder
    n.correct = n.status == "ok" and n.speedup ~= nil and n.speedup > 0
    n.verified = heldout[n.id]
    if n.verified == nil and holder then n.verified = heldout[holder] end
  end
end

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
--- A node's speedup is its kernel's figure: nodes of one source (node
--- events' `source_hash`) share the median of all the source's
--- measurements, `measure` events included, and the held-out verdict of
--- any of them (mk.search.figure).
---
--- Returns {nodes = {{id, kind, status, speedup, latency_s, same_as,
--- compiled, correct, verified = true|false|nil, at = {tokens, usd, llm_s,
--- device_s, wall_s}}}, total = {tokens, usd, llm_s, device_s, wall_s}, has
--- = {resource = bool}, rebuilt = bool, declared = the node summary.json
--- names best, or nil}.
---@param events table[]
---@param summary table|nil
---@return table
function anytime.trace(events, summary)
  if type(events) ~= "table" then error("anytime.trace: events must be a list", 2) end
  local from_llm = { tokens = 0, usd = 0, llm_s = 0 }
  local base, last = { tokens = 0, usd = 0, llm_s = 0, device_s = 0 }, { tokens = 0, usd = 0, llm_s = 0, device_s = 0 }
  local resumed_at = {}
  local has_device, rebuilt = true, false
  local nodes, heldout = {}, {}
  local pool = figure.pool()
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
      pool:add(ev)
      if ev.kind ~= "reference" and ev.kind ~= "root" then
        nodes[#nodes + 1] = {
          id = tostring(ev.id), kind = ev.kind, status = ev.status,
          compiled = type(ev.status) == "string" and not NOT_COMPILED[ev.status], at = at,
        }
      end
    elseif ty == "measure" then
      pool:measure(ev)
    end
  end
  pool_figures(nodes, pool, heldout)
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
    for _, k in ipairs(RESOURCES) do
      if n.at[k] and total[k] and n.at[k] > total[k] then total[k] = n.at[k] end
    end
  end
  local declared = type(summary) == "table" and type(summary.best) == "table" and summary.best.node
  return { nodes = nodes, total = total, rebuilt = rebuilt, declared = declared and tostring(declared) or nil,
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
--- count; nodes never re-checked count but are flagged); a run the budget
--- does not cut counts the node its summary declared best. Returns
--- {correct, compiled, speedup, node, unverified = bool, cut = bool (the
--- run spent more than the budget)} — shaped like a bench run outcome so
--- mk.metrics can rank and aggregate it.
---@param trace table from anytime.trace
---@param limits table {tokens=, usd=, llm_s=, device_s=, wall_s=} (any subset; {} = no cut)
function anytime.at_budget(trace, limits)
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
  if not cut and trace.declared then -- the whole run: the node it declared best (held-out checked, ties settled)
    for _, n in ipairs(trace.nodes) do
      if n.id == trace.declared and n.correct then best = n end
    end
  end
  return {
    correct = best ~= nil, compiled = compiled or best ~= nil, speedup = best and best.speedup,
    node = best and best.id, unverified = best ~= nil and best.verified == nil, cut = cut,
  }
end

--- Budgets spaced evenly on a log scale from lo to hi (n points, n >= 2).
function anytime.log_grid(lo, hi, n)
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
function anytime.curve(tasks, resource, grid)
  local pts = {}
  local kmax = 0
  for _, t in ipairs(tasks) do kmax = math.max(kmax, #t.traces) end
  for _, b in ipairs(grid) do
    local limits = { [resource] = b }
    local rows, per_k = {}, {}
    for ti, t in ipairs(tasks) do
      local outs = {}
      for k, tr in ipairs(t.traces) do outs[k] = anytime.at_budget(tr, limits) end
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

--- The anytime curves of every strategy for every resource the runs
--- record (device_s only when all do): {resource = {label = points}} with
--- points from anytime.curve on a log grid from the smallest non-zero spend
--- at any node to the largest run total. Resources nothing was spent on
--- are left out.
---@param strategies table[] from compare.load
---@param n integer|nil grid points (default 40)
function anytime.curves(strategies, n)
  local out = {}
  for _, r in ipairs(RESOURCES) do
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
      local grid = anytime.log_grid(lo, math.max(hi, lo), n or 40)
      out[r] = {}
      for _, s in ipairs(strategies) do out[r][s.label] = anytime.curve(s.tasks, r, grid) end
    end
  end
  return out
end

return anytime

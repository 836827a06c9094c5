--- mk.search.figure: the one figure of a kernel, for every reader.
---
--- Nodes of one source (same source hash: identical files, same tuning)
--- share a measurement record (mk.search.context): each evaluation or
--- re-measurement adds a sample, and the kernel's figure is the median of
--- its samples with their spread. A node's commit holds the record as it
--- stood when the node was made, so an older node of a source carries a
--- superseded figure; later samples are in the source's latest node and
--- in `measure` events of events.jsonl (samples taken without a new node:
--- ties settled at the end of a run, direct ctx:evaluate calls).
---
--- `show`, `tree`, summary.json, bench, compare, the reports and the viewer
--- all read a node's figure through a pool of this module, so they name the
--- same figure and the same node for one kernel: the latest node of its
--- source (its "holder"); older nodes of the source point there.
---
---   local pool = figure.pool()       -- then, in add order:
---   pool:add(node)                   -- a graph node, a node event or an index row
---   pool:measure(event)              -- a `measure` event
---   pool:of(node)                    -- → the figure of node's kernel, or nil
---   pool:best(keep)                  -- → the fastest kernel's holder and its figure
---   figure.versus(fa, fb)            -- "better" | "worse" | "tie", and both ranges
---   figure.of_run(dir, nodes, info)  -- a pool of a run directory, its declared best
local util = require("mk.services.util")

local figure = {}

local function num(v) return type(v) == "number" and v == v and v or nil end

-- The metrics of a node: a graph node's `metrics`, else the record itself
-- (node events and the viewer's rows carry them flat).
local function metrics_of(n)
  return type(n.metrics) == "table" and n.metrics or n
end

local function sorted_copy(xs)
  local s = {}
  for i, x in ipairs(xs) do s[i] = x end
  table.sort(s)
  return s
end

--- The median of a list of numbers (the mean of the middle two for an even
--- count); nil for an empty list.
---@param xs number[]
---@return number|nil
function figure.median(xs)
  local s = sorted_copy(xs)
  local n = #s
  if n == 0 then return nil end
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

-- P(Binomial(n, 1/2) <= k)
local function binom_cdf(n, k)
  local p, c = 0, 1
  for i = 0, k do
    if i > 0 then c = c * (n - i + 1) / i end
    p = p + c
  end
  return p / 2 ^ n
end

--- The latency range a list of samples (each one benchmark's median)
--- supports: min–max for up to 8 samples; from 9 on, the distribution-free
--- 95 % interval of their median (order statistics k and n-k+1, the
--- largest k whose coverage stays >= 95 %). Returns lo, hi (nil for none).
---@param samples number[]
function figure.sample_range(samples)
  local s = sorted_copy(samples)
  local n = #s
  if n == 0 then return nil end
  local k = 1
  while k + 1 <= n - k and 1 - 2 * binom_cdf(n, k) >= 0.95 do k = k + 1 end
  return s[k], s[n - k + 1]
end

--- The latency range a figure supports: over its samples when it has more
--- than one (figure.sample_range; min and max when only those were kept),
--- else the middle 80 % of its one benchmark's timed calls (spread =
--- (p90 - p10) / median, centred on the median). Returns lo, hi (nil when
--- the figure has no latency).
---@param m table a figure, or a node's metrics
function figure.range(m)
  local lat = num(m.latency_s)
  if not lat then return nil end
  local n = num(m.measurements) or 1
  if n > 1 and type(m.samples) == "table" and #m.samples > 1 then return figure.sample_range(m.samples) end
  if n > 1 and num(m.latency_min_s) and num(m.latency_max_s) then return m.latency_min_s, m.latency_max_s end
  local sp = num(m.spread) or 0
  return lat * (1 - sp / 2), lat * (1 + sp / 2)
end

local function side(m)
  local lo, hi = figure.range(m)
  return { latency_s = num(m.latency_s), low = lo, high = hi, measurements = num(m.measurements) or 1,
    source_hash = m.source_hash }
end

--- Whether kernel a beats kernel b beyond the measured noise: "better"
--- when a's whole latency range lies below b's (figure.range), "worse"
--- when above, "tie" when they overlap or are the same kernel (one source
--- hash). A kernel without a latency (not correct) loses to one with; two
--- without tie. Returns the verdict and {a = side, b = side}, each side
--- {latency_s, low, high, measurements, source_hash}.
---@param a table a figure or a node's metrics
---@param b table
---@return string, table
function figure.versus(a, b)
  local sa, sb = side(a), side(b)
  local detail = { a = sa, b = sb }
  if not sa.latency_s or not sb.latency_s then
    if sa.latency_s then return "better", detail end
    if sb.latency_s then return "worse", detail end
    return "tie", detail
  end
  if sa.source_hash and sa.source_hash == sb.source_hash then return "tie", detail end
  if sa.high < sb.low then return "better", detail end
  if sa.low > sb.high then return "worse", detail end
  return "tie", detail
end

-- ---------------------------------------------------------------- pools

local FIELDS = { "latency_s", "speedup", "baseline_latency_s", "measurements", "samples", "flagged",
  "latency_min_s", "latency_max_s", "spread", "contended", "timing_kind" }

local Pool = {}
Pool.__index = Pool

--- An empty pool (fill it with pool:add and pool:measure in the order the
--- run wrote them).
function figure.pool()
  return setmetatable({ by_hash = {}, single = {}, order = {} }, Pool)
end

-- Whether figure f (measurements count) supersedes the current one.
local function newer(f, cur)
  return not cur or (num(f.measurements) or 1) >= (num(cur.measurements) or 1)
end

local function copy_figure(m, holder, hash)
  local f = { node = holder, source_hash = hash }
  for _, k in ipairs(FIELDS) do f[k] = m[k] end
  f.measurements = num(f.measurements) or (num(f.latency_s) and 1 or nil)
  return f
end

local function correct(n)
  local m = metrics_of(n)
  return n.status == "ok" and n.kind ~= "reference" and n.kind ~= "root" and m.correct ~= false
    and (num(m.latency_s) ~= nil or num(m.speedup) ~= nil)
end

-- Faster first: lower median latency, else (records without one) higher
-- speedup, then the older id.
local function faster(a, b)
  local fa, fb = a.figure, b.figure
  local la, lb = num(fa.latency_s), num(fb.latency_s)
  if la and lb and la ~= lb then return la < lb end
  local sa, sb = num(fa.speedup) or 0, num(fb.speedup) or 0
  if not (la and lb) and sa ~= sb then return sa > sb end
  return tostring(a.node.id) < tostring(b.node.id)
end

--- Add a node (in add order): a graph node, a node event or a row with
--- flat metrics. Its source's figure moves to it when it holds as many
--- measurements as the one known (the latest node of a source holds every
--- sample taken before it). Returns the ids of the nodes added before whose
--- figure or holder this changed (the older nodes of its source).
function Pool:add(n)
  local id = tostring(n.id)
  local m = metrics_of(n)
  local h = m.source_hash
  if h == nil or not correct(n) then
    self.single[id] = { node = n, fig = correct(n) and copy_figure(m, id) or nil }
    self.order[#self.order + 1] = id
    return {}
  end
  local s = self.by_hash[h]
  if not s then
    s = { ids = {} }
    self.by_hash[h] = s
  end
  local before = table.move(s.ids, 1, #s.ids, 1, {})
  s.ids[#s.ids + 1] = id
  s.holder, s.holder_node = id, n
  if newer(m, s.fig) then s.fig = copy_figure(m, id, h) else s.fig.node = id end
  self.single[id] = { hash = h, node = n }
  self.order[#self.order + 1] = id
  return before
end

--- Fold a `measure` event ({source_hash, latency_s, speedup, measurements,
--- samples, ...}: a source's record after a sample taken without a new
--- node). Returns the ids of the nodes whose figure changed.
function Pool:measure(e)
  local s = e.source_hash and self.by_hash[e.source_hash]
  if not s or not newer(e, s.fig) then return {} end
  s.fig = copy_figure(e, s.holder, e.source_hash)
  return s.ids
end

--- The figure of node n's kernel (n a node or an id): {latency_s, speedup,
--- measurements, samples, latency_min_s, latency_max_s, spread,
--- contended, source_hash, node = the id of the node holding it}, or nil
--- for a node without a correct measurement. The second value is the
--- holder's id when n is an older node of its source ("same kernel as").
function Pool:of(n)
  local id = type(n) == "table" and tostring(n.id) or tostring(n)
  local e = self.single[id]
  if not e then return nil end
  if e.hash then
    local s = self.by_hash[e.hash]
    return s.fig, s.holder ~= id and s.holder or nil
  end
  return e.fig, nil
end

--- The node holding the figure of n's kernel (n itself unless an older
--- node of its source).
function Pool:holder(n)
  local id = type(n) == "table" and tostring(n.id) or tostring(n)
  local e = self.single[id]
  if e and e.hash then return self.by_hash[e.hash].holder_node end
  return e and e.node
end

--- The kernels, one per source, as {node = holder, figure}, fastest first
--- (median latency, then the older holder id); `keep(node, figure)` filters.
function Pool:ranked(keep)
  local out = {}
  for _, id in ipairs(self.order) do
    local e = self.single[id]
    local s = e.hash and self.by_hash[e.hash]
    local n, f = e.node, e.fig
    if s then n, f = (s.holder == id) and s.holder_node or nil, s.fig end
    if n and f and (not keep or keep(n, f)) then out[#out + 1] = { node = n, figure = f } end
  end
  table.sort(out, faster)
  return out
end

--- The fastest kernel (keep as in Pool:ranked): its holder node and figure,
--- or nil.
function Pool:best(keep)
  local r = self:ranked(keep)[1]
  if r then return r.node, r.figure end
  return nil
end

-- ------------------------------------------------------------- run dirs

--- The `measure` events of an events.jsonl file, in order (other lines
--- are not decoded).
---@param path string
---@return table[]
function figure.measures(path)
  return util.read_jsonl(path, '"type":"measure"')
end

--- The pool of a run directory: `nodes` (the graph's, in add order) and the
--- measure events of its events.jsonl. The second value is the run's best:
--- the node summary.json declares once the run ended (`info.status` not
--- "running"; what held-out checked and ties settled), else the fastest
--- kernel so far; the third is true when it is the declared one.
---@param dir string
---@param nodes table[]
---@param info table|nil run.json
function figure.of_run(dir, nodes, info)
  local pool = figure.pool()
  for _, n in ipairs(nodes) do pool:add(n) end
  for _, e in ipairs(figure.measures(dir .. "/events.jsonl")) do pool:measure(e) end
  if not info or info.status ~= "running" then
    local s = util.read_json(dir .. "/summary.json")
    local id = type(s) == "table" and type(s.best) == "table" and s.best.node
    if id then
      for _, n in ipairs(nodes) do
        if tostring(n.id) == tostring(id) then return pool, pool:holder(n) or n, true end
      end
    elseif type(s) == "table" and s.status then
      return pool, nil, true -- ended without a correct kernel
    end
  end
  return pool, (pool:best()), false
end

return figure

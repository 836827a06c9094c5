--- mk.ui.runs: what the run viewer knows of runs, without writing or
--- locking anything: the runs under a served path, and a run followed as it
--- grows, its nodes and events either read as they are appended (only the
--- new bytes of graph.git/nodes.jsonl and events.jsonl: the engine writing
--- it may be another process) or handed over by the engine writing it in
--- this process (run:listen); a node's record for its details.
local fs = require "mk.fs"
local json = require "cjson.safe"
local util = require "mk.services.util"
local ask = require "mk.search.ask"
local figure = require "mk.search.figure"

local M = {}

M.MAX_DEPTH = 3

-- Keys whose values are never served, wherever they appear (secrets must
-- not be in a run, but a viewer must not be the way one leaks).
local SECRET = { "key", "token", "secret", "password", "passwd", "authorization", "credential" }

local function secret_name(k)
  if type(k) ~= "string" then return false end
  local l = k:lower()
  for _, w in ipairs(SECRET) do
    if l:find(w, 1, true) and not l:find("tokens", 1, true) and l ~= "key" then return true end
  end
  return false
end

--- A copy of v without fields named like secrets (api_key, token, ...).
function M.redact(v, depth)
  depth = depth or 0
  if type(v) ~= "table" or depth > 40 then return v end
  local out = {}
  for k, x in pairs(v) do
    if not secret_name(k) then out[k] = M.redact(x, depth + 1) end
  end
  return setmetatable(out, getmetatable(v))
end

-- The JSON object in file path (nulls as nil), or nil.
local function read_json(path)
  local v = util.read_json(path)
  return type(v) == "table" and v or nil
end

-- Relative ids of the runs, benches and sweeps under root (root itself
-- included), at most M.MAX_DEPTH levels down.
local function walk(root, rel, depth, out)
  local dir = rel == "" and root or (root .. "/" .. rel)
  if fs.exists(dir .. "/run.json") then
    out[#out + 1] = { id = rel, kind = "run" }
    return
  end
  local res = fs.exists(dir .. "/results.json") and read_json(dir .. "/results.json")
  if res then out[#out + 1] = { id = rel, kind = res.kind == "sweep" and "sweep" or "bench" } end
  if depth >= M.MAX_DEPTH then return end
  local names = fs.list(dir) or {}
  table.sort(names)
  for _, name in ipairs(names) do
    local p = dir .. "/" .. name
    if name:sub(1, 1) ~= "." and (fs.stat(p) or {}).type == "dir" then -- symlinks are not followed
      walk(root, rel == "" and name or (rel .. "/" .. name), depth + 1, out)
    end
  end
end

--- The runs, benches and sweeps under root: {id, kind, strategy, task,
--- status, nodes, best, started_at}, newest first.
---@param root string
function M.list(root)
  local found = {}
  walk(root, "", 0, found)
  for _, e in ipairs(found) do
    local dir = e.id == "" and root or (root .. "/" .. e.id)
    if e.kind == "run" then
      local info = read_json(dir .. "/run.json") or {}
      local s = read_json(dir .. "/summary.json") or {}
      e.strategy, e.task, e.status, e.started_at = info.strategy, info.task, info.status, info.started_at
      e.nodes = s.nodes
      e.best = type(s.best) == "table" and s.best.speedup or nil
      e.pending = #ask.pending(dir)
    end
  end
  table.sort(found, function(a, b) return (a.started_at or "") > (b.started_at or "") end)
  return found
end

--- The directory of run/bench id under root, or nil, message: ids are
--- relative paths of plain names, and the real path (symlinks followed)
--- must stay inside root.
function M.resolve(root, id)
  if type(id) ~= "string" then return nil, "bad id" end
  if id ~= "" then
    for part in id:gmatch("[^/]+") do
      if part == "." or part == ".." or not part:match("^[%w_.%-]+$") then return nil, "bad path component" end
    end
  end
  local real_root = fs.realpath(root)
  local dir = id == "" and root or (root .. "/" .. id)
  local real = fs.realpath(dir)
  if not real or not real_root then return nil, "no such run" end
  if real ~= real_root and real:sub(1, #real_root + 1) ~= real_root .. "/" then
    return nil, "outside the served directory"
  end
  return dir
end

-- ---- a run being watched -----------------------------------------------------
--
-- Two ways to follow a run, one interface (:poll() answers what is new since
-- the last call; :state() all of it; :oid(n) and :record(n) a node's commit):
--   M.watch(dir)  its files, for a run another process writes (`mkengine
--                 serve`): every poll reads what was appended to the node
--                 index and the event log.
--   M.feed(run)   the engine that writes it, in this process (`run --ui`,
--                 `resume --ui`): the past is read once, then the run's
--                 listener (run:listen) hands over each event, node and
--                 question as it is committed; nothing is read back.

---@class mk.ui.Watch
local Watch = {}
Watch.__index = Watch

--- Start watching the run in dir (nothing read yet: call :poll()).
function M.watch(dir)
  return setmetatable({ dir = dir, noff = 0, eoff = 0, npart = "", epart = "", nodes = {}, by_id = {},
    curve = {}, spent = {}, best = nil, info = {}, info_mtime = nil, cpu_s = 0,
    -- the kernels' figures (mk.search.figure), the nodes in event order with
    -- what the run had spent, the ids whose figure changed since the last poll
    pool = figure.pool(), found = {}, refigured = {} }, Watch)
end

-- New complete lines appended to a file since the last call (one stat
-- when nothing changed: what an idle page costs per tick).
local function tail(self, path, off_k, part_k)
  local st = fs.stat(path)
  local size = st and st.size or 0
  if size == self[off_k] then return {} end
  if size < self[off_k] then -- rewritten (a repaired index): start over
    self[off_k], self[part_k] = 0, ""
    if off_k == "noff" then self.nodes, self.by_id = {}, {} end
  end
  local f = io.open(path, "rb")
  if not f then return {} end
  f:seek("set", self[off_k])
  local data = self[part_k] .. (f:read(size - self[off_k]) or "")
  f:close()
  local base = self[off_k] - #self[part_k]
  self[off_k] = size
  -- lines as spans of data (a node's line holds its prompts: copy only what is decoded)
  local lines, pos = {}, 1
  while true do
    local nl = data:find("\n", pos, true)
    if not nl then break end
    lines[#lines + 1] = { data = data, b = pos, e = nl - 1, at = base + pos - 1 }
    pos = nl + 1
  end
  self[part_k] = data:sub(pos)
  return lines
end

-- graph.git/nodes.jsonl: `[id, oid, parents, key, kind, status, latency_s,
-- speedup, correct]<TAB>{...}` (mk.search.graph); the page gets the head.
local function node_of(line)
  local tab = line.data:find("\t", line.b, true)
  local h = tab and tab <= line.e and json.decode(line.data:sub(line.b, tab - 1))
  if type(h) ~= "table" or type(h[1]) ~= "string" then return nil end
  local function v(x) return x ~= json.null and x or nil end
  return { id = h[1], oid = h[2], parents = h[3], key = v(h[4]), kind = h[5], status = h[6], latency_s = v(h[7]),
    speedup = v(h[8]), correct = h[9] ~= false, at = line.at }
end

--- The node as the page draws it (no oid, no offsets), with its kernel's
--- figure when `pool` (mk.search.figure) knows it: the median of all the
--- kernel's measurements; `same_as` names the node holding it.
function M.public_node(n, pool)
  local f, holder
  if pool then f, holder = pool:of(n.id) end
  return { id = n.id, parents = n.parents, key = n.key, kind = n.kind, status = n.status,
    latency_s = f and f.latency_s or n.latency_s, speedup = f and f.speedup or n.speedup,
    measurements = f and f.measurements, same_as = holder, tokens = n.tokens }
end

-- The best speedup against spend: at each node event, the best pooled
-- figure of the kernels found so far.
local function curve_of(self)
  local out = {}
  for _, x in ipairs(self.found) do
    local f = self.pool:of(x.id)
    local prev = out[#out]
    if f and type(f.speedup) == "number" and (not prev or f.speedup > prev.speedup) then
      out[#out + 1] = { tokens = x.spent.tokens or 0, usd = x.spent.usd or 0, device_s = x.spent.device_s or 0,
        speedup = f.speedup, id = x.id }
    end
  end
  return out
end

-- Keep node n unless it is known already; true when it was new.
local function add_node(self, n)
  if self.by_id[n.id] then return false end
  self.nodes[#self.nodes + 1] = n
  self.by_id[n.id] = n
  return true
end

-- Fold one event into what the page shows without re-reading events;
-- `moved` says the curve, spend or best did.
local function fold_event(self, e)
  if e.type == "node" then
    for _, id in ipairs(self.pool:add(e)) do self.refigured[id] = true end
    if type(e.spent) == "table" then
      self.moved = true
      self.spent = e.spent
      local n = self.by_id[e.id]
      if n then n.tokens = e.spent.tokens end
      self.found[#self.found + 1] = { id = e.id, spent = e.spent }
    end
  elseif e.type == "measure" then
    for _, id in ipairs(self.pool:measure(e)) do self.refigured[id] = true end
    self.moved = true
  end
end

-- The best node: the one summary.json declares once the run has ended,
-- else the fastest kernel so far (pooled figures).
local function best_of(self)
  if self.info.status and self.info.status ~= "running" then
    local s = read_json(self.dir .. "/summary.json")
    if s and type(s.best) == "table" and s.best.node then return s.best.node end
  end
  local n = self.pool:best()
  return n and n.id
end

-- After events: the curve and the best by the kernels' figures, and the
-- known nodes whose figure a re-measurement moved added to `nodes` (the
-- page updates them), unless `fresh` (ids) holds them already.
local function refigure(self, nodes, fresh)
  self.curve, self.best = curve_of(self), best_of(self)
  for id in pairs(self.refigured) do
    local n = self.by_id[id]
    if n and not fresh[id] then nodes[#nodes + 1] = n end
  end
  self.refigured = {}
end

-- The events the page's log shows (ui.js, logEvent); nodes reach it as
-- nodes and through what they fold into (curve, spend). A feed takes only
-- these (SHOWN), and measure events, which move the figures of nodes; the
-- rest changes nothing the page shows.
local LOGGED = { log = true, best = true, question = true, decision = true, resume = true, stopped = true }
local SHOWN = { node = true, measure = true }
for k in pairs(LOGGED) do SHOWN[k] = true end

--- Read what was appended since the last poll. Returns the new nodes and
--- the known ones whose kernel's figure changed (a re-measurement), the
--- new events the page logs (both may be empty) and whether run.json
--- changed; self.moved is set when the curve, spend or best changed.
function Watch:poll()
  local new_nodes, new_ids = {}, {}
  for _, line in ipairs(tail(self, self.dir .. "/graph.git/nodes.jsonl", "noff", "npart")) do
    local n = node_of(line)
    if n and add_node(self, n) then
      new_nodes[#new_nodes + 1] = n
      new_ids[n.id] = true
    end
  end
  local new_events = {}
  local first = not self.loaded -- the first read folds the past; only later events are handed out
  self.loaded = true
  for _, line in ipairs(tail(self, self.dir .. "/events.jsonl", "eoff", "epart")) do
    local text = line.data:sub(line.b, line.e)
    -- model calls and evaluations are most of the log and nothing the page shows: skipped undecoded
    if not (text:find('"type":"llm"', 1, true) or text:find('"type":"evaluation"', 1, true)) then
      local e = json.decode(text)
      if type(e) == "table" and type(e.type) == "string" then
        fold_event(self, e)
        if not first and LOGGED[e.type] then new_events[#new_events + 1] = M.redact(e) end
      end
    end
  end
  -- run.json (status) changes rarely and nobody waits on it: look every 10th poll
  self.polls = (self.polls or 0) + 1
  local st = (self.polls % 10 == 1 or #new_nodes > 0) and fs.stat(self.dir .. "/run.json")
  local changed = st and st.mtime ~= self.info_mtime
  if changed then
    self.info_mtime = st.mtime
    self.info = M.redact(read_json(self.dir .. "/run.json") or self.info)
  end
  if self.moved or changed or first then refigure(self, new_nodes, new_ids) end
  return new_nodes, new_events, changed
end

--- The questions of the run waiting for an answer, oldest first.
function Watch:questions() return ask.pending(self.dir) end

--- Node n's commit id.
function Watch:oid(n) return n.oid end -- luacheck: ignore 212/self

--- The rest of node n's record {metrics, cost, meta, time, files}: the
--- tail of its index line.
function Watch:record(n)
  local f = io.open(self.dir .. "/graph.git/nodes.jsonl", "rb")
  if not f then return {} end
  f:seek("set", n.at)
  local line = f:read("l") or ""
  f:close()
  local tab = line:find("\t", 1, true)
  local t = tab and json.decode(line:sub(tab + 1))
  return type(t) == "table" and t or {}
end

--- Everything the page needs to draw the run as it is now.
function Watch:state()
  local nodes = {}
  for i, n in ipairs(self.nodes) do nodes[i] = M.public_node(n, self.pool) end
  return { info = self.info, nodes = nodes, curve = self.curve, spent = self.spent, best = self.best,
    summary = M.redact(read_json(self.dir .. "/summary.json")), questions = self:questions(),
    budget = self.info.options and self.info.options.budget or self.info.budget }
end

--- Stop following the run (a feed lets go of the engine's run).
function Watch:close() end -- luacheck: ignore 212/self

-- ---- a run followed from the engine that writes it ---------------------------

---@class mk.ui.Feed : mk.ui.Watch
local Feed = setmetatable({}, { __index = Watch })
Feed.__index = Feed

--- Follow `run` (an open mk.search.rundir run of this process): its past
--- is read from its files now, what it commits later comes from its
--- listener. `on_change()` (optional, set by the caller) is called after
--- each event the page may show and each status change. A best event is
--- only written by a commit, just before its node's event (rundir's
--- graph.on_best): it waits for that one and calls nothing.
---@param run mk.Run
function M.feed(run)
  local w = M.watch(run.dir)
  Watch.poll(w)
  setmetatable(w, Feed)
  w.run, w.info = run, M.redact(run.info)
  w.new_nodes, w.new_events, w.info_changed = {}, {}, false
  w.pending = ask.pending(run.dir)
  -- what the listener costs the engine (on_change's work included) is w.cpu_s
  local function timed(fn, ...)
    local c0 = os.clock()
    fn(...)
    w.cpu_s = w.cpu_s + (os.clock() - c0)
  end
  w.listener = {
    event = function(e, detail)
      if SHOWN[e.type] then timed(w.take, w, e, detail) end
    end,
    info = function(info) timed(w.take_info, w, info) end,
  }
  run:listen(w.listener)
  return w
end

-- Keep the pending questions as the engine asks and decides them (the
-- question itself comes beside its event).
local function track_question(self, e, q)
  if e.type == "question" then
    for _, p in ipairs(self.pending) do
      if p.id == e.id then return end
    end
    self.pending[#self.pending + 1] = type(q) == "table" and q or { id = e.id, kind = e.kind, title = e.title }
  else
    for i, p in ipairs(self.pending) do
      if p.id == e.id then
        table.remove(self.pending, i)
        return
      end
    end
  end
end

--- One event the run wrote that the page shows (run:listen): its node,
--- its part of the curve, spend and best, a re-measurement of a kernel,
--- its question, queued for the next :poll().
function Feed:take(e, detail)
  if e.type == "node" then
    local n = { id = e.id, parents = e.parents or {}, key = e.key, kind = e.kind, status = e.status,
      latency_s = e.latency_s, speedup = e.speedup }
    if add_node(self, n) then self.new_nodes[#self.new_nodes + 1] = n end
  elseif e.type == "question" or e.type == "decision" then
    track_question(self, e, detail)
  end
  fold_event(self, e)
  if LOGGED[e.type] then self.new_events[#self.new_events + 1] = e end
  if self.on_change and e.type ~= "best" then self.on_change() end
end

--- run.json was rewritten (run:listen).
function Feed:take_info(info)
  self.info, self.info_changed = M.redact(info), true
  if self.on_change then self.on_change() end
end

--- What the engine committed since the last poll (no file is read).
function Feed:poll()
  local nodes, events, changed = self.new_nodes, self.new_events, self.info_changed
  self.new_nodes, self.new_events, self.info_changed = {}, {}, false
  for i, e in ipairs(events) do events[i] = M.redact(e) end
  if self.moved or changed then
    local fresh = {}
    for _, n in ipairs(nodes) do fresh[n.id] = true end
    refigure(self, nodes, fresh)
  end
  return nodes, events, changed
end

function Feed:questions() return self.pending end

-- Commit ids and records come from the engine's own graph: no index line to read.
function Feed:oid(n)
  local g = self.run.graph:get(n.id)
  return g and g.oid or n.oid
end

function Feed:record(n)
  local g = self.run.graph:get(n.id)
  if not g then return Watch.record(self, n) end
  return { metrics = g.metrics, cost = g.cost, meta = g.meta, time = g.time, files = g:files() }
end

function Feed:close()
  self.run:unlisten(self.listener)
  self.on_change = nil
end

return M

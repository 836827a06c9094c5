--- mk.search.graph: the search graph of a run, stored in a bare git repository.
---
--- Every node is one commit whose tree holds the candidate's files, `plan.md`
--- and `node.json` (id, key, kind, status, metrics, cost, meta); the commit's
--- parents are the node's parents; `refs/nodes/<id>` names it and
--- `refs/heads/best` follows the fastest correct node. Plain `git log --graph
--- --all` on the repository shows the search.
---
--- Durability: `add` writes the objects, then the ref, then appends one line
--- to the index `nodes.jsonl` (inside the repository) before it returns, so a
--- node a caller has seen is always committed. Opening repairs what a kill
--- can leave behind: a torn last index line, a node whose ref was written but
--- whose index line was not, stale `*.lock` files, temporary objects; an
--- index that disagrees with the refs is rebuilt from them. Loading reads the
--- index only (100,000 nodes in well under 2 s), never every commit.
---
--- Resume: `add{key = ...}` returns the already committed node with that key
--- instead of committing again, so a strategy re-run from the start after a
--- crash is answered from the graph up to the point it stopped.
local git = require "mk.git"
local fs = require "mk.fs"
local json = require("cjson").new()
local utf8_text = require "mk.services.text"

local graph = {}

local INDEX = "nodes.jsonl"
-- A binary snapshot of the index (string.pack records), written by close
-- when many nodes were added: loading it costs one string.unpack per node
-- instead of a JSON decode. A cache only: ignored unless it matches the
-- index byte for byte up to the point it covers.
local SNAP = "nodes.snap"
local SNAP_MAGIC = "mk.search.graph snapshot 1\n"
local SNAP_HEAD = "<I4I8I8s1s1"
local SNAP_NODE = "<s1s1s2s1s1ddBs2I4"
local SNAP_EVERY = 1000
local RESERVED = { ["plan.md"] = true, ["node.json"] = true, ["error.txt"] = true }
local LAZY = { plan = "plan.md", error = "error.txt" }

---@class mk.Node
---@field id string short stable id ("n0001"), sortable by add order
---@field oid string commit id
---@field key string|nil stable step key given to add
---@field kind string
---@field status string
---@field parents string[] parent node ids
---@field metrics table
---@field cost table
---@field meta table
---@field time integer unix seconds of the commit
local Node = {}

-- Fields kept undecoded (a span `_tb`.._te` of the index text `_src`) until first use, so
-- loading 100,000 nodes decodes only what the graph's structure needs.
local TAIL = { metrics = true, cost = true, meta = true, transcripts = true, time = true, file_names = true }
local expand -- defined below

local node_mt = {
  __index = function(n, k)
    if TAIL[k] then
      if rawget(n, "_src") then
        expand(n)
        return rawget(n, k)
      end
      return nil
    end
    if LAZY[k] then
      -- loaded on first use: 100,000 nodes need not hold their plans
      local p = n._g.repo and n._g.repo:read(n.oid, LAZY[k]) or nil
      if p then rawset(n, k, p) end
      return p
    end
    return Node[k]
  end,
  __tostring = function(n) return "mk.node(" .. n.id .. ")" end,
}

--- The content of one file of the node, or nil if it has no such file.
---@param name string
---@return string|nil
function Node:file(name)
  return (self._g.repo:read(self.oid, name))
end

--- Names of the candidate's files (without plan.md and node.json), sorted.
---@return string[]
function Node:files()
  local out = {}
  for i, f in ipairs(self.file_names or {}) do out[i] = f end
  return out
end

--- True when the node is a correct, measured candidate (eligible for best).
function Node:correct()
  return self.status == "ok" and self._ok ~= false and (self._lat ~= nil or self._sp ~= nil)
end

--- Tokens spent on the node (cost.input_tokens + cost.output_tokens, or cost.tokens).
---@return integer
function Node:tokens()
  local c = self.cost or {}
  if type(c.tokens) == "number" then return c.tokens end
  return (tonumber(c.input_tokens) or 0) + (tonumber(c.output_tokens) or 0)
end

--- Format seconds as a short latency ("812 us", "1.234 ms", "2.50 s"; "-" if none).
---@param s number|nil
---@return string
function graph.format_latency(s)
  if type(s) ~= "number" then return "-" end
  if s < 1e-3 then return string.format("%.1f us", s * 1e6) end
  if s < 1 then return string.format("%.3f ms", s * 1e3) end
  return string.format("%.3f s", s)
end

--- Format a speedup ("1.83x"; "-" if none).
---@param x number|nil
function graph.format_speedup(x)
  if type(x) ~= "number" then return "-" end
  return string.format("%.2fx", x)
end

--- One-line label: "n0004 tune ok 0.250 ms 4.00x".
function Node:label()
  local m = self.metrics or {}
  local parts = { self.id, self.kind, self.status }
  if type(m.latency_s) == "number" then parts[#parts + 1] = graph.format_latency(m.latency_s) end
  if type(m.speedup) == "number" then parts[#parts + 1] = graph.format_speedup(m.speedup) end
  return table.concat(parts, " ")
end

---@class mk.Graph
---@field repo any mk.git repository
---@field dir string path of the bare repository
---@field problems string[] what open found and repaired (or could not)
local Graph = {}
Graph.__index = Graph

local function num_of(id) return tonumber(id:match("^n(%d+)$")) end
local function id_of(n) return string.format("n%04d", n) end

-- lua-cjson decodes every number as a float; give integral values back
-- their integer subtype so counts print and compare as written.
local function normalize(v)
  for k, x in pairs(v) do
    local tx = type(x)
    if tx == "number" then
      local i = math.tointeger(x)
      if i then v[k] = i end
    elseif tx == "table" then
      normalize(x)
    end
  end
  return v
end

-- Deep copy, so a caller mutating its metrics table later cannot change a
-- committed node behind git's back.
local copy = require("mk.services.util").copy

local NULL = json.null
local NAN = 0 / 0
local function unnull(v)
  if v == NULL then return nil end
  return v
end
local function num(v)
  if type(v) == "number" then return v end
  return nil
end

-- Turn a full record (node.json, or a node being added) into a node in
-- place, keeping eagerly the summary of metrics that best-tracking needs.
local function adopt(rec, g)
  rec.file_names, rec.files = rec.files or {}, nil
  rec.parents = rec.parents or {}
  rec.metrics = rec.metrics and normalize(rec.metrics) or {}
  rec.cost = rec.cost and normalize(rec.cost) or {}
  rec.meta = rec.meta and normalize(rec.meta) or {}
  if rec.transcripts then normalize(rec.transcripts) end
  rec.time = rec.time and math.tointeger(rec.time) or rec.time
  rec._g = g
  rec._lat, rec._sp, rec._ok = num(rec.metrics.latency_s), num(rec.metrics.speedup), rec.metrics.correct ~= false
  return setmetatable(rec, node_mt)
end

function expand(n)
  local tail = json.decode(rawget(n, "_src"):sub(n._tb, n._te))
  n._src, n._tb, n._te = nil, nil, nil
  n.metrics = tail.metrics and normalize(tail.metrics) or {}
  n.cost = tail.cost and normalize(tail.cost) or {}
  n.meta = tail.meta and normalize(tail.meta) or {}
  n.transcripts = tail.transcripts and normalize(tail.transcripts) or nil
  n.time = tail.time and math.tointeger(tail.time) or tail.time
  n.file_names = tail.files or {}
end

local function is_better(a, b)
  local la, lb = a._lat, b._lat
  if la and lb then return la < lb end
  local sa, sb = a._sp, b._sp
  if sa and sb then return sa > sb end
  return la ~= nil and lb == nil
end

local LISTS = { parents = true, files = true }

-- node.json as people read it in `git show`/`git diff`: sorted keys, one
-- field per line.
local function pretty(v, indent, key)
  if type(v) == "string" then
    -- plain ASCII that JSON (and cjson, which escapes '/') keeps as is: no call out
    if not v:find('[%c"\\/\128-\255]') then return '"' .. v .. '"' end
    return json.encode(utf8_text.utf8(v)) -- a model's bytes may not be UTF-8
  end
  if type(v) ~= "table" then return json.encode(v) end
  local pad = indent .. "  "
  if next(v) == nil then return LISTS[key] and "[]" or "{}" end
  if #v > 0 then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = pretty(x, pad) end
    local one = "[" .. table.concat(parts, ", ") .. "]"
    if #one <= 72 and not one:find("\n", 1, true) then return one end
    return "[\n" .. pad .. table.concat(parts, ",\n" .. pad) .. "\n" .. indent .. "]"
  end
  local keys = {}
  for k in pairs(v) do
    if type(k) ~= "string" then error("cannot encode a table with mixed or non-string keys", 0) end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = pretty(k) .. ": " .. pretty(v[k], pad, k) end
  return "{\n" .. pad .. table.concat(parts, ",\n" .. pad) .. "\n" .. indent .. "}"
end

-- Record as written to node.json.
local function record_of(n)
  return {
    id = n.id, key = n.key, kind = n.kind, status = n.status,
    parents = n.parents, metrics = n.metrics, cost = n.cost, meta = n.meta,
    transcripts = n.transcripts, time = n.time, files = n.file_names,
  }
end

local function nonempty(t)
  if t and next(t) ~= nil then return t end
  return nil
end

-- One line of the index: a JSON array of what the graph's structure needs
-- (decoded at load), a tab, and a JSON object of the rest (decoded when a
-- node's metrics/cost/meta are first read). JSON escapes tabs inside
-- strings, so the first raw tab separates the two.
--   [id, oid, parents, key, kind, status, latency_s, speedup, correct]\t{metrics, cost, meta, ...}
local function tail_text(n)
  local src = rawget(n, "_src")
  if src then return src:sub(n._tb, n._te) end
  return json.encode(utf8_text.clean{ metrics = nonempty(n.metrics), cost = nonempty(n.cost), meta = nonempty(n.meta),
    transcripts = n.transcripts, time = n.time, files = nonempty(n.file_names) })
end

local function index_line(n)
  local head = json.encode{ n.id, n.oid, n.parents, n.key or NULL, n.kind, n.status,
    n._lat or NULL, n._sp or NULL, n._ok }
  return head .. "\t" .. tail_text(n)
end

-- A node from the index line text[pos..e] (nil if the line is malformed).
-- The tail stays in `text` (no copy) until the node is expanded.
local function from_line(text, pos, e, g)
  local tab = string.find(text, "\t", pos, true)
  if not tab or tab > e then return nil end
  local h = json.decode(string.sub(text, pos, tab - 1))
  if type(h) ~= "table" or type(h[1]) ~= "string" or type(h[2]) ~= "string" or type(h[3]) ~= "table" then
    return nil
  end
  return setmetatable({ _g = g, id = h[1], oid = h[2], parents = h[3], key = unnull(h[4]), kind = h[5],
    status = h[6], _lat = num(h[7]), _sp = num(h[8]), _ok = h[9] ~= false, _src = text, _tb = tab + 1,
    _te = e - 1 }, node_mt)
end

-- Add an adopted node to the maps (the hot loop of loading: keep it lean).
function Graph:_insert(n)
  self.by_id[n.id] = n
  local count = self.count + 1
  self.count = count
  self.list[count] = n
  if n.key then self.keys[n.key] = n end
  local parents = n.parents
  local np = #parents
  if np == 0 then
    if not self.root_node then self.root_node = n end
  else
    local kids = self.kids
    for i = 1, np do
      local p = parents[i]
      local c = kids[p]
      if not c then
        kids[p] = { n }
      else
        c[#c + 1] = n
      end
    end
  end
  if n.status == "ok" and (n._lat or n._sp) and n._ok and n.kind ~= "root" and n.kind ~= "reference" then
    local b = self.best_node
    if not b or is_better(n, b) then self.best_node = n end
  end
  return n
end

-- The counter behind new ids: the number of the last node (the index and
-- the rebuild are both in id order).
function Graph:_sync_seq()
  local last = self.list[#self.list]
  self.seq = last and num_of(last.id) or 0
end

function Graph:_reset()
  self.by_id, self.list, self.keys, self.kids, self.count = {}, {}, {}, {}, 0
  self.seq, self.root_node, self.best_node = 0, nil, nil
end

-- Read a node's record from its commit (node.json), for rebuilding.
function Graph:_record_from_git(id, oid)
  local text, err = self.repo:read(oid, "node.json")
  if not text then return nil, err end
  local ok, rec = pcall(json.decode, text)
  if not ok or type(rec) ~= "table" or rec.id ~= id then
    return nil, { kind = "corrupt", message = "node.json of " .. id .. " is not valid" }
  end
  rec.oid = oid
  return rec
end

-- Rebuild the in-memory graph from refs/nodes/* (the source of truth).
function Graph:_rebuild()
  self:_reset()
  local refs, err = self.repo:refs("refs/nodes/*")
  if not refs then return nil, err end
  local recs = {}
  for _, r in ipairs(refs) do
    local id = r.name:match("^refs/nodes/(.+)$")
    local rec, rerr
    if r.oid then rec, rerr = self:_record_from_git(id, r.oid) end
    if rec then
      recs[#recs + 1] = rec
    else
      self.problems[#self.problems + 1] = "ref " .. r.name .. " is unreadable: " ..
        (rerr and rerr.message or "dangling") .. " (skipped)"
    end
  end
  table.sort(recs, function(a, b) return (num_of(a.id) or 0) < (num_of(b.id) or 0) end)
  for _, rec in ipairs(recs) do self:_insert(adopt(rec, self)) end
  self:_sync_seq()
  return true
end

function Graph:_write_index()
  fs.remove(self.dir .. "/" .. SNAP)
  local lines = {}
  for i, n in ipairs(self.list) do lines[i] = index_line(n) end
  lines[#lines + 1] = ""
  return fs.write(self.dir .. "/" .. INDEX, table.concat(lines, "\n"), { atomic = true, sync = self.sync })
end

function Graph:_write_snapshot()
  local size = (fs.stat(self.dir .. "/" .. INDEX) or {}).size
  local last = self.list[#self.list]
  if not size or not last or self.index_broken then return end
  local pack, concat = string.pack, table.concat
  local last_line = #index_line(last) + 1
  local parts = { SNAP_MAGIC, pack(SNAP_HEAD, #self.list, size, size - last_line + 1, last.id, last.oid) }
  for i, n in ipairs(self.list) do
    local tail = tail_text(n)
    parts[i + 2] = pack(SNAP_NODE, n.id, n.oid, n.key or "", n.kind, n.status, n._lat or NAN, n._sp or NAN,
      (n._ok and 1 or 0) | (n.key and 2 or 0), concat(n.parents, ","), #tail) .. tail
  end
  fs.write(self.dir .. "/" .. SNAP, concat(parts), { atomic = true, sync = self.sync })
  self.snap_count = #self.list
end

-- Load nodes from the snapshot if it matches `text` (the index); returns
-- the number of index bytes it covers (0 when unusable).
function Graph:_load_snapshot(text)
  local data = fs.read(self.dir .. "/" .. SNAP)
  if not data or data:sub(1, #SNAP_MAGIC) ~= SNAP_MAGIC then return 0 end
  local unpack, find, gmatch = string.unpack, string.find, string.gmatch
  local count, covered, last_start, last_id, last_oid, pos = unpack(SNAP_HEAD, data, #SNAP_MAGIC + 1)
  local prefix = json.encode{ last_id, last_oid }:sub(1, -2) .. ","
  if covered > #text or text:sub(covered, covered) ~= "\n" or text:sub(last_start, last_start + #prefix - 1) ~= prefix then
    return 0
  end
  for _ = 1, count do
    local id, oid, key, kind, status, lat, sp, flags, pj, tlen
    id, oid, key, kind, status, lat, sp, flags, pj, tlen, pos = unpack(SNAP_NODE, data, pos)
    local parents
    if pj == "" then
      parents = {}
    elseif not find(pj, ",", 1, true) then
      parents = { pj }
    else
      parents = {}
      for p in gmatch(pj, "[^,]+") do parents[#parents + 1] = p end
    end
    self:_insert(setmetatable({ _g = self, id = id, oid = oid, parents = parents,
      key = (flags & 2 ~= 0) and key or nil, kind = kind, status = status,
      _lat = lat == lat and lat or nil, _sp = sp == sp and sp or nil, _ok = flags & 1 ~= 0,
      _src = data, _tb = pos, _te = pos + tlen - 1 }, node_mt))
    pos = pos + tlen
  end
  if pos ~= #data + 1 or self.list[#self.list].oid ~= last_oid then error("snapshot is damaged", 0) end
  self.snap_count = count
  return covered
end

-- Load the index; returns "ok", "torn" (last line cut short), "bad" or
-- "missing". The fast path decodes line after line with no per-line pcall;
-- any failure restarts in the careful loop that tells torn from bad.
function Graph:_load_index()
  local text = fs.read(self.dir .. "/" .. INDEX)
  if not text then return "missing" end
  local find = string.find
  local by_id = self.by_id
  local function fast()
    local pos, len = (self.no_snapshot and 0 or self:_load_snapshot(text)) + 1, #text
    while pos <= len do
      local e = find(text, "\n", pos, true)
      if not e then error("torn", 0) end
      local n = from_line(text, pos, e, self)
      if not n or by_id[n.id] then error("bad", 0) end
      self:_insert(n)
      pos = e + 1
    end
  end
  local gc_was_running = collectgarbage("isrunning")
  collectgarbage("stop")
  local ok = pcall(fast)
  if not ok and fs.exists(self.dir .. "/" .. SNAP) then
    -- maybe only the snapshot is bad: retry from the index alone
    self:_reset()
    self.no_snapshot = true
    ok = pcall(fast)
  end
  if gc_was_running then collectgarbage("restart") end
  self:_sync_seq()
  if ok then return "ok" end
  self:_reset()
  local state = "ok"
  local pos, len = 1, #text
  while pos <= len do
    local e = text:find("\n", pos, true)
    if not e then
      state = "torn"
      break
    end
    local dok, n = pcall(from_line, text, pos, e, self)
    if not dok or not n or self.by_id[n.id] then return "bad" end
    self:_insert(n)
    pos = e + 1
  end
  self:_sync_seq()
  return state
end

-- Remove what a killed writer leaves behind (only with exclusive access).
function Graph:_clean_stale()
  local removed = {}
  local function rm(p)
    if fs.exists(p) and fs.remove(p) then removed[#removed + 1] = p end
  end
  for i = 1, 4 do rm(self.dir .. "/refs/nodes/" .. id_of(self.seq + i) .. ".lock") end
  rm(self.dir .. "/refs/heads/best.lock")
  rm(self.dir .. "/packed-refs.lock")
  rm(self.dir .. "/HEAD.lock")
  rm(self.dir .. "/" .. INDEX .. ".lock")
  for _, f in ipairs(fs.list(self.dir .. "/objects") or {}) do
    if f:match("^tmp_object_git2_") then rm(self.dir .. "/objects/" .. f) end
  end
  for _, p in ipairs(removed) do self.problems[#self.problems + 1] = "removed stale " .. p end
end

-- A node's ref is fine when it names the node's commit. A ref that is
-- missing or unreadable (a torn file after a power loss) while the index
-- still names an intact commit of that node is restored from the index.
function Graph:_check_ref(n, ref_oid)
  if ref_oid == n.oid then return true end
  if ref_oid ~= nil or not self.repo:exists(n.oid) then return false end
  local rec = self:_record_from_git(n.id, n.oid)
  if not rec then return false end
  if not self.readonly then
    -- libgit2 will not overwrite a corrupt loose ref file: remove it first
    local loose = self.dir .. "/refs/nodes/" .. n.id
    if fs.exists(loose) then fs.remove(loose) end
    local ok, err = self.repo:set_ref("refs/nodes/" .. n.id, n.oid)
    if not ok then error(err, 0) end
  end
  self.problems[#self.problems + 1] = "restored refs/nodes/" .. n.id .. " from the index"
  return true
end

-- Bring the in-memory graph in line with the refs; returns whether the
-- index file must be rewritten.
function Graph:_reconcile(verify)
  local state = self:_load_index()
  if state == "bad" then
    self.problems[#self.problems + 1] = "index " .. INDEX .. " is corrupt: rebuilt from refs"
    assert(self:_rebuild())
    return true
  end
  local dirty = state == "torn"
  if state == "torn" then self.problems[#self.problems + 1] = "dropped a torn last line of " .. INDEX end
  if state == "missing" and self.repo:ref("refs/nodes/" .. id_of(1)) then
    self.problems[#self.problems + 1] = "index " .. INDEX .. " is missing: rebuilt from refs"
    assert(self:_rebuild())
    return true
  end
  -- the last indexed node must be what its ref says
  local last = self.list[#self.list]
  if last and not self:_check_ref(last, self.repo:ref("refs/nodes/" .. last.id)) then
    self.problems[#self.problems + 1] = "index disagrees with refs/nodes/" .. last.id .. ": rebuilt from refs"
    assert(self:_rebuild())
    return true
  end
  if verify then
    -- refs past the last indexed id are recovered below, one by one
    local refs = self.repo:refs("refs/nodes/*")
    local ok, seen = true, {}
    if not refs then
      -- a ref file too broken to list: check node by node
      refs = {}
      for _, n in ipairs(self.list) do refs[#refs + 1] = { name = "refs/nodes/" .. n.id, oid = self.repo:ref("refs/nodes/" .. n.id) } end
    end
    for _, r in ipairs(refs) do
      local id = r.name:sub(12)
      local n = self.by_id[id]
      if n then
        seen[id] = true
        ok = self:_check_ref(n, r.oid) and self.repo:exists(n.oid)
      else
        ok = (num_of(id) or 0) > self.seq
      end
      if not ok then break end
    end
    if ok then
      for _, n in ipairs(self.list) do
        if not seen[n.id] and not self:_check_ref(n, nil) then
          ok = false
          break
        end
      end
    end
    if not ok then
      self.problems[#self.problems + 1] = "index disagrees with refs: rebuilt from refs"
      assert(self:_rebuild())
      return true
    end
  end
  -- nodes committed after the index was last appended (killed in between)
  while true do
    local id = id_of(self.seq + 1)
    local oid = self.repo:ref("refs/nodes/" .. id)
    if not oid then break end
    local rec, err = self:_record_from_git(id, oid)
    if not rec then
      self.problems[#self.problems + 1] = "refs/nodes/" .. id .. " unreadable: " .. err.message .. ": rebuilt"
      assert(self:_rebuild())
      return true
    end
    self.problems[#self.problems + 1] = "recovered " .. id .. " from its ref"
    self:_insert(adopt(rec, self))
    self:_sync_seq()
    dirty = true
  end
  return dirty
end

--- Open (or create) the graph stored in the bare repository `dir`.
---@param dir string path of the bare repository (e.g. RUN/graph.git)
---@param opts table|nil {create = true, readonly = false, verify = false, sync = false, snapshot_every = 1000}
---  create: make the repository if missing; readonly: repair nothing on disk
---  (for inspecting a live run); verify: compare every ref with the index;
---  sync: fsync objects, refs and the index (survives power loss, ~ms/node);
---  snapshot_every: close writes a binary snapshot of the index (fast loading)
---  when at least this many nodes were added since the last one; snapshot =
---  false ignores the snapshot (loads from nodes.jsonl alone).
---@return mk.Graph|nil, table|nil err {kind = "not_found"|"corrupt", message}
function graph.open(dir, opts)
  assert(type(dir) == "string", "graph.open: dir must be a string")
  opts = opts or {}
  local repo, err
  if not fs.exists(dir) then
    if opts.create == false or opts.readonly then
      return nil, { kind = "not_found", message = "no graph repository at " .. dir }
    end
    repo, err = git.init(dir)
  else
    repo, err = git.open(dir)
  end
  if not repo then
    return nil, { kind = "corrupt", message = dir .. " is not a usable git repository: " .. err.message }
  end
  if opts.sync then git.fsync(true) end
  local g = setmetatable({ repo = repo, dir = dir:gsub("/+$", ""), sync = opts.sync or false,
    readonly = opts.readonly or false, problems = {}, snapshot_every = opts.snapshot_every or SNAP_EVERY,
    no_snapshot = opts.snapshot == false or nil }, Graph)
  g:_reset()
  if not g.readonly then
    -- new refs are lines appended to packed-refs: one cut short by a crash
    -- goes before anything reads the refs
    local _, torn = repo:repair_refs()
    if torn then g.problems[#g.problems + 1] = "dropped a torn last line of packed-refs" end
  end
  local ok, dirty = pcall(g._reconcile, g, opts.verify)
  if not ok then
    repo:close()
    local msg = type(dirty) == "table" and dirty.message or tostring(dirty)
    return nil, { kind = "corrupt", message = "cannot load graph " .. dir .. ": " .. msg }
  end
  if not g.readonly then
    g:_clean_stale()
    if dirty then assert(g:_write_index()) end
    local best = g.best_node
    if best and repo:ref("refs/heads/best") ~= best.oid then repo:set_ref("refs/heads/best", best.oid) end
  end
  return g
end

local function check_table(v, what)
  if v ~= nil and type(v) ~= "table" then error("graph:add: " .. what .. " must be a table", 3) end
end

local function fmt_speedup(m)
  if type(m.speedup) == "number" then return string.format(" %.3fx", m.speedup) end
  return ""
end

--- Commit a node. With `key`, a node already committed under that key is
--- returned as is (nothing is written): the resume mechanism.
---@param spec table {parents = {node|id...}, kind = string, files = {[name] = text},
---  plan = string?, status = string? ("ok"), metrics = table?, cost = table?,
---  meta = table?, transcripts = table?, key = string?, error = string?}
---  `error` (compiler output, failing test) is stored as error.txt.
---@return mk.Node|nil, table|nil err {kind = "git"|..., message} when the write failed
function Graph:add(spec)
  if type(spec) ~= "table" then error("graph:add: expects a table", 2) end
  if self.readonly then error("graph:add: graph was opened readonly", 2) end
  if spec.key ~= nil and type(spec.key) ~= "string" then error("graph:add: key must be a string", 2) end
  if spec.key and self.keys[spec.key] then return self.keys[spec.key] end
  if type(spec.kind) ~= "string" or spec.kind == "" then error("graph:add: kind must be a non-empty string", 2) end
  check_table(spec.files, "files")
  check_table(spec.metrics, "metrics")
  check_table(spec.cost, "cost")
  check_table(spec.meta, "meta")
  check_table(spec.parents, "parents")
  if spec.plan ~= nil and type(spec.plan) ~= "string" then error("graph:add: plan must be a string", 2) end
  if spec.error ~= nil and type(spec.error) ~= "string" then error("graph:add: error must be a string", 2) end
  local status = spec.status or "ok"
  if type(status) ~= "string" then error("graph:add: status must be a string", 2) end
  local parents, parent_oids = {}, {}
  for i, p in ipairs(spec.parents or {}) do
    local pid = type(p) == "table" and p.id or p
    local pn = self.by_id[pid]
    if not pn or (type(p) == "table" and pn ~= p and pn.oid ~= p.oid) then
      error("graph:add: parent " .. i .. " (" .. tostring(pid) .. ") is not a node of this graph", 2)
    end
    parents[i], parent_oids[i] = pn.id, pn.oid
  end
  local tree, names = {}, {}
  for name, data in pairs(spec.files or {}) do
    if RESERVED[name] then error("graph:add: file name '" .. name .. "' is reserved", 2) end
    if type(name) ~= "string" or type(data) ~= "string" then
      error("graph:add: files must map names to strings", 2)
    end
    tree[name] = data
    names[#names + 1] = name
  end
  table.sort(names)
  local id = id_of(self.seq + 1)
  local n = {
    id = id, key = spec.key, kind = spec.kind, status = status, parents = parents,
    metrics = copy(spec.metrics) or {}, cost = copy(spec.cost) or {}, meta = copy(spec.meta) or {},
    transcripts = copy(spec.transcripts), time = os.time(), file_names = names,
  }
  local ok, node_json = pcall(pretty, record_of(n), "")
  if not ok then error("graph:add: cannot encode node: " .. tostring(node_json), 2) end
  tree["node.json"] = node_json .. "\n"
  if spec.plan then tree["plan.md"] = spec.plan end
  if spec.error then tree["error.txt"] = spec.error end
  local msg = string.format("%s %s %s%s\n\n%s", id, n.kind, status, fmt_speedup(n.metrics),
    spec.key and ("key: " .. spec.key .. "\n") or "")
  local oid, err = self.repo:commit{ files = tree, parents = parent_oids, message = msg,
    ref = "refs/nodes/" .. id, new_ref = true, time = n.time }
  if not oid then return nil, err end
  n.oid = oid
  local prev_best = self.best_node
  n.files, n.file_names = n.file_names, nil
  local node = adopt(n, self)
  local line = index_line(node) .. "\n"
  self:_insert(node)
  self.seq = self.seq + 1
  if spec.plan then rawset(node, "plan", spec.plan) end
  if spec.error then rawset(node, "error", spec.error) end
  local aok, aerr = fs.append(self.dir .. "/" .. INDEX, line, self.sync)
  if not aok then
    -- the commit and its ref exist; the next open recovers the index line
    self.problems[#self.problems + 1] = "cannot append to index: " .. tostring(aerr and aerr.message)
    self.index_broken = true
  end
  if self.best_node ~= prev_best then
    self.repo:set_ref("refs/heads/best", node.oid, "best: " .. id)
    if self.on_best then self.on_best(node, prev_best) end
  end
  if self.on_add then self.on_add(node) end
  return node
end

--- The node committed under `key`, or nil.
---@param key string
function Graph:by_key(key) return self.keys[key] end

--- The node with this id (or nil).
---@param id string
function Graph:get(id) return self.by_id[id] end

--- The first node added without parents (holds the reference and baseline).
function Graph:root() return self.root_node end

--- The fastest correct node (lowest latency_s, else highest speedup), not
--- counting root/reference nodes; nil if there is none yet.
function Graph:best() return self.best_node end

--- Number of nodes.
function Graph:len() return #self.list end

--- Nodes in add order, optionally only those for which filter(node) is true.
---@param filter fun(n: mk.Node): boolean|nil
---@return mk.Node[]
function Graph:nodes(filter)
  local out = {}
  for _, n in ipairs(self.list) do
    if not filter or filter(n) then out[#out + 1] = n end
  end
  return out
end

--- The node's parents as nodes.
---@param n mk.Node|string
function Graph:parents(n)
  n = type(n) == "table" and n or self.by_id[n]
  local out = {}
  for i, p in ipairs(n and n.parents or {}) do out[i] = self.by_id[p] end
  return out
end

--- The node's children in add order.
---@param n mk.Node|string
function Graph:children(n)
  local id = type(n) == "table" and n.id or n
  local out = {}
  for i, c in ipairs(self.kids[id] or {}) do out[i] = c end
  return out
end

--- The path from a parentless ancestor to n (inclusive), following first parents.
---@param n mk.Node|string
---@return mk.Node[]
function Graph:lineage(n)
  n = type(n) == "table" and n or self.by_id[n]
  local path = {}
  while n do
    table.insert(path, 1, n)
    n = n.parents[1] and self.by_id[n.parents[1]]
  end
  return path
end

--- Find a node by id, "best", "root", a key, or a commit id prefix (>= 4 hex).
---@param s string
function Graph:resolve(s)
  if s == "best" then return self.best_node end
  if s == "root" then return self.root_node end
  if self.by_id[s] then return self.by_id[s] end
  -- a number names a node; digits that name none may still be a commit prefix
  if s:match("^%d+$") and self.by_id[id_of(tonumber(s))] then return self.by_id[id_of(tonumber(s))] end
  if self.keys[s] then return self.keys[s] end
  if #s >= 4 and s:match("^%x+$") then
    local found
    for _, n in ipairs(self.list) do
      if n.oid:sub(1, #s) == s then
        if found then return nil end
        found = n
      end
    end
    return found
  end
  return nil
end

--- Patch text and stat between two nodes' trees (see mk.git repo:diff).
---@param a mk.Node|string
---@param b mk.Node|string
function Graph:diff(a, b, opts)
  a = type(a) == "table" and a or self.by_id[a]
  b = type(b) == "table" and b or self.by_id[b]
  if not a or not b then error("graph:diff: unknown node", 2) end
  return self.repo:diff(a.oid, b.oid, opts)
end

--- All candidate files of a node as {[name] = text}.
---@param n mk.Node|string
function Graph:files(n)
  n = type(n) == "table" and n or self.by_id[n]
  local out = {}
  for _, f in ipairs(n.file_names) do out[f] = n:file(f) end
  return out
end

--- Pack refs (fast listing later) and close the repository.
function Graph:close()
  if not self.repo then return end
  if not self.readonly and #self.list > 0 then
    self.repo:pack_refs()
    if #self.list - (self.snap_count or 0) >= self.snapshot_every then self:_write_snapshot() end
  end
  self.repo:close()
  self.repo = nil
end

graph.Node = Node
graph.INDEX = INDEX
return graph

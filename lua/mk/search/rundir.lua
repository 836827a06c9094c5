--- mk.search.rundir: the directory of one run, created by `mkengine run` and
--- continued by `mkengine resume`.
---
---   runs/<time>-<strategy>-<task>/
---     run.json       strategy, task, options, seed, model, engine version,
---                    status, started/ended (rewritten atomically)
---     graph.git/     the search graph (mk.search.graph), readable with plain git
---     events.jsonl   append-only log: one JSON object per line with `t`
---                    (seconds since the run started) and `type`
---     suite.json     the frozen test suite it uses (key and path in the shared
---                    cache, mk.eval.suites)
---     tests/         empty; holds the suite itself in runs made before the
---                    cache or copied with `mkengine export`
---     best/          checkout of the best node, refreshed when best changes
---     summary.json   written at the end
---     .lock          held (flock) by the engine writing the run
---
--- Only one engine may write a run: create/open take the lock, a second one
--- gets {kind = "locked"}. Opening validates before touching anything.
local fs = require("mk.fs")
local git = require("mk.git")
local graph = require("mk.search.graph")
local utf8_text = require("mk.services.text")
local json = require("cjson").new()
local util = require("mk.services.util")
local home = require("mk.home")
local task_lib = require("mk.services.task")

local rundir = {}

--- JSON text as people expect it: lua-cjson escapes every '/' as '\/',
--- which is legal but makes paths unreadable; undo that.
---@param v any
---@return string
function rundir.encode(v)
  -- and valid UTF-8 whatever a model or a compiler said (invalid bytes -> U+FFFD)
  return (json.encode(utf8_text.clean(v)):gsub("\\/", "/"))
end

---@class mk.Run
---@field dir string
---@field graph mk.Graph
---@field info table contents of run.json
local Run = {}
Run.__index = Run

local function now() return task_lib.now() end

-- The name of a strategy or task path for a directory name: its last
-- component without extension.
local function slug(s)
  s = tostring(s or "run"):gsub("/+$", "")
  s = (s:match("([^/]+)$") or s):gsub("%.[%w]+$", "")
  return util.slug(s, "run")
end

local function write_json(path, tbl, sync)
  return fs.write(path, rundir.encode(tbl) .. "\n", { atomic = true, sync = sync })
end

local function read_json(path)
  local v = util.read_json(path)
  return type(v) == "table" and v or nil
end

-- Node events carry `spent`: what the run had spent when the node was
-- added (run.spent, set by the runner to ctx:spent), so a run can be cut
-- at any budget afterwards (mk.study.compare's anytime curves).
function Run:_wire()
  self.mono0 = now()
  self.offset = os.time() - (tonumber(self.info.started) or os.time())
  self.graph.on_add = function(n)
    self:event{ type = "node", id = n.id, key = n.key, kind = n.kind, status = n.status,
      parents = #n.parents > 0 and n.parents or nil, latency_s = n.metrics.latency_s, speedup = n.metrics.speedup,
      -- the kernel's measurement record: readers pool nodes of one source (mk.search.figure)
      source_hash = n.metrics.source_hash, measurements = n.metrics.measurements,
      cost = n.cost, spent = self.spent and self.spent() or nil }
  end
  self.graph.on_best = function(n)
    self:event{ type = "best", id = n.id, latency_s = n.metrics.latency_s, speedup = n.metrics.speedup }
    self:refresh_best()
  end
end

--- A path inside the run directory.
---@param rel string
function Run:path(rel) return self.dir .. "/" .. rel end

--- Seconds since the run started (across resumes).
function Run:elapsed() return self.offset + (now() - self.mono0) end

--- Follow the run from this process as it is written: after each event
--- line is appended, `l.event(e, detail)` is called (e: the event as
--- written, `t` included; detail: what the caller of run:event handed
--- beside it, never written), and after run.json is rewritten `l.info(info)`.
--- How `run --ui` shows the run it serves without reading its files back.
--- A listener's error is reported on stderr; the run goes on.
---@param l table {event = fun(e: table, detail: any)?, info = fun(info: table)?}
function Run:listen(l)
  if type(l) ~= "table" then error("run:listen: expects a table {event =, info =}", 2) end
  self.listeners = self.listeners or {}
  self.listeners[#self.listeners + 1] = l
end

--- Stop calling listener `l` (no-op when it is not listening).
function Run:unlisten(l)
  for i, x in ipairs(self.listeners or {}) do
    if x == l then
      table.remove(self.listeners, i)
      return
    end
  end
end

local function notify(self, what, ...)
  for _, l in ipairs(self.listeners) do
    local fn = l[what]
    if fn then
      local ok, err = pcall(fn, ...)
      if not ok then io.stderr:write("mkengine: a listener of the run failed: ", tostring(err), "\n") end
    end
  end
end

--- Append one event line. `tbl.type` is required; `t` is added. `detail`
--- is handed to the run's listeners (run:listen) and not written.
---@param tbl table
---@param detail any
function Run:event(tbl, detail)
  if type(tbl) ~= "table" or type(tbl.type) ~= "string" then error("run:event: needs a table with a string `type`", 2) end
  if self.readonly then error("run:event: run was opened readonly", 2) end
  local e = {}
  for k, v in pairs(tbl) do e[k] = v end
  e.t = math.floor(self:elapsed() * 1000 + 0.5) / 1000
  local ok, line = pcall(rundir.encode, e)
  if not ok then error("run:event: cannot encode event: " .. tostring(line), 2) end
  local done, err = fs.append(self:path("events.jsonl"), line .. "\n", false)
  if done and self.listeners then notify(self, "event", e, detail) end
  return done, err
end

--- Set run.json's status ("running", "done", "failed", "interrupted", ...);
--- any status but "running" also records `ended`.
---@param s string
function Run:set_status(s)
  if type(s) ~= "string" then error("run:set_status: status must be a string", 2) end
  if self.readonly then error("run:set_status: run was opened readonly", 2) end
  self.info.status = s
  if s ~= "running" then
    self.info.ended = os.time()
    self.info.ended_at = os.date("!%Y-%m-%dT%H:%M:%SZ", self.info.ended)
  end
  local ok, err = write_json(self:path("run.json"), self.info, true)
  if not ok then -- a full disk has no room for the atomic copy; rewriting in place reuses the file's own
    ok = fs.write(self:path("run.json"), rundir.encode(self.info) .. "\n", { atomic = false })
  end
  assert(ok, err and err.message)
  if self.listeners then notify(self, "info", self.info) end
  return ok
end

--- Rewrite best/ with the files of the current best node, or of `node`
--- when given (the runner passes the best node that also passed the
--- held-out check). plan.md and node.json included; atomic: best/ is
--- swapped in by a rename.
---@param node mk.Node|nil
function Run:refresh_best(node)
  local b = node or self.graph:best()
  local target = self:path("best")
  local tmp = self:path(".best.tmp")
  fs.rm_rf(tmp)
  assert(fs.mkdirs(tmp))
  if b then
    for _, f in ipairs(assert(self.graph.repo:ls(b.oid))) do
      local data = assert(self.graph.repo:read(b.oid, f))
      local dir = f:match("^(.*)/[^/]+$")
      if dir then fs.mkdirs(tmp .. "/" .. dir) end
      assert(fs.write(tmp .. "/" .. f, data, { atomic = false }))
    end
  end
  local old = self:path(".best.old")
  fs.rm_rf(old)
  if fs.exists(target) then assert(fs.rename(target, old)) end
  assert(fs.rename(tmp, target))
  fs.rm_rf(old)
end

--- Write summary.json. Fields not given are filled from the graph and
--- run.json: strategy, task, status, nodes, correct_nodes, best, cost,
--- model, seed, options. Returns the summary table (with run_dir).
---@param tbl table|nil
function Run:write_summary(tbl)
  tbl = tbl or {}
  local g = self.graph
  local s = {}
  for k, v in pairs(tbl) do s[k] = v end
  s.strategy = s.strategy or self.info.strategy
  s.task = s.task or self.info.task
  s.status = s.status or self.info.status
  s.nodes = s.nodes or g:len()
  s.correct_nodes = s.correct_nodes or #g:nodes(function(n)
    return n:correct() and n.kind ~= "root" and n.kind ~= "reference"
  end)
  if s.best == nil then
    local b = g:best()
    s.best = b and { node = b.id, speedup = b.metrics.speedup, latency_s = b.metrics.latency_s } or json.null
  end
  local cost = {}
  for k, v in pairs(s.cost or {}) do cost[k] = v end
  for _, k in ipairs{ "input_tokens", "output_tokens", "usd", "llm_s", "device_s" } do cost[k] = cost[k] or 0 end
  cost.wall_s = cost.wall_s or math.floor(self:elapsed() * 1000 + 0.5) / 1000
  s.cost = cost
  if s.model == nil then s.model = self.info.model end
  if s.seed == nil then s.seed = self.info.seed end
  if s.options == nil then s.options = self.info.options end
  s.run_dir = nil
  assert(write_json(self:path("summary.json"), s, true))
  s.run_dir = self.dir
  return s
end

--- Close the graph (packs refs) and release the lock.
function Run:close()
  if self.graph then self.graph:close() end
  if self.lock then self.lock:unlock() end
  self.lock = nil
end

---@class mk.RundirCreateOpts
---@field root string|nil parent directory (default "runs")
---@field dir string|nil exact directory to use (must not exist or be empty)
---@field strategy string
---@field task string task name or directory
---@field options table|nil
---@field seed integer|nil
---@field model string|nil
---@field sync boolean|nil fsync graph objects, refs and index lines: survives power loss, costs
---  tens of ms per node on slow disks (default false: a kill -9 loses nothing without it)

--- Create a new run directory, locked, with an empty graph.
---@param o mk.RundirCreateOpts
---@return mk.Run|nil, table|nil err {kind = "exists"|"locked"|"io", message}
function rundir.create(o)
  if type(o) ~= "table" then error("rundir.create: expects a table", 2) end
  if type(o.strategy) ~= "string" then error("rundir.create: strategy must be a string", 2) end
  if type(o.task) ~= "string" then error("rundir.create: task must be a string", 2) end
  local fixed = o.dir and o.dir:gsub("/+$", "")
  local base = fixed or string.format("%s/%s-%s-%s", (o.root or "runs"):gsub("/+$", ""),
    os.date("!%Y%m%d-%H%M%S"), slug(o.strategy), slug(o.task))
  local parent, name = base:match("^(.*)/([^/]+)$")
  if not parent then parent, name = ".", base end
  if fixed and fs.exists(fixed) and #(fs.list(fixed) or {}) > 0 then
    return nil, { kind = "exists", message = fixed .. " already exists and is not empty" }
  end
  local ok, err = fs.mkdirs(parent)
  if not ok then return nil, err end
  -- Build the run in a hidden sibling and rename it into place, so a kill
  -- during creation never leaves a half-made run under the real name.
  -- unique even when two engines seeded math.random alike: pid + counter
  local pid = (fs.read("/proc/self/stat") or ""):match("^(%d+)") or tostring(os.time())
  local tmp
  repeat
    tmp = string.format("%s/.creating-%s-%s-%d", parent, name, pid, math.random(1, 1 << 30))
  until not fs.exists(tmp)
  assert(fs.mkdirs(tmp))
  local lock, lerr = fs.lock(tmp .. "/.lock")
  if not lock then return nil, lerr end
  local started = os.time()
  local info = {
    strategy = o.strategy, task = o.task, options = o.options or {}, seed = o.seed, model = o.model,
    engine = "mkengine", engine_version = home.version, status = "running",
    started = started, started_at = os.date("!%Y-%m-%dT%H:%M:%SZ", started), resumed = 0,
    sync = o.sync == true,
  }
  for _, sub in ipairs{ "tests", "best" } do assert(fs.mkdirs(tmp .. "/" .. sub)) end
  local repo, gerr = git.init(tmp .. "/graph.git")
  if not repo then
    lock:unlock()
    fs.rm_rf(tmp)
    return nil, gerr
  end
  repo:close()
  assert(fs.write(tmp .. "/events.jsonl", "", { atomic = false }))
  assert(write_json(tmp .. "/run.json", info, true))
  local dir = base
  local i = 1
  while true do
    local moved, merr = fs.rename(tmp, dir)
    if moved then break end
    if fixed or not fs.exists(dir) then
      lock:unlock()
      fs.rm_rf(tmp)
      if fixed and fs.exists(dir) then
        return nil, { kind = "exists", message = dir .. " already exists and is not empty" }
      end
      return nil, merr
    end
    i = i + 1
    dir = base .. "-" .. i
  end
  local g, oerr = graph.open(dir .. "/graph.git", { create = false, sync = info.sync })
  if not g then
    lock:unlock()
    return nil, oerr
  end
  local run = setmetatable({ dir = dir, graph = g, info = info, lock = lock }, Run)
  run:_wire()
  run:event{ type = "run_start", strategy = o.strategy, task = o.task, seed = o.seed, model = o.model }
  return run
end

-- Drop a torn last line of events.jsonl (a kill in the middle of a write).
local function repair_events(path)
  local text = fs.read(path)
  if not text or text == "" or text:sub(-1) == "\n" then return false end
  local keep = text:match("^(.*\n)") or ""
  assert(fs.write(path, keep, { atomic = true }))
  return true
end

--- Check that `dir` is a run directory with a usable graph; nothing is
--- modified. Returns run.json's table or nil, err.
---@param dir string
---@return table|nil, table|nil err {kind = "not_a_run"|"corrupt", message}
function rundir.validate(dir)
  if type(dir) ~= "string" then error("rundir.validate: dir must be a string", 2) end
  if not fs.isdir(dir) then
    return nil, { kind = "not_a_run", message = dir .. " is not a directory" }
  end
  if not fs.exists(dir .. "/run.json") then
    return nil, { kind = "not_a_run", message = dir .. " is not a run directory (no run.json)" }
  end
  local info = read_json(dir .. "/run.json")
  if not info then return nil, { kind = "corrupt", message = dir .. "/run.json is not valid JSON" } end
  if not fs.isdir(dir .. "/graph.git") then
    return nil, { kind = "corrupt", message = dir .. "/graph.git is missing" }
  end
  local repo, err = git.open(dir .. "/graph.git")
  if not repo then
    return nil, { kind = "corrupt", message = dir .. "/graph.git is not a usable git repository: " .. err.message }
  end
  repo:close()
  return info
end

--- The first node of graph `g` whose commit cannot be read in full (a
--- file's object deleted or corrupted), as text, or nil when all are whole.
--- A resume must not go on over a damaged repository: it would answer
--- steps from nodes it cannot read.
---@param g mk.Graph
function rundir.missing_objects(g)
  for _, n in ipairs(g:nodes()) do
    local miss, err = g.repo:missing(n.oid)
    if not miss then return "node " .. n.id .. ": " .. tostring(err and err.message) end
    if #miss > 0 then return "node " .. n.id .. " lacks the object of " .. table.concat(miss, ", ") end
  end
  return nil
end

--- Open an existing run. By default takes the lock, repairs what a kill
--- left behind (torn lines, stale git locks, index behind the refs), logs
--- a "resume" event and sets the status to "running". With readonly = true
--- nothing is locked or written (for show/tree/diff on a live run).
---@param dir string
---@param opts table|nil {readonly = false}
---@return mk.Run|nil, table|nil err {kind = "not_a_run"|"corrupt"|"locked", message}
function rundir.open(dir, opts)
  opts = opts or {}
  dir = type(dir) == "string" and dir:gsub("/+$", "") or dir
  local info, err = rundir.validate(dir)
  if not info then return nil, err end
  local lock
  if not opts.readonly then
    local lerr
    lock, lerr = fs.lock(dir .. "/.lock")
    if not lock then
      return nil, { kind = "locked", message = dir .. " is in use by another engine (" .. lerr.message .. ")" }
    end
  end
  local g, gerr = graph.open(dir .. "/graph.git", { create = false, readonly = opts.readonly,
    verify = not opts.readonly, sync = info.sync })
  if not g then
    if lock then lock:unlock() end
    return nil, { kind = "corrupt", message = gerr.message }
  end
  if not opts.readonly then
    local bad = rundir.missing_objects(g)
    if bad then
      g:close()
      lock:unlock()
      return nil, { kind = "corrupt", message = dir .. "/graph.git is damaged: " .. bad
        .. " ('git --git-dir " .. dir .. "/graph.git fsck' shows the damage; restore the directory from a copy)" }
    end
  end
  local run = setmetatable({ dir = dir, graph = g, info = info, lock = lock, readonly = opts.readonly }, Run)
  run:_wire()
  if not opts.readonly then
    local torn = repair_events(run:path("events.jsonl"))
    for _, sub in ipairs{ "tests", "best" } do fs.mkdirs(dir .. "/" .. sub) end
    info.resumed = (math.tointeger(info.resumed) or 0) + 1
    info.ended, info.ended_at = nil, nil
    run:set_status("running")
    run:event{ type = "resume", nodes = g:len(), repaired = g.problems, torn_event = torn or nil }
    run:refresh_best()
  end
  return run
end

return rundir

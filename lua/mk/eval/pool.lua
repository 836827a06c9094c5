--- mk.eval.pool: the engine side of remote evaluation. A pool starts the
--- workers a `--workers FILE.lua` names (local processes, OpenSSH hosts,
--- Slurm allocations), speaks the worker protocol (mk.eval.worker) with each,
--- and lends their evaluation slots to mk.eval as one pool. Faults lose
--- nothing: an evaluation whose worker dies, hangs (no heartbeat) or loses
--- its connection is retried on another slot (bounded), never reported as
--- the candidate's failure; a worker that keeps failing is drained; with no
--- worker left, requests fail with {kind = "no_workers"} and the run stops
--- (resumable).
local cjson = require("cjson")
local fs = require("mk.fs")
local proc = require("mk.proc")
local task_lib = require("mk.services.task")
local util = require("mk.services.util")
local worker = require("mk.eval.worker")
local workdir = require("mk.services.workdir")
local home = require("mk.home")

local M = {}

local KINDS = { ["local"] = true, ssh = true, slurm = true }

local function input_error(msg)
  util.raise({ exit = 2, message = msg })
end

local function check_list(v, what)
  if v == nil then return {} end
  if type(v) ~= "table" then input_error(what .. " must be a list of strings") end
  for _, x in ipairs(v) do
    if type(x) ~= "string" then input_error(what .. " must be a list of strings") end
  end
  return v
end

--- Load and check a workers file (a Lua file returning a list of worker
--- specs, see docs/workers.md). Bad input raises {exit = 2, message}.
---@param path string
---@return table specs
function M.load(path)
  local chunk, err = loadfile(path, "t", {})
  if not chunk then input_error("cannot load workers file " .. path .. ": " .. tostring(err)) end
  local ok, specs = pcall(chunk)
  if not ok then input_error("workers file " .. path .. " failed: " .. tostring(specs)) end
  if type(specs) ~= "table" then input_error("workers file " .. path .. " must return a list of workers") end
  if type(specs.workers) == "table" then specs = specs.workers end
  if #specs == 0 then input_error("workers file " .. path .. " names no worker") end
  for i, s in ipairs(specs) do
    local where = string.format("%s: worker %d", path, i)
    if type(s) ~= "table" then input_error(where .. " must be a table") end
    if not KINDS[s.kind] then input_error(where .. ": kind must be \"local\", \"ssh\" or \"slurm\"") end
    if s.slots ~= nil and (not math.tointeger(s.slots) or s.slots < 1) then
      input_error(where .. ": slots must be a positive integer")
    end
    if s.kind == "ssh" and (type(s.host) ~= "string" or s.host == "") then input_error(where .. ": ssh needs host") end
    if s.port ~= nil and not math.tointeger(s.port) then input_error(where .. ": port must be an integer") end
    check_list(s.ssh_options, where .. ": ssh_options")
    check_list(s.extra, where .. ": extra")
    if s.env ~= nil and type(s.env) ~= "table" then input_error(where .. ": env must be a table") end
    if s.recheck ~= nil and type(s.recheck) ~= "boolean" then input_error(where .. ": recheck must be true or false") end
    for k, v in pairs(s.env or {}) do
      if type(k) ~= "string" or not k:match("^[%a_][%w_]*$") or (type(v) ~= "string" and type(v) ~= "number") then
        input_error(where .. ": env must map variable names to strings")
      end
    end
  end
  return specs
end


--- The command line that starts a spec's worker (exposed for tests/docs).
---@param spec table
---@param opts table {control_dir, exe}
function M.argv(spec, opts)
  local slots = tostring(math.tointeger(spec.slots or 1))
  local cmd = spec.command or (spec.kind == "ssh" and "mkengine" or opts.exe)
  local wargs = { cmd, "worker", "--slots", slots }
  if spec.name then wargs[#wargs + 1] = "--name"; wargs[#wargs + 1] = spec.name end
  if spec.cache then wargs[#wargs + 1] = "--cache"; wargs[#wargs + 1] = spec.cache end
  if spec.kind == "local" then return wargs end
  if spec.kind == "ssh" then
    -- BatchMode: never a password prompt; the user's ~/.ssh/config still
    -- applies (unless ssh_options gives -F); host keys are checked as usual.
    local a = { "ssh", "-T", "-o", "BatchMode=yes", "-o", "ControlMaster=auto", "-o",
      "ControlPath=" .. opts.control_dir .. "/%C", "-o", "ControlPersist=60", "-o", "ServerAliveInterval=5",
      "-o", "ServerAliveCountMax=3" }
    if spec.port then a[#a + 1] = "-p"; a[#a + 1] = tostring(math.tointeger(spec.port)) end
    if spec.user then a[#a + 1] = "-l"; a[#a + 1] = spec.user end
    for _, x in ipairs(spec.ssh_options or {}) do a[#a + 1] = x end
    a[#a + 1] = spec.host
    -- the remote side gets one command string: env assignments, then the worker
    local words = {}
    if spec.env and next(spec.env) then
      words[1] = "env"
      local names = {}
      for k in pairs(spec.env) do names[#names + 1] = k end
      table.sort(names)
      for _, k in ipairs(names) do words[#words + 1] = util.sh_quote(k .. "=" .. tostring(spec.env[k])) end
    end
    for _, w in ipairs(wargs) do words[#words + 1] = util.sh_quote(w) end
    a[#a + 1] = table.concat(words, " ")
    return a
  end
  -- slurm: salloc holds the allocation exactly as long as its srun runs the
  -- worker; killing salloc (the engine's exit, a cancel) releases it
  local a = { "salloc", "--quiet", "-N", tostring(spec.nodes or 1), "-n", tostring(spec.ntasks or 1) }
  if spec.partition then a[#a + 1] = "-p"; a[#a + 1] = spec.partition end
  if spec.gres then a[#a + 1] = "--gres=" .. spec.gres end
  if spec.time then a[#a + 1] = "-t"; a[#a + 1] = tostring(spec.time) end
  if spec.job_name ~= false then a[#a + 1] = "-J"; a[#a + 1] = spec.job_name or "mkengine-worker" end
  for _, x in ipairs(spec.extra or {}) do a[#a + 1] = x end
  for _, x in ipairs { "srun", "--unbuffered", "-n", "1", "-N", "1" } do a[#a + 1] = x end
  for _, w in ipairs(wargs) do a[#a + 1] = w end
  return a
end

-- ------------------------------------------------------------------ pool

local Pool = {}
Pool.__index = Pool

local function say(self, fmt, ...)
  local msg = string.format(fmt, ...)
  if self.log then self.log(msg) else io.stderr:write("mkengine: ", msg, "\n") end
end

--- Start a pool. opts: hb (heartbeat seconds, default 2), hb_timeout
--- (default 10), retries (attempts per evaluation, default 3), restarts
--- (a worker's reconnects before it is drained, default 2), start_timeout
--- (seconds for a worker's hello, default 120), log (function(msg)).
---@param specs table from M.load
---@param opts table|nil
function M.new(specs, opts)
  opts = opts or {}
  local self = setmetatable({}, Pool)
  self.hb = opts.hb or 2
  self.hb_timeout = opts.hb_timeout or 10
  self.retries = opts.retries or 3
  self.restarts = opts.restarts or 2
  self.start_timeout = opts.start_timeout or 120
  self.log = opts.log
  self.free = task_lib.queue()
  self.conns = {}
  self.next_id = 0
  self.tasks = {}
  self.stats = { retried = 0, lost = 0, busy_s = 0 }
  -- ssh control sockets: a marked directory, so one a SIGKILLed engine
  -- left is swept by the next engine (the first pool or evaluator)
  workdir.sweep_once()
  self.control_dir, self.control_lock = workdir.new("mkssh")
  self.exe = opts.exe or home.exe
  for i, spec in ipairs(specs) do
    local c = { spec = spec, index = i, failures = 0, gen = 0, pending = {}, shipped = {},
      label = spec.name or (spec.kind == "ssh" and ((spec.user and spec.user .. "@" or "") .. spec.host
        .. (spec.port and ":" .. spec.port or "")) or spec.kind .. "#" .. i) }
    self.conns[i] = c
  end
  for _, c in ipairs(self.conns) do self:_start(c) end
  return self
end

local function send(c, msg)
  if not c.child or c.state == "dead" then return false end
  return c.child:write(worker.encode(msg)) ~= nil
end

-- The connection is gone (EOF, no heartbeat, refused): fail what waits on
-- it, then reconnect or drain.
function Pool:_lost(c, gen, why)
  if c.gen ~= gen or c.state == "dead" or c.state == "drained" then return end
  c.state = "dead"
  c.why = why
  if c.child then c.child:kill() end
  for _, q in pairs(c.pending) do q:put { lost = why } end
  c.pending = {}
  for _, q in pairs(c.shipped) do
    if type(q) == "table" then q:put { lost = why } end
  end
  c.shipped = {}
  if self.closing then return end
  c.failures = c.failures + 1
  self.stats.lost = self.stats.lost + 1
  if c.refused or c.failures > self.restarts then
    c.state = "drained"
    say(self, "worker %s drained after %d failure(s): %s", c.label, c.failures, why)
    self:_check_alive()
  else
    say(self, "worker %s lost (%s): reconnecting", c.label, why)
    task_lib.spawn(function()
      task_lib.sleep(math.min(2 ^ c.failures * 0.25, 5))
      if not self.closing and c.state == "dead" then self:_start(c) end
    end)
  end
end

function Pool:_check_alive()
  for _, c in ipairs(self.conns) do
    if c.state ~= "drained" then return end
  end
  self.dead = true
  self.free:put(false) -- wakes the slot waiters, each passes it on
end

function Pool:_start(c)
  c.gen = c.gen + 1
  local gen = c.gen
  c.state = "starting"
  c.pending, c.shipped = {}, {}
  local argv = M.argv(c.spec, { control_dir = self.control_dir, exe = self.exe })
  -- API keys stay on the engine's host: secret-looking variables are not
  -- inherited by local/slurm workers; ssh carries only what `env` names
  local child, err = proc.spawn { argv = argv, env = c.spec.kind ~= "ssh" and c.spec.env or nil, scrub_env = true }
  if not child then
    c.state, c.why = "drained", "cannot start: " .. tostring(err.message)
    say(self, "worker %s drained: %s", c.label, c.why)
    self:_check_alive()
    return
  end
  c.child = child
  c.last_seen = task_lib.now()
  c.reader = task_lib.spawn(function() self:_read(c, gen) end)
  c.beat = task_lib.spawn(function()
    while c.gen == gen and c.state ~= "dead" and c.state ~= "drained" do
      task_lib.sleep(self.hb)
      if c.gen ~= gen or c.state == "dead" or c.state == "drained" then return end
      send(c, { t = "hb" })
      local quiet = task_lib.now() - c.last_seen
      local limit = c.state == "starting" and self.start_timeout or self.hb_timeout
      if quiet > limit then
        self:_lost(c, gen, string.format("no heartbeat for %.1f s", quiet))
        return
      end
    end
  end)
end

function Pool:_read(c, gen)
  local child = c.child
  while true do
    local line = child:read_line()
    if not line then break end
    c.last_seen = task_lib.now()
    local msg = worker.decode(line)
    if msg then
      if msg.t == "hello" then
        c.info = msg
        if msg.version ~= worker.VERSION or msg.protocol ~= worker.PROTOCOL then
          c.refused = true
          self:_lost(c, gen, string.format("refused: worker runs mkengine %s (protocol %s), this engine %s (protocol %d)",
            tostring(msg.version), tostring(math.tointeger(msg.protocol) or msg.protocol), worker.VERSION, worker.PROTOCOL))
          return
        end
        send(c, { t = "hello", version = worker.VERSION, protocol = worker.PROTOCOL, hb = self.hb,
          hb_timeout = self.hb_timeout })
        c.name = msg.name
        c.targets = {}
        for _, t in ipairs(msg.targets or {}) do c.targets[t] = true end
        c.slots = math.tointeger(msg.slots) or 1
        c.state = "ready"
        for _ = 1, c.slots do self.free:put { conn = c, gen = gen } end
      elseif msg.t == "refused" then
        c.refused = true
        self:_lost(c, gen, "refused: " .. tostring(msg.message))
        return
      elseif msg.t == "result" then
        local q = c.pending[msg.id]
        c.pending[msg.id] = nil
        if q then q:put { msg = msg } end
      elseif msg.t == "need" or msg.t == "task_ready" or msg.t == "task_error" then
        local q = c.shipped[msg.id]
        if type(q) == "table" then q:put { msg = msg } end
      end
    end
  end
  if c.gen == gen then
    local r = child:wait()
    local detail = (r.stderr or ""):gsub("%s+$", ""):match("[^\n]*$")
    self:_lost(c, gen, string.format("connection ended (%s%s)%s", r.status,
      r.code and " " .. r.code or (r.signal and " signal " .. r.signal or ""),
      detail ~= "" and ": " .. detail or ""))
  end
end

-- Wait for one message on queue q (put by the reader or by _lost).
local function await(q) return q:get() end

-- Make sure the worker has the task (content-addressed: only missing blobs
-- travel). Returns true, or nil, why (lost / task error).
function Pool:_ship(c, t)
  local s = c.shipped[t.id]
  if s == true then return true end
  if type(s) == "table" then -- another request is shipping it: wait for that one
    local waiters = c.ship_waiters or {}
    c.ship_waiters = waiters
    local q = task_lib.queue()
    waiters[t.id] = waiters[t.id] or {}
    table.insert(waiters[t.id], q)
    local r = await(q)
    return r.ok, r.why
  end
  local q = task_lib.queue()
  c.shipped[t.id] = q
  local function settle(ok, why)
    c.shipped[t.id] = ok and true or nil
    for _, w in ipairs(c.ship_waiters and c.ship_waiters[t.id] or {}) do w:put { ok = ok, why = why } end
    if c.ship_waiters then c.ship_waiters[t.id] = nil end
    return ok, why
  end
  send(c, { t = "task", id = t.id, files = t.manifest })
  while true do
    local r = await(q)
    if r.lost then return settle(nil, r.lost) end
    local msg = r.msg
    if msg.t == "task_ready" then return settle(true) end
    if msg.t == "task_error" then return settle(nil, "task error: " .. tostring(msg.message)) end
    if msg.t == "need" then
      local data = {}
      local by_sha = {}
      for rel, sha in pairs(t.manifest) do by_sha[sha] = rel end
      for _, sha in ipairs(msg.blobs or {}) do
        local rel = by_sha[sha]
        if rel then data[sha] = t.files[rel] end
      end
      self.shipped_bytes = (self.shipped_bytes or 0)
      for _, d in pairs(data) do self.shipped_bytes = self.shipped_bytes + #d end
      send(c, { t = "blobs", id = t.id, data = data })
    end
  end
end

-- The role of a worker: "recheck" (spec.recheck: it only re-checks what
-- could not be checked elsewhere) or "eval" (everything else).
local function role_of(c) return c.spec.recheck and "recheck" or "eval" end

--- Whether some worker of the pool has `role` ("eval" or "recheck");
--- with `live`, only one that is ready or may yet be (not drained).
---@param role string
---@param live boolean|nil
function Pool:serves(role, live)
  for _, c in ipairs(self.conns) do
    if role_of(c) == role and not (live and c.state == "drained") then return true end
  end
  return false
end

-- A free slot of a ready worker of `role` that serves `target`; nil when
-- no worker of that role is left.
function Pool:_acquire(target, role)
  while true do
    local s = self.free:get()
    if s == false then
      self.free:put(false)
      return nil
    end
    local c = s.conn
    if c.gen == s.gen and c.state == "ready" then
      if role_of(c) ~= role and not self:serves(role, true) then
        self.free:put(s)
        return nil
      elseif not c.targets[target] or role_of(c) ~= role then
        -- not for this target or role: give it back and look for another later
        self.free:put(s)
        task_lib.sleep(0.01)
      else
        return s
      end
    end
  end
end

function Pool:_release(s)
  if s.conn.gen == s.gen and s.conn.state == "ready" then self.free:put(s) end
end

--- The shipped form of a task: its files, manifest and id (memoised).
function Pool:task_of(task)
  local t = self.tasks[task.dir]
  if not t then
    local files, manifest, id = worker.task_files(task.dir)
    t = { files = files, manifest = manifest, id = id }
    self.tasks[task.dir] = t
  end
  return t
end

--- Run one request on some worker: op is an mk.eval method ("evaluate",
--- "heldout", "freeze", "baseline"). Retries on lost workers; returns the
--- worker's result, or raises the error the worker's evaluator raised, or
--- {kind = "no_workers"} when every worker is gone.
---@param task table a loaded task (with .dir and .target)
---@param op string
---@param files table|nil
---@param opts table|nil
---@param eval_opts table|nil evaluator options (plain values)
---@param role string|nil "eval" (default) or "recheck": which workers may take it
function Pool:request(task, op, files, opts, eval_opts, role)
  local t = self:task_of(task)
  local attempts, last = 0, nil
  while attempts < self.retries do
    local s = self:_acquire(task.target, role or "eval")
    if not s then break end
    local c = s.conn
    attempts = attempts + 1
    local ok, why = self:_ship(c, t)
    if ok then
      self.next_id = self.next_id + 1
      local id = self.next_id
      local q = task_lib.queue()
      c.pending[id] = q
      local t0 = task_lib.now()
      send(c, { t = "req", id = id, task = t.id, op = op, files = files or cjson.empty_array,
        opts = opts or {}, eval = eval_opts or {} })
      local ok2, r = pcall(await, q)
      -- slot-seconds held by requests: busy share = busy_s / (slots x wall)
      self.stats.busy_s = self.stats.busy_s + (task_lib.now() - t0)
      if not ok2 then -- our task was cancelled: the slot is still good
        c.pending[id] = nil
        self:_release(s)
        error(r, 0)
      end
      if r.msg and not r.msg.ok and (r.msg.error or {}).kind == "cancelled" then
        -- the worker cut the work short (it is stopping): not a verdict
        r = { lost = "the worker cancelled the evaluation: " .. tostring(r.msg.error.message) }
      end
      if r.msg then
        self:_release(s)
        local msg = r.msg
        if msg.ok then
          local res = worker.integers(msg.result)
          if type(res) == "table" and role == "recheck" then res.worker = c.name or c.label end
          return res
        end
        local e = msg.error or {}
        util.raise({ kind = e.kind or "error", message = tostring(e.message) }, (e.kind or "error") .. ": ")
      end
      why = r.lost
    elseif c.state == "ready" then
      self:_release(s) -- a task error, not the worker's fault
      util.raise({ kind = "worker", message = why })
    end
    last = why
    self.stats.retried = self.stats.retried + 1
    say(self, "evaluation on %s lost (%s); retrying elsewhere", c.label, tostring(why))
  end
  local msg = self.dead and "no worker left" or string.format("gave up after %d attempts", attempts)
  util.raise({ kind = "no_workers", exit = 1, message = msg .. (last and " (last: " .. last .. ")" or "")
    .. "; `mkengine resume RUN_DIR` continues once workers are back" })
end

--- Workers and their state: {{label, name, state, slots, failures, why}}.
function Pool:status()
  local out = {}
  for _, c in ipairs(self.conns) do
    out[#out + 1] = { label = c.label, name = c.name, state = c.state, slots = c.slots, failures = c.failures,
      why = c.why, kind = c.spec.kind }
  end
  return out
end

--- Wait until at least n slots are ready (or timeout seconds): true | false.
function Pool:wait_ready(n, timeout)
  local t0 = task_lib.now()
  while task_lib.now() - t0 < (timeout or self.start_timeout) do
    local ready = 0
    for _, c in ipairs(self.conns) do
      if c.state == "ready" then ready = ready + (c.slots or 0) end
    end
    if ready >= (n or 1) then return true end
    if self.dead then return false end
    task_lib.sleep(0.05)
  end
  return false
end

local shared = {}

--- The pool of a workers file, shared by every run of this process that
--- names the same file (bench and sweep run many): started on the first
--- open, closed by the last release.
---@param path string
---@param opts table|nil as for new
function M.open(path, opts)
  local key = fs.realpath(path) or path
  local p = shared[key]
  if not p or p.closed then
    p = M.new(M.load(path), opts)
    p.key = key
    p.refs = 0
    shared[key] = p
  end
  p.refs = p.refs + 1
  return p
end

--- Let go of a pool from M.open; the last user closes it.
function Pool:release()
  self.refs = (self.refs or 1) - 1
  if self.refs <= 0 then
    if self.key then shared[self.key] = nil end
    self:close()
  end
end

--- Say bye to every worker, wait for them (bounded), release allocations.
function Pool:close()
  if self.closed then return end
  self.closed, self.closing = true, true
  for _, c in ipairs(self.conns) do
    if c.child and c.state ~= "dead" and c.state ~= "drained" then
      send(c, { t = "bye" })
      c.child:close()
    end
  end
  for _, c in ipairs(self.conns) do
    if c.child and c.reader then
      -- the reader ends once the worker exited and its pipes closed
      if not c.reader:done() then
        task_lib.timeout(10, function() task_lib.await(c.reader) end)
        if not c.reader:done() then
          c.child:kill()
          pcall(task_lib.await, c.reader)
        end
      end
      c.state = c.state == "drained" and "drained" or "closed"
    end
    if c.beat then c.beat:cancel() end
  end
  -- ssh control masters (ControlPersist) end with their socket directory
  for _, name in ipairs(fs.list(self.control_dir) or {}) do
    if name ~= workdir.MARKER then
      proc.run { argv = { "ssh", "-o", "ControlPath=" .. self.control_dir .. "/" .. name, "-O", "exit", "x" }, timeout = 5 }
    end
  end
  workdir.release(self.control_dir, self.control_lock)
  self.control_dir, self.control_lock = nil, nil
end

return M

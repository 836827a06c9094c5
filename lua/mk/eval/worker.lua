--- mk.eval.worker: the worker side of the evaluation protocol (`mkengine
--- worker`), and the pieces both sides share. A worker is a long-lived
--- evaluator on the host that has the device; the engine talks to it over
--- its stdin/stdout (a pipe, ssh, or srun), one JSON object per line.
---
--- worker -> engine, first:  {t="hello", version, protocol, name, slots, targets, host}
--- engine -> worker, first:  {t="hello", version, protocol, hb}
---   a different mkengine version on either side: {t="refused", message}, exit
--- task shipping, content-addressed (git blob ids):
---   engine: {t="task", id, files = {relpath = blob id}}
---   worker: {t="need", id, blobs = {missing ids}}  (all present: {t="task_ready", id})
---   engine: {t="blobs", id, data = {blob id = content}}
---   worker: {t="task_ready", id} | {t="task_error", id, message}
--- evaluation: engine {t="req", id, task, op, files, opts, eval}
---   op: "evaluate" | "heldout" | "freeze" | "baseline" (mk.eval's methods)
---   worker {t="result", id, ok = true, result} | {t="result", id, ok = false, error = {kind, message}}
--- heartbeats both ways: {t="hb"} every `hb` seconds; a side that hears
--- nothing for `hb_timeout` seconds takes the other for dead.
--- {t="bye"} (or EOF on stdin) ends the worker.
---
--- Nothing of the engine's environment travels: the messages carry files
--- and evaluation options only.
local cjson = require("cjson")
local eval = require("mk.eval")
local fs = require("mk.fs")
local git = require("mk.git")
local home = require("mk.home")
local proc = require("mk.proc")
local targets = require("mk.eval.targets")
local task_lib = require("mk.services.task")

local M = {}

M.PROTOCOL = 1
M.VERSION = home.version

-- ---------------------------------------------------------------- shared

--- Encode one message as a line.
function M.encode(msg) return cjson.encode(msg) .. "\n" end

--- Decode a line: msg | nil, why.
function M.decode(line)
  local ok, msg = pcall(cjson.decode, line)
  if not ok or type(msg) ~= "table" or type(msg.t) ~= "string" then
    return nil, "not a protocol message: " .. line:sub(1, 200)
  end
  return msg
end

local function valid_rel(rel)
  return type(rel) == "string" and rel ~= "" and rel:sub(1, 1) ~= "/" and not rel:find("%.%.")
    and not rel:find("%z")
end
M.valid_rel = valid_rel

--- The files of a task directory as {relpath = content}, skipping hidden
--- entries and run outputs; and their manifest {relpath = blob id} and the
--- task's id (the blob id of the sorted manifest).
---@param dir string
---@return table files, table manifest, string id
function M.task_files(dir)
  local files = {}
  local function walk(d, prefix)
    for _, name in ipairs(fs.list(d) or {}) do
      if name:sub(1, 1) ~= "." and name ~= "__pycache__" then
        local path, rel = d .. "/" .. name, prefix .. name
        if fs.isdir(path) then walk(path, rel .. "/")
        else
          local data = fs.read(path)
          if data then files[rel] = data end
        end
      end
    end
  end
  walk(dir, "")
  local manifest, names = {}, {}
  for rel, data in pairs(files) do
    manifest[rel] = git.hash(data)
    names[#names + 1] = rel
  end
  table.sort(names)
  local lines = {}
  for _, rel in ipairs(names) do lines[#lines + 1] = manifest[rel] .. " " .. rel end
  return files, manifest, git.hash(table.concat(lines, "\n"))
end

--- A copy of v with only what JSON carries (strings, numbers, booleans,
--- tables of them); functions, userdata and `build` handles are dropped.
function M.plain(v, depth)
  depth = depth or 0
  local ty = type(v)
  if ty == "string" or ty == "boolean" then return v end
  if ty == "number" then
    if v ~= v or v == math.huge or v == -math.huge then return nil end
    return v
  end
  if ty ~= "table" or depth > 12 then return nil end
  local out = {}
  for k, x in pairs(v) do
    if (type(k) == "string" or math.type(k) == "integer") and k ~= "build" then out[k] = M.plain(x, depth + 1) end
  end
  return out
end

-- Counts and sizes come back from cjson as floats (17.0): make integers
-- integers again, so a remote result reads like a local one.
function M.integers(v)
  if type(v) ~= "table" then return math.tointeger(v) or v end
  for k, x in pairs(v) do
    if type(x) == "number" then v[k] = math.tointeger(x) or x
    elseif type(x) == "table" then M.integers(x) end
  end
  return v
end

-- ---------------------------------------------------------------- worker

local function host_facts()
  local f = {}
  local p = io.popen("nproc 2>/dev/null")
  if p then
    f.cores = tonumber(p:read("l"))
    p:close()
  end
  p = io.popen("uname -sm 2>/dev/null")
  if p then
    f.os = p:read("l")
    p:close()
  end
  p = io.popen("hostname 2>/dev/null")
  if p then
    f.hostname = p:read("l")
    p:close()
  end
  return f
end

-- A worker serving one engine (W below): its name, slots and cache, the
-- engine's stdin reader, the shipped tasks, the evaluators by task and
-- options, the manifests waiting for blobs, the heartbeat clock.
local Worker = {}
Worker.__index = Worker

local function default_cache()
  return (os.getenv("XDG_CACHE_HOME") or ((os.getenv("HOME") or "/tmp") .. "/.cache")) .. "/mkengine/worker"
end

local function new_worker(opts)
  local facts = host_facts()
  local W = setmetatable({ slots = opts.slots or 1, facts = facts, name = opts.name or facts.hostname or "worker",
    cache = opts.cache or default_cache(), hb = opts.hb or 2, hb_timeout = opts.hb_timeout,
    tasks = {}, evaluators = {}, pending = {}, done = false, code = 0, said_bye = false }, Worker)
  for _, sub in ipairs({ "blobs", "tasks", "tests" }) do fs.mkdirs(W.cache .. "/" .. sub) end
  W.sem = task_lib.semaphore(W.slots)
  W.last_seen = task_lib.now()
  return W
end

function Worker:send(msg) -- luacheck: ignore 212/self
  io.stdout:write(M.encode(msg))
  io.stdout:flush()
end

-- The task of a manifest (relpath -> blob id) as a directory of the cache,
-- written once (a .complete marker) and loaded: task | nil, why.
function Worker:materialize(id, manifest)
  local dir = self.cache .. "/tasks/" .. id
  if not fs.exists(dir .. "/.complete") then
    local tmp = dir .. ".part-" .. tostring(task_lib.now()):gsub("%.", "")
    fs.rm_rf(tmp)
    for rel, sha in pairs(manifest) do
      if not valid_rel(rel) then return nil, "bad path in task manifest: " .. tostring(rel) end
      local data = fs.read(self.cache .. "/blobs/" .. sha)
      if not data then return nil, "missing blob " .. sha end
      local parent = (tmp .. "/" .. rel):match("^(.*)/[^/]+$")
      fs.mkdirs(parent)
      fs.write(tmp .. "/" .. rel, data)
    end
    fs.write(tmp .. "/.complete", id)
    fs.rm_rf(dir)
    fs.rename(tmp, dir)
  end
  local t, err = targets.load_task(dir)
  if not t then return nil, err and err.message or "cannot load the task" end
  self.tasks[id] = t
  return t
end

-- The evaluator of a request's task and evaluation options (one per pair,
-- kept for later requests): evaluator | nil, why.
function Worker:evaluator_for(msg)
  local t = self.tasks[msg.task]
  if not t then return nil, "task " .. tostring(msg.task) .. " was not shipped" end
  local eo = M.integers(msg.eval or {})
  local key = msg.task .. " " .. cjson.encode(eo)
  local ev = self.evaluators[key]
  if not ev then
    local o = {}
    for k, v in pairs(eo) do o[k] = v end
    if o.test_sizes then t.test_sizes = o.test_sizes end
    o.test_sizes = nil
    o.tests_dir = self.cache .. "/tests/" .. git.hash(key)
    ev = eval.new(t, o)
    self.evaluators[key] = ev
  end
  return ev
end

-- The evaluator method a request names.
local function run_op(ev, msg)
  if msg.op == "evaluate" then return ev:evaluate(msg.files, M.integers(msg.opts or {}))
  elseif msg.op == "heldout" then return ev:heldout(msg.files)
  elseif msg.op == "freeze" then return ev:freeze()
  elseif msg.op == "baseline" then return ev:baseline()
  end
  error({ kind = "worker", message = "unknown op " .. tostring(msg.op) }, 0)
end

-- Answer one request, in a slot.
function Worker:serve_req(msg)
  self.sem:with(function()
    local ev, err = self:evaluator_for(msg)
    if not ev then
      self:send { t = "result", id = msg.id, ok = false, error = { kind = "worker", message = err } }
      return
    end
    local ok, r = pcall(run_op, ev, msg)
    if ok then
      local res = M.plain(r)
      res.worker = self.name
      self:send { t = "result", id = msg.id, ok = true, result = res }
    elseif task_lib.signal() then
      -- the worker is stopping (SIGTERM: scancel, a node going down): its
      -- work was cut short, which is no verdict; the engine sees the
      -- connection end and retries the request elsewhere. (Any other
      -- cancellation is answered: the pool retries a "cancelled" error.)
      return
    else
      local e = type(r) == "table" and { kind = r.kind or "error", message = tostring(r.message or r) }
        or { kind = "error", message = tostring(r) }
      self:send { t = "result", id = msg.id, ok = false, error = e }
    end
  end)
end

-- Heartbeats to the engine; stops reading (so the worker exits) when the
-- engine has said nothing for hb_timeout seconds.
function Worker:heartbeat()
  while not self.done do
    task_lib.sleep(self.hb)
    self:send { t = "hb" }
    local quiet = task_lib.now() - self.last_seen
    if quiet > (self.hb_timeout or 5 * self.hb) then
      io.stderr:write("mkengine worker: no word from the engine for ", string.format("%.0f", quiet), " s: exiting\n")
      self.input:kill()
      return
    end
  end
end

-- The engine's hello: true when its version differs (refused, exit 2).
function Worker:on_hello(msg)
  if msg.version ~= M.VERSION or msg.protocol ~= M.PROTOCOL then
    self:send { t = "refused", message = string.format("worker %s runs mkengine %s (protocol %d), the engine %s (protocol %s)",
      self.name, M.VERSION, M.PROTOCOL, tostring(msg.version), tostring(msg.protocol)) }
    self.code = 2
    return true
  end
  if msg.hb then self.hb = msg.hb end
  if msg.hb_timeout then self.hb_timeout = msg.hb_timeout end
end

-- A shipped task: ask for the blobs the cache lacks, or load it now.
function Worker:on_task(msg)
  local missing = {}
  for _, sha in pairs(msg.files or {}) do
    if not fs.exists(self.cache .. "/blobs/" .. sha) then missing[#missing + 1] = sha end
  end
  if #missing > 0 then
    self.pending[msg.id] = msg.files
    self:send { t = "need", id = msg.id, blobs = missing }
  else
    local t, err = self:materialize(msg.id, msg.files)
    self:send(t and { t = "task_ready", id = msg.id } or { t = "task_error", id = msg.id, message = err })
  end
end

-- The blobs a task needed (each kept only when its content matches its id).
function Worker:on_blobs(msg)
  for sha, data in pairs(msg.data or {}) do
    if git.hash(data) == sha then fs.write(self.cache .. "/blobs/" .. sha, data) end
  end
  local manifest = self.pending[msg.id]
  self.pending[msg.id] = nil
  local t, err
  if manifest then t, err = self:materialize(msg.id, manifest) else err = "blobs for an unknown task" end
  self:send(t and { t = "task_ready", id = msg.id } or { t = "task_error", id = msg.id, message = err })
end

-- Read the engine's messages until EOF, bye or a refused hello.
function Worker:read_loop()
  while true do
    local line = self.input:read_line()
    if not line then return end
    self.last_seen = task_lib.now()
    local msg, why = M.decode(line)
    if not msg then
      io.stderr:write("mkengine worker: ", why, "\n")
    elseif msg.t == "hello" then
      if self:on_hello(msg) then return end
    elseif msg.t == "task" then
      self:on_task(msg)
    elseif msg.t == "blobs" then
      self:on_blobs(msg)
    elseif msg.t == "req" then
      task_lib.spawn(self.serve_req, self, msg)
    elseif msg.t == "bye" then
      self.said_bye = true
      return
    end
  end
end

-- The engine went away without a bye (killed, connection lost). Inside a
-- Slurm allocation, give it back: the salloc that held it may have been
-- killed with the engine and could not release it itself.
function Worker:release_allocation()
  local job = os.getenv("SLURM_JOB_ID")
  if not self.said_bye and self.code == 0 and job and job:match("^%d+$") then
    io.stderr:write("mkengine worker: engine gone, cancelling Slurm job ", job, "\n")
    proc.run { argv = { "scancel", job }, timeout = 30 }
  end
end

--- Serve the protocol on stdin/stdout until EOF, `bye`, or the engine goes
--- quiet. opts: slots (default 1), name (default the host name), cache
--- (default $XDG_CACHE_HOME/mkengine/worker), hb (seconds, default the
--- engine's), hb_timeout (default 5 × hb).
---@return integer exit code
function M.serve(opts)
  local W = new_worker(opts or {})
  W:send { t = "hello", version = M.VERSION, protocol = M.PROTOCOL, name = W.name, slots = W.slots,
    targets = targets.list(), host = W.facts }
  -- stdin through a child, so waiting for the engine does not block the loop
  W.input = assert(proc.spawn { argv = { "cat" }, stdin = "inherit" })
  local beat = task_lib.spawn(W.heartbeat, W)
  W:read_loop()
  W:release_allocation()
  W.done = true
  beat:cancel()
  W.input:kill()
  W.input:wait()
  for _, ev in pairs(W.evaluators) do pcall(ev.close, ev) end
  return W.code
end

return M

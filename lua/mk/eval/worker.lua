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
local cjson = require "cjson"
local fs = require "mk.fs"
local git = require "mk.git"
local home = require "mk.home"
local task_lib = require "mk.services.task"

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

local function target_names() return require("mk.eval.targets").list() end

--- Serve the protocol on stdin/stdout until EOF, `bye`, or the engine goes
--- quiet. opts: slots (default 1), name (default the host name), cache
--- (default $XDG_CACHE_HOME/mkengine/worker), hb (seconds, default the
--- engine's), hb_timeout (default 5 × hb).
---@return integer exit code
function M.serve(opts)
  opts = opts or {}
  local proc = require "mk.proc"
  local eval = require "mk.eval"
  local slots = opts.slots or 1
  local facts = host_facts()
  local name = opts.name or facts.hostname or "worker"
  local cache = opts.cache or ((os.getenv("XDG_CACHE_HOME") or ((os.getenv("HOME") or "/tmp") .. "/.cache"))
    .. "/mkengine/worker")
  fs.mkdirs(cache .. "/blobs")
  fs.mkdirs(cache .. "/tasks")
  fs.mkdirs(cache .. "/tests")

  local function send(msg)
    io.stdout:write(M.encode(msg))
    io.stdout:flush()
  end

  send { t = "hello", version = M.VERSION, protocol = M.PROTOCOL, name = name, slots = slots,
    targets = target_names(), host = facts }

  -- stdin through a child, so waiting for the engine does not block the loop
  local input = assert(proc.spawn { argv = { "cat" }, stdin = "inherit" })
  local hb, hb_timeout = opts.hb or 2, opts.hb_timeout
  local last_seen = task_lib.now()
  local sem = task_lib.semaphore(slots)
  local tasks, evaluators, pending = {}, {}, {}
  local done = false

  local function materialize(id, manifest)
    local dir = cache .. "/tasks/" .. id
    if not fs.exists(dir .. "/.complete") then
      local tmp = dir .. ".part-" .. tostring(task_lib.now()):gsub("%.", "")
      fs.rm_rf(tmp)
      for rel, sha in pairs(manifest) do
        if not valid_rel(rel) then return nil, "bad path in task manifest: " .. tostring(rel) end
        local data = fs.read(cache .. "/blobs/" .. sha)
        if not data then return nil, "missing blob " .. sha end
        local parent = (tmp .. "/" .. rel):match("^(.*)/[^/]+$")
        fs.mkdirs(parent)
        fs.write(tmp .. "/" .. rel, data)
      end
      fs.write(tmp .. "/.complete", id)
      fs.rm_rf(dir)
      fs.rename(tmp, dir)
    end
    local t, err = require("mk.eval.targets").load_task(dir)
    if not t then return nil, err and err.message or "cannot load the task" end
    tasks[id] = t
    return t
  end

  local function evaluator_for(msg)
    local t = tasks[msg.task]
    if not t then return nil, "task " .. tostring(msg.task) .. " was not shipped" end
    local eo = M.integers(msg.eval or {})
    local key = msg.task .. " " .. cjson.encode(eo)
    local ev = evaluators[key]
    if not ev then
      local o = {}
      for k, v in pairs(eo) do o[k] = v end
      if o.test_sizes then t.test_sizes = o.test_sizes end
      o.test_sizes = nil
      o.tests_dir = cache .. "/tests/" .. git.hash(key)
      ev = eval.new(t, o)
      evaluators[key] = ev
    end
    return ev
  end

  local function serve_req(msg)
    sem:with(function()
      local ev, err = evaluator_for(msg)
      if not ev then
        send { t = "result", id = msg.id, ok = false, error = { kind = "worker", message = err } }
        return
      end
      local files = msg.files
      local ok, r = pcall(function()
        if msg.op == "evaluate" then return ev:evaluate(files, M.integers(msg.opts or {}))
        elseif msg.op == "heldout" then return ev:heldout(files)
        elseif msg.op == "freeze" then return ev:freeze()
        elseif msg.op == "baseline" then return ev:baseline()
        end
        error({ kind = "worker", message = "unknown op " .. tostring(msg.op) }, 0)
      end)
      if ok then
        local res = M.plain(r)
        res.worker = name
        send { t = "result", id = msg.id, ok = true, result = res }
      elseif task_lib.signal() then
        -- the worker is stopping (SIGTERM: scancel, a node going down): its
        -- work was cut short, which is no verdict; the engine sees the
        -- connection end and retries the request elsewhere. (Any other
        -- cancellation is answered: the pool retries a "cancelled" error.)
        return
      else
        local e = type(r) == "table" and { kind = r.kind or "error", message = tostring(r.message or r) }
          or { kind = "error", message = tostring(r) }
        send { t = "result", id = msg.id, ok = false, error = e }
      end
    end)
  end

  local beat = task_lib.spawn(function()
    while not done do
      task_lib.sleep(hb)
      send { t = "hb" }
      if task_lib.now() - last_seen > (hb_timeout or 5 * hb) then
        io.stderr:write("mkengine worker: no word from the engine for ", string.format("%.0f", task_lib.now() - last_seen),
          " s: exiting\n")
        input:kill()
        return
      end
    end
  end)

  local code, said_bye = 0, false
  while true do
    local line = input:read_line()
    if not line then break end
    last_seen = task_lib.now()
    local msg, why = M.decode(line)
    if not msg then
      io.stderr:write("mkengine worker: ", why, "\n")
    elseif msg.t == "hello" then
      if msg.version ~= M.VERSION or msg.protocol ~= M.PROTOCOL then
        send { t = "refused", message = string.format("worker %s runs mkengine %s (protocol %d), the engine %s (protocol %s)",
          name, M.VERSION, M.PROTOCOL, tostring(msg.version), tostring(msg.protocol)) }
        code = 2
        break
      end
      if msg.hb then hb = msg.hb end
      if msg.hb_timeout then hb_timeout = msg.hb_timeout end
    elseif msg.t == "task" then
      local missing = {}
      for _, sha in pairs(msg.files or {}) do
        if not fs.exists(cache .. "/blobs/" .. sha) then missing[#missing + 1] = sha end
      end
      if #missing > 0 then
        pending[msg.id] = msg.files
        send { t = "need", id = msg.id, blobs = missing }
      else
        local t, err = materialize(msg.id, msg.files)
        send(t and { t = "task_ready", id = msg.id } or { t = "task_error", id = msg.id, message = err })
      end
    elseif msg.t == "blobs" then
      for sha, data in pairs(msg.data or {}) do
        if git.hash(data) == sha then fs.write(cache .. "/blobs/" .. sha, data) end
      end
      local manifest = pending[msg.id]
      pending[msg.id] = nil
      local t, err
      if manifest then t, err = materialize(msg.id, manifest) else err = "blobs for an unknown task" end
      send(t and { t = "task_ready", id = msg.id } or { t = "task_error", id = msg.id, message = err })
    elseif msg.t == "req" then
      task_lib.spawn(serve_req, msg)
    elseif msg.t == "bye" then
      said_bye = true
      break
    end
  end
  -- The engine went away without a bye (killed, connection lost). Inside a
  -- Slurm allocation, give it back: the salloc that held it may have been
  -- killed with the engine and could not release it itself.
  local job = os.getenv("SLURM_JOB_ID")
  if not said_bye and code == 0 and job and job:match("^%d+$") then
    io.stderr:write("mkengine worker: engine gone, cancelling Slurm job ", job, "\n")
    proc.run { argv = { "scancel", job }, timeout = 30 }
  end
  done = true
  beat:cancel()
  input:kill()
  input:wait()
  for _, ev in pairs(evaluators) do pcall(ev.close, ev) end
  return code
end

return M

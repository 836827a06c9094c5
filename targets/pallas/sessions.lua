--- targets/pallas/sessions.lua: the Pallas target's harness processes.
---
--- A candidate's steps that import JAX (compile, run, bench, profile) run in
--- order in one harness process of its own (`harness worker --session`):
--- started before the candidate came, from a pool refilled in the
--- background, it has imported JAX (and, once the engine knows the host is
--- no TPU, initialised its backend), serves that one candidate's steps as
--- the engine sends them (a JSON line in; a "started" line and the step's
--- JSON object out), keeps what one step made for the next (the imported
--- module, the compiled executables) and ends when the candidate's
--- evaluation is done (`done(build)`). The harness refuses a second
--- candidate in one process, so candidates never share one. The checks of a
--- candidate's outputs run likewise in one light process (numpy only) of
--- their own, never the candidate's. A step with no candidate (freeze,
--- baseline), or of a build whose session ended, runs in a pre-started
--- process that ends after it.
---
--- On a TPU a process that has used the chip holds it: there every process
--- ends after its step (as before sessions) and none initialises JAX ahead.
local fs = require "mk.fs"
local cjson = require "cjson"
local workdir = require "mk.services.workdir"

local S = {}

local idle = {} -- pool key -> pre-started workers not yet used, oldest first
local bound = setmetatable({}, { __mode = "k" }) -- build -> {[pool key] = worker}
local ended = setmetatable({}, { __mode = "k" }) -- builds whose evaluation is done
local live = {} -- bound workers, least recently used first
local seq = 0

S.STDERR_TAIL = 16 << 10 -- bytes of a step's output read back (the harness keeps 64 KiB)

-- Kill a worker's process tree and remove its directory.
local function stop(w)
  if w.stopped then return end
  w.stopped = true
  pcall(w.child.kill, w.child)
  workdir.release(w.dir, w.lock)
end

local function unbind(w)
  for i, x in ipairs(live) do
    if x == w then table.remove(live, i) break end
  end
  local b = w.build and bound[w.build]
  if b and b[w.key] == w then b[w.key] = nil end
  w.build = nil
end

local function finish(w)
  unbind(w)
  stop(w)
end

-- A new worker for pool `key` (spec: py, env, sb, light), or nil, err.
local function start(T, key, spec)
  local proc = require "mk.proc"
  -- marked and locked (mk.services.workdir): one a killed engine left is
  -- swept by the next engine's first evaluator
  local made, lock = workdir.new("mk-pallas-worker")
  if not made then return nil, lock end
  local dir = fs.realpath(made)
  seq = seq + 1
  local argv = { spec.py, T.harness(), "worker", "--inbox", dir, "--idle", tostring(T.worker_idle), "--session" }
  if spec.light then
    argv[#argv + 1] = "--light"
  elseif T.platform and T.platform ~= "tpu" then
    argv[#argv + 1] = "--warm"
  end
  local sandbox = spec.sb and { workdir = dir, ro = spec.sb.ro, devices = spec.sb.devices } or nil
  local child, err = proc.spawn(require("mk.services.sandbox").apply {
    argv = argv, env = spec.env, cwd = dir, sandbox = sandbox,
  })
  if not child then
    workdir.release(dir, lock)
    return nil, err
  end
  return { child = child, dir = dir, lock = lock, seq = seq, key = key, light = spec.light }
end

-- Keep at most T.pool_max_idle idle workers of each kind (device, light):
-- those of `keep` last, the oldest of other pools first.
local function trim(T, keep, light)
  local all = {}
  for key, list in pairs(idle) do
    for _, w in ipairs(list) do
      if (w.light or false) == (light or false) then all[#all + 1] = { key = key, w = w } end
    end
  end
  table.sort(all, function(a, b)
    if (a.key == keep) ~= (b.key == keep) then return b.key == keep end
    return a.w.seq < b.w.seq
  end)
  for i = 1, #all - T.pool_max_idle do
    local list = idle[all[i].key]
    for j, w in ipairs(list) do
      if w == all[i].w then table.remove(list, j) break end
    end
    stop(all[i].w)
  end
end

-- A pre-started worker of pool `key`, or one started now when none is
-- ready; nil, err when none can start. `refill`: start a replacement (a
-- candidate's step; a step with no candidate, freeze or baseline, comes
-- once and leaves the candidates' pools alone).
local function take(T, key, spec, refill)
  local list = idle[key] or {}
  idle[key] = list
  local w
  while #list > 0 and not w do
    w = table.remove(list, 1)
    if not w.child:running() then stop(w); w = nil end
  end
  if refill then S.fill(T, key, spec) end
  if w then
    T.pool_stats.warm = T.pool_stats.warm + 1
    return w
  end
  T.pool_stats.cold = T.pool_stats.cold + 1
  return start(T, key, spec)
end

--- Start pre-started processes of pool `key` up to T.pool_size.
function S.fill(T, key, spec)
  local list = idle[key] or {}
  idle[key] = list
  while #list < T.pool_size do
    local nw = start(T, key, spec)
    if not nw then break end
    list[#list + 1] = nw
  end
  trim(T, key, spec.light)
end

local function read_tail(path, n)
  local f = io.open(path, "rb")
  if not f then return "" end
  local size = f:seek("end")
  f:seek("set", math.max(0, size - n))
  local s = f:read("a") or ""
  f:close()
  return s
end

-- One step in worker w: a proc.run-like result, or nil when w had ended
-- before it began the step (nothing ran: the caller tries another).
local function step(w, args, cwd, timeout, env)
  local task = require "mk.services.task"
  local errf = w.dir .. "/step.stderr"
  if not w.child:write(cjson.encode { argv = args, cwd = cwd, stderr = errf, env = env } .. "\n") then return nil end
  local t0 = task.now()
  local function read() return w.child:read_line() end
  local done, line = task.timeout(timeout, read)
  if done and line == nil then return nil end
  local ans = line
  if done and line:find('^{"started"') then
    done, ans = task.timeout(math.max(0, timeout - (task.now() - t0)), read)
  end
  local r = { stdout = ans or "", wall_s = task.now() - t0, pid = true }
  r.stderr = read_tail(errf, S.STDERR_TAIL)
  if not done then -- the cancelled read killed the process
    r.status = "timeout"
    w.dead = true
  elseif ans == nil then -- it ended during the step: a crash, a limit, a signal
    local x = w.child:wait()
    r.status, r.code, r.signal, r.cpu_s = x.status, x.code, x.signal, x.cpu_s
    w.dead = true
  else
    r.status, r.code = "exited", 0
  end
  return r
end

-- The step's workdir as seen by a sandboxed worker: its files copied into
-- the worker's directory before, what the step wrote moved back after.
local function copy_files(from, to)
  for _, name in ipairs(fs.list(from) or {}) do
    local p = from .. "/" .. name
    if not fs.isdir(p) and name ~= workdir.MARKER then assert(fs.write(to .. "/" .. name, assert(fs.read(p)))) end
  end
end

local function move_back(from, to)
  for _, name in ipairs(fs.list(from) or {}) do
    if name ~= "step.stderr" and name ~= workdir.MARKER then
      fs.rm_rf(to .. "/" .. name)
      assert(fs.rename(from .. "/" .. name, to .. "/" .. name))
    end
  end
end

-- Run the step in w, its paths rewritten for a sandboxed worker; `env`:
-- the step's own environment (its memory limit), set for it alone.
local function run_in(w, argv, opts, timeout, env)
  local args, cwd = { table.unpack(argv, 3) }, opts.cwd or fs.realpath(".")
  local wd = opts.sandbox and opts.sandbox.workdir
  if wd then
    copy_files(wd, w.dir)
    for i, a in ipairs(args) do
      if a == wd or a:sub(1, #wd + 1) == wd .. "/" then args[i] = w.dir .. a:sub(#wd + 1) end
    end
    cwd = w.dir
  end
  w.busy = true
  local ok, r = pcall(step, w, args, cwd, timeout, env)
  w.busy = false
  if wd and not w.stopped then move_back(w.dir, wd) end
  if not ok then -- cancelled (or a bug): the process goes with it
    finish(w)
    error(r, 0)
  end
  return r
end

-- The JAX platform a step's answer names, learnt once.
local function learn_platform(T, stdout)
  if T.platform then return end
  local v = T.decode(stdout)
  if v and type(v.platform) == "string" then T.platform = v.platform end
end

-- End a worker after its step. Off the CPU the next process may need the
-- device it holds: it is let go (stdin closed, its exit awaited, 30 s at
-- most) before the step returns; on the CPU it is killed at once.
local function close_after_step(T, w)
  unbind(w)
  if T.platform ~= "cpu" and not w.dead and not w.stopped then
    local task = require "mk.services.task"
    w.child:close()
    task.timeout(30, function() return w.child:wait() end)
  end
  stop(w)
end

-- Bind w to build (closing the least recently used session beyond T.max_sessions).
local function bind(T, w, build)
  bound[build] = bound[build] or {}
  bound[build][w.key] = w
  w.build = build
  live[#live + 1] = w
  while #live > T.max_sessions do finish(live[1]) end
end

local function touch(w)
  for i, x in ipairs(live) do
    if x == w then table.remove(live, i) break end
  end
  live[#live + 1] = w
end

--- Run a harness step (argv = {python, harness, step, args...}) in a
--- pre-started process of pool `key` (spec: py, env, sb, light): the
--- session of opts.build when it has one for that pool, else a process
--- taken from the pool, kept as the build's session afterwards (opts.build,
--- not done, not a TPU) or ended; `step_env`: environment of this step
--- only. Returns a proc.run-like result, or nil when no process could
--- start (the caller runs the step directly).
function S.run(T, key, spec, argv, opts, timeout, step_env)
  local build = opts.build
  local w = build and bound[build] and bound[build][key]
  if w and (w.busy or w.dead or not w.child:running()) then
    if not w.busy then finish(w) end
    w = nil
  end
  if w then T.pool_stats.warm = T.pool_stats.warm + 1; touch(w) end
  for _ = 1, 2 do -- a worker that ended before the step began is replaced once
    w = w or take(T, key, spec, build ~= nil)
    if not w then return nil end
    local r = run_in(w, argv, opts, timeout, step_env)
    if r then
      learn_platform(T, r.stdout)
      local keep = build and not ended[build] and T.platform ~= "tpu" and not w.dead and not w.released
        and T.max_sessions > 0 and (w.build == build or not (bound[build] and bound[build][key]))
      if keep and w.build ~= build then bind(T, w, build) end
      if not keep then close_after_step(T, w) end
      return r
    end
    finish(w)
    w = nil
  end
  return nil
end

--- The evaluation of `build` is over: its processes end; a later step of
--- it (remeasure, heldout) runs in a process that ends after the step.
function S.done(build)
  ended[build] = true
  local b = bound[build]
  if not b then return end
  local ws = {}
  for _, w in pairs(b) do ws[#ws + 1] = w end
  for _, w in ipairs(ws) do
    w.released = true -- one in a step ends after it
    if w.busy then unbind(w) else finish(w) end
  end
  bound[build] = nil
end

--- End every idle pre-started process and every session not in a step.
function S.release()
  for key, list in pairs(idle) do
    for _, w in ipairs(list) do stop(w) end
    idle[key] = nil
  end
  for i = #live, 1, -1 do
    local w = live[i]
    w.released = true -- one in a step ends after it
    if w.busy then unbind(w) else finish(w) end
  end
end

--- Processes alive now: {idle = n, sessions = n} (tests, benchmarks).
function S.count()
  local n = 0
  for _, list in pairs(idle) do n = n + #list end
  return { idle = n, sessions = #live }
end

return S

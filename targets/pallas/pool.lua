--- targets/pallas/pool.lua: which harness process runs a step: the pool
--- of pre-started processes (sessions.lua) by interpreter, environment and
--- sandbox, its sizes, starting processes ahead (prestart), ending them
--- (release, done).
local need, M, call = ...
local args = need "args"

--- Harness processes (targets/pallas/sessions.lua): a candidate's steps
--- that import JAX (compile, run, bench, profile) run in order in one
--- process of its own, taken pre-started (JAX imported) from a pool that is
--- refilled in the background, and ended when mk.eval says the candidate's
--- evaluation is done (M.done); its `check` steps likewise in one light
--- process (numpy only, never the candidate's). Steps with no candidate
--- (freeze, baseline) get a pre-started process that ends after them.
--- M.pool_size pre-started processes are kept per interpreter, environment
--- and sandbox ($MK_PALLAS_POOL; 0 = every step a fresh process that imports
--- JAX itself, as `harness <step>`), at most M.pool_max_idle idle ones of
--- each kind (JAX, light) over all pools, at most M.max_sessions candidates'
--- processes alive at once (the least recently used ends first; its
--- candidate's next step gets a fresh process). A sandboxed step's process
--- runs in the same sandbox with its own directory as the writable one: the
--- step's files are copied in, its paths rewritten, what it wrote moved back.
--- Processes exit by themselves after M.worker_idle idle seconds, and with
--- the engine.
M.pool_size = tonumber(os.getenv("MK_PALLAS_POOL") or "") or 1
M.worker_idle = 600
M.pool_stats = { warm = 0, cold = 0 } -- steps that found a process ready / waited for one to start
M.pool_max_idle = 2
M.max_sessions = 4
M.platform = nil -- the JAX platform the harness reported ("cpu", "gpu", "tpu"), once known
local sessions -- sessions.lua, loaded on first use

local function sessions_mod()
  sessions = sessions or need "sessions"
  return sessions
end

--- End every idle pre-started process and every candidate's process (mk.eval
--- calls it when an evaluator closes; the next step starts fresh ones).
function M.release()
  if sessions then sessions.release() end
end

--- The evaluation of `build` is over (mk.eval calls it): its processes end;
--- a later step of it runs in a process that ends after the step.
function M.done(build)
  if sessions then sessions.done(build) end
end

--- Harness processes alive now: {idle = pre-started, sessions = candidates'}.
function M.processes()
  return sessions and sessions.count() or { idle = 0, sessions = 0 }
end

local function env_key(py, env)
  local ks = {}
  for k, v in pairs(env) do ks[#ks + 1] = k .. "=" .. tostring(v) end
  table.sort(ks)
  return py .. "\0" .. table.concat(ks, "\0")
end

-- The pool a step's process comes from: its interpreter, environment,
-- kind (JAX or light) and sandbox.
local function pool_key(py, env, sb, light)
  return env_key(py, env) .. (light and "\0light" or "") .. (sb and ("\0sandbox\0" .. table.concat(sb.ro or {}, "\0") ..
    tostring(sb.devices)) or "")
end

local P = {}

-- Run argv's step in a pre-started process (see above): the proc.run-like
-- result, or nil when none could start (the caller runs it directly).
-- `step_env`: environment of this step only (its memory limit), sent
-- with the request.
function P.run(argv, opts, env, timeout, step_env)
  if M.pool_size <= 0 then return nil end
  local sb, light = opts.sandbox, opts.pool == "light"
  return sessions_mod().run(M, pool_key(argv[1], env, sb, light), { py = argv[1], env = env, sb = sb, light = light },
    argv, opts, timeout, step_env)
end

--- Start the processes the candidates' steps on `tests_dir` will take
--- (mk.eval calls it once the tests are frozen), so that the first
--- candidate finds them ready, its JAX imported (opts.sandbox as for the
--- candidate steps).
function M.prestart(task, tests_dir, opts)
  if M.pool_size <= 0 or not call.try_proc() or not coroutine.isyieldable() then return end
  local py, env = call.python(), call.env()
  local sb = args.sandbox(task, tests_dir, opts, args.visible_inputs(tests_dir)) -- its workdir is no part of the key
  sessions_mod().fill(M, pool_key(py, env, sb, false), { py = py, env = env, sb = sb })
  sessions_mod().fill(M, pool_key(py, env, nil, true), { py = py, env = env, light = true })
end

return P

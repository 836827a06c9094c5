--- targets/pallas/target.lua: the JAX Pallas target (TPU, GPU, or interpret mode).
--- Policy only: every step runs `targets/pallas/harness <step>` (a Python
--- package run as a folder) through
--- mk.proc and turns its one JSON object into a result table. A candidate's
--- `compile`/`run`/`bench`/`profile` steps run in one process of its own
--- (sessions.lua); expected outputs are compared by a separate `check`
--- process that never imports candidate code. See docs/targets/pallas.md.
---
--- This file is the interface module and how a step calls the harness
--- (the interpreter, its environment, device slots, the fallback without
--- mk.proc); each phase is a file of this folder that adds its functions
--- to the module (mk.eval.folder runs each once, with `need`, the module
--- and this file's harness calls):
---   load.lua      detect, load: the three task formats
---   freeze.lua    freeze: the reference's frozen tests
---   compile.lua   compile, not_a_kernel, tunables
---   test.lua      test: run, then check in another process
---   escalate.lua  escalate, larger_scales, widths_scales, scale_label
---   confirm.lua   confirm: a held-out pass re-checked at larger scales
---   bench.lua     bench, baseline
---   profile.lua   profile
---   facts.lua     facts: device, versions, chip figures, shapes
--- and what they share: args.lua (a step's arguments and sandbox, the
--- chip: chip_kind), pool.lua (pre-started processes: prestart, release,
--- done; sessions.lua runs them), tpu_chips.lua (the chips' figures).
local fs = require "mk.fs"
local home = require "mk.home"
local cjson = require "cjson"
local folder = require "mk.eval.folder"

local _, dir = ...

local M = { name = "pallas" }

--- Defaults (seconds); a task.lua `timeout` or opts.timeout overrides.
M.defaults = {
  load_timeout = 60,
  freeze_timeout = 1800,
  timeout = 600, -- compile, run, bench, profile, baseline: JAX compiles are slow
  check_timeout = 300,
  seeds = { 0, 1 }, -- 0 = the task's own inputs (JAXBench create_inputs as written)
  heldout_seeds = { 1001 },
  warmup = 3,
  iters = 20,
  max_output = 16 << 20,
}

--- Interpreter running the harness: M.python, else $MK_PYTHON, else the
--- project's .venv/bin/python (made by scripts/setup.sh with pinned JAX),
--- else python3. M.env: extra environment for harness processes.
M.python = nil
M.on_result = nil -- function(step, decoded_result): an observer of every harness answer (benchmarks)
M.env = nil
M.last_runner = nil -- "proc" or "popen": which path ran the last harness call (tests)

function M.default_python()
  -- .venv may be a link to a shared environment: the sandbox shows its
  -- real directory, so name the interpreter by it
  local venv = (fs.realpath(home.path(".venv")) or home.path(".venv")) .. "/bin/python"
  if fs.exists(venv) then return venv end
  return "python3"
end

local function python()
  return M.python or os.getenv("MK_PYTHON") or M.default_python()
end

--- Absolute path of the harness, a package Python runs as a folder
--- (`python targets/pallas/harness <step>`: its __main__.py).
function M.harness()
  return home.path("targets/pallas/harness")
end

local shell_quote = require("mk.services.util").sh_quote

-- Environment of every harness process: M.env over these defaults. JAX
-- preallocates 75% of a GPU per process by default; off, so a check or
-- compile process beside a benchmark does not starve it.
M.base_env = { XLA_PYTHON_CLIENT_PREALLOCATE = "false", PYTHONDONTWRITEBYTECODE = "1" }

local function child_env()
  local e = {}
  for k, v in pairs(M.base_env) do e[k] = v end
  for k, v in pairs(M.env or {}) do e[k] = v end
  return e
end

--- The target bounds the resident memory of each harness process by the
--- evaluator's `mem_mb` (mk.eval gives one derived from the machine's
--- memory when none is set): a step's opts.mem_mb, else its build's
--- (compile keeps it), sent as $MK_PALLAS_MEM_MB for that step only
--- (harness limits.py: one JSON error, kind memory_limit). A candidate's
--- step that passes it is `unchecked` (reason "memory"), never a crash:
--- this machine could not check it, which says nothing of the kernel.
M.mem_limit = true

-- The memory limit of a step (MiB), or nil: opts.mem_mb, else its build's.
local function step_mem_mb(opts)
  local mb = opts.mem_mb or (type(opts.build) == "table" and opts.build.mem_mb) or nil
  return tonumber(mb) and tonumber(mb) > 0 and math.floor(tonumber(mb)) or nil
end

-- A candidate's step (one with a build) past its memory limit: unchecked.
local function over_memory(v, sub)
  v.status, v.correct, v.reason = "unchecked", false, "memory"
  v.message = string.format("not checked on this machine: %s (each harness process is limited to %s MiB: " ..
    "mkengine eval/run/bench --mem-mb, mk.eval's mem_mb); re-checked on a device worker when the run has one",
    tostring(v.message), tostring(v.mem_limit_mb or "its"))
  v.step = sub
  return v
end

--- Processes that may hold the accelerator at once. A TPU admits one
--- process at a time, so every step that initialises JAX (compile, run,
--- bench, profile, baseline, freeze) takes a slot; `check` and `load` do
--- not. $MK_PALLAS_DEVICE_SLOTS raises it (GPUs, interpret mode on CPU).
M.device_slots = tonumber(os.getenv("MK_PALLAS_DEVICE_SLOTS") or "") or 1
local slots -- the semaphore, created on first use inside a task

local function with_device(fn, ...)
  if not coroutine.isyieldable() then return fn(...) end
  local ok, task = pcall(require, "mk.services.task")
  if not ok then return fn(...) end
  slots = slots or task.semaphore(M.device_slots)
  return slots:with(fn, ...)
end

local function try_proc()
  local ok, proc = pcall(require, "mk.proc")
  if ok then return proc end
  return nil
end

local function tail(s, n)
  s = s or ""
  n = n or 3000
  if #s <= n then return s end
  return "..." .. s:sub(-n)
end

--- Decode the last non-empty stdout line as JSON (candidate output is sent
--- to stderr by the harness, so that line is the harness's own).
---@param stdout string
---@return table|nil
function M.decode(stdout)
  local last
  for line in (stdout or ""):gmatch("[^\n]+") do
    if line:match("%S") then last = line end
  end
  if not last then return nil end
  local ok, v = pcall(cjson.decode, last)
  if ok and type(v) == "table" then return v end
  return nil
end

local pool_run -- pool.lua's run (a step in a pre-started process), set with the parts below

-- No mk.proc (or not in a task): a blocking fallback through coreutils
-- timeout; stderr goes to a temp file. A proc.run-like result.
local function popen_run(argv, opts, timeout, env)
  local t0 = os.time()
  local errf = os.tmpname()
  local q = {}
  for i, a in ipairs(argv) do q[i] = shell_quote(a) end
  local e = {}
  for k, v in pairs(env) do e[#e + 1] = shell_quote(k .. "=" .. tostring(v)) end
  table.sort(e)
  table.insert(q, 1, "env " .. table.concat(e, " "))
  local cmd = string.format("timeout -k 5 %d %s 2>%s", math.ceil(timeout), table.concat(q, " "),
    shell_quote(errf))
  if opts.cwd then cmd = "cd " .. shell_quote(opts.cwd) .. " && " .. cmd end
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("a")
  local _, how, code = p:close()
  local ef = io.open(errf, "r")
  local err = ef and ef:read("a") or ""
  if ef then ef:close() end
  os.remove(errf)
  local r = { stdout = out, stderr = err, wall_s = os.time() - t0 }
  if how == "exit" and code == 124 then
    r.status = "timeout"
  elseif how == "signal" then
    r.status, r.signal = "signaled", code
  else
    r.status, r.code = "exited", code
  end
  return r
end

-- Run the harness; returns the decoded JSON table (never nil: process
-- failures become {status = "timeout"|"crash"|"error", message}).
-- opts.pool: a pre-started worker may run the step (true: one that has
-- imported JAX, for steps that import it anyway; "light": numpy only).
local function harness(sub, args, opts)
  opts = opts or {}
  local argv = { python(), M.harness(), sub }
  for _, a in ipairs(args) do argv[#argv + 1] = tostring(a) end
  local timeout = opts.timeout or M.defaults.timeout
  local mem = step_mem_mb(opts)
  local step_env = mem and { MK_PALLAS_MEM_MB = tostring(mem) } or nil -- this step's, not the pool's
  local env = child_env()
  for k, v in pairs(step_env or {}) do env[k] = v end
  local proc = try_proc()
  local r
  if proc and coroutine.isyieldable() and opts.pool then
    r = pool_run(argv, opts, child_env(), timeout, step_env)
  end
  if r then
    r.pid = r.pid or true
  elseif proc and coroutine.isyieldable() then
    -- No limits.mem_mb: the JAX runtimes reserve far more address space
    -- than they use, so RLIMIT_AS would break every run (the harness
    -- watches its resident memory instead: M.mem_limit).
    local err
    r, err = proc.run(require("mk.services.sandbox").apply {
      argv = argv, cwd = opts.cwd, timeout = timeout, max_output = M.defaults.max_output,
      sandbox = opts.sandbox, env = env,
    })
    if not r then
      return { status = "error", kind = err.kind or "spawn", message = "cannot run the harness (" .. argv[1] ..
        "): " .. tostring(err.message), wall_s = 0 }
    end
  else
    r = popen_run(argv, opts, timeout, env)
  end
  M.last_runner = r.pid and "proc" or "popen"
  -- opts.cpu: the evaluation's accumulator of its processes' CPU seconds
  if opts.cpu and r.cpu_s then opts.cpu.s = opts.cpu.s + r.cpu_s end
  local v = M.decode(r.stdout)
  -- a session's step: its own CPU seconds, as the harness measured them
  if opts.cpu and not r.cpu_s and v and tonumber(v.cpu_s) then opts.cpu.s = opts.cpu.s + v.cpu_s end
  -- ... and the largest resident memory of one of its processes (MiB)
  if opts.cpu and v and tonumber(v.peak_rss_mb) then
    opts.cpu.peak_rss_mb = math.max(opts.cpu.peak_rss_mb or 0, tonumber(v.peak_rss_mb))
  end
  if r.status == "timeout" then
    return { status = "timeout", message = string.format("harness %s ran past %gs (hang?); stderr: %s",
      sub, timeout, tail(r.stderr, 1500)), wall_s = r.wall_s }
  end
  if not v then
    local why = r.status == "signaled" and ("killed by signal " .. tostring(r.signal))
        or ("exited " .. tostring(r.code) .. " without a result")
    return { status = "crash", message = string.format("harness %s %s (memory blow-up or a crash in the " ..
      "kernel?); stderr: %s", sub, why, tail(r.stderr)), wall_s = r.wall_s }
  end
  if r.truncated then v.output_truncated = true end
  v.wall_s = r.wall_s
  if M.on_result then M.on_result(sub, v) end
  v.stderr = tail(r.stderr, 4000)
  if v.status == "error" then
    local e = type(v.error) == "table" and v.error or {}
    v.kind = e.kind or "harness"
    v.message = e.message or "harness error"
    if v.kind == "memory_limit" and opts.build then
      v.mem_limit_mb = mem
      return over_memory(v, sub)
    end
  end
  v.message = v.message or ""
  return v
end
M._harness = harness

-- A harness step that initialises JAX on the device: one slot held; a
-- pre-started worker may run it (see M.pool_size).
local function device_harness(sub, args, opts)
  opts = opts or {}
  opts.pool = true
  return with_device(harness, sub, args, opts)
end

-- What every part is handed besides the module: the harness calls.
local call = { harness = harness, device = device_harness, python = python, env = child_env, try_proc = try_proc }
local need = folder.loader(dir, M, call)
pool_run = need("pool").run
for _, phase in ipairs { "load", "freeze", "compile", "test", "escalate", "sampled", "confirm", "bench", "profile", "facts" } do
  need(phase)
end

return M

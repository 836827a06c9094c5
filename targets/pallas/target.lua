--- targets/pallas/target.lua: the JAX Pallas target (TPU, GPU, or interpret mode).
--- Policy only: every step runs `targets/pallas/harness.py <step>` through
--- mk.proc and turns its one JSON object into a result table. A candidate's
--- `compile`/`run`/`bench`/`profile` steps run in one process of its own
--- (sessions.lua); expected outputs are compared by a separate `check`
--- process that never imports candidate code. See docs/targets/pallas.md.
local fs = require "mk.fs"
local home = require "mk.home"
local cjson = require "cjson"

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

--- Harness processes (targets/pallas/sessions.lua): a candidate's steps
--- that import JAX (compile, run, bench, profile) run in order in one
--- process of its own, taken pre-started (JAX imported) from a pool that is
--- refilled in the background, and ended when mk.eval says the candidate's
--- evaluation is done (M.done); its `check` steps likewise in one light
--- process (numpy only, never the candidate's). Steps with no candidate
--- (freeze, baseline) get a pre-started process that ends after them.
--- M.pool_size pre-started processes are kept per interpreter, environment
--- and sandbox ($MK_PALLAS_POOL; 0 = every step a fresh process that imports
--- JAX itself, as `harness.py <step>`), at most M.pool_max_idle idle ones of
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
local sessions -- targets/pallas/sessions.lua, loaded on first use

local function sessions_mod()
  sessions = sessions or dofile((M.dir or home.path("targets/pallas")) .. "/sessions.lua")
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

-- Run argv's step in a pre-started process (see above): the proc.run-like
-- result, or nil when none could start (the caller runs it directly).
local function pool_key(py, env, sb, light)
  return env_key(py, env) .. (light and "\0light" or "") .. (sb and ("\0sandbox\0" .. table.concat(sb.ro or {}, "\0") ..
    tostring(sb.devices)) or "")
end

local function pool_run(argv, opts, env, timeout)
  if M.pool_size <= 0 then return nil end
  local sb, light = opts.sandbox, opts.pool == "light"
  return sessions_mod().run(M, pool_key(argv[1], env, sb, light), { py = argv[1], env = env, sb = sb, light = light },
    argv, opts, timeout)
end

-- No mk.proc (or not in a task): a blocking fallback through coreutils
-- timeout; stderr goes to a temp file. A proc.run-like result.
local function popen_run(argv, opts, timeout)
  local t0 = os.time()
  local errf = os.tmpname()
  local q = {}
  for i, a in ipairs(argv) do q[i] = shell_quote(a) end
  local e = {}
  for k, v in pairs(child_env()) do e[#e + 1] = shell_quote(k .. "=" .. tostring(v)) end
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
  local proc = try_proc()
  local r
  if proc and coroutine.isyieldable() and opts.pool then
    r = pool_run(argv, opts, child_env(), timeout)
  end
  if r then
    r.pid = r.pid or true
  elseif proc and coroutine.isyieldable() then
    -- No limits.mem_mb: the JAX runtimes reserve far more address space
    -- than they use, so RLIMIT_AS would break every run.
    local err
    r, err = proc.run(require("mk.services.sandbox").apply {
      argv = argv, cwd = opts.cwd, timeout = timeout, max_output = M.defaults.max_output,
      sandbox = opts.sandbox, env = child_env(),
    })
    if not r then
      return { status = "error", kind = err.kind or "spawn", message = "cannot run the harness (" .. argv[1] ..
        "): " .. tostring(err.message), wall_s = 0 }
    end
  else
    r = popen_run(argv, opts, timeout)
  end
  M.last_runner = r.pid and "proc" or "popen"
  -- opts.cpu: the evaluation's accumulator of its processes' CPU seconds
  if opts.cpu and r.cpu_s then opts.cpu.s = opts.cpu.s + r.cpu_s end
  local v = M.decode(r.stdout)
  -- a session's step: its own CPU seconds, as the harness measured them
  if opts.cpu and not r.cpu_s and v and tonumber(v.cpu_s) then opts.cpu.s = opts.cpu.s + v.cpu_s end
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

-- Common harness arguments from a task.
local function task_args(task, extra)
  local a = { "--task", task.dir }
  if task.tolerance then
    a[#a + 1] = "--atol"; a[#a + 1] = string.format("%.17g", task.tolerance.atol)
    a[#a + 1] = "--rtol"; a[#a + 1] = string.format("%.17g", task.tolerance.rtol)
  end
  if task.dtype then a[#a + 1] = "--dtype"; a[#a + 1] = task.dtype end
  for _, x in ipairs(extra or {}) do a[#a + 1] = x end
  return a
end

-- The interpret mode asked for: "tpu" (TPU interpret mode), "plain"
-- (interpret=True), "off" (native) or "auto" (the harness picks: TPU
-- interpret mode on a CPU backend, native on a device). true = "plain",
-- false = "off"; nil leaves it to $MK_PALLAS_INTERPRET, then "auto".
local function interpret(task, opts)
  local v = opts and opts.interpret
  if v == nil then v = task.interpret end
  if v == true then return "plain" end
  if v == false then return "off" end
  return v
end

local function list_str(xs)
  local s = {}
  for i, x in ipairs(xs or {}) do s[i] = tostring(math.tointeger(x) or x) end
  return table.concat(s, ",")
end

-- ---------------------------------------------------------------------------
-- Task detection and loading
-- ---------------------------------------------------------------------------

local function isfile(p)
  local st = fs.stat(p)
  return st ~= nil and (st.type == "file" or (st.type == "link" and not fs.isdir(p)))
end

-- Evaluate a task.lua with only math and string visible.
local function read_task_lua(path)
  local src, err = fs.read(path)
  if not src then return nil, err end
  local env = { math = math, string = string, table = table, ipairs = ipairs, pairs = pairs, tonumber = tonumber }
  local chunk, perr = load(src, "@" .. path, "t", env)
  if not chunk then return nil, perr end
  local ok, v = require("mk.services.guard").call(path, nil, chunk) -- bounded: CPU time and memory
  if not ok then return nil, type(v) == "table" and v.message or tostring(v) end
  if type(v) ~= "table" then return nil, path .. " must return a table" end
  return v
end

--- Whether `dir` holds a Pallas task: JAXBench baseline.py, MaxKernel
--- reference.py + kernel_task.yaml, or a task.lua with target = "pallas".
---@param dir string
---@return boolean
function M.detect(dir)
  if type(dir) ~= "string" then error("pallas.detect: dir must be a string", 2) end
  if isfile(dir .. "/baseline.py") then return true end
  if isfile(dir .. "/reference.py") and isfile(dir .. "/kernel_task.yaml") then return true end
  if isfile(dir .. "/task.lua") then
    local t = read_task_lua(dir .. "/task.lua")
    return t ~= nil and t.target == "pallas"
  end
  return false
end

--- Load a Pallas task (any of the three formats) into a task table.
---@param dir string task directory
---@return table|nil task
---@return table|nil err {kind = "bad_task", message}
function M.load(dir)
  if type(dir) ~= "string" then error("pallas.load: dir must be a string", 2) end
  local abs = fs.realpath(dir)
  if not abs or not fs.isdir(abs) then
    return nil, { kind = "bad_task", message = "not a directory: " .. dir }
  end
  local spec = {}
  if isfile(abs .. "/task.lua") and not isfile(abs .. "/baseline.py") and not isfile(abs .. "/kernel_task.yaml") then
    local t, err = read_task_lua(abs .. "/task.lua")
    if not t then return nil, { kind = "bad_task", message = "task.lua: " .. tostring(err) } end
    if t.target ~= "pallas" then
      return nil, { kind = "bad_task", message = abs .. "/task.lua: target is not \"pallas\"" }
    end
    spec = t
    if spec.chip ~= nil and not M.chip_kind(spec.chip) then
      return nil, { kind = "bad_task", message = abs .. "/task.lua: chip: " .. select(2, M.chip_kind(spec.chip)) }
    end
  end
  local args = { "--task", abs }
  if spec.tolerance then
    if spec.tolerance.atol then args[#args + 1] = "--atol"; args[#args + 1] = string.format("%.17g", spec.tolerance.atol) end
    if spec.tolerance.rtol then args[#args + 1] = "--rtol"; args[#args + 1] = string.format("%.17g", spec.tolerance.rtol) end
  end
  if spec.name then args[#args + 1] = "--name"; args[#args + 1] = spec.name end
  if spec.config_index then args[#args + 1] = "--config-index"; args[#args + 1] = spec.config_index end
  local r = harness("load", args, { timeout = M.defaults.load_timeout })
  if r.status ~= "ok" then
    return nil, { kind = "bad_task", message = r.message ~= "" and r.message or ("cannot load " .. abs) }
  end
  local h = r.task
  local task = {
    name = h.name,
    target = "pallas",
    format = h.format,
    description = spec.description or h.description,
    dir = abs,
    candidate_file = "kernel.py",
    reference = h.reference,
    reference_file = h.reference_file,
    signature = h.signature,
    entry = h.entry,
    entry_params = h.entry_params,
    tolerance = { atol = h.tolerance.atol, rtol = h.tolerance.rtol },
    config = h.config,
    test_configs = h.test_configs,
    has_get_flops = h.has_get_flops,
    seeds = spec.seeds or M.defaults.seeds,
    heldout_seeds = spec.heldout_seeds or M.defaults.heldout_seeds,
    timeout = spec.timeout or M.defaults.timeout,
    dtype = spec.dtype,
    interpret = spec.interpret,
    test_scale = spec.test_scale,
    chip = spec.chip, -- the TPU a kernel sees in interpret mode (M.chip_kind)
    plain_ok = spec.plain_ok, -- candidates may be plain JAX (M.not_a_kernel)
    python = r.python,
  }
  task.prompt_notes = string.format(
    "Write %s in kernel.py using jax.experimental.pallas (pl.pallas_call); it must define `%s` with the " ..
    "same arguments and outputs as the reference (imports: see the rules). " ..
    "Declare tunables as `# mk:tune name = [v1, v2]` with a module-level default.",
    task.name, task.signature)
  return task
end

-- ---------------------------------------------------------------------------
-- Frozen tests
-- ---------------------------------------------------------------------------

local function chmod_tree_readonly(dir)
  for _, name in ipairs(fs.list(dir) or {}) do
    local p = dir .. "/" .. name
    if fs.isdir(p) then
      chmod_tree_readonly(p) -- directories stay writable so the tree can be removed
    else
      fs.chmod(p, tonumber("444", 8))
    end
  end
end

local function cases_of(list)
  local out = {}
  for i, c in ipairs(list or {}) do
    out[i] = { id = c.id, seed = math.tointeger(c.seed) or c.seed, heldout = c.heldout, shapes = c.shapes }
  end
  return out
end

--- Freeze the tests from the reference into tests_dir (idempotent: an
--- existing manifest is verified instead).
---@param task table
---@param tests_dir string
---@param opts? {timeout?: number}
---@return table result {status, cases, manifest, manifest_sha, fresh, message}
function M.freeze(task, tests_dir, opts)
  opts = opts or {}
  if type(tests_dir) ~= "string" then error("pallas.freeze: tests_dir must be a string", 2) end
  local manifest = tests_dir .. "/manifest.sha256"
  if fs.exists(manifest) then
    local r = harness("verify", { "--tests", tests_dir }, { timeout = M.defaults.check_timeout })
    if r.status == "ok" then task.tests_dir = tests_dir end
    return {
      status = r.status == "ok" and "ok" or "error", cases = cases_of(r.cases), manifest = manifest,
      manifest_sha = r.manifest_sha, fresh = false, message = r.message, wall_s = r.wall_s, kind = r.kind,
      test_scale = r.test_scale, warnings = r.warnings, -- the freeze's, kept in cases.json
    }
  end
  fs.mkdirs(tests_dir)
  local fargs = { "--tests", tests_dir, "--seeds", list_str(task.seeds), "--heldout", list_str(task.heldout_seeds) }
  local scale = opts.test_scale or task.test_scale
  if opts.scale_args then -- a larger scale for escalation (M.escalate)
    for _, x in ipairs(opts.scale_args) do fargs[#fargs + 1] = x end
  elseif scale ~= nil then
    fargs[#fargs + 1] = "--test-scale"; fargs[#fargs + 1] = scale == false and "off" or tostring(scale)
  end
  local r = device_harness("freeze", task_args(task, fargs), { timeout = opts.timeout or M.defaults.freeze_timeout })
  if r.status ~= "ok" then
    return { status = "error", kind = r.kind, message = "freezing the tests failed: " .. r.message, fresh = true,
      wall_s = r.wall_s }
  end
  chmod_tree_readonly(tests_dir)
  task.tests_dir = tests_dir
  return {
    status = "ok", cases = cases_of(r.cases), manifest = manifest, manifest_sha = r.manifest_sha,
    fresh = true, message = table.concat(r.warnings or {}, "; "), warnings = r.warnings, wall_s = r.wall_s,
    test_scale = r.test_scale, scaled_config = r.scaled_config,
  }
end

-- ---------------------------------------------------------------------------
-- Escalation: re-testing at larger scales before any verdict
-- ---------------------------------------------------------------------------

--- A candidate step answers status "rescale" when a case is test-scaled and
--- the kernel is made for larger sizes (an empty grid, a block larger than
--- its array, its own shape check raised). The step is then run again on
--- suites frozen at larger scales, up to the task's own sizes; a scale that
--- cannot be frozen within these limits ends it with status "unchecked".
M.defaults.escalate_timeout = 300 -- s to freeze the reference at one larger scale

local function read_json(path)
  local s = fs.read(path)
  local ok, v = pcall(cjson.decode, s or "")
  return ok and type(v) == "table" and v or {}
end

local function max_size(config)
  local m = 0
  for k, v in pairs(config or {}) do
    v = math.tointeger(v) -- cjson gives 1024.0
    if v and not tostring(k):lower():find("seed", 1, true) and v > m then m = v end
  end
  return m
end

--- The label of a frozen scale: its factor (1: the task's own sizes) and
--- tier ("widths": only those sizes were divided), as results name it
--- (`checked_at`, `timed_at`); nil when the factor is unknown.
function M.scale_label(factor, tier)
  local f = math.tointeger(factor)
  if not f then return nil end
  if f <= 1 then return "the task's own sizes" end
  return "scale factor " .. f .. (type(tier) == "string" and (" (" .. tier .. " only)") or "")
end

-- The label of the scale a timing step reports it ran at (harness
-- `timed_scale`: the case's factor and tier), or nil.
local function timed_label(ts)
  return type(ts) == "table" and M.scale_label(ts.factor, ts.tier) or nil
end

--- The larger scales after the one `tests_dir` was frozen at, smallest
--- first, as {args = freeze arguments, label, slug}: halving the recorded
--- scale factor down to 1, or doubling the recorded size cap up to the
--- task's own sizes.
function M.larger_scales(task, tests_dir)
  local info = read_json(tests_dir .. "/cases.json")
  local out = {}
  local rec = type(info.test_scale) == "table" and info.test_scale or type(info.scale) == "table" and info.scale
  local f = rec and math.tointeger(rec.factor)
  if f then
    local tier = type(rec.tier) == "string" and rec.tier or nil -- "widths": only those sizes were scaled
    while f > 1 do
      f = f // 2
      local args = { "--scale-factor", tostring(f) }
      if tier and f > 1 then args[3], args[4] = "--scale-tier", tier end
      out[#out + 1] = { args = args, slug = "f" .. f .. (tier and f > 1 and tier or ""), label = M.scale_label(f, tier) }
    end
    return out
  end
  local cap = math.tointeger(info.test_scale)
  if not cap then return out end
  local top = max_size(task.config)
  cap = cap * 2
  while cap < top do
    out[#out + 1] = { args = { "--test-scale", tostring(cap) }, slug = "cap" .. cap, label = "test scale " .. cap }
    cap = cap * 2
  end
  out[#out + 1] = { args = { "--test-scale", "off" }, slug = "full", label = "the task's own sizes" }
  return out
end

--- When every size scaled together is over the budget before the kernel's
--- blocks fit (a flash attention with 2048-row query blocks needs the
--- sequence at 2048, where heads x sequence^2 x head_dim is 140 GFLOP), the
--- widths alone (heads, head_dim, ...: the freeze's "widths" tier) are
--- divided instead, at the test scale's factor, then smaller factors: the
--- lengths a kernel tiles by keep the task's own sizes. Empty when the test
--- scale was already a widths tier or has no factor.
function M.widths_scales(tests_dir)
  local info = read_json(tests_dir .. "/cases.json")
  local rec = type(info.test_scale) == "table" and info.test_scale or nil
  local f = rec and math.tointeger(rec.factor)
  local out = {}
  if not f or type(rec.tier) == "string" then return out end
  while f > 1 do
    out[#out + 1] = { args = { "--scale-factor", tostring(f), "--scale-tier", "widths" }, slug = "f" .. f .. "widths",
      label = M.scale_label(f, "widths") }
    f = f // 2
  end
  return out
end

local freezing = {} -- escalation suite dir -> semaphore (one freeze of it at a time)

-- The suite at scale `s` beside `base` (frozen once, then verified), or nil, why.
local function scaled_suite(task, base, s)
  local dir = base .. ".scale-" .. s.slug
  local function freeze()
    local keep = task.tests_dir
    local r = M.freeze(task, dir, { scale_args = s.args, timeout = M.defaults.escalate_timeout })
    task.tests_dir = keep
    return r
  end
  local ok, tasklib = pcall(require, "mk.services.task")
  local r
  if ok and coroutine.isyieldable() then
    freezing[dir] = freezing[dir] or tasklib.semaphore(1)
    r = freezing[dir]:with(freeze)
  else
    r = freeze()
  end
  if r.status ~= "ok" then return nil, r.message end
  return dir
end

local function unchecked(why, how)
  return { status = "unchecked", correct = false, reason = "scale",
    message = "not checked on this machine: at the test scale " .. tostring(why) .. "; " .. how }
end

--- Run `step(tests_dir)` (a harness step's result) on `tests_dir`, and while
--- it answers "rescale", again on suites at larger scales. Returns the last
--- result, with `checked_at` (the scale's label) and `scale_note` when it
--- escalated, and the tests dir it ran on; "unchecked" when the next scale
--- could not be frozen or its step ran out of time.
function M.escalate(task, tests_dir, step, base)
  base = base or tests_dir
  local r = step(tests_dir)
  if r.status ~= "rescale" then return r, tests_dir end
  local why, dir = r.reason or r.message, tests_dir
  local scales, widths, i, refused = M.larger_scales(task, dir), M.widths_scales(dir), 0, nil
  while i < #scales do
    i = i + 1
    local s = scales[i]
    local d, err = scaled_suite(task, base, s)
    if not d then
      refused = (refused and refused .. "; " or "") .. string.format("at %s the reference could not be frozen " ..
        "within this machine's limits (%s)", s.label, tostring(err))
      if not widths[1] then return unchecked(why, refused), dir end
      scales, widths, i = widths, {}, 0 -- the widths alone divided: the lengths keep their sizes
      goto continue
    end
    dir = d
    r = step(d)
    if r.status == "timeout" then
      return unchecked(why, string.format("at %s it ran out of time (%s)", s.label, tostring(r.message))), dir
    end
    if r.status ~= "rescale" then
      r.checked_at = s.label
      r.scale_note = string.format("checked at %s (at the test scale: %s)", s.label, why)
      return r, dir
    end
    ::continue::
  end
  return unchecked(why, refused or "there is no larger scale of this task to check it at"), dir
end

-- ---------------------------------------------------------------------------
-- Confirmation: the held-out verdict re-checked at a larger scale
-- ---------------------------------------------------------------------------

--- A kernel can pass at the test scale and be wrong at the task's own
--- sizes: a bug whose error grows with the sizes (an online softmax that
--- does not rescale its running sum when the maximum grows, a last tile
--- dropped) stays under the tolerance when there are few tiles, and a
--- contracted size divided by the factor narrows the values (13p's logits
--- at a 64th of the hidden size). A kernel that passed its held-out cases
--- at the test scale is therefore run on them again at larger scales, each
--- halving of the test scale's factor in turn, up to
--- M.defaults.confirm_halvings of them, while the next run is estimated to
--- take at most M.defaults.confirm_s (the last run's call seconds times
--- the growth its calls showed from the scale before, at least 2; the
--- first time, the ratio of the reference's FLOPs) and to end within
--- M.defaults.confirm_total_s of the confirmation's start. A wrong output, a
--- crash, a race or an out-of-bounds access at any of them is the verdict.
--- A run out of time, a compile error or its own shape check raised
--- (sizes it was not made for), or the machine's limits (a harness error
--- such as its memory limit, a process killed from outside) end the
--- confirmation with the verdict of the largest scale passed, and a note
--- saying so. Only in interpret mode
--- (a device checks the task's own sizes), and never for a kernel already
--- checked at a larger scale.
M.defaults.confirm_halvings = 3
M.defaults.confirm_s = 120
M.defaults.confirm_total_s = 300 -- s all of one kernel's confirmation may take, freezes included

local function scale_flops(dir)
  local rec = read_json(dir .. "/cases.json").test_scale
  return type(rec) == "table" and tonumber(rec.flops) or nil
end

--- The verdict at larger scales of a kernel whose held-out cases passed on
--- `tests_dir`: `step(dir, limit)` runs and checks them on a suite (as
--- M.test does), `last()` is the last run's answer ({calls_s, compile_s}).
--- Returns {verdict = a failing result} or {label = the largest scale
--- passed, note = why no larger one was checked, text = both in words};
--- nil when the test scale is the task's own.
function M.confirm(task, tests_dir, step, last)
  local scales = M.larger_scales(task, tests_dir)
  if #scales == 0 then return nil end -- the task's own sizes
  local prev = { calls = tonumber(last().calls_s) or 0, flops = scale_flops(tests_dir), k = 0 }
  local growth, label, refused, started = nil, nil, nil, os.time()
  local function done(note)
    local text = label and ("confirmed at " .. label) or "not confirmed"
    return { label = label, note = note, text = note and (text .. " (" .. note .. ")") or text }
  end
  for k = 1, math.min(#scales, M.defaults.confirm_halvings) do
    local s = scales[k]
    if growth and prev.calls * growth ^ (k - prev.k) > M.defaults.confirm_s then
      return done(string.format("%s not checked: estimated at %.0f s of calls", s.label,
        prev.calls * growth ^ (k - prev.k)))
    end
    -- a scale whose reference cannot be frozen (a trivial output there) is passed over
    local d, err = scaled_suite(task, tests_dir, s)
    if not d then
      refused = string.format("%s not checked: %s", s.label, tostring(err))
      goto next
    end
    do
      local flops = scale_flops(d)
      local g = growth and growth ^ (k - prev.k)
        or ((flops and prev.flops and prev.flops > 0) and flops / prev.flops or 2 ^ (k - prev.k))
      local est = prev.calls * g + (tonumber(last().compile_s) or 0)
      if est > M.defaults.confirm_s then
        return done(string.format("%s not checked: estimated at %.0f s", s.label, est))
      elseif os.time() - started + est > M.defaults.confirm_total_s then
        return done(string.format("%s not checked: estimated at %.0f s, past the confirmation's %d s", s.label, est,
          M.defaults.confirm_total_s))
      end
      local r = step(d, math.max(3 * est, M.defaults.confirm_s))
      if r.status == "ok" and r.checked then
        label, refused = s.label, nil
        local calls = tonumber(last().calls_s) or 0
        growth = math.max(2, prev.calls > 0 and (calls / prev.calls) ^ (1 / (k - prev.k)) or 2)
        prev = { calls = calls, flops = flops, k = k }
      elseif r.status == "timeout" or r.status == "unchecked" or r.status == "rescale"
        or r.status == "compile_error" or r.status == "error" or (r.status == "crash" and not r.phase) then
        -- ... or the machine's limits at the larger sizes (a memory limit, a
        -- process killed): no verdict on the kernel
        return done(string.format("%s not checked: %s", s.label, tostring(r.message)))
      else
        r.message = string.format("at %s (the held-out cases re-checked at a larger scale than the test scale's): %s",
          s.label, tostring(r.message))
        r.checked_at = s.label
        return { verdict = r }
      end
    end
    ::next::
  end
  return done(refused)
end

-- ---------------------------------------------------------------------------
-- Candidate steps
-- ---------------------------------------------------------------------------

--- The chip a kernel sees in TPU interpret mode when neither the task
--- (task.lua `chip`) nor the run (opts.chip) names one.
M.chip = "v6e"

--- JAX's device_kind of a chip named as tpu_chips.lua names it ("v5e",
--- "TPU v6e", "trillium", "TPU v5 lite"), or nil, why.
function M.chip_kind(name)
  local lk = tostring(name):lower()
  for _, c in ipairs(dofile(M.dir .. "/tpu_chips.lua")) do
    if lk == c.name:lower() or lk == c.alt or lk == c.device_kind:lower() or lk == c.name:lower():gsub("^tpu ", "") then
      return c.device_kind
    end
  end
  return nil, "unknown TPU chip " .. tostring(name) .. " (targets/pallas/tpu_chips.lua lists v5e, v6e)"
end

local function candidate_args(task, build, extra, opts)
  local a = task_args(task, { "--candidate", build.candidate })
  local kind, why = M.chip_kind(opts and opts.chip or task.chip or M.chip)
  if not kind then error("pallas: " .. why, 0) end
  a[#a + 1] = "--chip"; a[#a + 1] = kind
  if build.defines and next(build.defines) then
    a[#a + 1] = "--params"; a[#a + 1] = cjson.encode(build.defines)
  end
  local mode = interpret(task, opts)
  if mode then a[#a + 1] = "--interpret"; a[#a + 1] = tostring(mode) end
  for _, x in ipairs(extra or {}) do a[#a + 1] = x end
  return a
end

--- Extra read-only paths for sandboxed harness runs (e.g. a PYTHONPATH).
M.sandbox_ro = {}

--- Candidate steps run under bubblewrap unless opts.sandbox = false or
--- $MK_PALLAS_SANDBOX=0 (as the C target's always do).
M.sandbox = os.getenv("MK_PALLAS_SANDBOX") ~= "0"

-- bubblewrap options for a candidate process: the task, the harness, the
-- interpreter's directories and the given inputs are visible read-only, the
-- build workdir read-write, the host's accelerator device nodes and driver
-- paths when there are any (mk.services.sandbox `devices`), nothing else (expected
-- outputs included).
local function sandbox_for(task, workdir, opts, ro_extra)
  local want = opts and opts.sandbox
  if want == nil then want = M.sandbox end
  if not want then return nil end
  local ro = { task.dir, fs.realpath(home.path("targets/pallas")) }
  for _, p in ipairs(M.sandbox_ro) do ro[#ro + 1] = p end
  for _, p in ipairs((task.python or {}).paths or {}) do ro[#ro + 1] = p end
  for _, p in ipairs(ro_extra or {}) do ro[#ro + 1] = p end
  return { workdir = workdir, ro = ro, devices = true }
end

-- What a candidate process may see of the frozen tests.
local function visible_inputs(tests_dir)
  return { tests_dir .. "/inputs", tests_dir .. "/cases.json", tests_dir .. "/manifest.sha256" }
end

--- Start the processes the candidates' steps on `tests_dir` will take
--- (mk.eval calls it once the tests are frozen), so that the first
--- candidate finds them ready, its JAX imported (opts.sandbox as for the
--- candidate steps).
function M.prestart(task, tests_dir, opts)
  if M.pool_size <= 0 or not try_proc() or not coroutine.isyieldable() then return end
  local py, env = python(), child_env()
  local sb = sandbox_for(task, tests_dir, opts, visible_inputs(tests_dir)) -- its workdir is no part of the key
  sessions_mod().fill(M, pool_key(py, env, sb, false), { py = py, env = env, sb = sb })
  sessions_mod().fill(M, pool_key(py, env, nil, true), { py = py, env = env, light = true })
end

--- Write the candidate files into workdir and compile (jax.jit(...).lower()
--- then .compile()). opts.defines = tunable values; opts.tests_dir gives
--- the input shapes (else the reference's inputs are built).
---@param task table
---@param files table {[filename] = source}
---@param workdir string
---@param opts? {defines?: table, tests_dir?: string, timeout?: number, interpret?: boolean, sandbox?: boolean}
---@return table build
function M.compile(task, files, workdir, opts)
  opts = opts or {}
  if type(files) ~= "table" or type(files[task.candidate_file]) ~= "string" then
    error("pallas.compile: files must contain " .. task.candidate_file, 2)
  end
  fs.mkdirs(workdir)
  for name, src in pairs(files) do
    if name:find("/", 1, true) or name:sub(1, 1) == "." then error("pallas.compile: bad file name " .. name, 2) end
    assert(fs.write(workdir .. "/" .. name, src))
  end
  local build = { workdir = workdir, candidate = workdir .. "/" .. task.candidate_file, defines = opts.defines or {} }
  -- Input shapes come from the frozen tests (opts.tests_dir, else the ones
  -- freeze last verified for this task); without them the harness builds
  -- the reference's inputs.
  local tests_dir = opts.tests_dir or task.tests_dir
  local function step(dir)
    return device_harness("compile", candidate_args(task, build, dir and { "--tests", dir } or {}, opts), {
      timeout = opts.timeout or task.timeout, cwd = workdir, cpu = opts.cpu, build = build,
      sandbox = sandbox_for(task, workdir, opts, dir and visible_inputs(dir) or nil),
    })
  end
  local r, used = step(tests_dir), tests_dir
  if tests_dir and r.status == "rescale" then r, used = M.escalate(task, tests_dir, function(d)
    return d == tests_dir and r or step(d) end) end
  if used ~= tests_dir then build.scaled_tests, build.base_tests = used, tests_dir end
  build.scale_note, build.checked_at = r.scale_note, r.checked_at
  build.status = r.status
  build.message = r.message
  build.log = r.stderr
  build.phase = r.phase
  build.kind = r.kind
  build.compile_s = r.compile_s
  build.lower_s = r.lower_s
  build.wall_s = r.wall_s
  build.device = r.device
  build.interpret = r.interpret
  build.timing_kind = r.timing
  build.work = r.work
  local why = build.status == "ok" and M.not_a_kernel(r.work, task, opts)
  if why then build.status, build.kind, build.message = "rejected", "plain_jax", "kernel.py is no Pallas kernel: " .. why end
  return build
end

--- The Pallas target judges Pallas kernels: a candidate whose work is done
--- by plain JAX (the reference's code in disguise, a matmul left to XLA
--- behind a Pallas epilogue, a fallback taken "off TPU", which the CPU is)
--- would be timed and ranked as one. Its compile step counts the work of
--- the traced workload inside and outside its pallas_calls, in the units
--- the freeze counted the reference's (harness jaxpr_work). Rejected:
--- no pallas_call traced, or a plain-JAX part doing at least
--- M.defaults.plain_work_limit of the reference's work. A task (task.plain_ok)
--- or an evaluator (opts.plain_ok: the reference checked as a candidate)
--- may allow plain JAX.
M.defaults.plain_work_limit = 0.8

--- Why a compile step's work split (`work`: {plain, pallas, calls, top,
--- reference}) is no Pallas kernel, or nil.
function M.not_a_kernel(work, task, opts)
  if type(work) ~= "table" or task.plain_ok or (opts and opts.plain_ok) then return nil end
  if (math.tointeger(work.calls) or 0) == 0 then
    return "no pallas_call runs: its workload traced to plain JAX alone (a fallback taken off a TPU is no " ..
      "exception: this target judges the Pallas kernels a TPU would run)"
  end
  local plain, ref = tonumber(work.plain) or 0, tonumber(work.reference)
  if not ref or ref <= 0 or plain < M.defaults.plain_work_limit * ref then return nil end
  local top = {}
  for name, w in pairs(type(work.top) == "table" and work.top or {}) do top[#top + 1] = { name = name, w = w } end
  table.sort(top, function(a, b) return a.w > b.w end)
  for i, x in ipairs(top) do top[i] = string.format("%s %.0f%%", x.name, 100 * x.w / ref) end
  return string.format("its plain-JAX part, outside every pallas_call, does %.0f%% as much work as the whole " ..
    "reference (%s), its Pallas kernels %.0f%%: the work must be done by Pallas kernels", 100 * plain / ref,
    #top > 0 and table.concat(top, ", ") or "?", 100 * (tonumber(work.pallas) or 0) / ref)
end

-- The verdict on a run in interpret mode that ran out of time (`r`), from
-- the check of the outputs its calls left (`c`, check --present-only): a
-- wrong output is `incorrect` whatever the rest would have been; calls
-- that were all correct make it `unchecked` (the interpreter is too slow
-- on this CPU for the kernel's DMAs and steps: 7p's ragged paged attention
-- copies ~8,700 pages a call), re-checked on a device worker when the run
-- has one. When no call ended, the run's progress file (harness
-- ProgressFile: grid steps and DMAs the interpreter simulated) says
-- whether it was still simulating the kernel when it was stopped (counts
-- that moved within M.defaults.stalled_after s): `unchecked` again; else
-- `timeout` (a hang: a semaphore never signalled, a loop without steps).
M.defaults.stalled_after = 30

local function out_of_time(r, c, limit, outputs)
  local done, total = math.tointeger(c.checked_calls) or 0, math.tointeger(c.calls) or 0
  if c.status == "incorrect" then
    c.checked = true
    c.message = string.format("%s (found in the %d call%s that ended before the run ran past its %g s limit)",
      tostring(c.message), done, done == 1 and "" or "s", limit)
    return c
  end
  if c.status ~= "ok" then return r end
  if done == 0 then
    local p = read_json(outputs .. "/progress.json")
    if type(p.wall) ~= "number" or os.time() - p.wall > M.defaults.stalled_after then return r end
    return { status = "unchecked", correct = false, reason = "time", message = string.format(
      "not checked on this machine: in interpret mode no call ended within the %g s limit, but the interpreter " ..
      "was still simulating it when stopped (%d grid steps and %d DMAs, in case %s, %s call); re-checked on a " ..
      "device worker when the run has one", limit, math.tointeger(p.steps) or 0, math.tointeger(p.dmas) or 0,
      tostring(p.case), tostring(p.call)) }
  end
  local secs = {}
  for _, s in ipairs(c.call_s or {}) do secs[#secs + 1] = string.format("%.0f", s) end
  return { status = "unchecked", correct = false, reason = "time", message = string.format(
    "not checked on this machine: in interpret mode its run ran past the %g s limit after %d of %d calls, " ..
    "each correct (%s s a call); re-checked on a device worker when the run has one", limit, done, total,
    #secs > 0 and table.concat(secs, ", ") or "?") }
end

--- Run the frozen cases of opts.group ("search" or "heldout") in one
--- process and check them in another that never loads candidate code.
---@param task table
---@param build table from compile
---@param tests_dir string
---@param opts? {group?: string, timeout?: number, interpret?: boolean, sandbox?: boolean}
---@return table {status, correct, message, cases, wall_s}
function M.test(task, build, tests_dir, opts)
  opts = opts or {}
  if build.status ~= "ok" then
    return { status = build.status, correct = false, message = build.message, cases = {}, wall_s = 0 }
  end
  local group = opts.group or "search"
  local outputs = build.workdir .. "/outputs-" .. group
  local wall, check_s, last_run = 0, 0, {}
  -- run in one process, check in another; "rescale" when a scaled case whose
  -- blocks exceed its arrays fails the check (M.escalate re-tests it)
  local function step(dir, limit)
    fs.rm_rf(outputs)
    fs.mkdirs(outputs)
    local extra = { "--tests", dir, "--outputs", outputs }
    if group == "heldout" then extra[#extra + 1] = "--heldout-cases" end
    limit = limit or opts.timeout or task.timeout
    local r = device_harness("run", candidate_args(task, build, extra, opts), {
      timeout = limit, cwd = build.workdir, cpu = opts.cpu, build = build,
      sandbox = sandbox_for(task, build.workdir, opts, visible_inputs(dir)),
    })
    wall, last_run = wall + (r.wall_s or 0), r
    local function check(present_only)
      local cargs = task_args(task, { "--tests", dir, "--outputs", outputs })
      if group == "heldout" then cargs[#cargs + 1] = "--heldout-cases" end
      if present_only then cargs[#cargs + 1] = "--present-only" end
      local c = harness("check", cargs, { timeout = M.defaults.check_timeout, pool = "light", cpu = opts.cpu,
        build = build })
      check_s = check_s + (c.wall_s or 0)
      return c
    end
    if r.status == "timeout" and build.timing_kind == "interpret" then
      return out_of_time(r, check(true), limit or M.defaults.timeout, outputs)
    end
    if r.status ~= "ok" then return r end
    local c = check(false)
    local failed
    for _, x in ipairs(c.cases or {}) do
      if x.ok == false then failed = failed or x.case end
    end
    local hint = c.status ~= "ok" and c.status ~= "error" and failed and type(r.rescale_cases) == "table"
      and r.rescale_cases[failed]
    if hint then -- the first failing case is test-scaled and its blocks exceed its arrays
      return { status = "rescale", reason = "case " .. failed .. ": " .. hint .. ", and the check failed: " ..
        tostring(c.message) }
    end
    c.checked = true
    return c
  end
  -- a build compiled at a larger scale (M.escalate) is tested there too
  local c, used = M.escalate(task, build.scaled_tests or tests_dir, step, build.base_tests or tests_dir)
  if used ~= (build.scaled_tests or tests_dir) then build.scaled_tests, build.base_tests = used, tests_dir end
  build.scale_note, build.checked_at = c.scale_note or build.scale_note, c.checked_at or build.checked_at
  if not c.checked then -- a run-time verdict (out of bounds, race, crash) names the scale it was reached at too
    local note = c.status ~= "unchecked" and c.status ~= "rescale" and build.scale_note
    return { status = c.status, correct = false, message = note and (note .. ": " .. tostring(c.message)) or c.message,
      cases = {}, wall_s = wall + check_s, check_s = check_s, kind = c.kind, phase = c.phase, reason = c.reason,
      checked_at = note and build.checked_at or nil }
  end
  local confirmed = group == "heldout" and c.status == "ok" and opts.confirm ~= false and used == tests_dir
    and build.timing_kind == "interpret" and M.confirm(task, tests_dir, step, function() return last_run end) or nil
  local v = confirmed and confirmed.verdict
  if v then
    return { status = v.status, correct = false, reason = v.reason, cases = {}, message = v.message,
      wall_s = wall + check_s, check_s = check_s, kind = v.kind, phase = v.phase, checked_at = v.checked_at }
  end
  local cases = {}
  for i, x in ipairs(c.cases or {}) do
    cases[i] = { id = x.case, call = x.call, ok = x.ok, message = x.message, reason = x.reason,
      max_abs_err = x.max_abs_err }
  end
  if confirmed then c.message = (c.message or "") ~= "" and (c.message .. "; " .. confirmed.text) or confirmed.text end
  return {
    confirmed_at = confirmed and confirmed.label or nil, confirm_note = confirmed and confirmed.text or nil,
    status = c.status, correct = c.status == "ok", reason = c.reason, cases = cases,
    message = (c.status ~= "ok" and build.scale_note) and (build.scale_note .. ": " .. tostring(c.message)) or c.message,
    wall_s = wall + check_s, check_s = check_s, kind = c.kind,
    checked_at = build.checked_at, scale_note = build.scale_note, -- escalated: the scale it was checked at
  }
end

-- Timing options shared by bench/profile/baseline: `iters` (or
-- `min_reps`), `min_time` (s of timed calls to aim for), `max_reps`, `warmup`.
-- An interpreter's timings are not kernel timings (results say timing =
-- "interpret"): a few untraced calls show that the kernel runs, no more.
M.interpret_timing = { warmup = 1, iters = 3, max_reps = 3, no_trace = true }

local function timing_args(opts, a, interpreted)
  a = a or {}
  if interpreted then
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    for k, v in pairs(M.interpret_timing) do o[k] = v end
    o.min_reps, o.min_time = nil, nil
    opts = o
  end
  local function add(k, v) if v ~= nil then a[#a + 1] = k; a[#a + 1] = tostring(v) end end
  add("--warmup", math.tointeger(opts.warmup) or opts.warmup or M.defaults.warmup)
  add("--iters", math.tointeger(opts.iters or opts.min_reps) or opts.iters or opts.min_reps or M.defaults.iters)
  if opts.min_time then add("--min-time", string.format("%.6g", opts.min_time)) end
  if opts.max_reps then add("--max-iters", math.tointeger(opts.max_reps) or opts.max_reps) end
  if opts.no_trace then a[#a + 1] = "--no-trace" end
  return a
end

local function timing(r)
  local s = (r.method == "device" and r.device) or r.wall or {}
  return s
end

--- Time the candidate on the benchmark case (the task's own inputs);
--- the timed runs' output is checked against the frozen expected output.
---@param task table
---@param build table
---@param opts {tests_dir: string, warmup?: integer, iters?: integer, timeout?: number, interpret?: boolean, no_trace?: boolean}
---@return table {status, correct, latency_s, spread, min_s, max_s, reps, method, message, wall_s}
function M.bench(task, build, opts)
  opts = opts or {}
  if build.status ~= "ok" then
    return { status = build.status, correct = false, message = build.message, wall_s = 0 }
  end
  if type(opts.tests_dir) ~= "string" then error("pallas.bench: opts.tests_dir is required", 2) end
  if build.scaled_tests then -- checked at a larger scale (M.escalate): timed there too
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.tests_dir = build.scaled_tests
    opts = o
  end
  local outputs = build.workdir .. "/outputs-bench"
  fs.rm_rf(outputs)
  local extra = timing_args(opts, { "--tests", opts.tests_dir, "--no-check-output", "--save-output", outputs },
    build.timing_kind == "interpret")
  local r = device_harness("bench", candidate_args(task, build, extra, opts), {
    timeout = opts.timeout or task.timeout, cwd = build.workdir, cpu = opts.cpu, build = build,
    sandbox = sandbox_for(task, build.workdir, opts, visible_inputs(opts.tests_dir)),
  })
  if r.status ~= "ok" then
    return { status = r.status, correct = false, message = r.message, wall_s = r.wall_s, kind = r.kind,
      reason = r.reason }
  end
  -- The timed runs' output, checked by a process that runs no candidate code.
  local c = harness("check", task_args(task, { "--tests", opts.tests_dir, "--outputs", outputs,
    "--cases", r.case, "--calls", "bench" }), { timeout = M.defaults.check_timeout, pool = "light", cpu = opts.cpu,
    build = build })
  -- wall_s: the bench and its check; check_s: the check's share
  local cw = c.wall_s or 0
  if c.status ~= "ok" then
    return { status = c.status, correct = false, reason = c.reason, kind = c.kind, wall_s = (r.wall_s or 0) + cw,
      check_s = cw, message = "output of the timed runs is wrong: " .. tostring(c.message) }
  end
  local s = timing(r)
  return {
    status = "ok", correct = true, latency_s = r.latency_s, spread = r.spread, min_s = s.min_s, max_s = s.max_s,
    reps = math.tointeger(s.n) or s.n, method = r.method, message = "", wall_s = (r.wall_s or 0) + cw, check_s = cw,
    trace_error = r.trace_error, device = r.device_info, timing_kind = r.timing, interpret = r.interpret,
    timed_scale = r.timed_scale, timed_at = timed_label(r.timed_scale),
  }
end

local function profile_result(r)
  local p = r.profile or {}
  local function g(x) return x and x / 1e9 or nil end
  return {
    status = r.status, text = r.text or "", message = r.message or "",
    gflops = g(p.achieved_flops), gbps = g(p.achieved_bytes_per_s),
    peak_gflops = g(p.peak_flops), peak_gbps = g(p.peak_bytes_per_s),
    intensity = p.intensity, bound = p.bound, chip = p.chip,
    flops = p.flops, bytes = p.bytes, flops_source = p.flops_source, bytes_source = p.bytes_source,
    latency_s = r.latency_s, counters = nil, timing_kind = r.timing,
    counters_message = "no hardware counters for the Pallas target; use XProf for per-op detail",
    wall_s = r.wall_s, device = r.device_info,
  }
end

--- cost_analysis FLOPs/bytes, achieved rates vs the chip's peaks, bound.
---@param task table
---@param build table
---@param opts? {tests_dir?: string, latency_s?: number, timeout?: number, interpret?: boolean}
---@return table {status, text, gflops, gbps, peak_gflops, peak_gbps, intensity, bound, message}
function M.profile(task, build, opts)
  opts = opts or {}
  if build.status ~= "ok" then return { status = build.status, text = "", message = build.message } end
  local extra = timing_args(opts, nil, build.timing_kind == "interpret")
  local tests_dir = build.scaled_tests or opts.tests_dir
  if tests_dir then extra[#extra + 1] = "--tests"; extra[#extra + 1] = tests_dir end
  if opts.latency_s then extra[#extra + 1] = "--latency-s"; extra[#extra + 1] = string.format("%.17g", opts.latency_s) end
  local r = device_harness("profile", candidate_args(task, build, extra, opts), {
    timeout = opts.timeout or task.timeout, cwd = build.workdir, cpu = opts.cpu, build = build,
    sandbox = sandbox_for(task, build.workdir, opts, tests_dir and visible_inputs(tests_dir) or nil),
  })
  return profile_result(r)
end

--- The XLA baseline: jax.jit of the reference, timed like a candidate.
---@param task table
---@param opts? {tests_dir?: string, warmup?: integer, iters?: integer, timeout?: number}
---@return table {status, latency_s, spread, min_s, max_s, reps, method, flops, bytes, text, message, wall_s}
function M.baseline(task, opts)
  opts = opts or {}
  local extra = timing_args(opts)
  local tests_dir = opts.tests_dir or task.tests_dir
  if tests_dir then extra[#extra + 1] = "--tests"; extra[#extra + 1] = tests_dir end
  local r = device_harness("baseline", task_args(task, extra), { timeout = opts.timeout or task.timeout })
  if r.status ~= "ok" then
    return { status = r.status == "error" and "error" or r.status, message = r.message, kind = r.kind,
      wall_s = r.wall_s }
  end
  local s = timing(r)
  return {
    status = "ok", correct = true, latency_s = r.latency_s, spread = r.spread, min_s = s.min_s, max_s = s.max_s,
    reps = math.tointeger(s.n) or s.n, method = r.method, flops = r.flops, bytes = r.bytes, text = r.text,
    message = "", wall_s = r.wall_s, device = r.device_info, profile = profile_result(r), timing_kind = r.timing,
    timed_scale = r.timed_scale, timed_at = timed_label(r.timed_scale), -- the case's scale (M.scale_label)
  }
end

-- ---------------------------------------------------------------------------
-- Tunables (pure Lua, mirrors harness.parse_tunables)
-- ---------------------------------------------------------------------------

local function parse_value(s)
  s = s:match("^%s*(.-)%s*$")
  if s == "" then return nil end
  local q = s:match('^"(.*)"$') or s:match("^'(.*)'$")
  if q then return q end
  if s == "True" or s == "true" then return true end
  if s == "False" or s == "false" then return false end
  local n = tonumber(s)
  if n then return math.tointeger(n) or n end
  return s
end

--- Tunables declared in a candidate: `# mk:tune block_m = [128, 256]`
--- (also `# mk:tune NAME v1 v2`). Raises on a malformed or duplicate line.
---@param source string
---@return table list of {name =, values = {...}}
function M.tunables(source)
  if type(source) ~= "string" then error("pallas.tunables: source must be a string", 2) end
  local out, seen, lineno = {}, {}, 0
  for line in (source .. "\n"):gmatch("([^\n]*)\n") do
    lineno = lineno + 1
    local name, rest = line:match("^%s*#%s*mk:tune%s+([%a_][%w_]*)%s*(.-)%s*$")
    if not name then name, rest = line:match("^%s*//%s*mk:tune%s+([%a_][%w_]*)%s*(.-)%s*$") end
    if name then
      local values = {}
      if rest:sub(1, 1) == "=" then
        local body = rest:sub(2):match("^%s*(.-)%s*$")
        local inner = body:match("^%[(.*)%]$") or body:match("^%((.*)%)$")
        if not inner then
          error(string.format("pallas.tunables: line %d: values of %s must be a [list]", lineno, name), 2)
        end
        for item in (inner .. ","):gmatch("([^,]*),") do
          local v = parse_value(item)
          if v ~= nil then values[#values + 1] = v end
        end
      else
        for item in rest:gsub(",", " "):gmatch("%S+") do values[#values + 1] = parse_value(item) end
      end
      if #values == 0 then error(string.format("pallas.tunables: line %d: %s has no values", lineno, name), 2) end
      if seen[name] then error(string.format("pallas.tunables: line %d: %s declared twice", lineno, name), 2) end
      seen[name] = true
      out[#out + 1] = { name = name, values = values }
    end
  end
  return out
end

-- ---------------------------------------------------------------------------
-- Facts for prompts
-- ---------------------------------------------------------------------------

local function config_text(c)
  if type(c) ~= "table" then return tostring(c) end
  local names = {}
  for k in pairs(c) do names[#names + 1] = tostring(k) end
  table.sort(names)
  local parts = {}
  for _, k in ipairs(names) do
    local v = c[k]
    if type(v) == "table" then v = "[" .. table.concat(v, ", ") .. "]" end
    parts[#parts + 1] = k .. "=" .. tostring(math.tointeger(v) or v)
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

--- Facts for the prompts ({label, value} list): the device kind, the JAX
--- and jaxlib versions the harness reported for the baseline (measured =
--- {device = {platform, device_kind, jax_version, jaxlib_version}}; each
--- "unknown" when it could not say), the chip's VMEM, SMEM and MXU figures
--- from tpu_chips.lua with their sources, and the task's shapes.
---@param task table
---@param measured table
---@return table
function M.facts(task, measured)
  local d = type(measured) == "table" and type(measured.device) == "table" and measured.device or {}
  local kind = type(d.device_kind) == "string" and d.device_kind ~= "" and d.device_kind or nil
  local out = {
    { "device", kind and (kind .. (d.platform and (" (platform " .. d.platform .. ")") or "")) or "unknown" },
    { "JAX version", d.jax_version or "unknown" },
    { "jaxlib version", d.jaxlib_version or "unknown" },
  }
  if task.interpret then
    out[#out + 1] = { "mode", "Pallas interpret mode (runs on the CPU: correctness only, timings do not reflect a TPU)" }
  end
  local chip
  local lk = kind and kind:lower() or ""
  for _, c in ipairs(dofile(M.dir .. "/tpu_chips.lua")) do
    if lk:find(c.match) or (c.alt and lk:find(c.alt, 1, true)) then chip = c break end
  end
  if chip then
    for _, f in ipairs { { "vmem", "VMEM" }, { "scoped_vmem", "scoped VMEM limit" }, { "smem", "SMEM" },
      { "mxu", "MXU" } } do
      local v = chip[f[1]]
      out[#out + 1] = { chip.name .. " " .. f[2], v[1] .. " (source: " .. v[2] .. ")" }
    end
  elseif lk:find("tpu", 1, true) then
    out[#out + 1] = { "chip figures", "not in the table (targets/pallas/tpu_chips.lua): VMEM, SMEM and MXU unknown" }
  end
  if task.config then out[#out + 1] = { "benchmark configuration (CONFIG)", config_text(task.config) } end
  local tests = {}
  for _, c in ipairs(task.test_configs or {}) do tests[#tests + 1] = config_text(c) end
  if #tests > 0 then out[#out + 1] = { "test configurations", table.concat(tests, " ") } end
  return out
end

return M

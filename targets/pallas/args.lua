--- targets/pallas/args.lua: what a harness step is given: the task's
--- arguments, a candidate's (its file, the emulated TPU chip, its tunable
--- values, the interpret mode), the timing options, and the sandbox a
--- candidate's process runs in with the files of the frozen tests it may
--- see.
local need, M = ...
local fs = require "mk.fs"
local home = require "mk.home"
local cjson = require "cjson"
local CHIPS = need "tpu_chips" -- the TPU chips' figures

local A = {}

-- Common harness arguments from a task.
function A.task(task, extra)
  local a = { "--task", task.dir }
  if task.tolerance then
    a[#a + 1] = "--atol"; a[#a + 1] = string.format("%.17g", task.tolerance.atol)
    a[#a + 1] = "--rtol"; a[#a + 1] = string.format("%.17g", task.tolerance.rtol)
  end
  if task.dtype then a[#a + 1] = "--dtype"; a[#a + 1] = task.dtype end
  for _, x in ipairs(extra or {}) do a[#a + 1] = x end
  return a
end
local task_args = A.task

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

-- A list of numbers as the harness reads it: "0,1".
function A.list(xs)
  local s = {}
  for i, x in ipairs(xs or {}) do s[i] = tostring(math.tointeger(x) or x) end
  return table.concat(s, ",")
end

--- The chip a kernel sees in TPU interpret mode when neither the task
--- (task.lua `chip`) nor the run (opts.chip) names one.
M.chip = "v6e"

--- JAX's device_kind of a chip named as tpu_chips.lua names it ("v5e",
--- "TPU v6e", "trillium", "TPU v5 lite"), or nil, why.
function M.chip_kind(name)
  local lk = tostring(name):lower()
  for _, c in ipairs(CHIPS) do
    if lk == c.name:lower() or lk == c.alt or lk == c.device_kind:lower() or lk == c.name:lower():gsub("^tpu ", "") then
      return c.device_kind
    end
  end
  return nil, "unknown TPU chip " .. tostring(name) .. " (targets/pallas/tpu_chips.lua lists v5e, v6e)"
end

-- A candidate step's arguments: the task's, the candidate's file, the chip,
-- the tunable values and the interpret mode, then `extra`.
function A.candidate(task, build, extra, opts)
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
function A.sandbox(task, workdir, opts, ro_extra)
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
function A.visible_inputs(tests_dir)
  return { tests_dir .. "/inputs", tests_dir .. "/cases.json", tests_dir .. "/manifest.sha256" }
end

-- Timing options shared by bench/profile/baseline: `iters` (or
-- `min_reps`), `min_time` (s of timed calls to aim for), `max_reps`, `warmup`.
-- An interpreter's timings are not kernel timings (results say timing =
-- "interpret"): a few untraced calls show that the kernel runs, no more.
M.interpret_timing = { warmup = 1, iters = 3, max_reps = 3, no_trace = true, max_time = 30 }

-- The timing options as harness arguments, appended to `a`; `interpreted`:
-- M.interpret_timing over them.
function A.timing(opts, a, interpreted)
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
  -- interpreted: calls of a minute (7p) are timed once, not three times (an interpreter's speed is no kernel's)
  if interpreted and opts.max_time then add("--max-time", string.format("%.6g", opts.max_time)) end
  if opts.no_trace then a[#a + 1] = "--no-trace" end
  return a
end

return A

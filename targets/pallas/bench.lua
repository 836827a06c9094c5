--- targets/pallas/bench.lua: a build timed on the benchmark case by the
--- harness's `bench` step, the timed runs' output checked by a process
--- that runs no candidate code; and the baseline: jax.jit of the
--- reference, timed like a candidate.
local need, M, call = ...
local fs = require "mk.fs"
local args = need "args"
local timed_label = need("escalate").timed_label
local profile_result = need("profile").result
local harness, device_harness = call.harness, call.device
local task_args, candidate_args, sandbox_for, visible_inputs, timing_args = args.task, args.candidate, args.sandbox,
  args.visible_inputs, args.timing

-- The timing figures of a harness answer: the device's when it timed on
-- the device, else the wall clock's.
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
  if build.sampled then -- checked only by a sampled run at the task's own sizes: its call is all that ran
    return { status = "ok", correct = true, latency_s = build.sampled.calls_s or 0, reps = 1, method = "wall",
      message = "", wall_s = 0, timing_kind = "interpret", interpret = "tpu", timed_at = build.checked_at }
  end
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
    timeout = opts.timeout or task.timeout, cwd = build.workdir, cpu = opts.cpu, build = build, mem_mb = opts.mem_mb,
    sandbox = sandbox_for(task, build.workdir, opts, visible_inputs(opts.tests_dir)),
  })
  if r.status ~= "ok" then
    return { status = r.status, correct = false, message = r.message, wall_s = r.wall_s, kind = r.kind,
      reason = r.reason }
  end
  -- The timed runs' output, checked by a process that runs no candidate code.
  local c = harness("check", task_args(task, { "--tests", opts.tests_dir, "--outputs", outputs,
    "--cases", r.case, "--calls", "bench" }), { timeout = M.defaults.check_timeout, pool = "light", cpu = opts.cpu,
    build = build, mem_mb = opts.mem_mb })
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

--- The XLA baseline: jax.jit of the reference, timed like a candidate.
---@param task table
---@param opts? {tests_dir?: string, warmup?: integer, iters?: integer, timeout?: number}
---@return table {status, latency_s, spread, min_s, max_s, reps, method, flops, bytes, text, message, wall_s}
function M.baseline(task, opts)
  opts = opts or {}
  local extra = timing_args(opts)
  local tests_dir = opts.tests_dir or task.tests_dir
  if tests_dir then extra[#extra + 1] = "--tests"; extra[#extra + 1] = tests_dir end
  local r = device_harness("baseline", task_args(task, extra), { timeout = opts.timeout or task.timeout,
    mem_mb = opts.mem_mb })
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

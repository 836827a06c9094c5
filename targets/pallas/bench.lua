--- targets/pallas/bench.lua: a build timed on the benchmark case by the
--- harness's `bench` step, the timed runs' output checked by a process
--- that runs no candidate code; and the baseline: jax.jit of the
--- reference, timed like a candidate.
local need, M, call = ...
local fs = require "mk.fs"
local args = need "args"
local escalate = need "escalate"
local timed_label, read_json = escalate.timed_label, escalate.read_json
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

--- The benchmark cases of a suite of several input configurations
--- (MaxKernel's multi-configuration tasks: cases.json `configurations` > 1):
--- the first test case of each configuration, in order; nil for a suite of
--- one configuration (its benchmark case is the suite's first case).
function M.configuration_cases(tests_dir)
  local info = read_json(tests_dir .. "/cases.json")
  local n = math.tointeger(info.configurations)
  if not n or n < 2 or type(info.cases) ~= "table" then return nil end
  local first = {}
  for _, c in ipairs(info.cases) do
    local k = type(c) == "table" and not c.heldout and type(c.id) == "string" and tonumber(c.id:match("^k(%d+)s"))
    if k and not first[k + 1] then first[k + 1] = c.id end
  end
  local out = {}
  for k = 1, n do
    if not first[k] then return nil end -- a configuration without a test case: time the first case only
    out[k] = first[k]
  end
  return out
end

--- One figure of several configurations' timings (each a bench or
--- baseline result that is ok): the time of running every configuration
--- once. latency_s, min_s and max_s are sums; spread (IQR / median) is the
--- configurations' spreads weighted by their medians; reps the fewest.
--- `configurations` lists each one's own figure.
function M.combine_configurations(parts, cases)
  local r = {}
  for k, v in pairs(parts[1]) do r[k] = v end
  local lat, lo, hi, sp, wall, check, reps = 0, 0, 0, 0, 0, 0, nil
  r.configurations = {}
  for i, p in ipairs(parts) do
    local l = p.latency_s or 0
    lat, wall, check = lat + l, wall + (p.wall_s or 0), check + (p.check_s or 0)
    lo, hi = lo + (p.min_s or l), hi + (p.max_s or l)
    sp = sp + (p.spread or 0) * l
    reps = reps and p.reps and math.min(reps, p.reps) or reps or p.reps
    r.configurations[i] = { configuration = i - 1, case = cases[i], latency_s = p.latency_s, spread = p.spread,
      min_s = p.min_s, max_s = p.max_s, reps = p.reps, timed_at = p.timed_at, flops = p.flops }
  end
  r.latency_s, r.min_s, r.max_s, r.reps, r.wall_s = lat, lo, hi, reps, wall
  r.spread = lat > 0 and sp / lat or 0
  if parts[1].check_s then r.check_s = check end
  if parts[1].flops then
    local f = 0
    for _, p in ipairs(parts) do f = f + (tonumber(p.flops) or 0) end
    r.flops = f
  end
  r.message = string.format("timed on %d input configurations: the sum of their medians", #parts)
  return r
end

-- Run `one(case)` on the benchmark case of every configuration of the
-- suite (one call with case nil for a suite of one configuration), and
-- combine them; the first failing one is the answer, its configuration named.
local function each_configuration(tests_dir, one)
  local cases = tests_dir and M.configuration_cases(tests_dir)
  if not cases then return one(nil) end
  local parts = {}
  for i, cid in ipairs(cases) do
    local r = one(cid)
    if r.status ~= "ok" then
      r.message = string.format("configuration %d of %d (case %s): %s", i - 1, #cases, cid, tostring(r.message))
      r.configuration = i - 1
      return r
    end
    parts[i] = r
  end
  return M.combine_configurations(parts, cases)
end

-- The candidate timed on one case (nil: the suite's first).
local function bench_case(task, build, opts, case)
  local outputs = build.workdir .. "/outputs-bench"
  fs.rm_rf(outputs)
  local extra = timing_args(opts, { "--tests", opts.tests_dir, "--no-check-output", "--save-output", outputs },
    build.timing_kind == "interpret")
  if case then extra[#extra + 1] = "--case"; extra[#extra + 1] = case end
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

--- Time the candidate on the benchmark case (the task's own inputs);
--- the timed runs' output is checked against the frozen expected output.
--- A suite of several input configurations is timed on each one's first
--- case, the figure being the sum (M.combine_configurations).
---@param task table
---@param build table
---@param opts {tests_dir: string, warmup?: integer, iters?: integer, timeout?: number, interpret?: boolean, no_trace?: boolean}
---@return table {status, correct, latency_s, spread, min_s, max_s, reps, method, message, wall_s, configurations?}
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
  return each_configuration(opts.tests_dir, function(case) return bench_case(task, build, opts, case) end)
end

--- The XLA baseline: jax.jit of the reference, timed like a candidate.
---@param task table
---@param opts? {tests_dir?: string, warmup?: integer, iters?: integer, timeout?: number, mem_mb?: number, cpu?: table}
---@return table {status, latency_s, spread, min_s, max_s, reps, method, flops, bytes, text, message, wall_s}
function M.baseline(task, opts)
  opts = opts or {}
  local tests_dir = opts.tests_dir or task.tests_dir
  return each_configuration(tests_dir, function(case)
    local extra = timing_args(opts)
    if tests_dir then extra[#extra + 1] = "--tests"; extra[#extra + 1] = tests_dir end
    if case then extra[#extra + 1] = "--case"; extra[#extra + 1] = case end
    local r = device_harness("baseline", task_args(task, extra), { timeout = opts.timeout or task.timeout,
      mem_mb = opts.mem_mb, cpu = opts.cpu })
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
  end)
end


--- targets/c/bench.lua: a build timed at the benchmark size by mkc-run
--- (rotating input sets, the outputs of timed calls checked, fresh-input
--- probes beside them: probes.lua), and the baseline: the reference
--- compiled and benchmarked exactly like a candidate.
local need, M = ...
local fs = require("mk.fs")
local cjson = require("cjson.safe")
local task_lib = require("mk.services.task")
local runner = need "runner"
local suite = need "suite"
local probes_lib = need "probes"
local contention = need "contention"
local check_outputs = need("check").outputs
local result, nonce, scratch_blob, run_runner = runner.result, runner.nonce, runner.scratch_blob, runner.run
local read_meta, case_list, case_plan = suite.read_meta, suite.case_list, suite.case_plan
local draw_probes, check_probes = probes_lib.draw, probes_lib.check

-- The runner's plan of a benchmark and the cases by id. Timed calls: at
-- least min_time s, then on while the median is not known to 2.5%, up to
-- max_time s (targets/c/runner.c, median_settled).
local function bench_plan(task, build, opts, meta, cases, tests_dir, n, blob)
  local min_time = opts.min_time or 0.5
  local plan = { "nonce " .. n, "mode bench", "so " .. build.so, "blob " .. blob,
    string.format("tol %.9g %.9g", task.tolerance.atol, task.tolerance.rtol),
    string.format("bench %d %.6g %d %d %d %.6g", opts.warmup or 3, min_time, opts.min_reps or 5,
      opts.max_reps or 200, math.tointeger(meta.flush_bytes) or 0, opts.max_time or 2 * min_time),
    "counters " .. (opts.counters and 1 or 0) }
  local by_id = {}
  for _, c in ipairs(cases) do
    by_id[c.id] = c
    plan[#plan + 1] = case_plan(task, c, tests_dir, "file", false)
  end
  return plan, by_id
end

-- opts.probe_stock when it was made for this suite and probe count (else
-- discarded): probes whose reference outputs were made ahead.
local function usable_stock(opts, tests_dir)
  local stock = opts.probe_stock
  if stock and (stock.tests_dir ~= tests_dir or #stock.probes ~= (opts.probes or 0)) then
    M.probe_discard(stock)
    return nil
  end
  return stock
end

-- Fresh-input probes added to the plan: seeds drawn now (or, with a stock,
-- drawn when the reference's outputs for them were made ahead), never
-- frozen, never seen before by any candidate. Returns the probes ({} when
-- none are asked for or there is no reference build).
local function add_probes(plan, by_id, task, meta, opts, tests_dir, n, stock)
  if (opts.probes or 0) <= 0 or not fs.exists(tests_dir .. "/.reference/kernel.so") then return {} end
  plan[#plan + 1] = "probes " .. math.tointeger(opts.probes)
  local probes = stock and stock.probes or draw_probes(meta, n, opts.probes)
  for _, c in ipairs(probes) do
    by_id[c.id] = c
    if stock then -- made ahead: mapped from its files
      plan[#plan + 1] = case_plan(task, c, stock.ref.inputs_root, "file", false)
    else
      plan[#plan + 1] = case_plan(task, c, tests_dir, "fresh", false)
    end
  end
  return probes
end

-- The benchmark's record from the runner's answer j.
local function bench_record(j, rproc, wall, stock)
  return { wall_s = wall, reps = math.tointeger(j.reps), sets = math.tointeger(j.sets), times = j.times,
    latency_s = j.median_s, min_s = j.min_s, max_s = j.max_s, p10_s = j.p10_s, p90_s = j.p90_s,
    median_undisturbed_s = j.median_undisturbed_s, undisturbed = math.tointeger(j.clean),
    spread = j.median_s > 0 and (j.p90_s - j.p10_s) / j.median_s or 0, counters = j.counters,
    counters_error = j.counters_error ~= cjson.null and j.counters_error or nil, correct = false, check_s = 0,
    probes_ahead = stock and true or nil, -- the reference's probe outputs were made before this benchmark
    -- the benchmark process's own time: input sets made, the call loop (and in
    -- it the per-call poisoning and output checks), probes, outputs written
    runner = { setup_s = j.setup_s, loop_s = j.loop_s, prep_s = j.prep_s, verify_s = j.verify_s, outs_s = j.outs_s,
      probes_s = j.probes_s, process_s = rproc and rproc.wall_s } }
end

-- The frozen cases' outputs and the probes' outputs of the runner's answer.
local function split_outs(j)
  local frozen, probe = {}, {}
  for _, o in ipairs(j.outs or {}) do
    if o.case:match("^probe") then probe[#probe + 1] = o else frozen[#frozen + 1] = o end
  end
  return frozen, probe
end

-- The verdict on the frozen cases' outputs: a result when they fail, nil when correct.
local function frozen_verdict(task, tests_dir, meta, blob, outs, by_id, base, cpu)
  local cr, cerr = check_outputs(task, tests_dir, meta, blob, outs, by_id, base, cpu)
  if not cr then return result("error", cerr, base) end
  if not cr.ok then return result("error", "check failed: " .. tostring(cr.error), base) end
  for _, x in ipairs(cr.results) do
    if x.tampered then return result("rejected", x.message, base) end
    if not x.ok then return result("incorrect", "at the benchmark size: " .. x.message, base) end
  end
  return nil
end

-- The probes' check as a task beside the frozen outputs' check (one is
-- mostly the reference's run or reading memory, the other reading memory:
-- two processes, one per core). It runs the reference on the probe inputs
-- first unless a stock holds that run; it writes into a record of its
-- own while it runs. Returns a function that awaits it (whatever else
-- failed: its processes and directory must be done with before the
-- benchmark returns) and gives its verdict: a result or nil; check_s is the
-- wall time of the pair, not the sum.
local function start_probe_check(task, tests_dir, meta, blob, probes, outs, j, opts, base, stock)
  local check0, pair0 = base.check_s, task_lib.now()
  local pbase = { check_s = 0 }
  local h = task_lib.spawn(check_probes, task, tests_dir, meta, blob, probes, outs, j, opts, pbase, stock and stock.ref)
  return function()
    if not h then return nil end
    local ok, pr = pcall(task_lib.await, h)
    h = nil
    base.check_s = check0 + (task_lib.now() - pair0)
    base.probe_s, base.probe_cpu_s, base.cpu_per_call_s = pbase.probe_s, pbase.probe_cpu_s, pbase.cpu_per_call_s
    if not ok then return result("error", "probe check failed: " .. tostring(pr), base) end
    return pr and result(pr.status, pr.message, base)
  end
end

--- Benchmark a build at the benchmark size (outputs of timed calls checked).
function M.bench(task, build, opts)
  opts = opts or {}
  if type(build) ~= "table" or build.status ~= "ok" then error("c.bench: build must be a successful compile result", 2) end
  local tests_dir = opts.tests_dir or error("c.bench: opts.tests_dir is required", 2)
  tests_dir = fs.realpath(tests_dir) or tests_dir
  local t0 = task_lib.now()
  local meta = read_meta(tests_dir)
  if not meta then return result("error", "tests are not frozen in " .. tests_dir) end
  local n = nonce()
  local sdir, blob, drop_blob = scratch_blob(opts, build, n, "bench")
  local plan, by_id = bench_plan(task, build, opts, meta, case_list(task, "bench", meta), tests_dir, n, blob)
  local stock = usable_stock(opts, tests_dir)
  local function drop()
    drop_blob()
    if stock then M.probe_discard(stock) end
  end
  local probes = add_probes(plan, by_id, task, meta, opts, tests_dir, n, stock)
  local bytes = meta.per_set_bytes * (meta.sets + 1 + #probes) + meta.flush_bytes
  local machine = contention.before()
  local st, j, rproc = run_runner(task, build, tests_dir, table.concat(plan, "\n") .. "\n", n,
    { timeout = opts.timeout or 2 * task.timeout, threads = opts.threads, mem_mb = opts.mem_mb, scratch = sdir,
      cpu = opts.cpu, ro = stock and #probes > 0 and { stock.ref.inputs_root .. "/inputs" } or nil }, bytes)
  if st then drop(); st.correct = false; return st end
  local base = bench_record(j, rproc, task_lib.now() - t0, stock)
  -- timed while other processes or the hypervisor held the CPU: flagged, for the evaluator to retake or mark
  base.contention = contention.judge(machine, rproc and rproc.cpu_s, j, opts.contention)
  base.contended = base.contention.why
  if j.bad_calls and j.bad_calls > 0 then
    drop()
    return result("incorrect", "the outputs changed between timed calls on the same inputs (" .. math.tointeger(j.bad_calls)
      .. " of " .. math.tointeger(j.calls) .. " calls): " .. tostring(j.bad)
      .. ". A kernel must do the full work on every call.", base)
  end
  local frozen_outs, probe_outs = split_outs(j)
  local probe_verdict = function() return nil end
  if #probes > 0 then
    probe_verdict = start_probe_check(task, tests_dir, meta, blob, probes, probe_outs, j, opts, base, stock)
  end
  local fr = frozen_verdict(task, tests_dir, meta, blob, frozen_outs, by_id, base, opts.cpu)
  local pr = probe_verdict()
  drop()
  if fr or pr then return fr or pr end
  base.correct = true
  base.wall_s = task_lib.now() - t0
  return result("ok", "", base)
end

--- The reference compiled and benchmarked exactly like a candidate.
function M.baseline(task, opts)
  opts = opts or {}
  local tests_dir = opts.tests_dir or error("c.baseline: opts.tests_dir is required", 2)
  local workdir = opts.workdir or (tests_dir .. "/.baseline")
  local b = M.compile(task, { [task.candidate_file] = task.reference }, workdir, { trusted = true })
  if b.status ~= "ok" then return result("error", "the reference does not compile: " .. b.message) end
  local r = M.bench(task, b, opts)
  if r.status ~= "ok" then r.status = "error"; r.message = "the reference failed its own benchmark: " .. r.message end
  return r
end

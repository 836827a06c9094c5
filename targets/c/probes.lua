--- targets/c/probes.lua: fresh-input probes, the check that a kernel
--- computes on every call instead of serving a cache of earlier calls:
--- inputs at the benchmark size drawn at run time, never frozen; the
--- reference computes the same inputs in its own sandboxed run (now, or
--- ahead of the benchmark: probe_prepare), mkc-check compares, and a
--- kernel much slower on new inputs than on the rotated ones is caching.
local need, M = ...
local fs = require("mk.fs")
local task_lib = require("mk.services.task")
local util = require("mk.services.util")
local task_mod = need "task"
local runner = need "runner"
local suite = need "suite"
local checker = need("check").run
local SHORT, dims_of, shape_text = task_mod.SHORT, task_mod.dims_of, task_mod.shape_text
local result, nonce, run_sandboxed, classify = runner.result, runner.nonce, runner.run_sandboxed, runner.classify
local path_dir, runner_limits = runner.path_dir, runner.limits
local read_meta, case_plan = suite.read_meta, suite.case_plan
local fmt_s = util.fmt_s

-- Probe cases at the benchmark size, seeded from the nonce `n`.
local function draw_probes(meta, n, count)
  local probes, base_seed = {}, tonumber(n:sub(1, 7), 16)
  for i = 1, count do probes[i] = { id = "probe" .. i, sizes = meta.bench_sizes, seed = 100000 + base_seed + i } end
  return probes
end

-- Fresh-input probes: the reference computes the same inputs (its own
-- sandboxed run), the checker compares, and a kernel much slower on new
-- inputs than on the rotated ones is caching results. nil when all is well.
-- The reference's sandboxed run on the probe inputs, in a scratch
-- directory of its own beside the candidate's blob (the frozen suite,
-- shared by runs, is only read): {r, n, pdir, rblob}.
-- With save_root, the generated inputs are also saved, as
-- save_root/inputs/<case>/<arg>.bin, for the candidate's runner to map.
local function probe_reference(task, tests_dir, meta, blob, probes, opts, save_root)
  local n = nonce()
  local rdir = tests_dir .. "/.reference"
  local pdir = path_dir(blob) .. "/probe-ref-" .. n
  fs.mkdirs(pdir)
  local rblob = pdir .. "/probe.bin"
  local plan = { "nonce " .. n, "mode test", "so " .. rdir .. "/kernel.so", "blob " .. rblob }
  if save_root then plan[#plan + 1] = "trusted 1" end
  for _, c in ipairs(probes) do
    if save_root then
      fs.mkdirs(save_root .. "/inputs/" .. c.id)
      plan[#plan + 1] = case_plan(task, c, save_root, "gen", false)
    else
      plan[#plan + 1] = case_plan(task, c, tests_dir, "fresh", false)
    end
  end
  local bins = M.binaries()
  local r = run_sandboxed({ bins.run }, { workdir = pdir, stdin = table.concat(plan, "\n") .. "\n",
    ro = { path_dir(bins.run), rdir }, rw = save_root and { save_root } or nil, timeout = 2 * task.timeout,
    threads = opts.threads, limits = runner_limits(meta.per_set_bytes * #probes), cpu = opts.cpu })
  return { r = r, n = n, pdir = pdir, rblob = rblob }
end

--- Fresh-input probes made ahead (the evaluator asks while the device
--- would otherwise idle, e.g. while the search waits for the model): seeds
--- drawn now and the reference's run on them done now, its outputs in a
--- directory under opts.dir, which no candidate's sandbox shows. Handed
--- to one later M.bench as opts.probe_stock, which then skips that run.
function M.probe_prepare(task, tests_dir, count, opts)
  opts = opts or {}
  tests_dir = fs.realpath(tests_dir) or tests_dir
  local meta = read_meta(tests_dir)
  if not meta then return nil, "tests are not frozen in " .. tests_dir end
  if not fs.exists(tests_dir .. "/.reference/kernel.so") then return nil, "no reference build" end
  local t0 = task_lib.now()
  local dir = opts.dir or error("c.probe_prepare: opts.dir is required", 2)
  local probes = draw_probes(meta, nonce(), count)
  -- the inputs in a directory of their own, which the candidate's runner
  -- maps read-only; the reference's outputs stay in probe-ref-*, which no
  -- candidate sees
  local inputs_root = dir .. "/probe-in-" .. nonce()
  local ref = probe_reference(task, tests_dir, meta, dir .. "/stock.bin", probes, opts, inputs_root)
  ref.inputs_root = inputs_root
  -- a failed run gives no stock (its inputs may be missing: the candidate's
  -- runner must not fail on them); the benchmark then runs it itself
  local st, rj = classify(ref.r or { status = "exited", code = 1, stdout = "" }, ref.n, 2 * task.timeout)
  if st then
    M.probe_discard { ref = ref }
    return nil, "the reference failed on probe inputs made ahead: " .. st.message
  end
  ref.j = rj
  return { probes = probes, ref = ref, tests_dir = tests_dir, wall_s = task_lib.now() - t0 }
end

--- Remove what probe_prepare made (a stock no benchmark will use).
function M.probe_discard(stock)
  fs.rm_rf(stock.ref.pdir)
  fs.rm_rf(stock.ref.inputs_root)
end

-- The probes' verdict: their outputs against the reference's, and their
-- CPU time against the timed calls'. A result, or nil when all is well.
local function check_probes(task, tests_dir, meta, blob, probes, outs, j, opts, base, ref_run)
  local args_by_name = {}
  for _, a in ipairs(task.args) do args_by_name[a.name] = a end
  local nouts = 0
  for _, a in ipairs(task.args) do if a.kind == "out" or a.kind == "inout" then nouts = nouts + 1 end end
  if #outs < #probes * nouts then
    return result("incorrect", "on fresh inputs at the benchmark size the kernel wrote outside its outputs", base)
  end
  if not ref_run then
    local t0 = task_lib.now()
    ref_run = probe_reference(task, tests_dir, meta, blob, probes, opts)
    base.check_s = (base.check_s or 0) + (task_lib.now() - t0)
  end
  if ref_run.error then return result("error", "the reference's probe run failed: " .. ref_run.error, base) end
  local n, pdir, rblob = ref_run.n, ref_run.pdir, ref_run.rblob
  local st, rj = nil, ref_run.j -- parsed already when made ahead
  if not rj then st, rj = classify(ref_run.r or { status = "exited", code = 1, stdout = "" }, n, 2 * task.timeout) end
  if st then fs.rm_rf(pdir); return result("error", "the reference failed on the probe inputs: " .. st.message, base) end
  local ref = {}
  for _, cj in ipairs(rj.cases or {}) do
    for _, o in ipairs(cj.outs or {}) do ref[o.case .. "/" .. o.name] = o end
  end
  local lines = { "blob " .. blob, "blob2 " .. rblob }
  for _, o in ipairs(outs) do
    local a, c, ro = args_by_name[o.name], nil, ref[o.case .. "/" .. o.name]
    for _, p in ipairs(probes) do if p.id == o.case then c = p end end
    if not ro then fs.rm_rf(pdir); return result("error", "no reference output for " .. o.case, base) end
    lines[#lines + 1] = string.format("cmp2 %s %s %s %d %d %s %d:%s %.9g %.9g %s", o.case, o.name, SHORT[a.dtype],
      math.tointeger(dims_of(a, c.sizes)), math.tointeger(o.offset), o.hash, math.tointeger(ro.offset), ro.hash,
      task.tolerance.atol, task.tolerance.rtol, shape_text(a, c.sizes))
  end
  local cr, cerr = checker(table.concat(lines, "\n") .. "\n", base, opts.cpu)
  fs.rm_rf(pdir)
  if not cr then return result("error", cerr, base) end
  if not cr.ok then return result("error", "probe check failed: " .. tostring(cr.error), base) end
  for _, x in ipairs(cr.results) do
    if x.tampered then return result("rejected", x.message, base) end
    if not x.ok then
      return result("incorrect", "on fresh inputs at the benchmark size (never seen before): " .. x.message, base)
    end
  end
  -- one call per probe, so compare CPU time (all threads), which another
  -- process preempting the call does not inflate, with a margin
  local pmin, wmin
  for _, p in ipairs(j.probes or {}) do
    pmin = math.min(pmin or math.huge, p.cpu_s or math.huge)
    wmin = math.min(wmin or math.huge, p.time_s)
  end
  base.probe_s, base.probe_cpu_s, base.cpu_per_call_s = wmin, pmin, j.cpu_per_call_s
  if pmin and j.cpu_per_call_s and pmin > 4 * j.cpu_per_call_s + 2e-3 then
    return result("rejected", string.format("the kernel used %s of CPU on inputs it had never seen but %s per "
      .. "call on the benchmark's repeated inputs: results must be computed on every call, not served from a "
      .. "cache of earlier calls", fmt_s(pmin), fmt_s(j.cpu_per_call_s)), base)
  end
  return nil
end

return { draw = draw_probes, check = check_probes }

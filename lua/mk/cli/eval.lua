--- mkengine eval TASK CANDIDATE: evaluate one candidate file through the
--- same path as a search (frozen tests in a temporary directory, sandboxed
--- compile and runs, autotune, benchmark against the baseline, held-out
--- check, profile).
local cjson = require("cjson")
local cli = require("mk.cli")
local eval = require("mk.eval")
local fs = require("mk.fs")
local pool_lib = require("mk.eval.pool")
local targets = require("mk.eval.targets")
local task_lib = require("mk.services.task")
local util = require("mk.services.util")

local M = {
  summary = "evaluate one candidate kernel file against a task",
  usage = "usage: mkengine eval TASK_DIR CANDIDATE_FILE [--json] [--timeout S] [--no-tune] [--no-profile] "
    .. "[--threads N] [--tests-dir DIR] [--min-time S] [--mem-mb MB] [--workers FILE] [--keep] [--fresh] "
    .. "[--no-confirm]",
  help = [[
Compiles CANDIDATE_FILE for the task in TASK_DIR, checks it on the frozen
tests, autotunes `mk:tune` parameters, times it at the benchmark size
against the reference (the baseline), re-checks it on held-out seeds and
profiles it. The frozen tests and the baseline's measurement are kept in
the engine's cache (~/.cache/mkengine, or $MKENGINE_CACHE), keyed by the
task's content and this machine, and reused (verified) by the next eval.

  --json         print one JSON object: status, correct, latency_s,
                 baseline_latency_s, speedup, message, profile, tune, heldout,
                 timing (seconds: compile_s, test_s, bench_s, check_s,
                 queue_s, setup_s, engine_s, wall_s), device_s, cpu_s
                 (CPU seconds of its processes), baseline_cached;
                 checked_at, timed_at, baseline_timed_at when a kernel
                 was checked at a larger scale than the test scale;
                 heldout.confirmed_at / confirm_note: the larger scale
                 its held-out cases passed at too, or why not (pallas);
                 contended (why), retakes, contention {other_cores,
                 steal, load1, disturbed}: the benchmark was timed while
                 something else held the CPU, even after retakes (c)
                 peak_rss_mb: the largest resident memory of one of the
                 harness processes it ran, the suite's freeze and the
                 baseline included (MiB, pallas), mem_mb: their limit;
                 configurations (also in heldout): a task of several
                 input configurations (MaxKernel's list form): for each,
                 configuration, ok, cases, failed, message;
                 timed_configurations: each one's time and the
                 baseline's (the figure: the sum of their medians);
                 error_ratio (also in heldout): its error against the
                 reference's float32 evaluation over the reference's own
                 (pallas, bf16/f16 references), warning: when far beyond
  --timeout S    time limit of each candidate process (default: the task's)
  --no-tune      ignore mk:tune lines
  --no-profile   skip the profile
  --threads N    OMP_NUM_THREADS for candidate and baseline runs
  --tests-dir D  keep (or reuse) the frozen tests in D
  --min-time S   seconds of timed calls per benchmark (default 1)
  --mem-mb MB    memory limit of each harness process (pallas; default: the
                 memory available over jobs + 1, at most 16384 MiB); past it
                 the candidate is `unchecked`, with a message saying so
  --workers F    evaluate on a worker the file F.lua names (docs/workers.md)
  --keep         keep the temporary directory (its path is printed)
  --fresh        freeze the tests and measure the baseline anew (a temporary
                 directory; the cache is neither read nor written)
  --no-confirm   (pallas, interpret mode) do not re-check the held-out cases
                 at a larger scale than the test scale

status is one of ok, compile_error, incorrect, timeout, crash, rejected,
unchecked (a Pallas kernel made for sizes larger than this machine can check
it at, or too slow for its interpreter here: the calls that ended correct,
or still being simulated when stopped; not a verdict on it; ranked below
correct kernels).
Exit status: 0 when the candidate was evaluated (whatever the verdict),
2 on a bad task or candidate path, 1 on an engine or machine failure (a
full disk, a missing compiler, modified frozen tests: one line, no verdict).
--json output is valid UTF-8: bytes a compiler or kernel wrote that are not
are shown as U+FFFD.]],
}

local function num(v) return type(v) == "number" and v or nil end

-- The options, the task and the candidate's source; bad input exits 2.
local function read_inputs(args)
  local opts, pos = cli.parse(args, {
    flags = { json = true, no_tune = true, no_profile = true, keep = true, fresh = true, no_confirm = true },
    options = { timeout = "number", threads = "number", tests_dir = "string", min_time = "number",
      workers = "string", mem_mb = "number" },
  }, M.usage)
  if #pos ~= 2 then cli.usage_error("expected TASK_DIR and CANDIDATE_FILE", M.usage) end
  local task, err = targets.load_task(pos[1])
  if not task then cli.input_error(err.message) end
  local src = fs.read(pos[2])
  if not src or fs.isdir(pos[2]) then cli.input_error("cannot read candidate file " .. pos[2]) end
  if opts.timeout and opts.timeout <= 0 then cli.usage_error("--timeout must be positive", M.usage) end
  if opts.mem_mb and opts.mem_mb <= 0 then cli.usage_error("--mem-mb must be positive", M.usage) end
  if opts.tests_dir and fs.exists(opts.tests_dir) and not fs.isdir(opts.tests_dir) then
    cli.input_error("--tests-dir " .. opts.tests_dir .. " is not a directory")
  end
  return opts, pos, task, src
end

-- The verdict on the search tests, then on the held-out seeds when correct.
local function evaluate(ev, task, src, opts)
  local files = { [task.candidate_file] = src }
  local res = ev:evaluate(files, { tune = not opts.no_tune, profile = not opts.no_profile })
  if res.correct then
    local h = ev:heldout(files)
    res.heldout = h
    if not h.correct then
      res.status, res.correct = h.status, false
      res.message = "passed the search tests but failed the held-out tests: " .. h.message
    elseif h.confirm_note then -- pallas: re-checked at a larger scale, or why not
      res.message = res.message .. "; held-out cases " .. h.confirm_note
    end
    if h.correct and h.warning and not res.warning then res.message = res.message .. "; held-out cases: " .. h.warning end
  end
  return res
end

-- The timing breakdown with numbers only (bench_parts: {name = seconds}).
local function timing_numbers(timing)
  local out = {}
  for k, v in pairs(timing) do
    if type(v) == "table" then
      out[k] = {}
      for k2, v2 in pairs(v) do out[k][k2] = num(v2) end
    else
      out[k] = num(v)
    end
  end
  return out
end

-- --json: one object.
local function json_result(r, task, candidate, ev)
  local out = {
    status = r.status, correct = r.correct, latency_s = num(r.latency_s),
    baseline_latency_s = num(r.baseline_latency_s), speedup = num(r.speedup), message = r.message,
    spread = num(r.spread), device_s = num(r.device_s), cpu_s = num(r.cpu_s), wall_s = num(r.wall_s), suspicious = r.suspicious,
    task = task.name, candidate = candidate,
    baseline_cached = ev.base and ev.base.cached or false,
    checked_at = r.checked_at, timed_at = r.timed_at, baseline_timed_at = r.baseline_timed_at, -- escalated (pallas)
    contended = r.contended, retakes = r.retakes, contention = r.contention, -- timed under contention (c)
    reason = r.reason, configurations = r.configurations, -- a multi-configuration task: what passed in each
    timed_configurations = r.timed_configurations, -- and each one's time (the figure: their sum)
    error_ratio = num(r.error_ratio), warning = r.warning, -- its error against the reference's own (pallas)
    -- the largest resident memory of one of its harness processes, held-out check, the suite's freeze and the
    -- baseline included (pallas), and the limit
    peak_rss_mb = num(math.max(num(r.peak_rss_mb) or 0, num(r.heldout and r.heldout.peak_rss_mb) or 0,
      num(ev.procs and ev.procs.peak_rss_mb) or 0)),
    mem_mb = num(ev.mem_mb),
  }
  if out.peak_rss_mb == 0 then out.peak_rss_mb = nil end
  if r.timing then out.timing = timing_numbers(r.timing) end
  if r.profile then
    local p = r.profile
    out.profile = { text = p.text, gflops = num(p.gflops), gbps = num(p.gbps), peak_gflops = num(p.peak_gflops),
      peak_gbps = num(p.peak_gbps), intensity = num(p.intensity), bound = p.bound, counters = p.counters }
  else
    out.profile = cjson.null
  end
  if r.tune then out.tune = { params = r.tune.params, tried = r.tune.tried, space = r.tune.space } end
  if r.heldout then
    out.heldout = { correct = r.heldout.correct, status = r.heldout.status, confirmed_at = r.heldout.confirmed_at,
      confirm_note = r.heldout.confirm_note, checked_at = r.heldout.checked_at,
      configurations = r.heldout.configurations, error_ratio = num(r.heldout.error_ratio),
      warning = r.heldout.warning }
  end
  return cli.json(out)
end

-- The verdict for people: status, message, the autotune's tries, the profile.
local function print_text(r, candidate)
  io.stdout:write(string.format("%s: %s\n", candidate, r.status))
  if r.message ~= "" then io.stdout:write(r.message, "\n") end
  if r.tune then
    for _, t in ipairs(r.tune.tried) do
      local names = {}
      for k, v in pairs(t.params) do names[#names + 1] = k .. "=" .. tostring(v) end
      table.sort(names)
      io.stdout:write(string.format("  tune %-30s %-10s %s\n", table.concat(names, " "), t.status,
        t.latency_s and util.fmt_s(t.latency_s) or ""))
    end
  end
  if r.profile and r.profile.text then io.stdout:write("\n", r.profile.text, "\n") end
end

function M.run(args)
  local opts, pos, task, src = read_inputs(args)
  local pool = opts.workers and pool_lib.open(opts.workers)
  local ev = eval.new(task, { pool = pool,
    timeout = opts.timeout, threads = opts.threads and math.tointeger(opts.threads), tests_dir = opts.tests_dir,
    bench = { min_time = opts.min_time }, keep = opts.keep, mem_mb = opts.mem_mb,
    suite_cache = not opts.fresh, baseline_cache = not opts.fresh,
    probe_stock = false, -- one candidate: nothing to make probes ahead for
    confirm = not opts.no_confirm,
  })
  local ok, r = pcall(evaluate, ev, task, src, opts)
  if opts.keep and ok then io.stderr:write("mkengine eval: kept ", ev.root, "\n") end
  ev:close()
  if pool then pool:release() end
  if not ok then
    if r == task_lib.CANCELLED or task_lib.signal() then error(r, 0) end
    -- the suite could not be frozen or the reference measured: one line
    if type(r) == "table" and r.message then cli.fail("cannot evaluate: " .. tostring(r.message)) end
    error(r, 0)
  end
  if r.status == "infra" then -- the machine failed: no verdict on the candidate
    cli.fail("cannot evaluate, not the candidate's fault: " .. tostring(r.message))
  end
  if opts.json then io.stdout:write(json_result(r, task, pos[2], ev), "\n") else print_text(r, pos[2]) end
  return 0
end

return M

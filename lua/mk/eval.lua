--- mk.eval: the evaluation service strategies use. One evaluator per task:
--- it freezes the tests once, measures the baseline once, and evaluates
--- candidate files (compile → test → autotune → bench → profile) through
--- the task's target, holding the right slots: compiles run `jobs` at a
--- time; benchmarks and profiles hold the device exclusively. On the CPU
--- (target c) compiles and test runs share the device, so a benchmark also
--- waits for them to finish and keeps them out while it runs.
local fs = require("mk.fs")
local task_lib = require("mk.services.task")
local targets = require("mk.eval.targets")
local infra = require("mk.eval.infra")
local util = require("mk.services.util")
local suites = require("mk.eval.suites")
local workdir = require("mk.services.workdir")

local M = {}

-- ------------------------------------------------------------ device locks

-- A readers-writer lock built on one FIFO semaphore of N permits: shared
-- users take one, an exclusive user takes all N (one exclusive at a time,
-- through a mutex). FIFO order means shared users arriving after an
-- exclusive waiter queue behind it, so a benchmark is not starved.
local N_SHARED = 64
local locks = {}

local function device_lock(key)
  local l = locks[key]
  if not l then
    l = { sem = task_lib.semaphore(N_SHARED), mutex = task_lib.semaphore(1) }
    locks[key] = l
  end
  return l
end

local function with_shared(l, fn, ...)
  l.sem:acquire()
  local r = table.pack(pcall(fn, ...))
  l.sem:release()
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

local function with_exclusive(l, fn, ...)
  l.mutex:acquire()
  local got = 0
  local ok, err = pcall(function()
    for _ = 1, N_SHARED do l.sem:acquire(); got = got + 1 end
  end)
  l.mutex:release()
  if not ok then
    for _ = 1, got do l.sem:release() end
    error(err, 0)
  end
  local r = table.pack(pcall(fn, ...))
  for _ = 1, N_SHARED do l.sem:release() end
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

-- ---------------------------------------------------------- memory limit

--- The default memory limit of each of an evaluator's processes on a target
--- that bounds their resident memory (target.mem_limit: pallas) when no
--- opts.mem_mb is given: the memory available now (MemAvailable) shared by
--- the evaluations that may run at once (jobs x evaluators, plus one share
--- for the engine, the pre-started processes and the rest of the machine),
--- between M.mem_floor_mb and M.mem_cap_mb.
M.mem_cap_mb = 16384
M.mem_floor_mb = 1024

--- MiB of memory available to new processes (/proc/meminfo's
--- MemAvailable), or nil where it cannot be read.
function M.available_mb()
  local s = fs.read("/proc/meminfo")
  local kb = s and tonumber(s:match("MemAvailable:%s*(%d+)"))
  return kb and kb // 1024 or nil
end

--- The default limit (MiB) for `in_flight` evaluations at once (>= 1) with
--- `avail_mb` available (default: available_mb()); nil when unknown.
---@param in_flight integer
---@param avail_mb? integer
---@return integer|nil
function M.default_mem_mb(in_flight, avail_mb)
  avail_mb = avail_mb or M.available_mb()
  if not avail_mb then return nil end
  local share = avail_mb // (math.max(1, math.tointeger(in_flight) or 1) + 1)
  return math.max(M.mem_floor_mb, math.min(M.mem_cap_mb, share))
end

-- ------------------------------------------------------------- evaluator

local Evaluator = {}
Evaluator.__index = Evaluator

-- The task in directory `dir` (a bad one raises at M.new's caller).
local function loaded_task(dir)
  local t, err = targets.load_task(dir)
  if not t then error("eval.new: " .. err.message, 3) end
  return t
end

--- Create an evaluator for `task` (a table from mk.eval.targets.load_task, or a
--- task directory).
---@param task table|string
---@param opts table|nil see docs/api/eval.md (tests_dir, workdir, jobs, timeout, seed, threads, bench, ...)
function M.new(task, opts)
  opts = opts or {}
  if type(task) == "string" then task = loaded_task(task) end
  if type(task) ~= "table" or not task.target then error("eval.new: task must be a loaded task", 2) end
  local self = setmetatable({}, Evaluator)
  self.task = task
  self.target = targets.get(task.target)
  self.opts = opts
  if opts.workdir then
    self.root = opts.workdir
    fs.mkdirs(self.root)
  else -- a marked directory: removed on any exit, swept after a SIGKILL
    workdir.sweep_once()
    self.root, self.root_lock = assert(workdir.new("mkeval-" .. task.name))
  end
  -- opts.suite_cache: the frozen suite lives in the shared cache (its path
  -- is known once freeze() has found or made it)
  self.use_suites = opts.suite_cache and not opts.tests_dir and self.target.suite_cache
  self.tests_dir = opts.tests_dir or (not self.use_suites and (self.root .. "/tests")) or nil
  -- output blobs (hundreds of MB at real sizes, written once and read back
  -- once) go to a RAM file system when there is one: on a disk-backed /tmp
  -- the page-cache writeback made writing them most of an evaluation's time
  if fs.isdir(workdir.RAM) then self.scratch, self.scratch_lock = workdir.new("mkeval-" .. task.name, workdir.RAM) end
  if not self.scratch then
    self.scratch = self.root .. "/scratch"
    fs.mkdirs(self.scratch)
  end
  self.jobs = task_lib.semaphore(opts.jobs or 2)
  -- the memory limit of each of its processes (MiB): opts.mem_mb, else on a
  -- target that bounds resident memory a share of the machine's (above)
  self.mem_mb = opts.mem_mb or (self.target.mem_limit and M.default_mem_mb((opts.jobs or 2) * (opts.evaluators or 1)))
  -- the CPU seconds (s) and largest resident memory (peak_rss_mb) of the
  -- evaluator's own processes: the suite's freeze and the baselines
  self.procs = { s = 0 }
  self.device = device_lock(self.target.device_key or task.target)
  self.cpu_shared = task.target == "c" -- on the CPU, compiles and tests disturb timings
  self.seed = opts.seed or 0
  self.builds = 0
  self.cache = {}
  self.rechecked = {} -- key_of(files) -> true: evaluated by a recheck worker
  -- opts.pool, an mk.eval.pool: every method below runs on its "eval"
  -- workers; its "recheck" workers (spec.recheck, a host with the device)
  -- re-check what came back unchecked (Evaluator:evaluate)
  local pool = opts.pool
  if pool and pool:serves("eval") then self.pool = pool end
  if pool and pool:serves("recheck") then self.recheck_pool = pool end
  return self
end

-- Run fn(...) with `acct.queue_s` grown by the wait for the slot `take`
-- (a function that takes a slot and runs what it is given).
local function queued(acct, take, fn, ...)
  local asked = task_lib.now()
  return take(function(...)
    if acct then acct.queue_s = acct.queue_s + (task_lib.now() - asked) end
    return fn(...)
  end, ...)
end

-- This evaluator's options as a worker's evaluator gets them; for a
-- re-check the worker's device decides the interpret mode (TPU interpret
-- mode only where there is no TPU).
function Evaluator:_worker_opts(recheck)
  local eo = {}
  for k, v in pairs(self.opts) do
    if k ~= "pool" and k ~= "tests_dir" and k ~= "workdir" and k ~= "keep" then eo[k] = v end
  end
  eo.test_sizes = self.task.test_sizes
  if recheck then eo.interpret = nil end
  return eo
end

-- Through a worker pool (mk.eval.pool): the same method on a worker's own
-- evaluator for this task, with this evaluator's options.
function Evaluator:_remote(op, files, opts)
  return self.pool:request(self.task, op, files, opts, self:_worker_opts())
end

function Evaluator:_shared(fn, ...)
  if self.cpu_shared then return with_shared(self.device, fn, ...) end
  return fn(...)
end

function Evaluator:_exclusive(fn, ...) return with_exclusive(self.device, fn, ...) end

-- The same, counting the wait in acct.queue_s.
function Evaluator:_exclusive_q(acct, fn, ...)
  return queued(acct, function(f, ...) return self:_exclusive(f, ...) end, fn, ...)
end

-- self[field] when it is known, else asked of the worker once (op on the
-- pool) and kept.
function Evaluator:_once(field, op)
  if self[field] == nil then self[field] = self:_remote(op) end
  return self[field]
end

--- Freeze the tests (idempotent; verifies the manifest when it exists).
function Evaluator:freeze()
  if self.frozen or self.pool then return self:_once("frozen", "freeze") end
  local fopts = { threads = self.opts.threads, bench_sizes = self.opts.bench_sizes, llc_bytes = self.opts.llc_bytes,
    mem_mb = self.mem_mb, cpu = self.procs }
  if self.use_suites then
    -- found or frozen in the shared cache; the target's freeze below then
    -- verifies it (manifest and seal) like any existing suite
    self.suite_key = suites.key(self.task, self.target, fopts)
    local path, made = self:_exclusive(suites.ensure, self.suite_key, function(dir)
      return self.target.freeze(self.task, dir, fopts)
    end)
    local err = not path and made
    if not path then util.raise({ kind = "freeze", message = err }, "freeze: ") end
    self.tests_dir = path
    self.fresh_suite = made == true
  end
  local r = self:_exclusive(self.target.freeze, self.task, self.tests_dir, fopts)
  if self.suite_key and self.fresh_suite then r.fresh = true end
  if r.status ~= "ok" then util.raise({ kind = "freeze", message = r.message }, "freeze: ") end
  self.frozen = r
  -- the target may start what the candidates' steps will need (pallas: its harness processes)
  if self.target.prestart then self.target.prestart(self.task, self.tests_dir) end
  return r
end

function Evaluator:_bench_opts(extra)
  local b = self.opts.bench or {}
  local o = { tests_dir = self.tests_dir, threads = self.opts.threads, min_time = b.min_time, max_time = b.max_time,
    warmup = b.warmup,
    min_reps = b.min_reps, max_reps = b.max_reps, timeout = self.opts.timeout and 2 * self.opts.timeout or nil,
    mem_mb = self.mem_mb, scratch = self.scratch, contention = b.contention }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- The key of a baseline in the suite cache (nil without it); `scale`
-- names another suite of the task (a larger scale), absent for its own.
function Evaluator:_baseline_key(bopts, scale)
  if not (self.opts.baseline_cache and self.suite_key and self.target.machine_key) then return nil end
  return suites.baseline_key(self.suite_key, self.target.machine_key(self.opts.threads), {
    min_time = bopts.min_time, max_time = bopts.max_time, warmup = bopts.warmup, min_reps = bopts.min_reps,
    max_reps = bopts.max_reps, rule = 2, scale = scale }) -- rule 2: the defaults and stopping rule of 2026-12-03
end

-- The reference timed with bopts, from the suite cache when it holds it.
function Evaluator:_measure_baseline(bopts, scale)
  local bkey = self:_baseline_key(bopts, scale)
  local hit = bkey and suites.get_baseline(bkey)
  if hit then
    hit.cached = true
    return hit
  end
  bopts.cpu = self.procs
  local r = self:_exclusive(self.target.baseline, self.task, bopts)
  if r.status ~= "ok" then util.raise({ kind = "baseline", message = r.message }, "baseline: ") end
  r = self:_retake(r, function() return self:_exclusive(self.target.baseline, self.task, bopts) end)
  if bkey and not r.contended then suites.put_baseline(bkey, r) end -- a contended one is not kept for later runs
  return r
end

--- The reference's benchmark (memoised): {latency_s, spread, ...}.
--- With opts.baseline_cache (and the suite cache), a baseline measured
--- before on this machine with the same settings is reused (r.cached).
--- `tests_dir`: another suite of the task (a target that re-tested a
--- candidate at a larger scale: pallas's escalation); the reference is
--- timed on it once per evaluator and kept, like the test scale's.
function Evaluator:baseline(tests_dir)
  if tests_dir and tests_dir ~= self.tests_dir then return self:_baseline_at(tests_dir) end
  if self.base or self.pool then return self:_once("base", "baseline") end
  self:freeze()
  local r = self:_measure_baseline(self:_bench_opts { workdir = self.root .. "/baseline" })
  self.base = r
  if not r.cached then self:_restock(self.opts.probes or 3) end -- the first candidate's probes
  return r
end

function Evaluator:_baseline_at(dir)
  self.base_at = self.base_at or {}
  local function measure()
    if not self.base_at[dir] then
      local name = dir:match("([^/]+)$")
      self.base_at[dir] = self:_measure_baseline(self:_bench_opts { tests_dir = dir,
        workdir = self.root .. "/baseline-" .. name }, name:match("%.scale%-(.+)$") or name)
    end
    return self.base_at[dir]
  end
  if not coroutine.isyieldable() then return measure() end
  self.base_lock = self.base_lock or {}
  self.base_lock[dir] = self.base_lock[dir] or task_lib.semaphore(1) -- two candidates at one scale: timed once
  return self.base_lock[dir]:with(measure)
end

local function files_of(self, files)
  if type(files) == "string" then return { [self.task.candidate_file] = files } end
  if type(files) ~= "table" then error("eval: files must be a table {name = source} or a source string", 3) end
  return files
end

local function key_of(files, defines)
  local parts = { util.files_key(files) }
  local dn = {}
  for k in pairs(defines or {}) do dn[#dn + 1] = k end
  table.sort(dn)
  for _, k in ipairs(dn) do parts[#parts + 1] = "-D" .. k .. "=" .. tostring(defines[k]) end
  return table.concat(parts, "\1")
end

function Evaluator:_compile(files, defines, acct)
  self.builds = self.builds + 1
  local dir = string.format("%s/builds/%04d", self.root, self.builds)
  local b = queued(acct, function(f) return self.jobs:with(function() return self:_shared(f) end) end, function()
    return self.target.compile(self.task, files, dir, { defines = defines, timeout = self.opts.compile_timeout,
      cpu = acct and acct.cpu, plain_ok = self.opts.plain_ok, mem_mb = self.mem_mb })
  end)
  -- the compile step's wall time (Pallas reports its XLA compile apart, as compile_s)
  if acct then
    acct.compile_s = acct.compile_s + (b.wall_s or b.compile_s or 0)
    acct.builds[#acct.builds + 1] = b -- ended (target.done) when the evaluation finishes
  end
  return b
end

function Evaluator:_test(build, group, acct)
  local r = queued(acct, function(f, ...) return self:_shared(f, ...) end, self.target.test, self.task, build,
    self.tests_dir, { group = group, timeout = self.opts.timeout, threads = self.opts.threads, mem_mb = self.mem_mb,
      scratch = self.scratch, cpu = acct and acct.cpu, confirm = self.opts.confirm })
  if acct then
    acct.check_s = acct.check_s + (r.check_s or 0)
    acct.test_s = acct.test_s + math.max(0, (r.wall_s or 0) - (r.check_s or 0))
  end
  return r
end

-- A benchmark's share of an evaluation's time (its checks apart).
local function add_bench(acct, r)
  acct.check_s = acct.check_s + (r.check_s or 0)
  acct.bench_s = acct.bench_s + math.max(0, (r.wall_s or 0) - (r.check_s or 0))
end

-- What a benchmark's retake replaces: its timing, never its verdict
-- (outputs checked, probes, counters).
local TIMING = { "latency_s", "spread", "reps", "sets", "times", "min_s", "max_s", "p10_s", "p90_s",
  "median_undisturbed_s", "undisturbed", "contention", "contended" }

--- A benchmark the target flagged as timed under contention (br.contended:
--- another process or the hypervisor held the CPU) is timed again by
--- `again()`, up to opts.bench.retakes times (default 1): the first clean
--- timing replaces its own, else the last one stays, still marked, so a
--- contended figure is never kept silently. br.retakes counts them;
--- `spent(r)` is handed each retake's result (its time). Once 3 retakes
--- in a row were flagged too, the contention is the machine's state, not
--- a moment: benchmarks are marked without a retake (which would only
--- double their cost) until one comes out clean.
function Evaluator:_retake(br, again, spent)
  local n = (self.opts.bench or {}).retakes or 1
  if (self.retakes_failed or 0) >= 3 then n = 0 end
  local k = 0
  while br.status == "ok" and br.contended and k < n do
    k = k + 1
    local r2 = again()
    if spent then spent(r2) end
    if r2.status ~= "ok" then break end
    for _, f in ipairs(TIMING) do br[f] = r2[f] end
  end
  if k > 0 then br.retakes = k end
  if br.status == "ok" and not br.contended then
    self.retakes_failed = 0
  elseif k > 0 then
    self.retakes_failed = (self.retakes_failed or 0) + 1
  end
  return br
end

-- Autotune configurations: the full grid when it fits the budget, else a
-- seeded sample of it (always including the file's own defaults).
local function configs_of(tunables, budget, seed)
  local grid = { {} }
  for _, t in ipairs(tunables) do
    local next_grid = {}
    for _, cfg in ipairs(grid) do
      for _, v in ipairs(t.values) do
        local c = {}
        for k, x in pairs(cfg) do c[k] = x end
        c[t.name] = v
        next_grid[#next_grid + 1] = c
        if #next_grid > 100000 then break end
      end
    end
    grid = next_grid
  end
  if #grid <= budget then return grid, #grid end
  -- seeded Fisher-Yates prefix with a small LCG (independent of math.random state)
  local state = (seed * 2654435761 + 12345) % 4294967296
  local function rnd(n)
    state = (state * 1103515245 + 12345) % 2147483648
    return state % n + 1
  end
  for i = 1, budget do
    local j = i - 1 + rnd(#grid - i + 1)
    grid[i], grid[j] = grid[j], grid[i]
  end
  local out = {}
  for i = 1, budget do out[i] = grid[i] end
  return out, #grid
end
M._configs_of = configs_of

local function fmt_params(p)
  local names = {}
  for k in pairs(p) do names[#names + 1] = k end
  table.sort(names)
  local parts = {}
  for _, k in ipairs(names) do parts[#parts + 1] = k .. "=" .. tostring(p[k]) end
  return #parts > 0 and table.concat(parts, " ") or "(defaults)"
end

-- A target's "error" is the machine failing, not the candidate: it reaches
-- the caller as status "infra" (mk.eval.infra), and is never cached.
local function verdict(status) return status == "error" and "infra" or status end

local function fail(status, message, extra)
  local r = extra or {}
  r.status, r.correct, r.message = verdict(status), false, message or ""
  return r
end

-- One local evaluation of candidate files (E below): the evaluator, the
-- files and options, its cache key, and where its time went (docs/api/eval.md,
-- "timing"): acct holds compile/test/bench/check/queue seconds and cpu.s,
-- the CPU seconds of the processes it ran (targets add what each of their
-- processes used: compiler, runs, checks).
local Evaluation = {}
Evaluation.__index = Evaluation

-- Time spent and device time so far, the result cached unless the machine failed.
function Evaluation:finish(r)
  local ev, acct = self.ev, self.acct
  -- its builds' processes end (pallas: a candidate's harness session)
  if ev.target.done then for _, b in ipairs(acct.builds) do ev.target.done(b) end end
  if self.restock then ev:_restock(self.restock) end -- probes to make ahead (profile included)
  r.device_s = self.device_s
  r.cpu_s = acct.cpu.s
  r.peak_rss_mb = acct.cpu.peak_rss_mb -- the largest of its processes (targets that report it: pallas)
  r.wall_s = task_lib.now() - self.t0
  local tm = { compile_s = acct.compile_s, test_s = acct.test_s, bench_s = acct.bench_s, check_s = acct.check_s,
    queue_s = acct.queue_s, setup_s = self.setup_s + (acct.setup_s or 0), wall_s = r.wall_s,
    bench_parts = acct.bench_parts }
  tm.engine_s = math.max(0, r.wall_s - tm.compile_s - tm.test_s - tm.bench_s - tm.check_s - tm.queue_s - tm.setup_s)
  r.timing = tm
  if r.status ~= "infra" then ev.cache[self.key] = r end -- the next try may find the machine mended
  return r
end

-- Compile and test one configuration: the test result with its build.
function Evaluation:try(defines)
  local b = self.ev:_compile(self.files, defines, self.acct)
  if b.status ~= "ok" then return b end
  local tr = self.ev:_test(b, "search", self.acct)
  self.device_s = self.device_s + (tr.wall_s or 0)
  tr.build = b
  return tr
end

-- Time one built configuration of the autotune (short benchmark settings).
function Evaluation:time_config(build)
  local ev = self.ev
  local tbo = ev:_bench_opts(ev.opts.tune_bench or { min_time = 0.2, min_reps = 3, max_reps = 50, warmup = 1 })
  tbo.cpu = self.acct.cpu
  local br = ev:_exclusive_q(self.acct, ev.target.bench, ev.task, build, tbo)
  self.device_s = self.device_s + (br.wall_s or 0)
  add_bench(self.acct, br)
  return br
end

-- Autotune: compile/test every configuration (jobs at a time), then time
-- them one by one. Returns the tune record and the fastest build (nil when
-- none was correct), or nil, message when the machine failed.
function Evaluation:autotune(tunables)
  local budget = self.opts.tune_budget or self.ev.opts.tune_budget or 8
  local configs, space = configs_of(tunables, budget, self.ev.seed)
  local handles = {}
  for i, cfg in ipairs(configs) do handles[i] = task_lib.spawn(self.try, self, cfg) end
  local tried, best, best_lat, best_params = {}, nil, nil, nil
  for i, h in ipairs(handles) do
    local ok, tr = pcall(task_lib.await, h)
    if not ok then tr = { status = "error", message = tostring(tr) } end
    local entry = { params = configs[i], status = tr.status, message = tr.message ~= "" and tr.message or nil }
    if tr.status == "ok" then
      local br = self:time_config(tr.build)
      entry.status, entry.latency_s = br.status, br.latency_s
      if br.status == "ok" and (not best_lat or br.latency_s < best_lat) then
        best, best_lat, best_params = tr.build, br.latency_s, configs[i]
      end
    end
    tried[#tried + 1] = entry
    if verdict(entry.status) == "infra" then return nil, entry.message end
  end
  return { params = best_params or {}, tried = tried, space = space, budget = budget }, best
end

-- The final benchmark, which also times fresh inputs (probes) against
-- caching cheats; the reference's outputs for them were made ahead when
-- possible.
function Evaluation:final_bench(build)
  local ev, acct = self.ev, self.acct
  local nprobes = ev.opts.probes or 3
  local stock = ev:_take_stock(acct)
  if stock then self.device_s = self.device_s + (stock.wall_s or 0) end
  local br = ev:_exclusive_q(acct, ev.target.bench, ev.task, build,
    ev:_bench_opts { counters = self.opts.profile, probes = nprobes, cpu = acct.cpu, probe_stock = stock })
  self.restock = nprobes
  self.device_s = self.device_s + (br.wall_s or 0)
  add_bench(acct, br)
  acct.bench_parts = br.runner
  return ev:_retake(br, function()
    return ev:_exclusive_q(acct, ev.target.bench, ev.task, build, ev:_bench_opts { cpu = acct.cpu })
  end, function(r2)
    self.device_s = self.device_s + (r2.wall_s or 0)
    add_bench(acct, r2)
  end)
end

--- Each configuration's figures of a multi-configuration task ({latency_s,
--- ...} lists of the candidate's and the baseline's timings, in order):
--- {configuration, case, latency_s, baseline_latency_s, speedup}.
function M.timed_configurations(cand, base)
  local out = {}
  for i, c in ipairs(cand) do
    local b = type(base) == "table" and base[i] or {}
    local l, bl = tonumber(c.latency_s), tonumber(b.latency_s)
    out[i] = { configuration = c.configuration, case = c.case, latency_s = l, baseline_latency_s = bl,
      speedup = l and bl and l > 0 and bl / l or nil }
  end
  return out
end

-- The verdict of a correct, benchmarked candidate against the baseline.
function Evaluation:correct_result(br, tune, build)
  local ev = self.ev
  local tb0 = task_lib.now()
  -- a build checked and timed at a larger scale (pallas) is compared with the reference timed there
  local base = ev:baseline(build and build.scaled_tests)
  self.acct.setup_s = task_lib.now() - tb0 -- measuring the baseline, the first time
  local r = {
    status = "ok", correct = true, latency_s = br.latency_s, spread = br.spread, reps = br.reps,
    baseline_latency_s = base.latency_s, speedup = base.latency_s / br.latency_s, tune = tune,
    timing_kind = br.timing_kind, -- "interpret": an interpreter's speed, not a kernel timing
    probes_ahead = br.probes_ahead, -- the probes' reference outputs were made before the benchmark
    -- timed while something else held the CPU, after retakes: why (mk.eval._retake)
    contended = br.contended, contention = br.contention, retakes = br.retakes,
    -- a multi-configuration task (pallas): each configuration's own figure, the kernel's and the baseline's
    timed_configurations = br.configurations and M.timed_configurations(br.configurations, base.configurations),
  }
  local fmt_s = ev.target.fmt_s or util.fmt_s
  local tuned = tune and (", tuned " .. fmt_params(tune.params)) or ""
  if r.timing_kind == "interpret" then
    -- an interpreter's speed against a native baseline is no speedup: none is shown (r.speedup
    -- stays for the record; mk.study.metrics counts such a row 1.0)
    r.message = string.format("correct; %s per call in interpret mode%s [interpret timings: not kernel timings, " ..
      "no speedup]", fmt_s(r.latency_s), tuned)
  else
    r.message = string.format("correct; %s per call vs baseline %s (%.2fx)%s", fmt_s(r.latency_s),
      fmt_s(r.baseline_latency_s), r.speedup, tuned)
  end
  if build and build.scale_note then -- a target that re-tested at a larger scale says which (pallas)
    r.checked_at = build.checked_at
    r.message = r.message .. "; " .. build.scale_note
    if build.scaled_tests then -- timed on that scale's case, and the baseline with it
      r.timed_at, r.baseline_timed_at = br.timed_at or build.checked_at, base.timed_at
      r.message = r.message .. (r.timed_at == r.baseline_timed_at and ("; both timed at " .. tostring(r.timed_at))
        or string.format("; timed at %s, the baseline at %s: the two times are not comparable", tostring(r.timed_at),
          tostring(base.timed_at or "an unknown scale")))
    end
  end
  if r.contended then r.message = r.message .. "; timed under contention (" .. r.contended .. ")" end
  if r.timing_kind ~= "interpret" and r.speedup > 20 then
    r.suspicious = true
    r.message = r.message .. "; the speedup is unusually large: the held-out check will re-verify it"
  end
  return r
end

-- The profile of the chosen build into r.profile; nil, message when the
-- machine failed.
function Evaluation:profile(build, br, r)
  local ev = self.ev
  local pr = ev:_exclusive_q(self.acct, ev.target.profile, ev.task, build,
    { tests_dir = ev.tests_dir, latency_s = br.latency_s, threads = ev.opts.threads, bench = br,
      scratch = ev.scratch, cpu = self.acct.cpu, mem_mb = ev.mem_mb })
  self.device_s = self.device_s + (pr.wall_s or 0)
  if verdict(pr.status) == "infra" then return nil, "profile: " .. tostring(pr.message) end
  self.acct.bench_s = self.acct.bench_s + (pr.wall_s or 0)
  r.profile = pr.status == "ok" and pr or { text = "profile failed: " .. pr.message, status = pr.status }
  return r
end

-- Compile and test, autotune when asked, benchmark, compare with the
-- baseline, profile when asked.
function Evaluation:run(tunables, do_tune)
  local first = self:try(nil)
  if first.status ~= "ok" then
    return self:finish(fail(first.status, first.message, { log = first.log, reason = first.reason,
      configurations = first.configurations }))
  end
  local build, tune = first.build, nil
  if do_tune then
    local best
    tune, best = self:autotune(tunables)
    if not tune then return self:finish(fail("infra", best)) end
    build = best or build
  end
  local br = self:final_bench(build)
  if br.status ~= "ok" then
    return self:finish(fail(br.status, br.message, { tune = tune, probes_ahead = br.probes_ahead }))
  end
  local r = self:correct_result(br, tune, build)
  r.configurations = first.configurations -- a task of several input configurations: each passed
  -- its error against the reference's own (pallas: where the reference was also evaluated in float32)
  r.error_ratio, r.warning = first.error_ratio, first.warning
  if r.warning then r.message = r.message .. "; warning: " .. r.warning end
  if r.configurations then r.message = string.format("%s; all %d input configurations pass", r.message,
    #r.configurations) end
  if self.opts.profile then
    local pr, why = self:profile(build, br, r)
    if not pr then return self:finish(fail("infra", why)) end
  end
  self.ev.last_build = self.ev.last_build or {}
  self.ev.last_build[key_of(self.files)] = build
  return self:finish(r)
end

--- Evaluate candidate files. opts: tune (default true when the file declares
--- tunables), profile (default false), tune_budget.
---@param files table|string {["kernel.c"] = source} or the source text
---@param opts table|nil
function Evaluator:evaluate(files, opts)
  opts = opts or {}
  files = files_of(self, files)
  local r = self:_evaluate(files, opts)
  if r.status == "unchecked" and self.recheck_pool then return self:_recheck(files, opts, r) end
  return r
end

-- A kernel this machine (or an "eval" worker) could not check at its sizes
-- (status "unchecked": made for sizes its CPU cannot reach) evaluated again
-- on a "recheck" worker, whose device runs it for real. The worker's
-- verdict replaces the first one, which its message keeps; when no such
-- worker can take it, the first verdict stands, saying why.
function Evaluator:_recheck(files, opts, first)
  local key = "\3recheck" .. key_of(files) .. tostring(opts.tune) .. tostring(opts.profile)
  if self.cache[key] then return self.cache[key] end
  local ok, r = pcall(self.recheck_pool.request, self.recheck_pool, self.task, "evaluate", files,
    { tune = opts.tune, profile = opts.profile, tune_budget = opts.tune_budget }, self:_worker_opts(true), "recheck")
  if not ok then
    infra.rethrow(r)
    local why = type(r) == "table" and r.message or tostring(r)
    local kept = util.copy(first) -- first is the cached local verdict: left as it is
    kept.message = first.message .. "; no re-check on a device worker: " .. tostring(why)
    return kept
  end
  r.recheck_of = first.message
  self.rechecked[key_of(files)] = true -- its held-out check goes there too
  r.message = string.format("%s [re-checked on worker %s: here %s]", r.message or "", tostring(r.worker), first.message)
  if r.status ~= "infra" then self.cache[key] = r end
  return r
end

-- evaluate without the re-check.
function Evaluator:_evaluate(files, opts)
  if self.pool then
    local key = key_of(files) .. "\2" .. tostring(opts.tune) .. tostring(opts.profile) .. tostring(opts.tune_budget)
    self.cache[key] = self.cache[key] or self:_remote("evaluate", files,
      { tune = opts.tune, profile = opts.profile, tune_budget = opts.tune_budget })
    return self.cache[key]
  end
  local t0 = task_lib.now()
  self:freeze()
  local src = files[self.task.candidate_file]
  local tunables = (type(src) == "string") and self.target.tunables(src) or {}
  local do_tune = opts.tune ~= false and #tunables > 0
  local key = key_of(files) .. (do_tune and "\2tune" or "") .. (opts.profile and "\2prof" or "")
  if self.cache[key] then return self.cache[key] end
  local E = setmetatable({ ev = self, files = files, opts = opts, key = key, t0 = t0, device_s = 0,
    acct = { compile_s = 0, test_s = 0, bench_s = 0, check_s = 0, queue_s = 0, cpu = { s = 0 }, builds = {} },
    setup_s = task_lib.now() - t0 }, Evaluation) -- setup: freezing or verifying the suite, the first time
  return E:run(tunables, do_tune)
end

--- Benchmark files that `evaluate` measured before once more, on the same
--- build (the autotuned configuration included), taken again when the
--- target flags contention: {status, latency_s, spread, wall_s, contended,
--- retakes}; {status = "error", kind = "not_evaluated"} when this
--- evaluator never measured them. Lets identical candidates share a record.
function Evaluator:remeasure(files)
  files = files_of(self, files)
  local build = self.last_build and self.last_build[key_of(files)]
  if not build then
    return { status = "error", kind = "not_evaluated", message = "remeasure: these files were not evaluated" }
  end
  local bo = self:_bench_opts()
  local br = self:_exclusive(self.target.bench, self.task, build, bo)
  return self:_retake(br, function() return self:_exclusive(self.target.bench, self.task, build, bo) end,
    function(r2) br.wall_s = (br.wall_s or 0) + (r2.wall_s or 0) end)
end

--- Re-check files on the held-out seeds (never used during search), with the
--- configuration autotune chose if `evaluate` ran first.
function Evaluator:heldout(files)
  files = files_of(self, files)
  if self.pool then return self:_remote("heldout", files) end
  if self.rechecked[key_of(files)] then
    return self.recheck_pool:request(self.task, "heldout", files, nil, self:_worker_opts(true), "recheck")
  end
  self:freeze()
  local build = self.last_build and self.last_build[key_of(files)]
  local own = not build
  -- what its processes used (peak_rss_mb), as an evaluation's are counted
  local acct = { compile_s = 0, test_s = 0, check_s = 0, queue_s = 0, cpu = { s = 0 }, builds = {} }
  if own then
    build = self:_compile(files, nil, acct)
    if build.status ~= "ok" then
      if self.target.done then self.target.done(build) end
      return { correct = false, status = verdict(build.status), message = build.message,
        peak_rss_mb = acct.cpu.peak_rss_mb }
    end
  end
  local r = self:_test(build, "heldout", acct)
  if own and self.target.done then self.target.done(build) end
  return { correct = r.status == "ok", status = verdict(r.status), message = r.message, cases = r.cases,
    confirmed_at = r.confirmed_at, confirm_note = r.confirm_note, checked_at = r.checked_at,
    peak_rss_mb = acct.cpu.peak_rss_mb, configurations = r.configurations, error_ratio = r.error_ratio,
    warning = r.warning }
end

-- Probes made ahead (targets with probe_prepare, e.g. C): the reference's
-- run on fresh probe inputs starts right after an evaluation, so that it
-- overlaps the next model call (and the next candidate's compile and
-- tests) instead of the next candidate's check. One stock at a time; each
-- is used by one benchmark.
function Evaluator:_restock(n)
  if self.stock_h or self.closed or not self.target.probe_prepare or n <= 0 or self.opts.probe_stock == false then
    return
  end
  self.stock_h = task_lib.spawn(function()
    -- on the CPU a shared slot, as a test run takes: it must not overlap a
    -- timed benchmark, but compiles and tests may run beside it; on an
    -- accelerator it holds the device
    local take = self.cpu_shared and self._shared or self._exclusive
    return take(self, function()
      -- closed while this task was waking up for the device: a cancel
      -- reaches it only at its next wait, so look before making files
      if self.closed then return nil end
      return self.target.probe_prepare(self.task, self.tests_dir, n, { dir = self.scratch, threads = self.opts.threads })
    end)
  end)
end

-- The stock, awaited if it is still being made (that wait is the
-- candidate's check time, as the reference's run would have been).
function Evaluator:_take_stock(acct)
  local h = self.stock_h
  if not h then return nil end
  self.stock_h = nil
  local w0 = task_lib.now()
  local ok, stock = pcall(task_lib.await, h)
  acct.check_s = acct.check_s + (task_lib.now() - w0)
  return ok and stock or nil
end

--- Remove the evaluator's private directory (tests included unless they
--- were given as opts.tests_dir outside it).
function Evaluator:close()
  self.closed = true
  if self.stock_h then self.stock_h:cancel(); self.stock_h = nil end
  if self.target.release then self.target.release() end -- e.g. pallas's pre-started harness processes
  -- frozen files are read-only, but their directories are not: rm_rf works
  if self.root and not self.opts.workdir and not self.opts.keep then fs.rm_rf(self.root) end
  if self.scratch_lock then
    workdir.release(self.scratch, self.scratch_lock)
  elseif self.scratch then
    fs.rm_rf(self.scratch)
  end
  self.scratch, self.scratch_lock = nil, nil
  if self.root_lock then self.root_lock:unlock(); self.root_lock = nil end
end

return M

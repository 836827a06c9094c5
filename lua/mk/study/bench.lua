--- mk.study.bench: run one strategy over every task of a suite K times, the
--- fair and resumable way, and compute the suite's metrics (mk.study.metrics).
---
--- Layout of a bench directory:
---   DIR/results.json          per-task rows + aggregate (rewritten after each run)
---   DIR/<task>/r<k>/          the run directory of repeat k of <task>
--- Resuming (same DIR again): a task/repeat whose run directory has a
--- summary.json is read, not rerun; one with a run directory but no summary
--- is resumed through the runner; the rest start fresh.
local agents = require("agents")
local cjson = require("cjson")
local fs = require("mk.fs")
local home = require("mk.home")
local infra = require("mk.eval.infra")
local metrics = require("mk.study.metrics")
local runner_lib = require("mk.search.runner")
local task_lib = require("mk.services.task")
local utf8_text = require("mk.services.text")
local util = require("mk.services.util")

local bench = {}

local read_json = util.read_json

local TASK_MARKERS = { "task.lua", "baseline.py", "reference.py" }

--- Whether dir looks like a task directory (ours, JAXBench or MaxKernel).
function bench.is_task_dir(dir)
  for _, m in ipairs(TASK_MARKERS) do
    if fs.exists(dir .. "/" .. m) then return true end
  end
  return false
end

--- The tasks of a suite: every sub-directory that is a task directory,
--- sorted by name; a suite that is itself a task directory is a suite of
--- one. Returns {{name=, dir=}...} | nil, {kind="bad_suite", message}.
---@param suite string
function bench.tasks(suite)
  if type(suite) ~= "string" then error("bench.tasks: suite must be a string", 2) end
  suite = suite:gsub("/+$", "")
  if not fs.isdir(suite) then return nil, { kind = "bad_suite", message = suite .. " is not a directory" } end
  if bench.is_task_dir(suite) then
    return { { name = suite:match("([^/]+)$") or suite, dir = suite } }
  end
  local out = {}
  for _, name in ipairs(fs.list(suite) or {}) do
    local d = suite .. "/" .. name
    if not name:match("^[._]") and fs.isdir(d) and bench.is_task_dir(d) then
      out[#out + 1] = { name = name, dir = d }
    end
  end
  if #out == 0 then
    return nil, { kind = "bad_suite", message = suite .. " holds no task directories (with task.lua, baseline.py or reference.py)" }
  end
  return out
end

local NOT_COMPILED = { compile_error = true, rejected = true }

-- Whether a finished run produced a kernel that compiled: the summary's
-- compiled_nodes when the runner writes it, else node events in
-- events.jsonl (root/baseline nodes do not count).
local function run_compiled(summary, run_dir)
  -- a summary made in this process has best = cjson.null (truthy) when there is none
  if type(summary.best) == "table" or (tonumber(summary.correct_nodes) or 0) > 0 then return true end
  if tonumber(summary.compiled_nodes) then return summary.compiled_nodes > 0 end
  local text = run_dir and fs.read(run_dir .. "/events.jsonl")
  if not text then return false end
  for line in text:gmatch("[^\n]+") do
    local ok, ev = pcall(cjson.decode, line)
    if ok and type(ev) == "table" and (ev.type == "node" or ev.type == "node_added") then
      local n = type(ev.node) == "table" and ev.node or ev
      if type(n.status) == "string" and not NOT_COMPILED[n.status] and n.kind ~= "root" and n.kind ~= "reference"
        and n.kind ~= "baseline" then
        return true
      end
    end
  end
  return false
end

--- The outcome of one run from its summary: {status, correct, compiled,
--- speedup, latency_s, nodes, correct_nodes, cost}.
function bench.outcome(summary, run_dir)
  local best = type(summary.best) == "table" and summary.best or nil
  local speedup = best and tonumber(best.speedup)
  return {
    status = summary.status,
    correct = speedup ~= nil and speedup > 0,
    compiled = run_compiled(summary, run_dir),
    speedup = speedup,
    latency_s = best and tonumber(best.latency_s),
    timing_kind = best and best.timing_kind, -- "interpret": not a kernel timing (mk.metrics)
    baseline_latency_s = tonumber(summary.baseline_latency_s),
    best_node = best and best.node,
    nodes = math.tointeger(summary.nodes) or summary.nodes,
    correct_nodes = math.tointeger(summary.correct_nodes) or summary.correct_nodes,
    cost = metrics.sum_costs({ summary.cost }),
    model_label = summary.model_label, -- "scripted model (...)", "simulated model (...)"
    simulation = summary.simulation, -- the simulated model's or device's line (mk.services.sim.task.note)
  }
end

--- The name a bench is shown under: opts.label, else the strategy's
--- stem ("beam"; "my/bandit.lua" -> "bandit"), never a path.
function bench.label(opts)
  if type(opts.label) == "string" and opts.label ~= "" then return opts.label end
  return (tostring(opts.strategy):gsub("/+$", ""):match("([^/]+)$") or "bench"):gsub("%.lua$", "")
end

local function default_out(opts)
  return string.format("runs/bench-%s-%s", os.date("%Y%m%d-%H%M%S"), util.slug(bench.label(opts), "bench"))
end

local function copy_opts(o)
  local r = {}
  for k, v in pairs(o or {}) do r[k] = v end
  return r
end

--- Read, resume or run the one run in `dir` (bench and sweep both decide it
--- here): its summary.json when it finished; `resume(dir)` when it started
--- (run.json is there); else `runner(run_opts)` in a fresh `dir` (leftovers
--- of a run that died before writing run.json cannot be resumed, and
--- rundir.create refuses a non-empty directory). Returns how ("read",
--- "resumed", "ran"), ok, and the summary or the error; cancelling the
--- calling task cancels the run.
---@param dir string
---@param runner function
---@param resume function|nil
---@param run_opts table
---@return string how
---@return boolean ok
---@return any summary_or_err
function bench.read_resume_or_run(dir, runner, resume, run_opts)
  local summary = read_json(dir .. "/summary.json")
  -- a run its model endpoint stopped is not finished: it is resumed
  if summary and summary.status ~= "model_unavailable" then return "read", true, summary end
  local how, ok, res
  if resume and fs.exists(dir .. "/run.json") then
    how = "resumed"
    ok, res = pcall(resume, dir)
  else
    how = "ran"
    if fs.exists(dir) then fs.rm_rf(dir) end
    ok, res = pcall(runner, run_opts)
  end
  if not ok and res == task_lib.CANCELLED then error(res, 0) end
  return how, ok, res
end

-- Repeats K and concurrency from opts, checked (raises on bad options).
local function check_opts(opts)
  if type(opts) ~= "table" then error("bench.run: opts must be a table", 3) end
  if type(opts.suite) ~= "string" then error("bench.run: opts.suite must be a directory name", 3) end
  if type(opts.strategy) ~= "string" then error("bench.run: opts.strategy must be a strategy name", 3) end
  local K = opts.repeats or opts["repeat"] or 5
  if math.type(K) ~= "integer" then K = math.tointeger(K) end
  if not K or K < 1 then error("bench.run: repeat must be an integer >= 1", 3) end
  local conc = math.tointeger(opts.concurrency or 2)
  if not conc or conc < 1 then error("bench.run: concurrency must be an integer >= 1", 3) end
  for _, k in ipairs({ "runner", "resume" }) do
    if opts[k] ~= nil and type(opts[k]) ~= "function" then
      error("bench.run: opts." .. k .. " must be a function, got " .. type(opts[k]), 3)
    end
  end
  return K, conc
end

-- The suite's tasks, only those named in opts.tasks when it is given.
local function select_tasks(opts)
  local tasks, terr = bench.tasks(opts.suite)
  if not tasks or not opts.tasks then return tasks, terr end
  local want, sel = {}, {}
  for _, n in ipairs(opts.tasks) do want[n] = true end
  for _, t in ipairs(tasks) do
    if want[t.name] then
      sel[#sel + 1] = t
      want[t.name] = nil
    end
  end
  local missing = next(want)
  if missing then return nil, { kind = "bad_suite", message = "no task named '" .. missing .. "' in " .. opts.suite } end
  return sel
end

-- The functions that start and resume one run: opts' own, else the
-- runner's with the sub-agents (the strategy is loaded first, so a typo in
-- its name fails the bench once instead of every run one by one).
local function run_functions(opts)
  if not opts.runner then
    local ok, err = pcall(runner_lib.load_strategy, opts.strategy)
    if not ok then
      return nil, nil, { kind = "bad_strategy", message = type(err) == "table" and (err.message or tostring(err)) or tostring(err) }
    end
  end
  local with_agents = runner_lib.with_agents(agents)
  return opts.runner or with_agents.run, opts.resume or with_agents.resume
end

-- The bench directory, made and locked: out, lock | nil, err.
local function open_out(opts)
  local out = (opts.out or default_out(opts)):gsub("/+$", "")
  fs.mkdirs(out)
  local lock = fs.lock(out .. "/.bench.lock")
  if not lock then return nil, { kind = "locked", message = out .. " is used by another bench" } end
  return out, lock
end

-- One bench in progress: its tasks, the outcome of each task/repeat pair
-- and the results table written after every run.
local Bench = {}
Bench.__index = Bench

local function new_bench(opts, tasks, K, conc, out)
  local b = setmetatable({ opts = opts, tasks = tasks, K = K, out = out, prog = opts.progress, conc = conc,
    seed = opts.seed or 1, outcomes = {}, done = 0, failed = 0, total = #tasks * K }, Bench)
  for ti = 1, #tasks do b.outcomes[ti] = {} end
  b.results = {
    kind = "bench", version = 1, suite = opts.suite, suite_name = opts.suite:gsub("/+$", ""):match("([^/]+)$"),
    strategy = opts.strategy, label = bench.label(opts), ["repeat"] = K, model = opts.model, seed = b.seed,
    options = { set = opts.set, budget = opts.budget, jobs = opts.jobs, llm_config = opts.llm_config, concurrency = conc },
    started = os.date("!%Y-%m-%dT%H:%M:%SZ"), engine_version = home.version, tasks = {},
  }
  local prev = read_json(out .. "/results.json")
  if prev and prev.started then b.results.started = prev.started end
  return b
end

-- Rewrite results.json from the outcomes so far (final: the bench ended).
function Bench:write_results(final)
  local rows = {}
  for ti, t in ipairs(self.tasks) do
    local runs = {}
    for k = 1, self.K do if self.outcomes[ti][k] then runs[#runs + 1] = self.outcomes[ti][k] end end
    local row = metrics.task_row(t.name, runs)
    row.dir = t.dir
    row.runs = runs
    row.complete = #runs == self.K
    rows[ti] = row
  end
  local results = self.results
  results.tasks = rows
  results.aggregate = metrics.aggregate(rows)
  for ti = 1, #self.tasks do -- where the figures come from, as the runs said it
    for k = 1, self.K do
      local o = self.outcomes[ti][k]
      results.model_label = results.model_label or (o and o.model_label)
      results.simulation = results.simulation or (o and o.simulation)
    end
  end
  results.runs_done, results.runs_total = self.done, self.total
  results.finished = final and os.date("!%Y-%m-%dT%H:%M:%SZ") or nil
  local ok, err = fs.write(self.out .. "/results.json", cjson.encode(utf8_text.clean(results)), { atomic = true })
  if not ok then error("bench: cannot write results.json: " .. tostring(err and err.message or err)) end
end

-- Status-line fields summed over the finished runs.
function Bench:status_fields()
  local f = { text = string.format("bench %s: runs %d/%d", bench.label(self.opts), self.done, self.total),
              nodes = 0, correct = 0, best = nil, tokens = 0, usd = 0, device_s = 0 }
  for ti = 1, #self.tasks do
    for k = 1, self.K do
      local o = self.outcomes[ti][k]
      if o then
        f.nodes = f.nodes + (tonumber(o.nodes) or 0)
        if o.correct then f.correct = f.correct + 1 end
        if o.speedup and o.timing_kind ~= "interpret" and (not f.best or o.speedup > f.best) then f.best = o.speedup end
        f.tokens = f.tokens + (o.cost.input_tokens or 0) + (o.cost.output_tokens or 0)
        f.usd = f.usd + (o.cost.usd or 0)
        f.device_s = f.device_s + (o.cost.device_s or 0)
      end
    end
  end
  return f
end

-- The options of repeat k of task t.
function Bench:run_opts(t, k, dir)
  local opts = self.opts
  return { strategy = opts.strategy, task = t.dir, set = copy_opts(opts.set), seed = self.seed + k - 1,
    model = opts.model, llm_config = opts.llm_config, budget = opts.budget and copy_opts(opts.budget),
    run_dir = dir, quiet = true, jobs = opts.jobs, llm_cache = opts.llm_cache, workers = opts.workers,
    mem_mb = opts.mem_mb, evaluators = self.conc } -- the runs at once share the machine's memory
end

-- The status line, an event and a line of text for a finished run.
function Bench:show(t, k, o)
  local prog = self.prog
  if not prog then return end
  prog:set(self:status_fields())
  prog:event({ type = "bench_run", task = t.name, ["repeat"] = k, how = o.how, status = o.status,
               correct = o.correct, speedup = o.speedup, error = o.error })
  prog:note(string.format("%-24s r%d %-8s %s", t.name, k, o.how,
    o.error and ("error: " .. (o.error:match("^[^\n]*"))) or (o.correct and (o.timing_kind == "interpret" and
          "correct (interpret timing)" or string.format("%.2fx", o.speedup)) or "no correct kernel")))
end

-- One task/repeat pair: read, resume or start its run, and record the
-- outcome. A signal or a failing machine stops the whole bench.
function Bench:run_one(ti, k)
  local t = self.tasks[ti]
  local rel = t.name .. "/r" .. k
  local dir = self.out .. "/" .. rel
  fs.mkdirs(self.out .. "/" .. t.name)
  local how, ok, summary = bench.read_resume_or_run(dir, self.runner, self.resume, self:run_opts(t, k, dir))
  local o
  if ok then
    o = bench.outcome(summary, dir)
  else
    infra.rethrow(summary)
    self.failed = self.failed + 1
    o = { status = "error", correct = false, compiled = false, cost = metrics.sum_costs({}),
          error = type(summary) == "table" and (summary.message or tostring(summary)) or tostring(summary) }
  end
  o["repeat"], o.run_dir, o.how = k, rel, how
  self.outcomes[ti][k] = o
  self.done = self.done + 1
  self:write_results(false)
  self:show(t, k, o)
  return o
end

--- Run a bench. opts:
---   suite (dir), strategy (name or path of a .lua file) — required
---   label (the name results are shown under; default the strategy's stem)
---   repeats (K, default 5; `opts["repeat"]` also accepted), out (dir)
---   set, seed (base seed, default 1; repeat k uses seed + k - 1), model,
---   llm_config, llm_cache (rw|ro|off), budget (per run), jobs, mem_mb: passed to every run
---   concurrency (runs at once, default 2)
---   runner = fn(run_opts) -> summary (default mk.search.runner's run with the sub-agents)
---   resume = fn(run_dir) -> summary (default mk.search.runner's resume)
---   progress = an mk.services.progress object (optional)
---   tasks = {names...} to restrict the suite
--- Returns the results table (also written to out/results.json) | nil, err.
---@param opts table
function bench.run(opts)
  local K, conc = check_opts(opts)
  local tasks, terr = select_tasks(opts)
  if not tasks then return nil, terr end
  local runner, resume, rerr = run_functions(opts)
  if not runner then return nil, rerr end
  local out, lerr = open_out(opts)
  if not out then return nil, lerr end
  local lock <close> = lerr -- luacheck: ignore 211 (held until bench.run returns or raises)
  local b = new_bench(opts, tasks, K, conc, out)
  b.runner, b.resume = runner, resume
  -- pairs in suite order, repeat by repeat, so the first tasks finish
  -- first and a resumed bench fills its gaps in order
  local pairs_ = {}
  for k = 1, K do
    for ti = 1, #tasks do pairs_[#pairs_ + 1] = { ti, k } end
  end
  if b.prog and b.prog.tick then
    b.prog:set(b:status_fields())
    b.prog:tick(1)
  end
  task_lib.map(pairs_, conc, function(p) return b:run_one(p[1], p[2]) end)
  b:write_results(true)
  local results = b.results
  results.out = out
  results.failed_runs = b.failed
  return results
end

-- Table output ---------------------------------------------------------------

local function fx(x) return x and string.format("%.2fx", x) or "-" end

local function fint(x)
  local s = string.format("%d", math.floor((x or 0) + 0.5))
  return (s:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", ""))
end

local function fsec(x)
  x = x or 0
  if x < 120 then return string.format("%.1fs", x) end
  if x < 7200 then return string.format("%.1fm", x / 60) end
  return string.format("%.2fh", x / 3600)
end

--- The results as a plain-text table (no control characters): one row
--- per task, then the aggregate with both geomeans side by side.
---@param results table as returned by bench.run / read from results.json
---@return string
function bench.format(results)
  local rows = results.tasks or {}
  local w = 4
  for _, r in ipairs(rows) do w = math.max(w, #r.task) end
  local L = {}
  if results.simulation then L[#L + 1] = results.simulation end
  if results.model_label then L[#L + 1] = "model: " .. results.model_label end
  local hdr = string.format("%-" .. w .. "s  %-8s %-7s %8s %7s  %-22s %10s %9s %8s %8s",
    "task", "compiled", "correct", "speedup", "runs ok", "speedups of repeats", "tokens", "USD", "device", "wall")
  L[#L + 1] = hdr
  L[#L + 1] = string.rep("-", #hdr)
  for _, r in ipairs(rows) do
    local sps = {}
    for _, s in ipairs(r.speedups or {}) do sps[#sps + 1] = s > 0 and string.format("%.2f", s) or "x" end
    local c = r.cost or {}
    L[#L + 1] = string.format("%-" .. w .. "s  %-8s %-7s %8s %7s  %-22s %10s %9s %8s %8s",
      r.task, r.compiled and "yes" or "no", r.correct and "yes" or "no",
      r.timing_kind == "interpret" and "interp" or fx(r.speedup),
      string.format("%d/%d", r.correct_runs or 0, r.repeats or 0), table.concat(sps, " "):sub(1, 22),
      fint((c.input_tokens or 0) + (c.output_tokens or 0)), string.format("$%.4f", c.usd or 0), fsec(c.device_s), fsec(c.wall_s))
  end
  local a = results.aggregate or metrics.aggregate(rows)
  L[#L + 1] = string.rep("-", #hdr)
  L[#L + 1] = string.format("geomean speedup %s (failed tasks = 1.0)   |   floored at 1.0: %s",
    fx(a.geomean_speedup), fx(a.geomean_speedup_floored))
  local rg = a.repeat_geomeans or {}
  if #rg > 1 then
    local lo, hi, shown = math.huge, -math.huge, {}
    for i, g in ipairs(rg) do
      lo, hi, shown[i] = math.min(lo, g), math.max(hi, g), string.format("%.2f", g)
    end
    L[#L + 1] = string.format("floored geomean of each repeat: %s (range %.2f-%.2f)", table.concat(shown, " "), lo, hi)
  end
  local fp = {}
  for _, p in ipairs(metrics.P) do
    local name = metrics.p_name(p)
    fp[#fp + 1] = string.format("fast_%s %.2f", name, a.fast_p and a.fast_p[name] or 0)
  end
  L[#L + 1] = string.format("compiled %d/%d   correct %d/%d   %s", a.compiled or 0, a.tasks or #rows,
    a.correct or 0, a.tasks or #rows, table.concat(fp, "   "))
  if (a.interpret_timed or 0) > 0 then
    L[#L + 1] = string.format("%d task(s) timed in interpret mode (an interpreter's speed, not kernel timings): " ..
      "their speedups count 1.0 in the geomeans and are left out of fast_p for p > 0", a.interpret_timed)
  end
  local c = a.cost or {}
  L[#L + 1] = string.format("cost: %s input + %s output tokens, $%.4f, LLM %s, device %s, wall %s (sum over %s runs)",
    fint(c.input_tokens), fint(c.output_tokens), c.usd or 0, fsec(c.llm_s), fsec(c.device_s), fsec(c.wall_s),
    tostring(results.runs_done or "all"))
  L[#L + 1] = string.format("median of %s repeats per task; fast_p = share of all tasks correct with speedup > p",
    tostring(math.tointeger(results["repeat"]) or results["repeat"] or "?"))
  local rd, rt = tonumber(results.runs_done), tonumber(results.runs_total)
  if rd and rt and rd < rt then
    L[#L + 1] = string.format("INCOMPLETE: %d of %d runs done; tasks without a finished run count as failed", rd, rt)
  end
  return table.concat(L, "\n") .. "\n"
end

return bench

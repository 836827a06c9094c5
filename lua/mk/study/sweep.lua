--- mk.study.sweep: scripted experiments. A sweep script is plain Lua that calls
--- `mk.run{...}` and `mk.bench{...}` (a table `mk` in the script's
--- environment, also `require("mk.study.sweep").current()`); each call returns
--- its summary and is recorded as one entry of the sweep's results table
--- (DIR/results.json). All calls run in one process, so concurrent runs
--- (`mk.map`) share device slots and the LLM cache.
---
--- Each entry gets a deterministic directory DIR/<n>-<label>; calling the
--- same script again with the same DIR reads finished runs back instead of
--- rerunning them (and resumes interrupted ones), so a sweep is resumable.
local agents = require("agents")
local cjson = require("cjson")
local fs = require("mk.fs")
local metrics = require("mk.study.metrics")
local bench = require("mk.study.bench")
local budget = require("mk.search.budget")
local compare = require("mk.study.compare")
local infra = require("mk.eval.infra")
local runner_lib = require("mk.search.runner")
local task = require("mk.services.task")
local utf8_text = require("mk.services.text")
local util = require("mk.services.util")

local sweep = {}

local read_json = util.read_json

local function slug(s) return util.slug(s, "entry", 60) end
local copy = util.copy

local function default_label(o)
  local bits = { o.strategy or "?" }
  local target = o.task or o.suite
  if target then bits[#bits + 1] = tostring(target):gsub("/+$", ""):match("([^/]+)$") end
  if type(o.set) == "table" then
    local ks = {}
    for k in pairs(o.set) do ks[#ks + 1] = k end
    table.sort(ks)
    for _, k in ipairs(ks) do bits[#bits + 1] = k .. "=" .. tostring(o.set[k]) end
  end
  if o.seed then bits[#bits + 1] = "seed=" .. tostring(o.seed) end
  return table.concat(bits, " ")
end

local current

--- The sweep API of the running sweep script (nil outside a sweep).
function sweep.current() return current end

-- A sweep in progress (S below): out, results, the entry count n, the
-- runner and resume functions, the progress object and the defaults.

-- Write results.json (final: the script ended).
local function save(S, final)
  local results = S.results
  local costs = {}
  for _, e in ipairs(results.entries) do
    costs[#costs + 1] = e.summary and e.summary.cost or (e.aggregate and e.aggregate.cost) or nil
  end
  results.totals = { entries = #results.entries, cost = metrics.sum_costs(costs) }
  results.finished = final and os.date("!%Y-%m-%dT%H:%M:%SZ") or nil
  fs.write(S.out .. "/results.json", cjson.encode(utf8_text.clean(results)), { atomic = true })
end

-- A call's options over the sweep's defaults, its budget parsed (a bad
-- budget names the script's line: level 3 is the caller of mk.run).
local function with_defaults(S, o)
  local r = copy(o)
  for k, v in pairs(S.defaults) do if r[k] == nil then r[k] = copy(v) end end
  if type(r.budget) == "string" then
    local b, err = budget.parse(r.budget)
    if not b then error("mk.run: " .. err.message, 3) end
    r.budget = b
  end
  return r
end

-- A new entry of the results, numbered in call order.
local function add_entry(S, kind, o)
  S.n = S.n + 1
  local n = S.n
  local label = o.label or default_label(o)
  local e = { index = n, kind = kind, label = label, dir = string.format("%03d-%s", n, slug(label)),
              params = { strategy = o.strategy, task = o.task, suite = o.suite, set = copy(o.set), seed = o.seed,
                         model = o.model, budget = copy(o.budget), ["repeat"] = o["repeat"] or o.repeats } }
  S.results.entries[n] = e
  return e
end

-- mk.run: one strategy on one task, recorded as an entry.
local function run_entry(S, o)
  if type(o) ~= "table" then error("mk.run: argument must be a table", 2) end
  if type(o.strategy) ~= "string" or type(o.task) ~= "string" then error("mk.run: strategy and task are required", 2) end
  o = with_defaults(S, o)
  local e = add_entry(S, "run", o)
  local dir = S.out .. "/" .. e.dir
  e.run_dir = e.dir
  local ok, res
  e.how, ok, res = bench.read_resume_or_run(dir, S.runner, S.resume, { strategy = o.strategy, task = o.task,
    set = copy(o.set) or {}, seed = o.seed, model = o.model, llm_config = o.llm_config, llm_cache = o.llm_cache,
    budget = o.budget, run_dir = dir, quiet = true, jobs = o.jobs, workers = o.workers })
  if not ok or type(res) ~= "table" then
    infra.rethrow(res) -- a signal or a failing machine stops the whole sweep
    e.error = type(res) == "table" and (res.message or tostring(res)) or tostring(res)
    save(S, false)
    if S.prog then S.prog:note(string.format("%-40s error: %s", e.label, e.error)) end
    return nil, { kind = "run_failed", message = e.error }
  end
  -- a run without a correct kernel has best = JSON null: a result whose best is nil
  for k, v in pairs(res) do if v == cjson.null then res[k] = nil end end
  res.run_dir = res.run_dir or dir
  e.summary = copy(res)
  e.summary.run_dir = nil
  save(S, false)
  if S.prog then
    local b = res.best and res.best.speedup
    S.prog:event({ type = "sweep_entry", index = e.index, label = e.label, how = e.how, speedup = b })
    S.prog:note(string.format("%-40s %-7s %s", e.label, e.how, b and string.format("best %.2fx", b) or "no correct kernel"))
  end
  return res
end

--- One value per repeat of a bench's results: the geomean over its tasks
--- of that repeat's best speedup (1.0 for a task whose run found no
--- correct kernel). Each repeat is a replicate of the whole bench (its own
--- seed), so these are the units the by-parameter statistics sample.
function sweep.repeat_speedups(res)
  local logs, counts = {}, {}
  for _, row in ipairs(res.tasks or {}) do
    for _, r in ipairs(row.runs or {}) do
      local k = math.tointeger(r["repeat"])
      if k then
        local sp = (r.correct and tonumber(r.speedup) and r.speedup > 0) and r.speedup or 1.0
        logs[k] = (logs[k] or 0) + math.log(sp)
        counts[k] = (counts[k] or 0) + 1
      end
    end
  end
  local out = {}
  for k = 1, math.tointeger(res["repeat"]) or #logs do
    if counts[k] then out[#out + 1] = math.exp(logs[k] / counts[k]) end
  end
  return out
end

-- mk.bench: a strategy over a suite, recorded as an entry.
local function bench_entry(S, o)
  if type(o) ~= "table" then error("mk.bench: argument must be a table", 2) end
  o = with_defaults(S, o)
  local e = add_entry(S, "bench", o)
  local bo = copy(o)
  bo.out = S.out .. "/" .. e.dir
  bo.repeats = o.repeats or o["repeat"] or 5
  bo.runner, bo.resume = S.runner, S.resume
  bo.label = nil
  local res, err = bench.run(bo)
  if not res then
    e.error = err.message
    save(S, false)
    return nil, err
  end
  e.bench_dir = e.dir
  e.aggregate = res.aggregate
  e.tasks = {}
  for i, r in ipairs(res.tasks) do
    e.tasks[i] = { task = r.task, correct = r.correct, compiled = r.compiled, speedup = r.speedup, cost = r.cost }
  end
  e.repeat_speedups = sweep.repeat_speedups(res)
  e.failed_runs = res.failed_runs
  e.simulation = res.simulation -- a simulated bench (docs/simulator.md)
  save(S, false)
  if S.prog then
    S.prog:note(string.format("%-40s bench: geomean %.2fx (floored %.2fx), correct %d/%d", e.label,
      res.aggregate.geomean_speedup, res.aggregate.geomean_speedup_floored, res.aggregate.correct, res.aggregate.tasks))
  end
  return res
end

--- mk.map: fn(item, i) for every item, at most `concurrency` at once
--- (default 4) as mk.services.task tasks; the results in item order. A
--- call that raises gives nil for its item (its error is raised when
--- opts.strict; a cancellation always is).
local function map(items, fn, mopts)
  if type(items) ~= "table" or type(fn) ~= "function" then error("mk.map: (items, fn[, opts]) expected", 2) end
  mopts = mopts or {}
  local conc = math.tointeger(mopts.concurrency or 4) or 4
  return task.map(items, conc, function(item, k)
    local ok, r = pcall(fn, item, k)
    if ok then return r end
    if r == task.CANCELLED or mopts.strict then error(r, 0) end
    return nil
  end)
end

--- mk.seeds: the strictly increasing seeds base, base+1, ... (n of them).
local function seeds(nseeds, base)
  local r = {}
  for s = 1, nseeds do r[s] = (base or 1) + s - 1 end
  return r
end

--- mk.grid: the cartesian product of named lists: mk.grid{width={2,3},
--- depth={2,3}} -> {{width=2,depth=2}, {width=2,depth=3}, ...} (keys in
--- name order).
local function grid(spec)
  local keys = {}
  for k in pairs(spec) do keys[#keys + 1] = k end
  table.sort(keys)
  local outg = { {} }
  for _, k in ipairs(keys) do
    local nxt = {}
    for _, partial in ipairs(outg) do
      for _, v in ipairs(spec[k]) do
        local c = copy(partial)
        c[k] = v
        nxt[#nxt + 1] = c
      end
    end
    outg = nxt
  end
  return outg
end

--- Create a sweep context. opts: out (dir, required), runner / resume
--- (default mk.search.runner's), progress (mk.services.progress object), name, script,
--- defaults (options merged into every call, e.g. model).
--- Returns the `mk` table scripts use.
---@param opts table
function sweep.new(opts)
  if type(opts) ~= "table" or type(opts.out) ~= "string" then error("sweep.new: opts.out must be a directory", 2) end
  local out = opts.out:gsub("/+$", "")
  fs.mkdirs(out)
  local with_agents = runner_lib.with_agents(agents)
  local S = { out = out, n = 0, runner = opts.runner or with_agents.run, resume = opts.resume or with_agents.resume,
    prog = opts.progress, defaults = opts.defaults or {} }
  S.results = {
    kind = "sweep", version = 1, name = opts.name, script = opts.script,
    started = os.date("!%Y-%m-%dT%H:%M:%SZ"), entries = {},
  }
  local prev = read_json(out .. "/results.json")
  if prev and prev.started then S.results.started = prev.started end
  return {
    out = out, results = S.results, metrics = metrics, task = task,
    save = function(final) return save(S, final) end,
    --- Run a strategy on one task; returns its summary (with run_dir) or
    --- nil, err when the run failed (recorded as an error entry).
    run = function(o) return run_entry(S, o) end,
    --- Bench a strategy over a suite (options as mk.study.bench.run: suite,
    --- strategy, repeat, set, seed, model, budget, concurrency, tasks);
    --- returns the bench results (aggregate, tasks) or nil, err.
    bench = function(o) return bench_entry(S, o) end,
    map = map, seeds = seeds, grid = grid,
  }
end

-- The part of a script's return value that JSON can hold (functions,
-- coroutines and userdata dropped), so results.json always encodes.
local function plain_data(v, depth)
  local ty = type(v)
  if ty == "table" then
    if (depth or 0) > 32 then return nil end
    local r = {}
    for k, x in pairs(v) do
      if type(k) == "string" or type(k) == "number" then r[k] = plain_data(x, (depth or 0) + 1) end
    end
    return r
  end
  if ty == "string" or ty == "number" or ty == "boolean" then return v end
  return nil
end

--- Run a sweep script: FILE is loaded with `mk` (the API above) and `arg`
--- in an environment that falls back to the globals. opts as sweep.new
--- plus args (list for `arg`). Returns the results table.
---@param file string
---@param opts table
function sweep.run_file(file, opts)
  if type(file) ~= "string" then error("sweep.run_file: file must be a string", 2) end
  -- a shallow copy: opts.progress and opts.runner keep their metatables
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  opts = o
  opts.script = opts.script or file
  opts.name = opts.name or file:match("([^/]+)%.lua$") or file
  local mk = sweep.new(opts)
  local env = setmetatable({ mk = mk }, { __index = _G })
  local a = { [0] = file }
  for i, v in ipairs(opts.args or {}) do a[i] = v end
  env.arg = a
  local chunk, err = loadfile(file, "t", env)
  if not chunk then return nil, { kind = "bad_script", message = err } end
  local prev = current
  current = mk
  local ok, ret = pcall(chunk, table.unpack(a))
  current = prev
  if ok then mk.results.returned = plain_data(ret) end
  mk.save(true)
  if not ok then
    infra.rethrow(ret)
    return nil, { kind = "script_error", message = tostring(ret), results = mk.results }
  end
  mk.results.out = mk.out
  return mk.results
end

-- The numbers an entry contributes to its group, and whether it found a
-- correct kernel: a run's best speedup (1.0, the reference, when it found
-- none); a bench's value per repeat (sweep.repeat_speedups: every run
-- counts, not one geomean per bench).
local function entry_values(e)
  if e.kind == "bench" and e.aggregate then
    local vs = e.repeat_speedups
    if type(vs) ~= "table" or #vs == 0 then vs = { e.aggregate.geomean_speedup } end -- a sweep made before
    return vs, e.aggregate.correct > 0
  end
  if e.summary then
    local b = type(e.summary.best) == "table" and e.summary.best.speedup
    return { b or 1.0 }, b ~= nil
  end
  return nil
end

local PARAMS = { "strategy", "task", "suite", "model" }

--- Group a sweep's finished entries by each parameter that varies (every
--- `set` key, and strategy / task / suite / model when they differ), one row
--- per value: {param, value, n, correct, median, low, high, level, min,
--- max, values}, the statistics taken over the entries with that value
--- (the seeds and the other parameters); low-high is a seeded 95 %
--- bootstrap interval of the median (mk.study.compare.bootstrap, 1000
--- replicates: with 2 runs it is the runs' range). Errors are left out.
--- Rows in parameter, value order.
---@param results table
function sweep.groups(results)
  local by = {} -- param -> value text -> row
  local raw = {}
  for _, e in ipairs(results.entries or {}) do
    local vs, ok = entry_values(e)
    if vs and not e.error then
      local p = e.params or {}
      local pairs_ = {}
      for _, k in ipairs(PARAMS) do if p[k] ~= nil then pairs_[#pairs_ + 1] = { k, p[k] } end end
      for k, x in pairs(p.set or {}) do pairs_[#pairs_ + 1] = { k, x } end
      for _, kv in ipairs(pairs_) do
        local k, x = kv[1], kv[2]
        local text = type(x) == "table" and cjson.encode(x) or tostring(math.tointeger(x) or x)
        by[k] = by[k] or {}
        local row = by[k][text]
        if not row then
          row = { param = k, value = text, raw = x, values = {}, correct = 0 }
          by[k][text] = row
          raw[#raw + 1] = row
        end
        for _, v in ipairs(vs) do row.values[#row.values + 1] = v end
        if ok then row.correct = row.correct + 1 end
      end
    end
  end
  local rows = {}
  for _, row in ipairs(raw) do
    local nvals = 0
    for _ in pairs(by[row.param]) do nvals = nvals + 1 end
    if nvals > 1 then -- a parameter that never varies answers nothing
      row.n = #row.values
      row.median = metrics.median(row.values)
      row.min, row.max = math.min(table.unpack(row.values)), math.max(table.unpack(row.values))
      -- a seeded bootstrap interval of the median over the runs (mk.study.compare's)
      local units = {}
      for i, x in ipairs(row.values) do units[i] = x end
      local ci = compare.bootstrap(units, function(us) return metrics.median(us) end, { n = 1000, within = false })
      row.low, row.high, row.level = ci.low, ci.high, ci.level
      rows[#rows + 1] = row
    end
  end
  table.sort(rows, function(a, b)
    if a.param ~= b.param then return a.param < b.param end
    if type(a.raw) == "number" and type(b.raw) == "number" then return a.raw < b.raw end
    return a.value < b.value
  end)
  for _, row in ipairs(rows) do row.raw = nil end
  return rows
end

--- Plain-text table of sweep.groups: the median and min–max per value.
function sweep.format_groups(results)
  local rows = sweep.groups(results)
  if #rows == 0 then return "" end
  local L = { "by parameter (a run's best speedup, a bench repeat's geomean over its tasks; 1.0x when none was "
    .. "correct; median over all of them, 95% bootstrap interval of the median, min-max):" }
  for _, r in ipairs(rows) do
    L[#L + 1] = string.format("  %-14s %-12s median %6.2fx  [%.2f, %.2f]  (min %.2fx, max %.2fx, n %d, %d entries correct)",
      r.param, r.value:sub(1, 12), r.median, r.low, r.high, r.min, r.max, r.n, r.correct)
  end
  return table.concat(L, "\n") .. "\n"
end

--- Plain-text table of a sweep's entries.
function sweep.format(results)
  local L = {}
  local w = 5
  for _, e in ipairs(results.entries or {}) do w = math.max(w, #e.label) end
  w = math.min(w, 60)
  local hdr = string.format("%3s  %-" .. w .. "s  %-5s  %-18s  %-15s  %10s  %9s  %8s", "#", "entry", "kind",
    "correct", "best / geomean", "tokens", "USD", "wall")
  L[#L + 1] = hdr
  L[#L + 1] = string.rep("-", #hdr)
  for _, e in ipairs(results.entries or {}) do
    local c, correct, sp = {}, "-", "-"
    if e.error then
      correct = "error"
      sp = e.error:sub(1, 15)
    elseif e.kind == "bench" and e.aggregate then
      c = e.aggregate.cost or {}
      correct = string.format("%d/%d tasks", e.aggregate.correct, e.aggregate.tasks)
      sp = string.format("%.2fx (fl %.2fx)", e.aggregate.geomean_speedup, e.aggregate.geomean_speedup_floored)
    elseif e.summary then
      c = e.summary.cost or {}
      correct = string.format("%s/%s nodes", tostring(math.tointeger(e.summary.correct_nodes) or "?"),
        tostring(math.tointeger(e.summary.nodes) or "?"))
      local best = type(e.summary.best) == "table" and e.summary.best or nil -- JSON null when read raw
      sp = best and best.speedup and string.format("%.2fx", best.speedup) or "-"
    end
    L[#L + 1] = string.format("%3d  %-" .. w .. "s  %-5s  %-18s  %-15s  %10d  %9s  %7.1fs", e.index, e.label:sub(1, w), e.kind,
      correct, sp, math.floor((c.input_tokens or 0) + (c.output_tokens or 0)), string.format("$%.4f", c.usd or 0), c.wall_s or 0)
  end
  for _, e in ipairs(results.entries or {}) do -- simulated entries say so (docs/simulator.md)
    local note = e.simulation or (e.summary and e.summary.simulation)
    if note then
      table.insert(L, 1, note)
      break
    end
  end
  local tc = results.totals and results.totals.cost or {}
  L[#L + 1] = string.format("total: %d entries, %d tokens, $%.4f, wall %.1fs (sum)", #(results.entries or {}),
    math.floor((tc.input_tokens or 0) + (tc.output_tokens or 0)), tc.usd or 0, tc.wall_s or 0)
  return table.concat(L, "\n") .. "\n" .. sweep.format_groups(results)
end

return sweep

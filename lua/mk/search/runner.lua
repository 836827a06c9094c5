--- mk.search.runner: one search run from start to summary, used by `mkengine
--- run`, `mkengine resume`, `mkengine bench` and sweeps.
---
---   run{strategy=, task=, set={...}, seed=, model=, llm_config=, budget=,
---       run_dir=, root=, quiet=, json=, jobs=, kb_learn=, kb_dirs=, agents=}
---   → summary (contents of summary.json plus run_dir)
---   resume(run_dir, {agents=, quiet=, json=}) → summary
--- `agents` (required) is the table of sub-agents, as `require("agents")`
--- returns: the commands hand it in, the search floor never requires it.
---
--- Input problems (unknown strategy, bad task, bad option, bad model spec)
--- raise {exit = 2, message}; a Lua error inside a strategy raises with
--- file:line and traceback (exit 1); a failure of the machine (disk full,
--- a tool missing, a modified suite: mk.eval.infra) stops the run with
--- one line {kind = "infra", exit = 1} and status "stopped".
local budget_lib = require("mk.search.budget")
local cjson = require("cjson")
local context = require("mk.search.context")
local figure = require("mk.search.figure")
local records = require("mk.search.records")
local eval = require("mk.eval")
local fs = require("mk.fs")
local home = require("mk.home")
local infra = require("mk.eval.infra")
local ledger = require("mk.search.ledger")
local llm = require("mk.services.llm") -- loads mk.services.llm.providers.scripted itself for --model scripted
local pool_lib = require("mk.eval.pool")
local progress_lib = require("mk.services.progress")
local retrieve = require("mk.services.retrieve")
local rundir = require("mk.search.rundir")
local simtask = require("mk.services.sim.task")
local targets = require("mk.eval.targets")
local task_lib = require("mk.services.task")
local util = require("mk.services.util")

local runner = {}

local function input_error(msg)
  util.raise({ exit = 2, kind = "input", message = msg })
end

-- The run cannot go on: one line, exit 1 (an infrastructure failure when
-- the text says the machine failed).
local function run_error(msg)
  local ie = infra.wrap(msg)
  if ie then error(ie, 0) end
  util.raise({ exit = 1, kind = "run", message = msg })
end

--- Find and load a strategy: a name in lua/strategies ("beam" or
--- "beam.lua") or a path to a Lua file. Returns the module and its path.
function runner.load_strategy(name)
  if type(name) ~= "string" or name == "" then input_error("no strategy given") end
  local path
  if name:find("/") or (name:match("%.lua$") and fs.exists(name)) then
    path = name
  else
    path = home.path("lua/strategies/" .. name:gsub("%.lua$", "") .. ".lua")
  end
  if not fs.exists(path) then
    local names = {}
    for _, f in ipairs(fs.list(home.path("lua/strategies")) or {}) do
      local n = f:match("^(.+)%.lua$")
      if n then names[#names + 1] = n end
    end
    input_error("unknown strategy '" .. name .. "' (built in: " .. table.concat(names, ", ") .. "; or give a path to a .lua file)")
  end
  local chunk, err = loadfile(path)
  if not chunk then input_error("cannot load strategy: " .. err) end
  local mod = chunk()
  if type(mod) ~= "table" or type(mod.run) ~= "function" then
    input_error("strategy " .. path .. " must return a table {defaults = {...}, run = function(ctx, opts) ... end}")
  end
  mod.defaults = mod.defaults or {}
  return mod, path
end

--- Coerce a --set value: numbers, booleans and strings.
--- A float with an integral value (1.0: what a JSON round trip of a stored
--- bench or sweep configuration gives back) becomes the integer 1.
function runner.coerce(v)
  if math.type(v) == "float" then return math.tointeger(v) or v end
  if type(v) ~= "string" then return v end
  if v == "true" then return true elseif v == "false" then return false end
  local n = math.tointeger(tonumber(v)) or tonumber(v)
  if n then return n end
  return v
end

--- Strategy options: defaults overridden by `set`; unknown keys are an
--- input error (a typo must not be silently ignored). `settings` are the
--- agents' defaults (agent_max_tokens, ...): known keys too, typed by
--- their default.
function runner.options(strategy, set, path, settings)
  settings = settings or {}
  local opts = {}
  for k, v in pairs(strategy.defaults) do opts[k] = v end
  local known = {}
  for k in pairs(strategy.defaults) do known[#known + 1] = k end
  table.sort(known)
  -- options every strategy understands (read by ctx and the agents)
  local common = { kb = true, kb_k = true, kb_chars = true, max_tokens = true, temperature = true,
    tests_agent = true, iters = true, max_fix = true, tune = true, settle = true }
  for k, v in pairs(set or {}) do
    if strategy.defaults[k] == nil and not common[k] and settings[k] == nil then
      input_error(string.format("unknown option '%s' for strategy %s (its options: %s)", k, path,
        table.concat(known, ", ")))
    end
    v = runner.coerce(v)
    local want = strategy.defaults[k]
    if want == nil then want = settings[k] end
    if want ~= nil and type(want) ~= type(v) then
      input_error(string.format("option '%s' must be a %s, got '%s'", k, type(want), tostring(v)))
    end
    runner.check_count(k, v, want)
    opts[k] = v
  end
  return opts
end

--- The traceback of an error inside a strategy, cut to the frames of the
--- strategy's own files (engine frames hidden) unless `full`.
function runner.strategy_traceback(msg, spath, full)
  local tb = debug.traceback(msg, 3)
  if full then return tb end
  local lines, hidden = {}, 0
  local engine = home.path("lua/")
  for line in (tb .. "\n"):gmatch("([^\n]*)\n") do
    local frame = line:match("^\t(.*)")
    if not frame then
      lines[#lines + 1] = line
    elseif frame:find(spath, 1, true) or not (frame:find(engine .. "mk/", 1, true) or frame:find(engine .. "agents/", 1, true)
        or frame:find(home.path("targets/"), 1, true) or frame:find("^%[C%]") or frame:find("^%(%.%.%.")) then
      lines[#lines + 1] = line
    else
      hidden = hidden + 1
    end
  end
  if hidden > 0 then lines[#lines + 1] = string.format("\t(%d engine frames hidden; --debug shows them)", hidden) end
  return table.concat(lines, "\n")
end

-- counts every strategy reads: whole numbers >= 0
local COUNTS = { iters = true, max_fix = true, kb_k = true, kb_chars = true, max_tokens = true, settle = true }

--- A count (an option whose default is a whole number >= 0, or one of the
--- common counts) must be a whole number >= 0: depth=-1 or width=2.5 is an
--- input error, not a run that silently does nothing.
function runner.check_count(k, v, want)
  local count = COUNTS[k] or (math.type(want) == "integer" and want >= 0)
  if count and (math.type(v) ~= "integer" or v < 0) then
    input_error(string.format("option '%s' must be a whole number >= 0, got '%s'", k, tostring(v)))
  end
  if k == "temperature" and (type(v) ~= "number" or v < 0) then
    input_error(string.format("option 'temperature' must be a number >= 0, got '%s'", tostring(v)))
  end
end

-- The run options a run directory stores (run.json's `options`) and what
-- each must be. A JSON round trip turns 2 into 2.0: whole numbers come back
-- as integers, and anything else of the wrong type is an input error that
-- names the field (never a crash deep inside the evaluator).
local function whole(min)
  return function(v)
    local n = math.tointeger(v)
    if n and n >= min then return n end
    return nil, "a whole number >= " .. min
  end
end
local function positive(v)
  if type(v) == "number" and v > 0 and v == v and v < math.huge then return math.tointeger(v) or v end
  return nil, "a number > 0"
end
local function text(v)
  if type(v) == "string" and v ~= "" then return v end
  return nil, "a non-empty string"
end
local function one_of(set)
  return function(v)
    if set[v] then return v end
    local names = {}
    for k in pairs(set) do names[#names + 1] = k end
    table.sort(names)
    return nil, "one of " .. table.concat(names, ", ")
  end
end
local function budget_value(v)
  if type(v) == "string" or type(v) == "table" then return v end
  return nil, "a budget text (tokens=N,usd=X,...)"
end
local function set_table(v)
  if type(v) ~= "table" then return nil, "a table of KEY = VALUE" end
  local out = {}
  for k, x in pairs(v) do
    if type(k) ~= "string" or not k:match("^[%w_]+$") then return nil, "a table of KEY = VALUE (key " .. tostring(k) .. ")" end
    local tx = type(x)
    if tx ~= "string" and tx ~= "number" and tx ~= "boolean" then
      return nil, "a table of KEY = VALUE (value of " .. k .. " is a " .. tx .. ")"
    end
    out[k] = runner.coerce(x)
  end
  return out
end

local RUN_OPTIONS = {
  strategy = { text, required = true }, task_dir = { text, required = true }, set = { set_table },
  seed = { function(v) return math.tointeger(v), "a whole number" end }, model = { text }, llm_config = { text },
  llm_cache = { one_of { rw = true, ro = true, off = true } }, budget = { budget_value }, jobs = { whole(1) },
  timeout = { positive }, workers = { text }, mem_mb = { positive },
}

--- The run options `info` (what run.json stores as `options`) checked and
--- coerced to the types the options take; `where` names their source in
--- the message of the input error (exit 2) a bad field raises. Unknown
--- fields are kept (a newer engine's run read by an older one).
function runner.check_options(info, where)
  if type(info) ~= "table" then input_error(where .. ": the run's options must be a table") end
  local out = {}
  for k, v in pairs(info) do out[k] = v end
  for k, spec in pairs(RUN_OPTIONS) do
    local v = info[k]
    if v == nil or v == cjson.null then
      if spec.required then input_error(string.format("%s: option '%s' is missing", where, k)) end
      out[k] = nil
    else
      local ok, want = spec[1](v)
      if ok == nil then
        local okj, shown = pcall(cjson.encode, v)
        input_error(string.format("%s: option '%s' must be %s, got %s", where, k, want, okj and shown or tostring(v)))
      end
      out[k] = ok
    end
  end
  out.set = out.set or {}
  return out
end

local function task_slug(task_dir)
  return (task_dir:gsub("/+$", ""):match("([^/]+)$") or "task")
end

local function make_client(model, llm_config, cache)
  if not model or model == "" then
    input_error("no model: pass --model PROVIDER:MODEL (openai:..., gemini:..., anthropic:..., exec:COMMAND) " ..
      "or --model scripted for the offline scripted test model")
  end
  local ok, client, err = pcall(llm.from_spec, model, { config_file = llm_config, cache = cache })
  if not ok then input_error("bad model spec '" .. model .. "': " .. tostring(client)) end
  if not client then input_error("bad model spec '" .. model .. "': " .. tostring(err and err.message or err)) end
  return client, llm
end

-- The best node as summary.json records it: its figure (the median of its
-- measurements, with their range) and the nodes still within its noise.
local function summarize_node(n, ties, heldout)
  if not n then return nil end
  local m = n.metrics or {}
  return { heldout = heldout, node = n.id, speedup = m.speedup, latency_s = m.latency_s, timing_kind = m.timing_kind, timing = m.timing,
    measurements = m.measurements, latency_min_s = m.latency_min_s, latency_max_s = m.latency_max_s,
    spread = m.spread, source_hash = m.source_hash, contended = m.contended,
    ties = ties and #ties > 0 and ties or nil }
end

-- The correct candidates in `nodes` with a figure, one per kernel source:
-- the latest node of each (its commit holds every sample taken before it).
local function one_per_source(nodes)
  local latest = {} -- by source hash (a node without one stands for itself); nodes come in add order
  for _, n in ipairs(nodes) do
    if n.status == "ok" and n.kind ~= "reference" and n.metrics and n.metrics.latency_s then
      latest[n.metrics.source_hash or n] = n
    end
  end
  local out = {}
  for _, n in pairs(latest) do out[#out + 1] = n end -- ranked by the caller
  return out
end

-- What the strategy returned, as the runner weighs it: nil (the run's
-- best) when it is the run's fastest kernel (what `return ctx:best()`
-- gives), else the latest node of its kernel (the one holding its figure).
local function returned(chosen, all)
  if not chosen then return nil end
  local h = chosen.metrics and chosen.metrics.source_hash
  local latest = chosen
  if h then
    for _, n in ipairs(all) do
      if n.metrics.source_hash == h then latest = n end
    end
  end
  local fastest
  for _, n in ipairs(all) do
    if not fastest or n.metrics.latency_s < fastest.metrics.latency_s then fastest = n end
  end
  if fastest and fastest == latest then return nil end
  return latest
end

-- The best node that also passes the held-out check (nodes failing it are
-- recorded and skipped), and the ids of the candidates still within its
-- noise. A node the strategy returned is the only candidate, unless it is
-- the run's fastest kernel. Otherwise the lead is settled first:
-- candidates tying with the fastest are re-measured interleaved
-- (mk.search.records.settle, `settle` rounds, default 3), so the best is
-- declared beyond noise where measuring can tell.
local function heldout_best(ctx, chosen)
  local all = one_per_source(ctx.graph:nodes())
  chosen = returned(chosen, all)
  local candidates = chosen and one_per_source({ chosen }) or all
  if chosen and #candidates == 0 then ctx:log("the strategy returned %s, which is not a correct candidate", chosen.id) end
  local _, _, rounds = records.settle(ctx, candidates, { rounds = chosen and 0 or ctx.opts.settle })
  if rounds > 0 then ctx:event { type = "settle", rounds = rounds } end
  for i, n in ipairs(candidates) do
    local files = {}
    for _, name in ipairs(n:files()) do files[name] = n:file(name) end
    local h = ctx.eval:heldout(files)
    if h.status == "infra" then infra.raise("the held-out check of " .. n.id .. ": " .. tostring(h.message)) end
    -- where it was checked (pallas: a larger scale, the task's own sizes sampled)
    local at = { checked_at = h.checked_at, confirmed_at = h.confirmed_at, confirm_note = h.confirm_note }
    ctx:event { type = "heldout", node = n.id, correct = h.correct, status = h.status, message = h.message,
      checked_at = at.checked_at, confirmed_at = at.confirmed_at }
    if h.correct then
      local ties = {}
      for j = i + 1, #candidates do
        if figure.versus(n.metrics, candidates[j].metrics) == "tie" then ties[#ties + 1] = candidates[j].id end
      end
      return n, ties, next(at) and at or nil
    end
    ctx:log("node %s passed the search tests but failed held-out inputs (%s); not reported", n.id, h.status or "?")
  end
  return nil
end

-- The budget of a run: its limits (a --budget text parsed), with the
-- wall time earlier sessions spent; nil without limits.
local function run_budget(info, prior)
  if not info.budget then return nil end
  local limits, berr = info.budget, nil
  if type(limits) == "string" then limits, berr = budget_lib.parse(limits) end
  if not limits then input_error("bad --budget: " .. berr.message) end
  return budget_lib.new(limits, { used = { wall_s = prior.wall_s } })
end

-- Every event of the run also feeds the status line (or --json); every
-- model call of this run (a bench runs several in one process) becomes an
-- event.
local function wire_events(run, progress, client)
  local append = run.event
  run.event = function(self, e, detail)
    append(self, e, detail)
    progress:event(e)
  end
  client.ledger = function(rec)
    rec.type = "llm"
    run:event(rec)
  end
end

-- The evaluator (on the workers the run names, docs/workers.md) and the
-- strategies' ctx. The frozen suite is in the shared cache (suite.json
-- names it), or in tests/ for runs made before the cache or exported
-- standalone.
local function open_context(o, run, info, task, opts, client, budget, prior, note)
  if info.workers then run.pool = pool_lib.open(info.workers, { log = note }) end
  local inlined = fs.exists(run.dir .. "/tests/frozen.json")
  local ev = eval.new(task, { tests_dir = inlined and (run.dir .. "/tests") or nil, suite_cache = not inlined,
    jobs = info.jobs, seed = info.seed, timeout = info.timeout, pool = run.pool,
    -- each harness process's memory limit: the run's, else a share of the machine's for the runs at once
    mem_mb = info.mem_mb, evaluators = o.evaluators })
  run.evaluator = ev -- closed by run/resume whatever happens (it owns temporary work directories)
  local ctx = context.new { task = task, graph = run.graph, run = run, eval = ev, llm = client, opts = opts, agents = o.agents,
    dump_prompts = o.dump_prompts,
    seed = info.seed or 0, budget = budget, prior = prior, log = function(msg) note(msg) end }
  ctx.started = task_lib.now()
  run.spent = function() return ctx:spent() end -- recorded with each node event
  return ev, ctx
end

-- The extra test shapes the tests agent proposed, added to the task's
-- (recorded in the run directory, so a resumed run freezes the same suite).
local function add_extra_tests(run, info, task, opts, ctx)
  local extra_path = run.dir .. "/extra_tests.json"
  if fs.exists(extra_path) then
    info.extra_test_sizes = cjson.decode(fs.read(extra_path))
    for _, sz in ipairs(info.extra_test_sizes) do
      for k, v in pairs(sz) do sz[k] = math.tointeger(v) or v end
    end
  else
    local extra = {}
    if opts.tests_agent ~= false and task.sizes then
      extra = ctx.agents.tests { key = "tests" } or {}
    end
    info.extra_test_sizes = extra
    fs.write(extra_path, #extra > 0 and cjson.encode(extra) or "[]", { sync = true })
  end
  if #info.extra_test_sizes > 0 then
    task.test_sizes = task.test_sizes or { task.sizes }
    for _, s in ipairs(info.extra_test_sizes) do table.insert(task.test_sizes, s) end
  end
end

-- Freeze the test suite and record which one in suite.json (a note when it
-- differs from the one the run started with).
local function freeze_suite(run, ev, note)
  local okc, okf, ferr = pcall(ev.freeze, ev)
  if not okc then run_error("cannot freeze the test suite: " .. tostring(type(okf) == "table" and okf.message or okf)) end
  if not okf and ferr then run_error("cannot freeze the test suite: " .. tostring(ferr.message or ferr)) end
  if not ev.suite_key then return end
  local okp, prev = pcall(cjson.decode, fs.read(run.dir .. "/suite.json") or "null")
  if okp and type(prev) == "table" and prev.manifest_sha and prev.manifest_sha ~= ev.frozen.manifest_sha then
    note(string.format("mkengine: the frozen suite differs from the one this run started with (%s, was %s)",
      ev.frozen.manifest_sha:sub(1, 12), prev.manifest_sha:sub(1, 12)))
  end
  fs.write(run.dir .. "/suite.json", cjson.encode { key = ev.suite_key, path = ev.tests_dir,
    manifest_sha = ev.frozen.manifest_sha } .. "\n", { atomic = true })
end

-- The graph's root: the reference, measured once (the first session).
local function reference_node(run, ev, ctx, task)
  local root = run.graph:root()
  if root then return root end
  local okb, base = pcall(ev.baseline, ev)
  if not okb or not base or not base.latency_s then
    local why = okb and base and base.message or base
    run_error("the reference could not be measured: " .. tostring(type(why) == "table" and why.message or why))
  end
  return ctx:step("root", function()
    return { parents = {}, kind = "reference", status = "ok", files = { [task.candidate_file] = task.reference },
      plan = "The reference implementation (the baseline).",
      metrics = { latency_s = base.latency_s, speedup = 1.0, baseline_latency_s = base.latency_s, spread = base.spread,
        contended = base.contended }, -- timed while something else held the CPU, even after a retake
      meta = { baseline = true } }
  end)
end

-- Run the strategy; returns the node it returned (or nil). A failure
-- marks the run failed and raises (a Lua error with the strategy's
-- traceback).
local function run_strategy(o, run, ctx, strategy, spath, opts)
  local ok, ret = xpcall(strategy.run, function(e)
    if type(e) == "table" then return e end
    return runner.strategy_traceback(tostring(e), spath, o.debug)
  end, ctx, opts)
  if ok then
    local node, warning = context.check_result(ctx, ret, spath, strategy.run)
    if warning then -- the strategy's bug: shown even with --quiet
      run:event { type = "strategy_warning", message = warning }
      io.stderr:write("mkengine: warning: ", warning, "\n")
    end
    return node
  end
  if infra.is(ret) then error(ret, 0) end -- the machine's or the model endpoint's, not the strategy's
  run:event { type = "strategy_error", message = tostring(type(ret) == "table" and ret.message or ret) }
  run:set_status("failed")
  if type(ret) == "table" then error(ret, 0) end
  util.raise({ exit = 1, kind = "strategy", message = "strategy " .. spath .. " failed: " .. ret })
end

-- The run's summary (written to summary.json): status, best, spend, and
-- the model calls of every session: how many were replayed from the LLM
-- cache, how many failed and with which kind of error. `status` overrides
-- the one the best node gives (a run stopped by its model endpoint).
local function write_summary(run, info, task, ctx, best, client, opts, resumed, status, ties, heldout)
  local spent = ctx:spent()
  local calls = ledger.read(run:path("events.jsonl"))
  status = status or (best and "done" or "no_correct_kernel")
  local compiled = 0
  for _, n in ipairs(run.graph:nodes()) do
    if n.kind ~= "reference" and n.status ~= "compile_error" then compiled = compiled + 1 end
  end
  local summary = {
    strategy = info.strategy, task = task.name, status = status, compiled_nodes = compiled,
    best = summarize_node(best, ties, heldout) or cjson.null,
    model = info.model, model_label = client.label, seed = info.seed, options = opts,
    target = task.target, simulation = simtask.note(info.model, { task.target }),
    cost = { input_tokens = spent.input_tokens, output_tokens = spent.output_tokens, usd = spent.usd,
      llm_s = spent.llm_s, device_s = spent.device_s, wall_s = spent.wall_s, calls = calls.calls,
      cached_calls = calls.cached_calls },
    llm_failures = calls.failures, endpoint = client.endpoint and client:endpoint() or nil,
    budget_exhausted = select(2, ctx:exhausted()),
    resumed = resumed or nil,
  }
  run:set_status(status)
  summary = run:write_summary(summary) or summary
  summary.run_dir = run.dir
  return summary
end

-- Say how many model calls were answers replayed from the LLM cache, and
-- which calls failed: a run that "succeeded" from replay, or despite a
-- flaky endpoint, must not look like fresh work.
local function replay_note(summary, client, note)
  local c = summary.cost
  if (c.cached_calls or 0) > 0 then
    note(string.format("%d of %d model calls were answers replayed from the LLM cache (%s), not asked of %s; "
      .. "--llm-cache off asks the model again", c.cached_calls, c.calls, client.cache_dir or "?",
      client.endpoint and client:endpoint() or tostring(client.label)))
  end
  local kinds = {}
  for k, n in pairs(summary.llm_failures or {}) do kinds[#kinds + 1] = string.format("%s %d", k, n) end
  table.sort(kinds)
  if #kinds > 0 then note("model calls that failed: " .. table.concat(kinds, ", ") .. " (events.jsonl has each)") end
end

-- --kb-learn: what each node tried and what it gave, as notes for later runs.
local function learn(o, run, task, note)
  local entries = {}
  for _, n in ipairs(run.graph:nodes()) do
    if n.kind ~= "reference" and n.plan and n.plan:find("%S") then
      entries[#entries + 1] = { task = task.name, target = task.target, status = n.status,
        plan_summary = (n.plan:match("^[^\n]+") or n.plan):sub(1, 200),
        effect = n.status == "ok" and string.format("%.2fx the baseline", n.metrics.speedup or 0)
          or (n.status .. ": " .. (n.error or ""):sub(1, 200)) }
    end
  end
  local wrote, lerr = retrieve.learn(entries, { dir = o.kb_learn_dir })
  if not wrote then note("kb-learn: nothing written: " .. tostring(lerr and lerr.message or lerr)) end
end

local function execute(o, run, info, resumed)
  local task, terr = targets.load_task(info.task_dir)
  if not task then input_error("bad task " .. tostring(info.task_dir) .. ": " .. tostring(terr and terr.message or terr)) end
  local strategy, spath = runner.load_strategy(info.strategy)
  local opts = runner.options(strategy, info.set, spath, o.agents and o.agents.defaults)
  -- real models cache by default (a re-run or resume replays completed calls
  -- for free); the offline models (scripted, sim) never need a cache
  local cache = info.llm_cache or (llm.offline(info.model) and "off" or "rw")
  local client = make_client(info.model, info.llm_config, cache)
  local progress = progress_lib.new { quiet = o.quiet, json = o.json, label = info.strategy .. " " .. task.name }
  local function note(msg) progress:note(msg) end
  local prior = ledger.read(run:path("events.jsonl")) -- what earlier sessions spent (a resumed run)
  local budget = run_budget(info, prior)
  wire_events(run, progress, client)
  note(string.format("mkengine: %s on %s with %s%s -> %s", info.strategy, task.name, client.label or info.model,
    resumed and " (resumed)" or "", run.dir))

  local ev, ctx = open_context(o, run, info, task, opts, client, budget, prior, note)
  local function search()
    add_extra_tests(run, info, task, opts, ctx)
    freeze_suite(run, ev, note)
    local root = reference_node(run, ev, ctx, task)
    note(string.format("baseline (reference): %.3f ms", (root.metrics.latency_s or 0) * 1000))
    local best, ties, heldout = heldout_best(ctx, run_strategy(o, run, ctx, strategy, spath, opts))
    return best, root, ties, heldout
  end
  local oks, best, root, ties, heldout = pcall(search)
  if not oks then
    if infra.is(best) and best.cause == "model_unavailable" then -- the summary says so, with the failures
      pcall(write_summary, run, info, task, ctx, nil, client, opts, resumed, "model_unavailable")
    end
    error(best, 0)
  end
  if best then run:refresh_best(best) end
  local summary = write_summary(run, info, task, ctx, best, client, opts, resumed, nil, ties, heldout)
  replay_note(summary, client, note)
  if best then
    local m = best.metrics
    note(string.format("best: %s %s (%.3f ms vs %.3f ms) -> %s/best", best.id, m.timing_kind == "interpret"
      and "(interpret timing: no speedup)" or string.format("speedup %.2fx over the baseline", m.speedup or 0),
      best.metrics.latency_s * 1000, (root.metrics.latency_s or 0) * 1000, run.dir)
      .. (ties and #ties > 0 and (" (within the measured noise of " .. table.concat(ties, ", ") .. ")") or ""))
  else
    note("no correct kernel found -> " .. run.dir)
  end
  if o.kb_learn then learn(o, run, task, note) end
  progress:finish()
  return summary
end

-- The status a run that ended with error `err` keeps: "stopped" when a
-- signal stopped the engine or the machine failed (a resume continues it),
-- else "failed".
local function end_status(run, err)
  local sig = task_lib.signal()
  if sig or err == task_lib.CANCELLED then
    pcall(run.event, run, { type = "stopped", signal = sig })
    return "stopped"
  end
  if infra.is(err) and err.cause == "model_unavailable" then
    pcall(run.event, run, { type = "stopped", reason = "model_unavailable", endpoint = err.endpoint,
      failure = err.failure, message = err.message })
    return "model_unavailable"
  end
  if infra.is(err) then
    pcall(run.event, run, { type = "stopped", reason = "infra", message = err.message })
    return "stopped"
  end
  return "failed"
end

-- An infrastructure failure as the one line the user sees.
local function infra_line(err, dir)
  if err.cause == "model_unavailable" then
    err.message = string.format("%s. The run is stopped, not failed (status model_unavailable; every committed "
      .. "node is kept); once the endpoint answers, 'mkengine resume %s' continues it", err.message, dir)
    return err
  end
  err.message = string.format("infrastructure failure, not a candidate's: %s. The run is stopped; once the cause "
    .. "is gone, 'mkengine resume %s' continues it", err.message, dir)
  return err
end

-- Execute a run and release what it holds (evaluator work directories, the
-- run lock) whatever happens; a failure marks the run failed (or stopped)
-- and re-raises.
local function execute_and_close(o, run, info, resumed)
  if o.on_open then o.on_open(run) end -- e.g. `--ui` starts the viewer on the run directory
  local ok, res = pcall(execute, o, run, info, resumed)
  if run.evaluator and run.evaluator.close then pcall(run.evaluator.close, run.evaluator) end
  if run.pool then pcall(run.pool.release, run.pool) end
  if not ok then
    res = infra.wrap(res) or res
    pcall(run.set_status, run, end_status(run, res))
    if infra.is(res) then res = infra_line(res, run.dir) end
  end
  local okc, cerr = pcall(run.close, run)
  if ok and not okc then -- the run's end could not be written (a full disk)
    ok, res = false, infra.wrap(cerr) and infra_line(infra.wrap(cerr), run.dir) or cerr
  end
  if not ok then error(res, 0) end
  return res
end

--- Run a strategy on a task. See the module comment for the fields.
---@param o table
---@return table summary
function runner.run(o)
  if type(o) ~= "table" then error("runner.run: expects a table", 2) end
  if type(o.agents) ~= "table" then error("runner.run: o.agents must be the sub-agents (require \"agents\")", 2) end
  if not o.task or not fs.isdir(o.task) then input_error("task directory not found: " .. tostring(o.task)) end
  local strategy_name = o.strategy
  local strategy, spath = runner.load_strategy(strategy_name) -- fail before creating a run dir
  runner.options(strategy, o.set, spath) -- and on a bad option too
  local info = {
    strategy = strategy_name, task_dir = fs.realpath(o.task) or o.task, set = o.set or {},
    seed = o.seed or 1, model = o.model, llm_config = o.llm_config, llm_cache = o.llm_cache,
    budget = o.budget, jobs = o.jobs, timeout = o.timeout, mem_mb = o.mem_mb,
    workers = o.workers and (fs.realpath(o.workers) or input_error("workers file not found: " .. o.workers)),
  }
  info = runner.check_options(info, "mkengine run")
  if info.workers then pool_lib.load(info.workers) end -- bad input fails before the run dir exists
  local run, err = rundir.create { root = o.root, dir = o.run_dir, strategy = strategy_name:gsub("^.*/", ""):gsub("%.lua$", ""),
    task = task_slug(o.task), options = info, seed = info.seed, model = o.model }
  if not run then input_error("cannot create the run directory: " .. err.message) end
  return execute_and_close(o, run, info, false)
end

--- Continue a run that was stopped at any moment: completed nodes are
--- answered from the graph, the rest is computed.
---@param dir string
function runner.resume(dir, o)
  o = o or {}
  if type(o.agents) ~= "table" then error("runner.resume: o.agents must be the sub-agents (require \"agents\")", 2) end
  local okr, run, err = pcall(rundir.open, dir)
  if not okr then -- opening writes (repairs, run.json): a full disk fails here
    local ie = infra.wrap(run)
    if ie then error(infra_line(ie, dir), 0) end
    error(run, 0)
  end
  if not run then input_error("cannot resume " .. tostring(dir) .. ": " .. err.message) end
  local okc, info = pcall(runner.check_options, run.info.options, run.dir .. "/run.json")
  if not okc then
    pcall(run.close, run)
    error(info, 0)
  end
  run:event { type = "resume" }
  return execute_and_close(o, run, info, true)
end

--- run and resume with `agents` filled in when the caller gives none:
--- what bench and sweeps call.
---@param agents table
---@return {run: fun(o: table): table, resume: fun(dir: string, o?: table): table}
function runner.with_agents(agents)
  return {
    run = function(o)
      if o.agents == nil then o.agents = agents end
      return runner.run(o)
    end,
    resume = function(dir, o)
      o = o or {}
      if o.agents == nil then o.agents = agents end
      return runner.resume(dir, o)
    end,
  }
end

return runner

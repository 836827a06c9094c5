--- mk.search.context: the `ctx` a strategy receives. It ties together the task,
--- the node graph, the evaluator, the model, the sub-agents, the budget and
--- the run's event log, and offers the Auto trajectory (`ctx:auto`).
---
--- Resume: every node-producing step goes through `ctx:step(key, fn)`. The
--- key is derived from the parent node's id and the step's place in the
--- strategy; if a node with that key is already in the graph (a resumed
--- run), it is returned without calling fn. Randomness comes from
--- `ctx:rng(key)`, so a re-executed strategy makes the same choices and
--- reaches the same keys.
local task_lib = require("mk.services.task")
local infra = require("mk.eval.infra")
local rng_lib = require("mk.services.rng")
local targets = require("mk.eval.targets")
local template = require("mk.services.template")
local fs = require("mk.fs")
local util = require("mk.services.util")
local ask = require("mk.search.ask")
local figure = require("mk.search.figure")
local records = require("mk.search.records")

--- What a strategy's `run(ctx)` receives (docs/strategies.md); for editors.
---@class mk.ctx
---@field task table the loaded task (mk.eval.targets.load_task)
---@field graph table the node graph (mk.search.graph)
---@field run table the run directory (mk.search.rundir)
---@field eval table the evaluator (mk.eval)
---@field llm table the model client (mk.services.llm)
---@field opts table the strategy's options (--set name=value)
---@field seed integer
---@field budget table|nil limits (mk.search.budget)
---@field tasks table mk.services.task, for spawn/gather/semaphores
---@field agents table<string, fun(a: table): any> plan, implement, fix, tests, tune, profile
---@field device_s number device seconds spent so far
---@field evaluations integer
---@field usage {input_tokens: integer, output_tokens: integer, usd: number, llm_s: number, calls: integer}
local Ctx = {}

local M = {}

--- The sub-agents a context needs.
M.AGENTS = { "plan", "implement", "fix", "tests", "tune", "profile" }

-- The options each ctx call and agent accepts: anything else is a typo
-- that must not run silently with the defaults.
local OPTIONS = {
  auto = { "iters", "tag", "direction", "max_fix", "tune" },
  repair = { "max_fix", "feedback", "made" },
  evaluate = { "tune", "profile", "tune_budget" },
  evaluated = { "plan", "direction", "transcripts", "feedback", "tune", "key" },
  plan = { "parent", "feedback", "error", "direction", "tried", "key" },
  implement = { "plan", "parent", "second", "key" },
  fix = { "node", "attempt", "max_attempts", "key" },
  tune = { "node", "key" },
  profile = { "profile", "code", "metrics", "key" },
  tests = { "key", "max_dim", "max_extra" },
}
for name, list in pairs(OPTIONS) do
  local set = {}
  for _, k in ipairs(list) do set[k] = true end
  OPTIONS[name] = { list = list, set = set }
end

-- Raise (at the strategy's line) when o holds an option `call` does not know.
local function check_options(call, o, level)
  if o == nil then return {} end
  if type(o) ~= "table" then error(call .. ": options must be a table, got " .. type(o), level + 1) end
  local known = OPTIONS[call:match("[%w_]+$")]
  for k in pairs(o) do
    if not known.set[k] then
      error(string.format("%s: unknown option '%s' (valid: %s)", call, tostring(k), table.concat(known.list, ", ")),
        level + 1)
    end
  end
  return o
end
M.OPTIONS = OPTIONS

-- Fields a ctx may lack (nil) that engine code reads; any other missing
-- name close to a member is a misspelling.
local OPTIONAL = { budget = true, run = true, log_fn = true, started = true, stopped = true, on_node = true, prior = true,
  eval = true, llm = true, dump_prompts = true, dumped = true }
local MEMBERS = { "task", "graph", "run", "eval", "llm", "opts", "seed", "budget", "tasks", "agents", "better",
  "device_s", "evaluations", "usage" }

-- Edit distance with adjacent transpositions (optimal string alignment).
local function distance(a, b)
  if math.abs(#a - #b) > 2 then return 3 end
  local d = {}
  for i = 0, #a do d[i] = { [0] = i } end
  for j = 0, #b do d[0][j] = j end
  for i = 1, #a do
    for j = 1, #b do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      d[i][j] = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        d[i][j] = math.min(d[i][j], d[i - 2][j - 2] + 1)
      end
    end
  end
  return d[#a][#b]
end

--- The member of ctx nearest to a misspelt name ("ctx:exhausted"), or nil.
function M.nearest(name)
  local best, bd
  for k, v in pairs(Ctx) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" then
      local d = distance(name, k)
      if not bd or d < bd then best, bd = (type(v) == "function" and k ~= "better" and "ctx:" or "ctx.") .. k, d end
    end
  end
  for _, k in ipairs(MEMBERS) do
    local d = distance(name, k)
    if not bd or d < bd then best, bd = "ctx." .. k, d end
  end
  if bd and bd <= (#name >= 5 and 2 or 1) then return best end
  return nil
end

-- A method reached through ctx checks that it was called with a colon:
-- `ctx.exhausted()` would otherwise fail inside with "attempt to index a
-- nil value (local 'self')". One wrapper per method, made on first use.
local checked = {}
local function method(k, f)
  local w = checked[k]
  if not w then
    w = function(self, ...)
      if getmetatable(self) ~= Ctx then
        error(string.format("ctx.%s(...) was called with a dot: call it as ctx:%s(...)", k, k), 2)
      end
      return f(self, ...)
    end
    checked[k] = w
  end
  return w
end

Ctx.__index = function(_, k)
  local v = Ctx[k]
  if type(v) == "function" and k ~= "better" and k:sub(1, 1) ~= "_" then return method(k, v) end
  if v ~= nil or type(k) ~= "string" or OPTIONAL[k] or k:sub(1, 1) == "_" then return v end
  local near = M.nearest(k)
  if near then error(string.format("ctx has no member '%s' (did you mean `%s`?)", k, near), 2) end
  return nil
end

-- errors of the model that no retry or other step can fix: the run stops
local TERMINAL = { auth = true, quota = true, bad_request = true, cache_miss = true }
-- the endpoint did not answer, after the client's retries (connection
-- refused, DNS, TLS, timeouts, 5xx, rate limits): nothing was learned
-- about the search, so the run stops as an infrastructure failure with
-- status "model_unavailable", and `mkengine resume` continues it
M.UNAVAILABLE = { network = true, timeout = true, server = true, rate_limit = true }

--- Build a context. Fields of o: task, graph, run (rundir), eval, llm
--- (client), opts (strategy options), seed, budget (may be nil),
--- log (function(fmt, ...)), agents (the sub-agents: a table with a
--- module for each of M.AGENTS, as `require("agents")` returns, and
--- optionally `defaults`, the agents' settings read by ctx:setting; handed
--- in, never required here, so the search floor does not reach up), prior
--- (what earlier sessions of a resumed run spent, mk.search.ledger.read:
--- counted by spent() and so by the budget), dump_prompts (a directory:
--- every model request is written there).
---@return mk.ctx
function M.new(o)
  local ctx = setmetatable({
    task = o.task, graph = o.graph, run = o.run, eval = o.eval, llm = o.llm,
    opts = o.opts or {}, seed = o.seed or 0, budget = o.budget, prior = o.prior, dump_prompts = o.dump_prompts,
    log_fn = o.log, tasks = task_lib,
    device_s = 0, evaluations = 0, usage = { input_tokens = 0, output_tokens = 0, usd = 0, llm_s = 0, calls = 0 },
    _acc = setmetatable({}, { __mode = "k" }),
    _trajectories = {}, _live = {}, _records = {},
  }, Ctx)
  local mods = o.agents
  if type(mods) ~= "table" then error("context.new: agents must be the table of sub-agents (require \"agents\")", 2) end
  -- a resumed run: its nodes show their kernels' figures (mk.search.records)
  if o.graph and o.graph:len() > 0 then records.seed(ctx) end
  ctx.agents = {}
  ctx.defaults = type(mods.defaults) == "table" and mods.defaults or {}
  for _, name in ipairs(M.AGENTS) do
    local mod = mods[name]
    if type(mod) ~= "table" or type(mod.run) ~= "function" then
      error("context.new: agents." .. name .. " must be a module with a run function", 2)
    end
    local call = "ctx.agents." .. name
    ctx.agents[name] = function(a)
      if not mod.options then check_options(call, a, 2) end
      return mod.run(ctx, a)
    end
  end
  return ctx
end

--- A setting of the run: the strategy option `name`, else the agents'
--- default (e.g. agent_error_chars), else nil.
function Ctx:setting(name)
  local v = self.opts[name]
  if v == nil then v = self.defaults[name] end
  return v
end

-- Write one request to the --dump-prompts directory: NNNN-<agent>.txt with
-- the step key, the settings and the system and user prompts.
local function dump(self, req)
  self.dumped = (self.dumped or 0) + 1
  local parts = { string.format("key: %s\nagent: %s\nmax_tokens: %s\ntemperature: %s\n\n=== system\n%s\n",
    req.key, req.agent, tostring(req.max_tokens), tostring(req.temperature), req.system or "") }
  for _, m in ipairs(req.messages) do parts[#parts + 1] = "\n=== " .. m.role .. "\n" .. tostring(m.content) .. "\n" end
  fs.mkdirs(self.dump_prompts)
  local ok, err = fs.write(string.format("%s/%04d-%s.txt", self.dump_prompts, self.dumped, req.agent or "chat"),
    table.concat(parts))
  if not ok then error("--dump-prompts: cannot write in " .. self.dump_prompts .. ": " .. tostring(err and err.message or err), 0) end
end

--- Log a line (shown unless --quiet) and record it in the event log.
function Ctx:log(fmt, ...)
  local msg = select("#", ...) > 0 and string.format(fmt, ...) or fmt
  if self.log_fn then self.log_fn(msg) end
  self:event { type = "log", message = msg }
end

--- Append an event to the run's events.jsonl (detail: handed to the
--- run's listeners, not written; run:listen).
function Ctx:event(e, detail)
  if self.run then self.run:event(e, detail) end
end

--- The stable name of a node for building step keys: its own key (the
--- path of steps that made it), or its id. Keys built from paths, not ids,
--- make two runs with the same seed ask the same questions even though
--- concurrent branches commit in a different order.
function Ctx:path(node) -- luacheck: ignore 212/self
  return node.key or node.id
end

--- A deterministic random generator for a step key.
function Ctx:rng(key) return rng_lib.new(self.seed, key) end

--- Whether the budget is spent (no new expansion should start).
---@return boolean, string|nil
function Ctx:exhausted()
  if not self.stopped and self.run then self.stopped = ask.stop_requested(self.run.dir, self.run.info) end
  if self.stopped then return true, self.stopped end
  if self.budget then
    local s = self:spent()
    self.budget:set_used { tokens = s.tokens, usd = s.usd, device_s = s.device_s }
    local done, why = self.budget:exhausted()
    if done then return true, why end
  end
  return false
end

--- Ask a person and wait for the answer (docs/strategies.md, "Asking a
--- person"): spec {key, kind = "review"|"choose"|"confirm", title, text,
--- options, terminal}. The question is shown by `mkengine serve` / `run
--- --ui` (and on the terminal when `terminal` is set); waiting never blocks
--- the engine. The decision is recorded in the run, so a resumed run gets
--- it back without asking. Returns {verb, text?, choice?, by}; a stop
--- requested from the page answers {verb = "quit", by = "stop"}.
---@param spec mk.AskSpec
function Ctx:ask(spec)
  if not self.run then error("ctx:ask: needs a run directory", 2) end
  return ask.ask(self.run.dir, spec, function(e, q) self:event(e, q) end, self.run.info)
end

--- What the run has spent so far, every session of a resumed run
--- included: {tokens, input_tokens, output_tokens, usd, device_s, wall_s, llm_s}.
function Ctx:spent()
  local u, p = self.usage, self.prior or {}
  local input, output = u.input_tokens + (p.input_tokens or 0), u.output_tokens + (p.output_tokens or 0)
  return {
    tokens = input + output, input_tokens = input, output_tokens = output,
    usd = u.usd + (p.usd or 0), llm_s = u.llm_s + (p.llm_s or 0), device_s = self.device_s + (p.device_s or 0),
    wall_s = task_lib.now() - (self.started or task_lib.now()) + (p.wall_s or 0),
  }
end

local function add_to(acc, r)
  if not acc then return end
  local u = r.usage or {}
  acc.input_tokens = (acc.input_tokens or 0) + (u.input_tokens or 0)
  acc.output_tokens = (acc.output_tokens or 0) + (u.output_tokens or 0)
  acc.usd = (acc.usd or 0) + (r.cost_usd or 0)
  acc.llm_s = (acc.llm_s or 0) + (r.latency_s or 0)
end

--- Ask the model. req = {agent, key, system, messages, max_tokens,
--- temperature}. The key seeds the sample index (distinct cache entries
--- per step) and the offline scripted model's choices. Returns r or nil, err
--- (err.kind "budget" when the budget is spent); terminal model errors
--- (auth, quota, bad_request, cache_miss) raise, ending the run; an
--- endpoint still unavailable after the client's retries (M.UNAVAILABLE)
--- raises an infrastructure error (cause "model_unavailable"): the run
--- stops with that status and `mkengine resume` continues it.
function Ctx:chat(req)
  local spent, why = self:exhausted()
  if spent then return nil, { kind = "budget", message = "budget spent: " .. tostring(why) } end
  local h = rng_lib.hash(tostring(self.seed) .. "\0" .. req.key)
  if self.dump_prompts then dump(self, req) end
  local r, err = self.llm:chat {
    system = req.system, messages = req.messages, max_tokens = req.max_tokens, temperature = req.temperature,
    thinking = req.thinking,
    sample = h & 0x7fffffff,
    meta = { agent = req.agent, key = req.key, seed = h, task_dir = self.task.dir, task_name = self.task.name,
      run_seed = self.seed },
  }
  if not r then
    self:event { type = "llm_error", agent = req.agent, key = req.key, kind = err and err.kind,
      message = err and err.message }
    if err and TERMINAL[err.kind] then
      util.raise({ exit = 1, kind = err.kind, message = "model error (" .. err.kind .. "): " .. tostring(err.message) })
    end
    if err and M.UNAVAILABLE[err.kind] then
      local where = self.llm.endpoint and self.llm:endpoint() or tostring(self.llm.label or self.llm.provider)
      local e = infra.error(string.format("the model endpoint %s failed (%s): %s", where, err.kind,
        tostring(err.message)))
      e.cause, e.endpoint, e.failure = "model_unavailable", where, err.kind
      error(e, 0)
    end
    return nil, err
  end
  local u = self.usage
  u.calls = u.calls + 1
  add_to(u, r)
  add_to(self._acc[task_lib.current()], r)
  return r
end

--- Evaluate candidate files on the target (device slots are handled by the
--- evaluator). Returns the evaluator's result table; identical files share
--- one measurement record (mk.search.records): after the first, a call
--- re-measures the same build and the result carries the combined figure.
function Ctx:evaluate(files, o)
  o = check_options("ctx:evaluate", o, 2)
  if type(files) ~= "table" then return self:_measure(files, o) end
  return records.evaluate(self, files, o)
end

function Ctx:_measure(files, o)
  local t0 = task_lib.now()
  local res = self.eval:evaluate(files, o)
  local device_s = res.device_s or (task_lib.now() - t0)
  self.device_s = self.device_s + device_s
  self.evaluations = self.evaluations + 1
  self:event { type = "evaluation", status = res.status, device_s = device_s } -- the ledger a resume reads
  return res
end

M.source_hash = records.source_hash

--- Benchmark the kernel of a correct node once more, on the same build,
--- and add the sample to its record (every node of that source shows the
--- new figure). Returns the node's figure ({latency_s, speedup,
--- measurements, samples, latency_min_s, latency_max_s}), or nil, why.
---@param node mk.Node
function Ctx:remeasure(node)
  if type(node) ~= "table" or not node.id then error("ctx:remeasure: expects a node", 2) end
  return records.remeasure(self, node)
end

--- Whether node a's kernel is faster than node b's beyond the measured
--- noise: "better", "worse" or "tie" (ranges overlap, or the same kernel),
--- and {a = {latency_s, low, high, measurements}, b = {...}}, the latency
--- ranges compared (mk.search.figure.range: min–max over a kernel's
--- measurements, else the middle 80 % of its one benchmark's calls). A
--- correct node beats one that is not. A tie is settled by measuring
--- again: `ctx:remeasure(a)`, `ctx:remeasure(b)`, then compare again.
---@param a mk.Node
---@param b mk.Node
---@return string, table
function Ctx:compare(a, b) -- luacheck: ignore 212/self
  if type(a) ~= "table" or type(b) ~= "table" then error("ctx:compare: expects two nodes", 2) end
  local function fig(n) return n.status == "ok" and n.kind ~= "reference" and n.metrics or {} end
  return figure.versus(fig(a), fig(b))
end

--- The node with the lowest latency among correct candidates (the
--- reference root is not a candidate), or nil. Of nodes of one source
--- (one shared measurement record, equal latency) the latest: its commit
--- holds all the samples.
function Ctx:best(filter)
  local best
  for _, n in ipairs(self.graph:nodes()) do
    if n.status == "ok" and n.kind ~= "reference" and n.metrics and n.metrics.latency_s
        and (not filter or filter(n)) then
      local bl = best and best.metrics.latency_s
      if not best or n.metrics.latency_s < bl or (n.metrics.latency_s == bl and n.metrics.source_hash
          and n.metrics.source_hash == best.metrics.source_hash) then
        best = n
      end
    end
  end
  return best
end

--- Order of nodes for selection (a sort comparator, usable as
--- `table.sort(list, ctx.better)`): correct before not, then lower latency,
--- then older id.
function Ctx.better(a, b)
  local ao, bo = a.status == "ok", b.status == "ok"
  if ao ~= bo then return ao end
  if ao then
    local la, lb = a.metrics.latency_s or math.huge, b.metrics.latency_s or math.huge
    if la ~= lb then return la < lb end
  end
  return a.id < b.id
end

--- Run one node-producing step, memoised by key (see the module comment).
--- fn() returns a graph:add spec or nil; returns the node (or nil, why).
function Ctx:step(key, fn)
  if type(key) ~= "string" or type(fn) ~= "function" then error("ctx:step: (key, fn) expected", 2) end
  local existing = self.graph:by_key(key)
  if existing then return existing end
  local here = M.call_site()
  if self._live[key] then
    error(string.format("ctx:step: two steps with the same key '%s' run at once (%s and %s): their nodes would be "
      .. "merged; give each its own key", key, self._live[key], here), 2)
  end
  local spent, why = self:exhausted()
  if spent then return nil, "budget: " .. tostring(why) end
  local acc = {}
  local me = task_lib.current()
  self._acc[me] = acc
  self._live[key] = here
  local live <close> = setmetatable({}, { __close = function() self._live[key] = nil end }) -- luacheck: ignore 211
  local spec, err = fn()
  self._acc[me] = nil
  if not spec then return nil, err end
  spec.key = key
  spec.cost = spec.cost or acc
  local node, gerr = self.graph:add(spec)
  if not node then -- git could not write (disk full, permissions): nothing can be kept, stop the run
    infra.raise("cannot commit the node of step " .. key .. ": " .. tostring(type(gerr) == "table" and gerr.message or gerr))
  end
  records.joined(self, node)
  if self.on_node then self.on_node(node) end
  return node
end

--- "file:line" of the nearest caller outside the engine's own modules (the
--- strategy's line that started a step), for error messages.
function M.call_site()
  for level = 3, 40 do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    local src = info.short_src or ""
    if info.currentline > 0 and not src:find("lua/mk/", 1, true) and not src:find("lua/agents/", 1, true)
        and not src:find("targets/[%w_]+/target%.lua") then
      return src .. ":" .. info.currentline
    end
  end
  return "a line hidden by a tail call"
end

--- Check what a strategy's run() returned: nil, or a node of this graph.
--- Returns the node, or nil and (for anything else) a warning naming the
--- strategy's run function by file:line: the run then reports its best
--- correct node as if run() had returned nil, so a search that found a
--- correct kernel keeps it. `run_fn` is the strategy's run function.
function M.check_result(ctx, ret, path, run_fn)
  if ret == nil then return nil end
  if type(ret) == "table" and ret.id ~= nil and rawget(ctx, "graph"):get(ret.id) == ret then return ret end
  local what = type(ret) == "table" and "a table that is not a node of this run's graph" or
      (type(ret) .. " " .. tostring(ret))
  local where = path
  local info = type(run_fn) == "function" and debug.getinfo(run_fn, "S")
  if info and info.source:sub(1, 1) == "@" then where = info.source:sub(2) .. ":" .. info.linedefined end
  return nil, string.format("strategy %s: run() must return a node of the graph or nil, got %s; "
    .. "the run's best correct node is reported instead", where, what)
end

--- Evaluate what an agent produced and turn it into a node spec.
--- kind: "implement" | "fix" | "tune" | ...; parents: list of nodes;
--- out: the agent's result ({files, code, transcript, knowledge});
--- extra: {plan, direction, transcripts = {...}, feedback = bool, tune = bool}.
function Ctx:evaluated(kind, parents, out, extra)
  extra = check_options("ctx:evaluated", extra, 2)
  local parent_ids = {}
  for i, p in ipairs(parents) do parent_ids[i] = p.id end
  local transcripts = extra.transcripts or {}
  if out.transcript then transcripts[#transcripts + 1] = out.transcript end
  local meta = { direction = extra.direction, knowledge = out.knowledge, transcript = transcripts,
    changed = out.changed }
  local files, res
  if not out.code then
    meta.no_code = true -- repaired from the nearest ancestor with code (see Ctx:_repair_step)
    files = { ["reply.txt"] = out.transcript and out.transcript.reply or "" }
    res = { status = "compile_error", correct = false,
      message = "the model's reply contained no fenced code block with the complete file" }
  else
    files = out.files
    res = self:evaluate(files, { tune = extra.tune or false, profile = true })
    -- the machine failed, not the candidate: no verdict to commit; the run stops and a resume redoes the step
    if res.status == "infra" then infra.raise(res.message) end
  end
  meta.profile = res.profile and res.profile.text
  meta.tune = res.tune
  meta.worker = res.worker -- where it was evaluated (with --workers)
  if res.status == "ok" and extra.feedback then
    local fb = self.agents.profile { profile = res.profile, code = out.code,
      metrics = { status = "ok", metrics = res }, key = extra.key or kind }
    meta.feedback = fb.text
    if fb.transcript then transcripts[#transcripts + 1] = fb.transcript end
  end
  return {
    parents = parent_ids, kind = kind, files = files, plan = extra.plan, status = res.status,
    -- the error a failed candidate got: error.txt in its commit, shown by `mkengine show RUN NODE`
    error = res.status ~= "ok" and self:_error_text(res.message) or nil,
    metrics = { latency_s = res.latency_s, speedup = res.speedup, baseline_latency_s = res.baseline_latency_s,
      correct = res.correct, spread = res.spread, timing_kind = res.timing_kind, gflops = res.profile and res.profile.gflops,
      gbps = res.profile and res.profile.gbps,
      -- the source's measurement record, shared by identical candidates of the run
      source_hash = res.source_hash, measurements = res.measurements, samples = res.samples,
      latency_min_s = res.latency_min_s, latency_max_s = res.latency_max_s, flagged = res.flagged,
      contended = res.contended,
      timing = res.timing }, -- where this evaluation's time went (compile_s, test_s, ...)
    meta = meta,
  }
end

-- A failed candidate's error as kept with its node: cut to the
-- agent_error_chars setting, head and tail (no setting: kept whole).
function Ctx:_error_text(msg)
  local n = self:setting("agent_error_chars")
  return n and template.clip(msg, n) or tostring(msg or "")
end

local function faster(a, b)
  return a and a.status == "ok" and a.metrics.latency_s and
      (not b or not b.metrics.latency_s or a.metrics.latency_s < b.metrics.latency_s)
end

-- Statuses the fix loop repairs; a wrong answer (incorrect) goes back to planning.
M.REPAIRABLE = { compile_error = true, rejected = true, crash = true }

-- One repair attempt of `prev` under step key FK. A reply that had no code
-- is repaired from the nearest ancestor with code: a failed candidate goes
-- to fix, the node the implementer started from goes back to implement with
-- the same plan. Either way the node is a "fix" node, child of `prev`.
function Ctx:_repair_step(prev, FK, attempt, max_fix, o)
  local src = prev
  while src.meta and src.meta.no_code and src.parents[1] do src = self.graph:get(src.parents[1]) end
  return self:step(FK, function()
    if src ~= prev and not M.REPAIRABLE[src.status] then
      local impl, ierr = self.agents.implement { plan = prev.plan, parent = src, key = FK }
      if not impl then return nil, ierr end
      local spec = self:evaluated("fix", { prev }, impl, { plan = prev.plan, feedback = o.feedback, key = FK })
      spec.meta.changed = "(the reply before had no code: the implementer was asked again)"
      return spec
    end
    local fx, ferr = self.agents.fix { node = src, attempt = attempt, max_attempts = max_fix, key = FK }
    if not fx then return nil, ferr end
    return self:evaluated("fix", { prev }, fx, { plan = prev.plan, feedback = o.feedback, key = FK })
  end)
end

--- The fix loop: while `n` did not compile, was rejected or crashed (see
--- M.REPAIRABLE), ask the fix agent (up to o.max_fix attempts, each
--- attempt a node, child of the previous one). Returns the last node.
--- o: {max_fix, feedback, made = list to append to}.
function Ctx:repair(n, key, o)
  o = check_options("ctx:repair", o, 2)
  local max_fix = o.max_fix or self.opts.max_fix or 6
  local attempt = 0
  while M.REPAIRABLE[n.status] and attempt < max_fix do
    attempt = attempt + 1
    local fixed = self:_repair_step(n, key .. "/fix" .. attempt, attempt, max_fix, o)
    if not fixed then break end
    n = fixed
    if o.made then o.made[#o.made + 1] = n end
  end
  return n
end

--- How a plan ended, in one line: "ok, 1.83x the baseline" or
--- "compile_error: <first line of the error>".
function M.outcome(n)
  if n.status == "ok" then
    local m = n.metrics or {}
    if m.timing_kind == "interpret" then return "ok (interpret timing: no speedup)" end
    return string.format("ok, %.2fx the baseline", m.speedup or 0)
  end
  local first = tostring(n.error or ""):match("[^\n]*%S[^\n]*") or ""
  return n.status .. ": " .. first:sub(1, 200)
end

--- One Auto trajectory from `start`: plan → implement → compile (fix loop)
--- → test → tune → profile, the profile feeding the next plan; a compile or
--- numeric failure goes back to planning. Every step is a node. Returns the
--- fastest correct node made by this trajectory (not `start`; nil if none)
--- and the list of nodes it made.
--- o: {iters = opts.iters or 5, tag = "auto", direction = text,
---     max_fix = opts.max_fix or 6, tune = opts.tune ~= false}
function Ctx:auto(start, o)
  o = check_options("ctx:auto", o, 2)
  if type(start) ~= "table" or not start.id then error("ctx:auto: start must be a node", 2) end
  local iters = o.iters or self.opts.iters or 5
  local max_fix = o.max_fix or self.opts.max_fix or 6
  local tune = o.tune
  if tune == nil then tune = self.opts.tune ~= false end
  -- the k-th trajectory from the same node with the same tag gets tag#k: never
  -- merged into the first; deterministic because a re-executed strategy makes
  -- its calls in the same order
  local base = self:path(start) .. "/" .. (o.tag or "auto")
  local calls = self._trajectories
  calls[base] = (calls[base] or 0) + 1
  if calls[base] > 1 then base = base .. "#" .. calls[base] end
  local current, err_feedback = start, nil
  local made, tried = {}, {} -- tried: {plan, outcome} per iteration, the planner's memory
  for it = 1, iters do
    if self:exhausted() then break end
    local K = base .. "/i" .. it
    local n = self:step(K .. "/impl", function()
      local plan, perr = self.agents.plan { parent = current, direction = o.direction, error = err_feedback,
        tried = tried, key = K }
      if not plan then return nil, perr end
      local impl, ierr = self.agents.implement { plan = plan.text, parent = current, key = K }
      if not impl then return nil, ierr end
      return self:evaluated("implement", { current }, impl, {
        plan = plan.text, direction = o.direction, transcripts = { plan.transcript },
        feedback = not tune, key = K .. "/impl" })
    end)
    if not n then break end
    made[#made + 1] = n
    n = self:repair(n, K, { max_fix = max_fix, feedback = not tune, made = made })
    if n.status == "ok" and tune then
      local TK, impl_node = K .. "/tune", n
      local tuned = self:step(TK, function()
        local tn, terr = self.agents.tune { node = impl_node, key = TK }
        if not tn then return nil, terr end
        return self:evaluated("tune", { impl_node }, tn, { plan = impl_node.plan, tune = true, feedback = true, key = TK })
      end)
      if tuned then
        made[#made + 1] = tuned
        if tuned.status == "ok" and not faster(n, tuned) then n = tuned end -- tuned and not slower
      end
    end
    tried[#tried + 1] = { plan = n.plan, outcome = M.outcome(n) }
    if n.status == "ok" then
      current, err_feedback = n, nil
    else
      err_feedback = n.status .. ": " .. (n.error or "")
    end
  end
  -- only nodes made by this trajectory count; chosen at the end, since a
  -- shared measurement record may have moved an earlier node's latency
  local best
  for _, n in ipairs(made) do
    if faster(n, best) then best = n end
  end
  return best, made
end

--- A direction (optimisation idea) from the target's menu, chosen by a
--- generator seeded with key, or nil when the target has no menu. Menus
--- live in targets/<t>/directions.lua.
function Ctx:direction(key)
  local menu = targets.directions(self.task.target)
  if #menu == 0 then return nil end
  return self:rng(key):pick(menu)
end

--- Run fn(...) for each element concurrently; returns results in order.
function Ctx:map(list, fn) -- luacheck: ignore 212/self
  local hs = {}
  for i, v in ipairs(list) do hs[i] = task_lib.spawn(fn, v, i) end
  return task_lib.gather(hs)
end

return M

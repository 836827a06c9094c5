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
local task_lib = require "mk.services.task"
local rng_lib = require "mk.services.rng"
local targets = require "mk.search.targets"
local template = require "mk.services.template"
local fs = require "mk.fs"

local Ctx = {}
Ctx.__index = Ctx

local M = {}

--- The sub-agents a context needs.
M.AGENTS = { "plan", "implement", "fix", "tests", "tune", "profile" }

-- errors of the model that no retry or other step can fix: the run stops
local TERMINAL = { auth = true, quota = true, bad_request = true, cache_miss = true }

--- Build a context. Fields of o: task, graph, run (rundir), eval, llm
--- (client), opts (strategy options), seed, budget (may be nil),
--- log (function(fmt, ...)), agents (the sub-agents: a table with a
--- module for each of M.AGENTS, as `require "agents"` returns, and
--- optionally `defaults`, the agents' settings read by ctx:setting; handed
--- in, never required here, so the search floor does not reach up),
--- dump_prompts (a directory: every model request is written there).
function M.new(o)
  local ctx = setmetatable({
    task = o.task, graph = o.graph, run = o.run, eval = o.eval, llm = o.llm,
    opts = o.opts or {}, seed = o.seed or 0, budget = o.budget, dump_prompts = o.dump_prompts,
    log_fn = o.log, tasks = task_lib,
    device_s = 0, evaluations = 0, usage = { input_tokens = 0, output_tokens = 0, usd = 0, llm_s = 0, calls = 0 },
    _acc = setmetatable({}, { __mode = "k" }),
  }, Ctx)
  local mods = o.agents
  if type(mods) ~= "table" then error("context.new: agents must be the table of sub-agents (require \"agents\")", 2) end
  ctx.agents = {}
  ctx.defaults = type(mods.defaults) == "table" and mods.defaults or {}
  for _, name in ipairs(M.AGENTS) do
    local mod = mods[name]
    if type(mod) ~= "table" or type(mod.run) ~= "function" then
      error("context.new: agents." .. name .. " must be a module with a run function", 2)
    end
    ctx.agents[name] = function(a) return mod.run(ctx, a) end
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

--- Append an event to the run's events.jsonl.
function Ctx:event(e)
  if self.run then self.run:event(e) end
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
  if self.stopped then return true, self.stopped end
  if self.budget then
    local s = self:spent()
    self.budget:set_used { tokens = s.tokens, usd = s.usd, device_s = s.device_s }
    local done, why = self.budget:exhausted()
    if done then return true, why end
  end
  return false
end

--- What the run has spent so far: {tokens, input_tokens, output_tokens, usd, device_s, wall_s, llm_s}.
function Ctx:spent()
  local u = self.usage
  return {
    tokens = u.input_tokens + u.output_tokens, input_tokens = u.input_tokens, output_tokens = u.output_tokens,
    usd = u.usd, llm_s = u.llm_s, device_s = self.device_s,
    wall_s = task_lib.now() - (self.started or task_lib.now()),
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
--- (auth, quota, bad_request, cache_miss) raise, ending the run.
function Ctx:chat(req)
  local spent, why = self:exhausted()
  if spent then return nil, { kind = "budget", message = "budget spent: " .. tostring(why) } end
  local h = rng_lib.hash(tostring(self.seed) .. "\0" .. req.key)
  if self.dump_prompts then dump(self, req) end
  local r, err = self.llm:chat {
    system = req.system, messages = req.messages, max_tokens = req.max_tokens, temperature = req.temperature,
    thinking = req.thinking,
    sample = h & 0x7fffffff,
    meta = { agent = req.agent, key = req.key, seed = h, task_dir = self.task.dir, task_name = self.task.name },
  }
  if not r then
    self:event { type = "llm_error", agent = req.agent, key = req.key, kind = err and err.kind,
      message = err and err.message }
    if err and TERMINAL[err.kind] then
      error(setmetatable({ exit = 1, kind = err.kind, message = "model error (" .. err.kind .. "): " .. tostring(err.message) },
        { __tostring = function(e) return e.message end }), 0)
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
--- evaluator). Returns the evaluator's result table.
function Ctx:evaluate(files, o)
  local t0 = task_lib.now()
  local res = self.eval:evaluate(files, o or {})
  self.device_s = self.device_s + (res.device_s or (task_lib.now() - t0))
  self.evaluations = self.evaluations + 1
  return res
end

--- The node with the lowest latency among correct candidates (the
--- reference root is not a candidate), or nil.
function Ctx:best(filter)
  local best
  for _, n in ipairs(self.graph:nodes()) do
    if n.status == "ok" and n.kind ~= "reference" and n.metrics and n.metrics.latency_s
        and (not filter or filter(n)) then
      if not best or n.metrics.latency_s < best.metrics.latency_s then best = n end
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
  local existing = self.graph:by_key(key)
  if existing then return existing end
  local spent, why = self:exhausted()
  if spent then return nil, "budget: " .. tostring(why) end
  local acc = {}
  local me = task_lib.current()
  self._acc[me] = acc
  local spec, err = fn()
  self._acc[me] = nil
  if not spec then return nil, err end
  spec.key = key
  spec.cost = spec.cost or acc
  local node, gerr = self.graph:add(spec)
  if not node then -- git could not write (disk full, permissions): nothing can be kept, stop the run
    error("cannot commit the node of step " .. key .. ": " .. tostring(type(gerr) == "table" and gerr.message or gerr), 0)
  end
  if self.on_node then self.on_node(node) end
  return node
end

--- Evaluate what an agent produced and turn it into a node spec.
--- kind: "implement" | "fix" | "tune" | ...; parents: list of nodes;
--- out: the agent's result ({files, code, transcript, knowledge});
--- extra: {plan, direction, transcripts = {...}, feedback = bool, tune = bool}.
function Ctx:evaluated(kind, parents, out, extra)
  extra = extra or {}
  local parent_ids = {}
  for i, p in ipairs(parents) do parent_ids[i] = p.id end
  local transcripts = extra.transcripts or {}
  if out.transcript then transcripts[#transcripts + 1] = out.transcript end
  local meta = { direction = extra.direction, knowledge = out.knowledge, transcript = transcripts,
    changed = out.changed }
  local files, res
  if not out.code then
    meta.no_code = true -- repaired by asking the implementer again, not fix (see Ctx:repair)
    files = { ["reply.txt"] = out.transcript and out.transcript.reply or "" }
    res = { status = "compile_error", correct = false,
      message = "the model's reply contained no fenced code block with the complete file" }
  else
    files = out.files
    res = self:evaluate(files, { tune = extra.tune or false, profile = true })
  end
  meta.profile = res.profile and res.profile.text
  meta.tune = res.tune
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
      correct = res.correct, spread = res.spread, gflops = res.profile and res.profile.gflops,
      gbps = res.profile and res.profile.gbps },
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

-- One repair attempt of `prev` under step key FK: a reply that had no code
-- goes back to the implementer with the same plan, anything else to fix.
-- Either way the node is a "fix" node (a repair attempt of the candidate).
function Ctx:_repair_step(prev, FK, attempt, max_fix, o)
  return self:step(FK, function()
    if prev.meta and prev.meta.no_code then
      local base = prev.parents[1] and self.graph:get(prev.parents[1]) or nil
      local impl, ierr = self.agents.implement { plan = prev.plan, parent = base, key = FK }
      if not impl then return nil, ierr end
      local spec = self:evaluated("fix", { prev }, impl, { plan = prev.plan, feedback = o.feedback, key = FK })
      spec.meta.changed = "(the reply before had no code: the implementer was asked again)"
      return spec
    end
    local fx, ferr = self.agents.fix { node = prev, attempt = attempt, max_attempts = max_fix, key = FK }
    if not fx then return nil, ferr end
    return self:evaluated("fix", { prev }, fx, { plan = prev.plan, feedback = o.feedback, key = FK })
  end)
end

--- The fix loop: while `n` did not compile, was rejected or crashed (see
--- M.REPAIRABLE), ask the fix agent (up to o.max_fix attempts, each
--- attempt a node, child of the previous one). Returns the last node.
--- o: {max_fix, feedback, made = list to append to}.
function Ctx:repair(n, key, o)
  o = o or {}
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
    return string.format("ok, %.2fx the baseline", n.metrics and n.metrics.speedup or 0)
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
  o = o or {}
  local iters = o.iters or self.opts.iters or 5
  local max_fix = o.max_fix or self.opts.max_fix or 6
  local tune = o.tune
  if tune == nil then tune = self.opts.tune ~= false end
  local base = self:path(start) .. "/" .. (o.tag or "auto")
  local best -- only nodes made by this trajectory count
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
      if faster(n, best) then best = n end
    else
      err_feedback = n.status .. ": " .. (n.error or "")
    end
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

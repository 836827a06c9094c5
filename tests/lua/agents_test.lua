-- The sub-agents' prompts, rendered for a real task, contain what the
-- model needs (task, signature, reference, parent code and metrics,
-- feedback, errors, direction, knowledge passages, output format), and
-- replies are parsed as documented. A recording fake client stands in for
-- the model.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local targets = require "mk.eval.targets"
local graph_lib = require "mk.search.graph"
local context = require "mk.search.context"
local template = require "mk.services.template"
local common = require "agents.common"

local task = assert(targets.load_task("tests/tasks/rmsnorm_small"))

local function recorder(reply)
  local c = { label = "recording fake client", requests = {} }
  function c:chat(req)
    self.requests[#self.requests + 1] = req
    local text = type(reply) == "function" and reply(req) or reply
    return { text = text, usage = { input_tokens = 10, output_tokens = 5 }, cost_usd = 0, latency_s = 0 }
  end
  return c
end

local function ctx_with(client, opts)
  local dir = t.tmpdir("mk-agents")
  local g = assert(graph_lib.open(dir .. "/graph.git", { create = true }))
  local ctx = context.new { task = task, graph = g, llm = client, opts = opts or {}, seed = 1, agents = require "agents",
    eval = { evaluate = function() return { status = "ok", latency_s = 0.001, speedup = 2 } end } }
  ctx:step("root", function()
    return { parents = {}, kind = "reference", status = "ok", files = { ["kernel.c"] = task.reference },
      metrics = { latency_s = 0.002, speedup = 1 } }
  end)
  local parent = ctx:step("p", function()
    return { parents = { ctx.graph:root().id }, kind = "implement", status = "ok",
      files = { ["kernel.c"] = "void kernel(void) { /* PARENT-CODE */ }" },
      metrics = { latency_s = 0.001, speedup = 2.0 }, meta = { feedback = "PARENT-FEEDBACK memory-bound" } }
  end)
  return ctx, parent
end

local function user_prompt(req) return req.messages[1].content end

t.test("plan prompt holds task, signature, reference, parent code, metrics, feedback, error and direction", function()
  local c = recorder("Title\nplan text")
  local ctx, parent = ctx_with(c)
  local r = ctx.agents.plan { parent = parent, error = "ERR-TEXT", direction = "DIRECTION-TEXT", key = "k" }
  t.eq(r.text, "Title\nplan text")
  local p = user_prompt(c.requests[1])
  t.contains(p, task.description)
  t.contains(p, "void kernel(const float *x, const float *scale, float *out, int rows, int cols)")
  t.contains(p, "Reference rmsnorm")
  t.contains(p, "PARENT-CODE")
  t.contains(p, "2.00x the baseline's speed")
  t.contains(p, "PARENT-FEEDBACK")
  t.contains(p, "ERR-TEXT")
  t.contains(p, "DIRECTION-TEXT")
  t.contains(p, "Do not write the code")
  t.contains(c.requests[1].system, "atol=0.0001")
  t.eq(c.requests[1].meta.agent, "plan")
  t.eq(c.requests[1].meta.key, "k/plan")
end)

t.test("plan from the reference root shows no parent section", function()
  local c = recorder("T\nx")
  local ctx = ctx_with(c)
  ctx.agents.plan { parent = ctx.graph:root(), key = "k" }
  t.ok(not user_prompt(c.requests[1]):find("## Current kernel", 1, true))
end)

t.test("prompts carry knowledge-base passages for the target, and the node records which", function()
  local c = recorder("T\nx")
  local ctx, parent = ctx_with(c)
  local r = ctx.agents.plan { parent = parent, key = "k", direction = "vectorise the loop with OpenMP and restrict" }
  local p = user_prompt(c.requests[1])
  t.contains(p, "## Notes from the knowledge base")
  t.ok(#r.knowledge > 0)
  for _, k in ipairs(r.knowledge) do
    local f = k.file or k.name or ""
    t.ok(not f:match("pallas%-") and not f:match("tpu%-"), "TPU passage in a C prompt: " .. f)
  end
  local c2 = recorder("T\nx")
  local ctx2, parent2 = ctx_with(c2, { kb = false })
  ctx2.agents.plan { parent = parent2, key = "k" }
  t.ok(not user_prompt(c2.requests[1]):find("knowledge base", 1, true), "kb=false removes the passages")
end)

t.test("implement extracts the fenced C block defining the entry; no block gives nil code", function()
  local c = recorder("text\n```c\nvoid kernel() {}\n```\nmore\n```c\nint a; /* a usage example */\n```\n")
  local ctx, parent = ctx_with(c)
  local r = ctx.agents.implement { plan = "PLAN-TEXT", parent = parent, key = "k" }
  t.eq(r.code, "void kernel() {}\n")
  t.eq(r.files["kernel.c"], "void kernel() {}\n")
  t.contains(user_prompt(c.requests[1]), "PLAN-TEXT")
  t.contains(user_prompt(c.requests[1]), "Implement the plan")
  local c2 = recorder("I cannot do that.")
  local ctx2 = ctx_with(c2)
  local r2 = ctx2.agents.implement { key = "k" }
  t.eq(r2.code, nil)
  t.contains(user_prompt(c2.requests[1]), "Write a complete, correct and fast kernel")
end)

t.test("crossover prompt shows both parents", function()
  local c = recorder("```c\nx\n```")
  local ctx, parent = ctx_with(c)
  local second = ctx:step("s", function()
    return { parents = { parent.id }, kind = "implement", status = "ok", files = { ["kernel.c"] = "/* SECOND-CODE */" },
      metrics = { latency_s = 0.0015, speedup = 1.3 } }
  end)
  ctx.agents.implement { parent = parent, second = second, key = "k" }
  local p = user_prompt(c.requests[1])
  t.contains(p, "PARENT-CODE"); t.contains(p, "SECOND-CODE"); t.contains(p, "combines the strengths")
end)

t.test("fix prompt holds the failing code, its status, the error text and the attempt count", function()
  local c = recorder("```c\nfixed\n```")
  local ctx, parent = ctx_with(c)
  local bad = ctx:step("bad", function()
    return { parents = { parent.id }, kind = "implement", status = "compile_error", files = { ["kernel.c"] = "BROKEN-CODE" },
      error = "kernel.c:3: error: expected ';'" }
  end)
  local r = ctx.agents.fix { node = bad, attempt = 2, max_attempts = 6, key = "k" }
  t.eq(r.code, "fixed\n")
  local p = user_prompt(c.requests[1])
  t.contains(p, "BROKEN-CODE"); t.contains(p, "compile_error"); t.contains(p, "expected ';'")
  t.contains(p, "attempt 2 of 6")
end)

t.test("tests agent keeps only valid size proposals", function()
  local c = recorder('```json\n[{"rows": 3, "cols": 17}, {"rows": 0, "cols": 5}, {"rows": 2}, {"rows": 9, "cols": 1.5}]\n```')
  local ctx = ctx_with(c)
  local sizes = ctx.agents.tests { key = "k" }
  t.same(sizes, { { rows = 3, cols = 17 } })
  t.contains(user_prompt(c.requests[1]), "Size symbols: cols, rows")
  local c2 = recorder("not json at all")
  t.same(ctx_with(c2).agents.tests { key = "k" }, {})
end)

t.test("tune and profile prompts hold the code, metrics and profile text", function()
  local c = recorder("```c\n// mk:tune B 1 2\ncode\n```")
  local ctx, parent = ctx_with(c)
  local r = ctx.agents.tune { node = parent, key = "k" }
  t.contains(r.code, "mk:tune B")
  t.contains(user_prompt(c.requests[1]), "// mk:tune NAME")
  local c2 = recorder("It is memory-bound.")
  local ctx2 = ctx_with(c2)
  local fb = ctx2.agents.profile { profile = { text = "PROFILE-TEXT 3 GB/s" }, code = "CODE", metrics = "ok", key = "k" }
  t.eq(fb.text, "It is memory-bound.")
  t.contains(user_prompt(c2.requests[1]), "PROFILE-TEXT")
end)

t.test("every prompt file renders without unknown placeholders for both targets", function()
  local personas = {}
  for _, name in ipairs(targets.list()) do personas[name] = targets.persona(name) end
  t.ok(personas.c and personas.pallas, "both shipped targets have a persona")
  for name, p in pairs(personas) do
    for _, field in ipairs({ "target_desc", "lang", "rules", "tune_syntax" }) do
      t.ok(p[field], name .. " lacks " .. field)
    end
  end
  local vars = setmetatable({}, { __index = function() return "x" end })
  for _, f in ipairs(fs.list(require("mk.home").path("lua/agents/prompts"))) do
    local name = f:match("^(.+)%.txt$")
    if name then t.ok(#template.render(require("agents.common").prompt(name), vars) > 20, name) end
  end
  t.raises(function() template.render("{{nope}}", {}) end, "no value for {{nope}}")
end)

t.test("extract_code accepts python blocks for the pallas target", function()
  t.eq(common.extract_code("```python\nimport jax\n```", "python"), "import jax\n")
  t.eq(common.extract_code("```py\nx = 1\n```", "python"), "x = 1\n")
  t.eq(common.extract_code("no code", "c"), nil)
end)

t.test("a terminal model error (bad key) stops the run with a clear message", function()
  local c = { label = "failing fake" }
  function c.chat() return nil, { kind = "auth", message = "invalid API key" } end
  local ctx, parent = ctx_with(c)
  local err = t.raises(function() ctx.agents.plan { parent = parent, key = "k" } end, "model error (auth)")
  t.eq(err.exit, 1)
  -- an endpoint still failing after the client's retries stops the run as
  -- an infrastructure failure (status model_unavailable), naming where
  local c2 = { label = "flaky fake" }
  function c2.chat() return nil, { kind = "server", message = "500 after retries" } end
  local ctx2, parent2 = ctx_with(c2)
  local e2 = t.raises(function() ctx2.agents.plan { parent = parent2, key = "k" } end,
    "the model endpoint flaky fake failed (server): 500 after retries")
  t.eq(e2.kind, "infra")
  t.eq(e2.cause, "model_unavailable")
  -- an answer that cannot be used is the step's failure: the strategy goes on
  local c3 = { label = "garbling fake" }
  function c3.chat() return nil, { kind = "bad_response", message = "not JSON" } end
  local ctx3, parent3 = ctx_with(c3)
  local r, e = ctx3.agents.plan { parent = parent3, key = "k" }
  t.eq(r, nil)
  t.eq(e.kind, "bad_response")
end)

-- a failed candidate and a chain of fix attempts under it
local function failed_chain(ctx, parent, errors)
  local prev = ctx:step("bad", function()
    return { parents = { parent.id }, kind = "implement", status = "compile_error", plan = "PLAN-OF-CANDIDATE\nsteps",
      files = { ["kernel.c"] = "BROKEN-CODE" }, error = errors[1] }
  end)
  for i = 2, #errors do
    local p = prev
    prev = ctx:step("fix" .. i, function()
      return { parents = { p.id }, kind = "fix", status = "compile_error", plan = p.plan,
        files = { ["kernel.c"] = "BROKEN-CODE-" .. i }, error = errors[i], meta = { changed = "CHANGE-" .. i } }
    end)
  end
  return prev
end

t.test("a C fix prompt holds the plan, the reference, the sizes, the rules and the earlier attempts", function()
  local c = recorder("Changed: added the missing semicolon\n```c\nvoid kernel(float *o) { o[0] = 1; }\n```\n")
  local ctx, parent = ctx_with(c)
  local bad = failed_chain(ctx, parent, { "kernel.c:3:1: error: expected ';' before '}'",
    "kernel.c:9:2: error: 'acc' undeclared" })
  local r = ctx.agents.fix { node = bad, attempt = 2, max_attempts = 6, key = "k" }
  t.eq(r.changed, "added the missing semicolon")
  local p, sys = user_prompt(c.requests[1]), c.requests[1].system
  t.contains(p, "## Plan the kernel implements\nPLAN-OF-CANDIDATE")
  t.contains(p, "Reference rmsnorm")
  t.contains(p, task.description)
  t.contains(p, "no file or network I/O") -- the target's rules
  t.contains(p, "## Earlier attempts at this kernel")
  t.contains(p, "1. the first version (implement) -> compile_error:\nkernel.c:3:1: error: expected ';'")
  t.contains(p, "'acc' undeclared")
  t.contains(p, "Changed: <what you changed")
  t.ok(not p:find("change approach", 1, true), "two different errors: no change of approach asked")
  t.contains(sys, "benchmark size (timed): {cols=2048, rows=256}")
  t.contains(sys, "test sizes (correctness): {cols=129, rows=37}")
  t.contains(sys, "logical CPUs: ")
  t.eq(c.requests[1].temperature, 0.4)
end)

t.test("the scripted model answers a real fix prompt (plan id first) with the bank's fix of the failing kernel", function()
  require "mk.services.llm.providers.scripted"
  local scripted = require("mk.services.llm").client { provider = "scripted", model = "scripted" }
  local ctx, parent = ctx_with(scripted)
  local typo = fs.read("tests/tasks/rmsnorm_small/scripted/stream_store_typo.c")
  local bad = ctx:step("typo", function()
    return { parents = { parent.id }, kind = "implement", status = "compile_error",
      plan = "Plan stream_stores [bank:stream_stores]\nstream the rows",
      files = { ["kernel.c"] = "// bank:stream_store_typo\n" .. typo },
      error = "kernel.c:14:9: error: expected ',' or ';' before '#pragma'" }
  end)
  local r = ctx.agents.fix { node = bad, attempt = 1, max_attempts = 6, key = "k" }
  t.ok(r.code, "the reply has code")
  t.contains(r.code, "bank:stream_store\n")
  t.eq(r.code:find("bank:stream_store_typo", 1, true), nil, "not the broken kernel again")
end)

t.test("after the same error twice fix is told to change approach and samples hotter", function()
  local c = recorder("```c\nvoid kernel(float *o) { o[0] = 1; }\n```\n")
  local ctx, parent = ctx_with(c)
  local bad = failed_chain(ctx, parent, { "kernel.c:3:1: error: expected ';' before '}'",
    "kernel.c:7:5: error: expected ';' before '}'" })
  ctx.agents.fix { node = bad, attempt = 2, max_attempts = 6, key = "k" }
  t.contains(user_prompt(c.requests[1]), "failed with the same error (compile_error)")
  t.contains(user_prompt(c.requests[1]), "2. CHANGE-2 -> compile_error:\n(the kernel and the error above)")
  t.eq(c.requests[1].temperature, 0.7)
end)

t.test("plan remembers the plans tried, the parent's plan, its tuned configuration and its raw profile", function()
  local c = recorder("T\nx")
  local ctx, parent = ctx_with(c)
  local tuned = ctx:step("tuned", function()
    return { parents = { parent.id }, kind = "tune", status = "ok", plan = "PARENT-PLAN-TITLE\ndetails",
      files = { ["kernel.c"] = "void kernel(void) {}" }, metrics = { latency_s = 0.0005, speedup = 4 },
      meta = { profile = "RAW-PROFILE 12 GB/s", tune = { params = { BM = 64, UNROLL = 4 },
        tried = { {}, {}, {} } } } }
  end)
  ctx.agents.plan { parent = tuned, key = "k", error = "E" .. string.rep("x", 5000) .. "MOSAIC-CAUSE-AT-END",
    tried = { { plan = "# Vectorise rows\nmore", outcome = "ok, 1.50x the baseline" },
      { plan = "Block columns", outcome = "compile_error: kernel.c:1: error" } } }
  local p = user_prompt(c.requests[1])
  t.contains(p, "## The plan the current kernel implements\nPARENT-PLAN-TITLE")
  t.contains(p, "BM=64, UNROLL=4 (best of 3 configurations tried)")
  t.contains(p, "## Profile of the current kernel\nRAW-PROFILE 12 GB/s")
  t.contains(p, "1. Vectorise rows -> ok, 1.50x the baseline")
  t.contains(p, "2. Block columns -> compile_error: kernel.c:1: error")
  t.contains(p, "MOSAIC-CAUSE-AT-END") -- errors keep their tail
  t.contains(p, "characters cut")
end)

t.test("agent settings come from the run options: tokens, temperature, thinking budget", function()
  local c = recorder("T\nx")
  local ctx, parent = ctx_with(c, { agent_max_tokens = 1000, agent_temperature = 0.9, agent_thinking_budget = 500,
    agent_thinking_effort = "high" })
  ctx.agents.plan { parent = parent, key = "k" }
  local req = c.requests[1]
  t.eq(req.max_tokens, 1500) -- the thinking budget counts against the output limit
  t.eq(req.temperature, 0.9)
  t.same(req.thinking, { budget_tokens = 500, effort = "high" })
  local c2 = recorder("T\nx")
  local ctx2, parent2 = ctx_with(c2)
  ctx2.agents.plan { parent = parent2, key = "k" }
  t.eq(c2.requests[1].max_tokens, common.DEFAULTS.agent_max_tokens)
  t.eq(c2.requests[1].thinking, nil)
end)

t.test("by default Gemini gets a bounded thinking budget and room for it; OpenAI and Anthropic none", function()
  for provider, want in pairs { gemini = 8192, openai = false, anthropic = false } do
    local c = recorder("T\nx")
    c.provider = provider
    local ctx, parent = ctx_with(c)
    ctx.agents.plan { parent = parent, key = "k" }
    local req = c.requests[1]
    if want then
      t.same(req.thinking, { budget_tokens = want }, provider)
      t.eq(req.max_tokens, common.DEFAULTS.agent_max_tokens + want, provider)
    else
      t.eq(req.thinking, nil, provider)
      t.eq(req.max_tokens, common.DEFAULTS.agent_max_tokens, provider)
    end
  end
end)

t.test("a reply cut by the token limit is asked again once with more room", function()
  local n = 0
  local c = recorder("unused")
  function c:chat(req)
    self.requests[#self.requests + 1] = req
    n = n + 1
    local cut = n == 1
    return { text = cut and "```c\nvoid kernel(float *o) {" or "```c\nvoid kernel(float *o) { o[0] = 1; }\n```",
      finish_reason = cut and "length" or "stop", usage = { input_tokens = 1, output_tokens = 1 } }
  end
  local ctx = ctx_with(c)
  local r = ctx.agents.implement { plan = "P", key = "k" }
  t.eq(#c.requests, 2)
  t.eq(c.requests[2].max_tokens, 2 * c.requests[1].max_tokens)
  t.eq(c.requests[2].meta.key, "k/implement/longer")
  t.eq(r.code, "void kernel(float *o) { o[0] = 1; }\n")
  t.eq(r.transcript.retried_longer, true)
end)

t.test("clip keeps the head and the tail of a long error", function()
  local s = "HEAD" .. string.rep("-", 10000) .. "TAIL"
  local c = template.clip(s, 300)
  t.ok(#c < 400, #c)
  t.eq(c:sub(1, 4), "HEAD")
  t.eq(c:sub(-4), "TAIL")
  t.eq(template.clip("short", 300), "short")
end)

t.test("pallas facts name the device, versions and the chip's figures with their source", function()
  local pallas = targets.get("pallas")
  local f = {}
  for _, kv in ipairs(pallas.facts({ config = { m = 512, n = 256 }, test_configs = { { m = 8, n = 128 } } },
    { device = { platform = "tpu", device_kind = "TPU v6 lite", jax_version = "0.7.1" } })) do f[kv[1]] = kv[2] end
  t.eq(f.device, "TPU v6 lite (platform tpu)")
  t.eq(f["JAX version"], "0.7.1")
  t.eq(f["jaxlib version"], "unknown")
  t.contains(f["TPU v6e VMEM"], "128 MiB")
  t.contains(f["TPU v6e VMEM"], "source: ")
  t.contains(f["TPU v6e MXU"], "256 x 256")
  t.eq(f["benchmark configuration (CONFIG)"], "{m=512, n=256}")
  local g = {}
  for _, kv in ipairs(pallas.facts({}, {})) do g[kv[1]] = kv[2] end
  t.eq(g.device, "unknown")
  t.eq(g["JAX version"], "unknown")
  local h = {}
  for _, kv in ipairs(pallas.facts({}, { device = { device_kind = "TPU v9 future" } })) do h[kv[1]] = kv[2] end
  t.contains(h["chip figures"], "not in the table")
end)

t.test("the pallas implement prompt carries the skeleton, the plan and tune prompts their templates", function()
  local p = targets.persona("pallas")
  local vars = setmetatable({ skeleton = p.skeleton, plan_template = p.plan_template, tune_notes = p.tune_notes,
    lang = "python" }, { __index = function() return "x" end })
  local impl = template.render(common.prompt("implement"), vars)
  for _, s in ipairs { "pl.cdiv", "BlockSpec", "scratch_shapes", "dimension_semantics", "pl.when",
    "broadcasted_iota" } do t.contains(impl, s) end
  local plan = template.render(common.prompt("plan"), vars)
  for _, s in ipairs { "grid", "BlockSpec", "memory space", "VMEM use per step" } do t.contains(plan, s) end
  local tune = template.render(common.prompt("tune"), vars)
  t.contains(tune, "module global")
  t.contains(tune, "default argument")
  t.contains(tune, "(8, 128)")
end)

t.test("repair: no code goes back to implement, a fix without code to fix, rejected is repaired", function()
  local c = recorder("Changed: x\n```c\nvoid kernel(float *o) { o[0] = 1; }\n```\n")
  local ctx, parent = ctx_with(c)
  local noc = ctx:step("noc", function()
    return { parents = { parent.id }, kind = "implement", status = "compile_error", plan = "PLAN-X",
      files = { ["reply.txt"] = "no code" }, error = "no code", meta = { no_code = true } }
  end)
  local n = ctx:repair(noc, "r1", { max_fix = 2 })
  t.eq(c.requests[1].meta.agent, "implement")
  t.contains(user_prompt(c.requests[1]), "PLAN-X")
  t.contains(user_prompt(c.requests[1]), "PARENT-CODE")
  t.eq(n.kind, "fix"); t.eq(n.status, "ok"); t.eq(n.parents[1], noc.id)
  t.contains(n.meta.changed, "implementer was asked again")

  local bad = failed_chain(ctx, parent, { "kernel.c:1:1: error: boom" })
  local fixnoc = ctx:step("fixnoc", function()
    return { parents = { bad.id }, kind = "fix", status = "compile_error", plan = bad.plan,
      files = { ["reply.txt"] = "no code" }, error = "no code", meta = { no_code = true } }
  end)
  ctx:repair(fixnoc, "r2", { max_fix = 2 })
  t.eq(c.requests[2].meta.agent, "fix")
  t.contains(user_prompt(c.requests[2]), "BROKEN-CODE")

  local rej = ctx:step("rej", function()
    return { parents = { parent.id }, kind = "implement", status = "rejected", plan = "P",
      files = { ["kernel.c"] = "REJECTED-CODE" }, error = "the kernel called fopen" }
  end)
  local fixed = ctx:repair(rej, "r3", { max_fix = 2 })
  t.eq(c.requests[3].meta.agent, "fix")
  t.contains(user_prompt(c.requests[3]), "the kernel called fopen")
  t.eq(fixed.status, "ok")
  t.eq(fixed.meta.changed, "x")
end)

return t.run()

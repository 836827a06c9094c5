-- The sub-agents' prompts, rendered for a real task, contain what the
-- model needs (task, signature, reference, parent code and metrics,
-- feedback, errors, direction, knowledge passages, output format), and
-- replies are parsed as documented. A recording fake client stands in for
-- the model.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local targets = require "mk.search.targets"
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
  local dir = fs.tmpdir("mk-agents")
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

t.test("implement extracts the last fenced C block; no block gives nil code", function()
  local c = recorder("text\n```c\nint a;\n```\nmore\n```c\nvoid kernel() {}\n```\n")
  local ctx, parent = ctx_with(c)
  local r = ctx.agents.implement { plan = "PLAN-TEXT", parent = parent, key = "k" }
  t.eq(r.code, "void kernel() {}")
  t.eq(r.files["kernel.c"], "void kernel() {}")
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
  t.eq(r.code, "fixed")
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
  t.eq(common.extract_code("```python\nimport jax\n```", "python"), "import jax")
  t.eq(common.extract_code("```py\nx = 1\n```", "python"), "x = 1")
  t.eq(common.extract_code("no code", "c"), nil)
end)

t.test("a terminal model error (bad key) stops the run with a clear message", function()
  local c = { label = "failing fake" }
  function c.chat() return nil, { kind = "auth", message = "invalid API key" } end
  local ctx, parent = ctx_with(c)
  local err = t.raises(function() ctx.agents.plan { parent = parent, key = "k" } end, "model error (auth)")
  t.eq(err.exit, 1)
  local c2 = { label = "flaky fake" }
  function c2.chat() return nil, { kind = "server", message = "500 after retries" } end
  local ctx2, parent2 = ctx_with(c2)
  local r, e = ctx2.agents.plan { parent = parent2, key = "k" }
  t.eq(r, nil)
  t.eq(e.kind, "server")
end)

return t.run()

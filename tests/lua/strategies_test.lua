-- Strategies on the scripted model with a FAKE evaluator (a labelled test
-- double that maps each bank kernel's `expect` to a verdict instantly), so
-- the graph shape each strategy builds can be checked exactly and fast.
-- The end-to-end tests with the real evaluator are in run_test.lua.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local graph_lib = require "mk.search.graph"
local llm = require "mk.services.llm"
local context = require "mk.search.context"
local runner = require "mk.search.runner"
require "mk.services.llm.providers.scripted"

local TASK_DIR = "examples/suites/cpu/attention"

local function load_task()
  local spec = dofile(TASK_DIR .. "/task.lua")
  return {
    name = spec.name, target = "c", dir = fs.realpath(TASK_DIR), candidate_file = "kernel.c",
    description = spec.description, signature = "void kernel(...)", reference = fs.read(TASK_DIR .. "/reference.c"),
    tolerance = spec.tolerance or { atol = 1e-4, rtol = 1e-4 }, sizes = spec.sizes, test_sizes = spec.test_sizes,
  }
end

local bank = dofile(TASK_DIR .. "/scripted/bank.lua")
local BASE = 0.010

-- fake evaluator: verdict from the bank's `expect` of the kernel id in the code
local function fake_eval()
  local ev = { calls = 0, tuned = 0 }
  function ev:evaluate(files, o)
    self.calls = self.calls + 1
    if o and o.tune then self.tuned = self.tuned + 1 end
    local id = (files["kernel.c"] or ""):match("bank:([%w_%-]+)")
    local k = id and bank.kernels[id]
    local expect = k and k.expect or "compile_error"
    if expect == "fast" or expect == "slow" then
      local lat = expect == "fast" and BASE / 2 or BASE * 1.25
      return { status = "ok", correct = true, latency_s = lat, baseline_latency_s = BASE, speedup = BASE / lat,
        profile = { text = "memory-bound at 10 GB/s (fake profile)" }, device_s = 0 }
    end
    return { status = expect, correct = false, message = "fake " .. expect .. " for " .. tostring(id), device_s = 0 }
  end
  function ev.heldout() return { correct = true, status = "ok" } end
  -- a re-measurement of the same kernel lands 10 % slower each time: noise
  ev.remeasured = 0
  function ev:remeasure(files)
    self.remeasured = self.remeasured + 1
    local id = (files["kernel.c"] or ""):match("bank:([%w_%-]+)")
    local lat = bank.kernels[id].expect == "fast" and BASE / 2 or BASE * 1.25
    return { status = "ok", latency_s = lat * (1 + 0.1 * self.remeasured), wall_s = 0 }
  end
  return ev
end

-- How many different sources (candidate files) the nodes of a graph hold.
local function distinct_sources(g, pred)
  local seen, n = {}, 0
  for _, node in ipairs(g:nodes()) do
    local src = node:file("kernel.c")
    if pred(node) and src and not seen[src] then seen[src], n = true, n + 1 end
  end
  return n
end

local function make_ctx(opts, seed, budget)
  local dir = t.tmpdir("mk-strat")
  local g = assert(graph_lib.open(dir .. "/graph.git", { create = true }))
  local client = llm.client { provider = "scripted", model = "scripted" }
  local ev = fake_eval()
  local ctx = context.new { task = load_task(), graph = g, eval = ev, llm = client, opts = opts or {}, agents = require "agents",
    seed = seed or 1, budget = budget }
  ctx:step("root", function()
    return { parents = {}, kind = "reference", status = "ok", files = { ["kernel.c"] = "ref" },
      metrics = { latency_s = BASE, speedup = 1.0 } }
  end)
  return ctx, ev, g, dir
end

local function count(g, pred)
  local n = 0
  for _, node in ipairs(g:nodes()) do if pred(node) then n = n + 1 end end
  return n
end

local function strategy_opts(name, set)
  local s = runner.load_strategy(name)
  return runner.options(s, set, name), s
end

t.test("auto makes one implement node per iteration and returns the fastest correct node", function()
  local opts, s = strategy_opts("auto", { iters = 3, tune = false })
  local ctx, _, g = make_ctx(opts)
  local best = s.run(ctx, opts)
  t.eq(count(g, function(n) return n.kind == "implement" end), 3)
  -- every fix node follows a compile error, a rejection or a crash
  for _, n in ipairs(g:nodes()) do
    if n.kind == "fix" then t.ok(context.REPAIRABLE[g:get(n.parents[1]).status], g:get(n.parents[1]).status) end
  end
  if best then
    t.eq(best.status, "ok")
    for _, n in ipairs(g:nodes()) do
      if n.status == "ok" and n.kind ~= "reference" then t.ok(n.metrics.latency_s >= best.metrics.latency_s) end
    end
  end
end)

t.test("beam with width 2, depth 2, branches 2, inner_iters 1 runs exactly 6 inner Auto runs", function()
  local opts, s = strategy_opts("beam", { width = 2, depth = 2, branches = 2, inner_iters = 1, tune = false })
  local ctx, _, g = make_ctx(opts, 3)
  s.run(ctx, opts)
  -- depth 1: root x 2 branches; depth 2: 2 beam nodes x 2 branches
  t.eq(count(g, function(n) return n.kind == "implement" end), 6)
  local depth1 = count(g, function(n) return n.kind == "implement" and n.parents[1] == g:root().id end)
  t.eq(depth1, 2)
  -- every branch was steered by a direction from the C menu
  local menu = require("mk.eval.targets").directions("c")
  for _, n in ipairs(g:nodes()) do
    if n.kind == "implement" then
      local found = false
      for _, d in ipairs(menu) do if n.meta.direction == d then found = true end end
      t.ok(found, "implement node without a menu direction")
    end
  end
end)

t.test("parallel runs `trajectories` independent trajectories from the root", function()
  local opts, s = strategy_opts("parallel", { trajectories = 3, iters = 2, tune = false })
  local ctx, _, g = make_ctx(opts)
  s.run(ctx, opts)
  t.eq(count(g, function(n) return n.kind == "implement" end), 6)
  t.eq(count(g, function(n) return n.kind == "implement" and n.parents[1] == g:root().id end) >= 3, true)
end)

t.test("zeroshot makes n implement-only children of the root and no fix or tune nodes", function()
  local opts, s = strategy_opts("zeroshot", { n = 12 })
  local ctx, ev, g = make_ctx(opts)
  local best = s.run(ctx, opts)
  t.eq(count(g, function(n) return n.kind == "implement" and n.parents[1] == g:root().id end), 12)
  t.eq(count(g, function(n) return n.kind == "fix" or n.kind == "tune" end), 0)
  -- identical samples share one evaluation: the first evaluates, the others re-measure
  t.eq(ev.calls, distinct_sources(g, function(n) return n.kind == "implement" end))
  t.ok(ev.calls < 12, "the bank repeats kernels among 12 samples")
  t.ok(best and best.status == "ok", "12 samples of this bank contain a correct kernel")
end)

t.test("identical kernels in one run show one measurement record, re-measured and combined", function()
  local opts, s = strategy_opts("zeroshot", { n = 12 })
  local ctx, ev, g = make_ctx(opts)
  s.run(ctx, opts)
  local by = {}
  for _, n in ipairs(g:nodes()) do
    if n.kind == "implement" then
      local h = n.metrics.source_hash
      t.ok(h, "every evaluated node names its source's record")
      by[h] = by[h] or {}
      table.insert(by[h], n)
    end
  end
  local shared = 0
  for _, nodes in pairs(by) do
    local m1 = nodes[1].metrics
    for _, n in ipairs(nodes) do
      t.eq(n.metrics.latency_s, m1.latency_s, "one latency per source")
      t.eq(n.status, nodes[1].status)
    end
    if #nodes > 1 and nodes[1].status == "ok" then
      shared = shared + 1
      t.eq(m1.measurements, #nodes, "one measurement per candidate, combined")
      t.ok(m1.latency_max_s > m1.latency_min_s, "the spread is kept")
      t.ok(m1.latency_s >= m1.latency_min_s and m1.latency_s <= m1.latency_max_s)
      -- the median of the samples
      local xs = table.move(m1.samples, 1, #m1.samples, 1, {})
      table.sort(xs)
      local k = #xs
      t.near(m1.latency_s, k % 2 == 1 and xs[(k + 1) // 2] or (xs[k // 2] + xs[k // 2 + 1]) / 2, 1e-15)
      t.near(m1.speedup, BASE / m1.latency_s, 1e-12)
    end
  end
  t.ok(shared > 0, "this seed samples one correct kernel twice")
  t.eq(ev.remeasured > 0, true)
  -- of the nodes of the best source, ctx:best() is the latest (its commit
  -- holds every sample, so the reported node and its record agree)
  for h, nodes in pairs(by) do
    if #nodes > 1 and nodes[1].status == "ok" then
      t.eq(ctx:best(function(n) return n.metrics.source_hash == h end).id, nodes[#nodes].id)
    end
  end
end)

t.test("a resumed run continues the measurement records of the nodes it already has", function()
  local opts, s = strategy_opts("zeroshot", { n = 6 })
  local ctx, ev, g, dir = make_ctx(opts, 9)
  s.run(ctx, opts)
  g:close()
  local g2 = assert(graph_lib.open(dir .. "/graph.git"))
  local more = runner.options(runner.load_strategy("zeroshot"), { n = 14 }, "zeroshot")
  local ctx2 = context.new { task = load_task(), graph = g2, eval = ev, llm = ctx.llm, opts = more, seed = 9,
    agents = require "agents" }
  s.run(ctx2, more)
  local by = {}
  for _, n in ipairs(g2:nodes()) do
    local h = n.kind == "implement" and n.status == "ok" and n.metrics.source_hash
    if h then by[h] = by[h] or {}; table.insert(by[h], n) end
  end
  local across = 0
  for _, nodes in pairs(by) do
    local old_and_new = false
    for _, n in ipairs(nodes) do
      t.eq(n.metrics.measurements, #nodes, "every node of a source shows all its measurements")
      if n.key:match("/zs[1-6]$") and nodes[#nodes].key:match("/zs%d%d?$") and not nodes[#nodes].key:match("/zs[1-6]$") then
        old_and_new = true
      end
    end
    if old_and_new then across = across + 1 end
  end
  t.ok(across > 0, "a source sampled before and after the resume")
end)

t.test("greedy expands the current best node each step", function()
  local opts, s = strategy_opts("greedy", { steps = 4, tune = false })
  local ctx, _, g = make_ctx(opts, 5)
  s.run(ctx, opts)
  t.eq(count(g, function(n) return n.kind == "implement" end), 4)
end)

t.test("evolve: initial population plus population children per generation", function()
  local opts, s = strategy_opts("evolve", { population = 3, generations = 2, crossover = 0.5 })
  local ctx, _, g = make_ctx(opts, 7)
  s.run(ctx, opts)
  local firsts = count(g, function(n) return n.kind == "implement" or n.kind == "crossover" end)
  t.eq(firsts, 3 * 3) -- generation 0 (initial) + 2 generations, 3 children each
end)

t.test("tuning adds a tune node after each correct implement node", function()
  local opts, s = strategy_opts("auto", { iters = 4, tune = true })
  local ctx, ev, g = make_ctx(opts, 2)
  s.run(ctx, opts)
  local ok_impl = count(g, function(n) return (n.kind == "implement" or n.kind == "fix") and n.status == "ok" end)
  t.eq(count(g, function(n) return n.kind == "tune" end), ok_impl)
  t.eq(ev.tuned, distinct_sources(g, function(n) return n.kind == "tune" end), "each tuned source evaluated once")
end)

t.test("the token budget stops expansion", function()
  local opts, s = strategy_opts("parallel", { trajectories = 4, iters = 5, tune = false })
  local budget = require("mk.search.budget").new { tokens = 6000 }
  local ctx, _, g = make_ctx(opts, 1, budget)
  s.run(ctx, opts)
  local unlimited_ctx, _, g2 = make_ctx(opts, 1)
  s.run(unlimited_ctx, opts)
  t.ok(g:len() < g2:len(), "budgeted run made " .. g:len() .. " nodes, unlimited " .. g2:len())
  t.ok(ctx:exhausted(), "budget should be spent")
end)

t.test("outcomes vary with the seed and repeat with the same seed", function()
  local function signature(seed)
    local opts, s = strategy_opts("zeroshot", { n = 6 })
    local ctx, _, g = make_ctx(opts, seed)
    s.run(ctx, opts)
    local parts = {}
    for _, n in ipairs(g:nodes()) do parts[#parts + 1] = (n:file("kernel.c") or ""):match("bank:([%w_%-]+)") or "-" end
    table.sort(parts)
    return table.concat(parts, ",")
  end
  t.eq(signature(11), signature(11))
  local differs = false
  for seed = 12, 16 do if signature(seed) ~= signature(11) then differs = true end end
  t.ok(differs, "five other seeds all gave the same samples")
end)

t.test("re-running a strategy on the same graph recomputes nothing (resume)", function()
  local opts, s = strategy_opts("beam", { width = 2, depth = 2, branches = 2, inner_iters = 1, tune = false })
  local ctx, ev, g, dir = make_ctx(opts, 4)
  s.run(ctx, opts)
  local n1, calls1 = g:len(), ev.calls
  g:close()
  local g2 = assert(graph_lib.open(dir .. "/graph.git"))
  local ctx2 = context.new { task = load_task(), graph = g2, eval = ev, llm = ctx.llm, opts = opts, seed = 4,
    agents = require "agents" }
  s.run(ctx2, opts)
  t.eq(g2:len(), n1)
  t.eq(ev.calls, calls1)
end)

t.test("an unknown strategy option is an input error naming the known ones", function()
  local err = t.raises(function() strategy_opts("beam", { widht = 3 }) end, "unknown option 'widht'")
  t.eq(err.exit, 2)
  t.contains(tostring(err), "width")
  t.raises(function() strategy_opts("beam", { width = "wide" }) end, "must be a number")
  t.raises(function() runner.load_strategy("nosuch") end, "unknown strategy 'nosuch'")
end)

t.test("counts read back from JSON (1.0) are whole numbers; 2.5 and -1 are input errors", function()
  local opts = strategy_opts("beam", { width = 2.0, iters = 1.0 })
  t.eq(math.type(opts.width), "integer")
  t.eq(opts.iters, 1)
  t.eq(math.type(opts.iters), "integer")
  t.raises(function() strategy_opts("beam", { width = 2.5 }) end, "whole number")
  t.raises(function() strategy_opts("beam", { depth = -1 }) end, "whole number")
end)

-- The ctx contract: typos raise, trajectories never merge silently.

t.test("an unknown option to ctx:auto or any ctx call raises listing the valid ones", function()
  local ctx, ev = make_ctx({ tune = false })
  local root = ctx.graph:root()
  local err = t.raises(function() ctx:auto(root, { iter = 1 }) end, "unknown option 'iter'")
  t.contains(tostring(err), "iters, tag, direction, max_fix, tune")
  t.contains(tostring(err), "strategies_test.lua:", "the error points at the caller's line")
  t.eq(ev.calls, 0, "nothing ran")
  t.raises(function() ctx:repair(root, "k", { maxfix = 2 }) end, "ctx:repair: unknown option 'maxfix'")
  t.raises(function() ctx:evaluate({ ["kernel.c"] = "x" }, { profiel = true }) end, "unknown option 'profiel'")
  t.raises(function() ctx:evaluated("implement", { root }, { code = "x" }, { dirction = "d" }) end, "unknown option 'dirction'")
  t.raises(function() ctx.agents.plan { parnt = root, key = "k" } end, "ctx.agents.plan: unknown option 'parnt'")
  t.raises(function() ctx.agents.implement { key = "k", temprature = 1 } end, "valid: plan, parent, second, key")
end)

t.test("concurrent ctx:auto calls from one node with the same tag make distinct trajectories, also on resume", function()
  local ctx, ev, g, dir = make_ctx({ tune = false }, 6)
  local root = ctx.graph:root()
  ctx:map({ 1, 2, 3 }, function() return ctx:auto(root, { iters = 1 }) end)
  t.eq(count(g, function(n) return n.kind == "implement" end), 3, "three trajectories, three implement nodes")
  t.ok(g:by_key(ctx:path(root) .. "/auto/i1/impl") and g:by_key(ctx:path(root) .. "/auto#2/i1/impl")
    and g:by_key(ctx:path(root) .. "/auto#3/i1/impl"), "keys auto, auto#2, auto#3")
  local n1, calls1 = g:len(), ev.calls
  g:close()
  local g2 = assert(graph_lib.open(dir .. "/graph.git"))
  local ctx2 = context.new { task = load_task(), graph = g2, eval = ev, llm = ctx.llm, opts = { tune = false }, seed = 6,
    agents = require "agents" }
  ctx2:map({ 1, 2, 3 }, function() return ctx2:auto(g2:root(), { iters = 1 }) end)
  t.eq(g2:len(), n1, "the resumed strategy finds every node again")
  t.eq(ev.calls, calls1, "and evaluates nothing again")
end)

t.test("two live ctx:step calls with the same key raise naming both call sites", function()
  local ctx = make_ctx({})
  local spec = { parents = { ctx.graph:root().id }, kind = "implement", status = "compile_error", files = { ["kernel.c"] = "x" },
    metrics = {} }
  local function slow() ctx.tasks.sleep(0.02); return spec end
  local ok, err = pcall(ctx.map, ctx, { 1, 2 }, function(i)
    local n
    if i == 1 then n = ctx:step("same", slow) else n = ctx:step("same", slow) end
    return n
  end)
  t.eq(ok, false)
  t.contains(tostring(err), "two steps with the same key 'same'")
  local lines = {}
  for line in tostring(err):gmatch("strategies_test%.lua:(%d+)") do lines[#lines + 1] = line end
  t.ok(#lines >= 2 and lines[#lines - 1] ~= lines[#lines], "both call sites named: " .. tostring(err))
end)

t.test("a misspelt ctx method raises with the nearest name", function()
  local ctx = make_ctx({})
  t.raises(function() return ctx:exausted() end, "did you mean `ctx:exhausted`?")
  t.raises(function() return ctx:evalute({}) end, "did you mean `ctx:evaluate`?")
  t.raises(function() return ctx.grpah end, "did you mean `ctx.graph`?")
  t.eq(ctx.stopped, nil, "optional fields read as nil")
  t.eq(ctx:exhausted(), false)
end)

t.test("a ctx method called with a dot says to call it with a colon, at the caller's line", function()
  local ctx = make_ctx({})
  local ok, err = pcall(function()
    local spent = ctx.exhausted()
    return spent
  end)
  t.eq(ok, false)
  t.contains(tostring(err), "ctx.exhausted(...) was called with a dot: call it as ctx:exhausted(...)")
  t.matches(tostring(err), "strategies_test%.lua:%d+:")
  ok, err = pcall(function() return ctx.best({}) end)
  t.eq(ok, false)
  t.contains(tostring(err), "call it as ctx:best(...)")
  t.eq(ctx.better({ id = "a", status = "ok", metrics = { latency_s = 1 } },
    { id = "b", status = "ok", metrics = { latency_s = 2 } }), true, "ctx.better is a plain function")
end)

t.test("a strategy's return value: a node of the graph or nil; anything else is a warning naming run's file:line", function()
  local ctx = make_ctx({})
  local root = ctx.graph:root()
  t.eq(context.check_result(ctx, nil, "mine.lua"), nil)
  t.eq(context.check_result(ctx, root, "mine.lua"), root)
  local run_fn = load("return function(ctx)\n  return 42\nend", "@strategies/mine.lua")()
  for _, bad in ipairs({ 42, "best", { id = root.id }, true }) do
    local node, warning = context.check_result(ctx, bad, "strategies/mine.lua", run_fn)
    t.eq(node, nil)
    t.contains(warning, "strategy strategies/mine.lua:1: run() must return a node of the graph or nil")
    t.contains(warning, "best correct node is reported instead")
  end
end)

return t.run()

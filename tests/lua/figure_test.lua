-- One figure per kernel (mk.search.figure, mk.search.records, ctx:compare,
-- ctx:remeasure): nodes of one source pool their measurements, an older
-- node points to the one holding the figure, ties are settled by measuring
-- again interleaved, a contended benchmark is kept apart; and, end to end
-- with the real evaluator, `show`, summary.json and compare name the same
-- best node with the same figure.
local t = dofile("tests/lua/lib/t.lua")
local cjson = require "cjson"
local fs = require "mk.fs"
local proc = require "mk.proc"
local figure = require "mk.search.figure"
local rundir = require "mk.search.rundir"
local context = require "mk.search.context"
local llm = require "mk.services.llm"
local compare = require "mk.study.compare"
local util = require "mk.services.util"
require "mk.services.llm.providers.scripted"

local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
local tmp = t.tmpdir("mk-figure-test")

-- figure: statistics and the verdict ---------------------------------------------

t.test("median and the range of samples: min-max up to 8, the 95 % interval of the median from 9", function()
  t.eq(figure.median({ 3, 1, 2 }), 2)
  t.eq(figure.median({ 4, 1, 2, 3 }), 2.5)
  t.eq(figure.median({}), nil)
  t.same({ figure.sample_range({ 5, 1, 3 }) }, { 1, 5 })
  t.same({ figure.sample_range({ 8, 7, 6, 5, 4, 3, 2, 1 }) }, { 1, 8 })
  -- n = 9: P(Bin(9, 1/2) <= 1) = 10/512, coverage of (x2, x8) = 1 - 20/512 = 96.1 % >= 95 %;
  -- (x3, x7) would cover 1 - 2 * 46/512 = 82 %
  t.same({ figure.sample_range({ 9, 8, 7, 6, 5, 4, 3, 2, 1 }) }, { 2, 8 })
  -- one benchmark: the middle 80 % of its calls, centred on the median
  local lo, hi = figure.range({ latency_s = 1.0, spread = 0.2 })
  t.near(lo, 0.9, 1e-12); t.near(hi, 1.1, 1e-12)
end)

t.test("versus: better or worse only beyond the ranges, a tie inside them or for the same kernel", function()
  local a = { latency_s = 1.0, measurements = 2, samples = { 0.95, 1.05 } }
  local b = { latency_s = 1.2, measurements = 2, samples = { 1.1, 1.3 } }
  local v, d = figure.versus(a, b)
  t.eq(v, "better")
  t.same({ d.a.low, d.a.high, d.b.low, d.b.high }, { 0.95, 1.05, 1.1, 1.3 })
  t.eq(figure.versus(b, a), "worse")
  t.eq(figure.versus(a, { latency_s = 1.04, spread = 0.05 }), "tie")
  t.eq(figure.versus({ latency_s = 1, source_hash = "h" }, { latency_s = 2, source_hash = "h" }), "tie", "one kernel")
  t.eq(figure.versus(a, {}), "better", "a correct kernel beats none")
  t.eq(figure.versus({}, {}), "tie")
end)

-- pools: one figure per kernel --------------------------------------------------------

local function row(id, lat, hash, extra)
  local r = { id = id, kind = "implement", status = "ok", latency_s = lat, speedup = 0.01 / lat, source_hash = hash,
    measurements = 1 }
  for k, v in pairs(extra or {}) do r[k] = v end
  return r
end

t.test("a pool gives every node of a source the latest figure; older nodes name its holder", function()
  local pool = figure.pool()
  pool:add({ id = "n0001", kind = "reference", status = "ok", latency_s = 0.01, speedup = 1 })
  pool:add(row("n0002", 7.946e-3, "h1"))
  t.same(pool:add(row("n0003", 5.979e-3, "h1", { measurements = 2, samples = { 7.946e-3, 4.012e-3 } })), { "n0002" })
  pool:add(row("n0004", 2.37e-3, "h2"))
  local f2, holder = pool:of("n0002")
  t.eq(holder, "n0003", "the older node points to the latest")
  t.eq(f2.latency_s, 5.979e-3, "never the superseded first figure")
  t.eq(select(2, pool:of("n0003")), nil)
  t.eq(pool:of("n0001"), nil, "the reference is not a kernel")
  -- a sample taken without a new node (settling a tie) moves the figure of every node of the source
  t.same(pool:measure({ type = "measure", source_hash = "h1", latency_s = 1.5e-3, speedup = 0.01 / 1.5e-3,
    measurements = 3, samples = { 7.946e-3, 4.012e-3, 1.5e-3 } }), { "n0002", "n0003" })
  t.eq(pool:of("n0002").latency_s, 1.5e-3)
  local best, bf = pool:best()
  t.eq(best.id, "n0003", "the holder stands for its kernel")
  t.eq(bf.measurements, 3)
  local ranked = pool:ranked()
  t.eq(#ranked, 2, "one entry per kernel")
  t.eq(ranked[2].node.id, "n0004")
end)

t.test("of_run: the best a finished run declared, else the fastest so far", function()
  local dir = tmp .. "/of_run"
  fs.mkdirs(dir)
  local nodes = { row("n0002", 2e-3, "a"), row("n0003", 1e-3, "b") }
  fs.write(dir .. "/events.jsonl", cjson.encode({ type = "measure", source_hash = "a", latency_s = 0.9e-3,
    speedup = 0.01 / 0.9e-3, measurements = 2, samples = { 2e-3, 0.9e-3 } }) .. "\n")
  local pool, best, declared = figure.of_run(dir, nodes, { status = "running" })
  t.eq(best.id, "n0002"); t.eq(declared, false)
  t.eq(pool:of("n0002").latency_s, 0.9e-3)
  fs.write(dir .. "/summary.json", cjson.encode({ status = "done", best = { node = "n0003" } }))
  local _, b2, d2 = figure.of_run(dir, nodes, { status = "done" })
  t.eq(b2.id, "n0003"); t.eq(d2, true)
end)

-- ctx: compare, remeasure, settle, contention ---------------------------------------------

local TASK_DIR = "tests/tasks/rmsnorm_small"
local BASE = 0.010

local function load_task()
  local spec = dofile(TASK_DIR .. "/task.lua")
  return { name = spec.name, target = "c", dir = fs.realpath(TASK_DIR), candidate_file = "kernel.c",
    description = spec.description, signature = "void kernel(...)", reference = fs.read(TASK_DIR .. "/reference.c"),
    tolerance = spec.tolerance, sizes = spec.sizes }
end

-- A test double of the evaluator: a kernel's latency is named in its code
-- ("lat=0.005"); re-measurements take the next value of `script[lat]`
-- (each {latency_s, contended}), else the same latency.
local function fake_eval(script)
  local ev = { evaluated = 0, remeasured = 0 }
  local function lat_of(files) return tonumber((files["kernel.c"] or ""):match("lat=([%d.e%-]+)")) end
  function ev:evaluate(files)
    self.evaluated = self.evaluated + 1
    local lat = lat_of(files)
    return { status = "ok", correct = true, latency_s = lat, baseline_latency_s = BASE, speedup = BASE / lat,
      spread = 0.02, device_s = 0 }
  end
  function ev:remeasure(files)
    self.remeasured = self.remeasured + 1
    local lat = lat_of(files)
    local next_one = script and script[lat] and table.remove(script[lat], 1)
    if next_one then return { status = "ok", latency_s = next_one[1], contended = next_one[2], wall_s = 0 } end
    return { status = "ok", latency_s = lat, wall_s = 0 }
  end
  function ev.heldout() return { correct = true, status = "ok" } end
  return ev
end

local function make_ctx(script)
  local run = assert(rundir.create { root = tmp, strategy = "test", task = "rmsnorm_small" })
  local ev = fake_eval(script)
  local ctx = context.new { task = load_task(), graph = run.graph, run = run, eval = ev,
    llm = llm.client { provider = "scripted", model = "scripted" }, agents = require "agents", seed = 1 }
  local root = ctx:step("root", function()
    return { parents = {}, kind = "reference", status = "ok", files = { ["kernel.c"] = "ref" },
      metrics = { latency_s = BASE, speedup = 1.0, baseline_latency_s = BASE } }
  end)
  local function kernel(key, lat, tag)
    local src = string.format("/* lat=%s %s */", tostring(lat), tag or "")
    return ctx:step(key, function()
      return ctx:evaluated("implement", { root }, { code = src, files = { ["kernel.c"] = src } }, { plan = key })
    end)
  end
  return ctx, ev, run, kernel
end

t.test("ctx:compare: the same kernel ties, kernels apart beyond their spread do not, with the ranges", function()
  local ctx, _, run, kernel = make_ctx()
  local a = kernel("a", 0.005)
  local b = kernel("b", 0.008)
  local a2 = kernel("a2", 0.005)
  local v, d = ctx:compare(a, b)
  t.eq(v, "better")
  t.ok(d.a.high < d.b.low, "a's range lies below b's")
  t.eq(ctx:compare(b, a), "worse")
  t.eq(ctx:compare(a, a2), "tie", "one source: one kernel")
  t.eq(select(2, pcall(ctx.compare, ctx, a)):match("expects two nodes") ~= nil, true)
  local ok, err = pcall(function() return ctx.compare(a, b) end)
  t.eq(ok, false); t.contains(err, "called with a dot")
  run:close()
end)

t.test("a re-measured kernel: every node shows the median, a measure event records the sample", function()
  local ctx, ev, run, kernel = make_ctx({ [0.005] = { { 0.003 }, { 0.004 } } })
  local a = kernel("a", 0.005)
  local a2 = kernel("a2", 0.005) -- same source: re-measured, 0.003
  t.eq(ev.evaluated, 1)
  t.eq(a.metrics.latency_s, 0.004, "median of 0.005 and 0.003")
  t.eq(a2.metrics.measurements, 2)
  local f = assert(ctx:remeasure(a)) -- 0.004 more, without a node
  t.eq(f.measurements, 3); t.eq(f.latency_s, 0.004)
  t.same(a.metrics.samples, { 0.005, 0.003, 0.004 })
  local measures = figure.measures(run.dir .. "/events.jsonl")
  t.eq(#measures, 2)
  t.eq(measures[2].node, a2.id, "the latest node of the source holds it")
  t.eq(measures[2].measurements, 3)
  -- a reader of the run directory finds the same figure
  run:close()
  local ro = assert(rundir.open(run.dir, { readonly = true }))
  local pool = figure.of_run(run.dir, ro.graph.list, ro.info)
  t.eq(pool:of(a.id).latency_s, 0.004)
  t.eq(select(2, pool:of(a.id)), a2.id)
  t.eq(pool:of(a.id).measurements, 3, "the node's commit held 2; the event brought the third")
  ro:close()
end)

t.test("a resumed run's nodes show their kernels' figures again, measure events included", function()
  local ctx, _, run, kernel = make_ctx({ [0.005] = { { 0.003 }, { 0.002 } } })
  local a = kernel("a", 0.005)
  kernel("a2", 0.005)
  ctx:remeasure(a) -- 0.002: the median of 0.005, 0.003, 0.002 is 0.003, only in a measure event
  local dir = run.dir
  run:close()
  local again = assert(rundir.open(dir))
  local ctx2 = context.new { task = load_task(), graph = again.graph, run = again, eval = fake_eval(),
    llm = llm.client { provider = "scripted", model = "scripted" }, agents = require "agents", seed = 1 }
  local a_again = again.graph:get(a.id)
  t.eq(a_again.metrics.latency_s, 0.003, "not the 5 ms its commit holds")
  t.eq(a_again.metrics.measurements, 3)
  t.eq(ctx2:best().id, "n0003", "the latest node of the kernel")
  again:close()
end)

t.test("a contended benchmark is kept apart, never silently pooled; alone it is marked", function()
  local _, _, run, kernel = make_ctx({ [0.005] = { { 0.020, "steal 30 %" } }, [0.007] = {} })
  local a = kernel("a", 0.005)
  kernel("a2", 0.005)
  t.eq(a.metrics.latency_s, 0.005, "the contended 20 ms is not the kernel's figure")
  t.same(a.metrics.flagged, { 0.020 })
  t.eq(a.metrics.measurements, 1)
  t.eq(a.metrics.contended, nil)
  run:close()
  local records = require "mk.search.records"
  local rec = { samples = {}, flagged = { 0.02, 0.03 }, why = "load 5.1 on 2 cores", result = { baseline_latency_s = BASE } }
  local f = records.figure(rec)
  t.eq(f.latency_s, 0.025); t.eq(f.contended, "load 5.1 on 2 cores")
end)

t.test("settle: tied leaders are re-measured interleaved until one stands apart, or stay tied", function()
  -- a: 5.0 ms then 5.02 (stays near 5); b: 5.05 ms then 5.6 -> b falls behind after one round
  local ctx, ev, run, kernel = make_ctx({ [0.005] = { { 0.00502 } }, [0.00505] = { { 0.0056 } } })
  local a, b = kernel("a", 0.005), kernel("b", 0.00505)
  t.eq(ctx:compare(a, b), "tie", "one benchmark each, spreads overlap")
  local records = require "mk.search.records"
  local ranked, ties, rounds = records.settle(ctx, { b, a }, { rounds = 3 })
  t.eq(ranked[1].id, a.id)
  t.same(ties, {})
  t.eq(rounds, 1, "one interleaved round settles it")
  t.eq(ev.remeasured, 2)
  run:close()
  -- equal kernels stay tied after every round, and say so
  local ctx2, ev2, run2, kernel2 = make_ctx()
  local c, d = kernel2("c", 0.006, "x"), kernel2("d", 0.006, "y")
  local _, ties2, rounds2 = records.settle(ctx2, { c, d }, { rounds = 2 })
  t.eq(rounds2, 2); t.eq(ev2.remeasured, 4)
  t.same(ties2, { d.id })
  run2:close()
end)

-- end to end: show, summary.json and compare agree -----------------------------------------

-- A strategy that makes the same kernel twice (one source, two nodes)
-- beside another kernel, on the real evaluator.
local STRATEGY = [[
local fs = require "mk.fs"
return {
  defaults = {},
  run = function(ctx)
    local root = ctx.graph:root()
    local function kernel(key, name)
      local src = assert(fs.read(ctx.task.dir .. "/scripted/" .. name))
      return ctx:step(key, function()
        return ctx:evaluated("implement", { root }, { code = src, files = { ["kernel.c"] = src } }, { plan = key })
      end)
    end
    kernel("first", "stream_store.c")
    kernel("other", "stream_omp.c")
    kernel("again", "stream_store.c")
    return ctx:best() -- the run's fastest kernel: settled like nil
  end,
}
]]

local function mk(args)
  local argv = { MK }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local r = assert(proc.run { argv = argv, timeout = 900, env = { TMPDIR = tmp }, max_output = 4 * 1024 * 1024 })
  return r.code, r.stdout .. r.stderr, r.stdout
end

t.test("show, summary.json and compare name the same best node with the same figure", function()
  fs.write(tmp .. "/twice.lua", STRATEGY)
  local dir = tmp .. "/bench/rmsnorm_small/r1"
  local code, out = mk { "run", tmp .. "/twice.lua", TASK_DIR, "--model", "scripted", "--set", "tests_agent=false",
    "--run-dir", dir, "--quiet" }
  t.eq(code, 0, out)
  local summary = util.read_json(dir .. "/summary.json")
  local best = summary.best
  t.ok(type(best) == "table" and best.node, "a best node")
  -- show
  local sc, _, js = mk { "show", "--json", dir }
  t.eq(sc, 0)
  local shown = cjson.decode(js)
  t.eq(shown.best, best.node)
  local row_of = {}
  for _, n in ipairs(shown.nodes) do row_of[n.id] = n end
  t.eq(row_of[best.node].speedup, best.speedup)
  t.eq(row_of[best.node].latency_s, best.latency_s)
  -- the kernel made twice: the older node names the latest, both show one figure
  t.eq(row_of.n0002.same_as, "n0004")
  t.eq(row_of.n0002.latency_s, row_of.n0004.latency_s)
  -- benchmarked twice; under a load that comes and goes one of the two may be
  -- flagged as contended and kept apart from the median, so count both kinds
  local measures = figure.measures(dir .. "/events.jsonl")
  local last
  for _, m in ipairs(measures) do
    if m.node == "n0002" or m.node == "n0004" then last = m end
  end
  t.ok(last, "a measure event of the kernel made twice")
  local taken = last.contended and #last.flagged or #last.samples + #(last.flagged or {})
  t.ok(taken >= 2, "benchmarked at least twice")
  t.ok(row_of.n0004.measurements >= 1)
  local _, text = mk { "show", dir, "n0002" }
  t.contains(text, "same kernel as n0004, see there")
  -- compare: the run as one repeat of a bench, against a copy of itself
  for _, side in ipairs({ "bench", "bench2" }) do
    fs.mkdirs(tmp .. "/" .. side)
    fs.write(tmp .. "/" .. side .. "/results.json", cjson.encode({ kind = "bench", version = 1, suite = "s",
      suite_name = "s", strategy = side, ["repeat"] = 1, runs_done = 1, runs_total = 1,
      tasks = { { task = "rmsnorm_small", runs = { { ["repeat"] = 1, run_dir = dir, status = "done" } }, cost = {} } } }))
  end
  local trace = compare.trace(util.read_jsonl(dir .. "/events.jsonl"), summary)
  local at = compare.at_budget(trace, {})
  t.eq(at.node, best.node)
  t.eq(at.speedup, best.speedup)
  local cc, _, cj = mk { "compare", tmp .. "/bench", tmp .. "/bench2", "--json" }
  t.eq(cc, 0)
  local r = cjson.decode(cj)
  t.eq(r.per_task[1].a_speedups[1], best.speedup)
end)

return t.run()

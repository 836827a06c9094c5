-- mk.study.compare and `mkengine compare` with known answers: synthetic bench
-- directories (hand-written events.jsonl, summary.json, results.json)
-- whose per-task ratios, geomeans and bootstrap intervals are computed by
-- hand in the comments, including a task one side never solves, a budget
-- cut that removes a late find and repeats whose ranges overlap (ties);
-- then two small real benches of the CPU suite on the scripted model.
local t = dofile("tests/lua/lib/t.lua")
local cjson = require "cjson"
local fs = require "mk.fs"
local proc = require "mk.proc"
local task = require "mk.services.task"
local compare = require "mk.study.compare"

local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
local tmp = t.tmpdir("mk-compare-test-")

local function mk(args)
  local argv = { MK }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local r = assert(proc.run { argv = argv, timeout = 900, max_output = 8 * 1024 * 1024 })
  return r.code, r.stdout, r.stderr
end

-- One synthetic run: nodes = {{tokens = spend before it, speedup = x |
-- status = "compile_error"/"incorrect", t = seconds, device = s,
-- heldout = true|false|nil}}; total tokens of the run.
local function write_run(dir, nodes, total)
  fs.mkdirs(dir)
  local ev = { { type = "run_start", t = 0 },
    { type = "node", id = "n0001", kind = "reference", status = "ok", speedup = 1, t = 0.5,
      spent = { tokens = 0, usd = 0, llm_s = 0, device_s = 0.1 } } }
  local used, best = 0, nil
  for i, n in ipairs(nodes) do
    ev[#ev + 1] = { type = "llm", t = n.t - 0.1, input_tokens = n.tokens - used, output_tokens = 0, cost_usd = 0, latency_s = 1 }
    used = n.tokens
    local id = string.format("n%04d", i + 1)
    -- spent as the runner records it: the run's totals when the node was added
    ev[#ev + 1] = { type = "node", id = id, kind = "implement", status = n.status or "ok", speedup = n.speedup,
      t = n.t, spent = { tokens = n.tokens, usd = 0, llm_s = i, device_s = n.device or i } }
    n.id = id
  end
  for _, n in ipairs(nodes) do
    if n.heldout ~= nil then ev[#ev + 1] = { type = "heldout", node = n.id, correct = n.heldout, t = 99 } end
    if n.speedup and n.heldout ~= false and (not best or n.speedup > best.speedup) then best = n end
  end
  local lines = {}
  for i, e in ipairs(ev) do lines[i] = cjson.encode(e) end
  fs.write(dir .. "/events.jsonl", table.concat(lines, "\n") .. "\n")
  fs.write(dir .. "/summary.json", cjson.encode({ status = best and "done" or "no_correct_kernel",
    best = best and { node = best.id, speedup = best.speedup } or cjson.null,
    cost = { input_tokens = total, output_tokens = 0, usd = 0, llm_s = #nodes, device_s = #nodes, wall_s = 100 } }))
end

-- A bench directory: tasks = {name = {run1_nodes, run2_nodes, ...}}, totals = {name = {tokens per run}}.
local function write_bench(dir, strategy, suite, tasks, totals, opts)
  opts = opts or {}
  local names = {}
  for n in pairs(tasks) do names[#names + 1] = n end
  table.sort(names)
  local rows, nruns = {}, 0
  for _, name in ipairs(names) do
    local runs = {}
    for k, nodes in ipairs(tasks[name]) do
      local rel = name .. "/r" .. k
      write_run(dir .. "/" .. rel, nodes, totals[name][k])
      runs[k] = { ["repeat"] = k, run_dir = rel, status = "done" }
      nruns = nruns + 1
    end
    local spent = 0
    for _, x in ipairs(totals[name]) do spent = spent + x end
    rows[#rows + 1] = { task = name, runs = runs, cost = { input_tokens = spent, output_tokens = 0, usd = 0 } }
  end
  fs.mkdirs(dir)
  fs.write(dir .. "/results.json", cjson.encode({ kind = "bench", version = 1, suite = "suites/" .. suite,
    suite_name = suite, strategy = strategy, ["repeat"] = 2, runs_done = opts.runs_done or nruns, runs_total = nruns,
    tasks = rows }))
end

-- alpha (A): t1 repeats 1.1, 1.3; t2 1.2, 1.6; t3 never solved. Every
-- run spends 3000 tokens, so the default budget is 3000 tokens per run.
local A_TASKS = {
  t1 = { { { tokens = 1000, speedup = 1.1, t = 10, heldout = true } }, { { tokens = 1000, speedup = 1.3, t = 10, heldout = true } } },
  t2 = { { { tokens = 1500, speedup = 1.2, t = 12, heldout = true } }, { { tokens = 2500, speedup = 1.6, t = 20, heldout = true } } },
  t3 = { { { tokens = 1000, status = "compile_error", t = 10 } }, { { tokens = 1000, status = "incorrect", t = 10 } } },
}
local A_TOTALS = { t1 = { 3000, 3000 }, t2 = { 3000, 3000 }, t3 = { 3000, 3000 } }
-- beta (B): t1 finds 1.2 / 1.4 at 2000 tokens and 2.0 / 2.2 late (9000 /
-- 8000 tokens, runs of 10000); t2 1.5, 1.8; t3 1.5 in both repeats.
local B_TASKS = {
  t1 = { { { tokens = 2000, speedup = 1.2, t = 10 }, { tokens = 9000, speedup = 2.0, t = 90 } },
         { { tokens = 2000, speedup = 1.4, t = 10 }, { tokens = 8000, speedup = 2.2, t = 80 } } },
  t2 = { { { tokens = 1000, speedup = 1.5, t = 10 } }, { { tokens = 1000, speedup = 1.8, t = 10 } } },
  t3 = { { { tokens = 1000, speedup = 1.5, t = 10, heldout = true } }, { { tokens = 2000, speedup = 1.5, t = 20 } } },
}
local B_TOTALS = { t1 = { 10000, 10000 }, t2 = { 3000, 3000 }, t3 = { 3000, 3000 } }

local DA, DB = tmp .. "/alpha", tmp .. "/beta"
write_bench(DA, "alpha", "toy", A_TASKS, A_TOTALS)
write_bench(DB, "beta", "toy", B_TASKS, B_TOTALS)

local function trace_of(nodes, total)
  local d = tmp .. "/one-" .. math.random(1, 1 << 30)
  write_run(d, nodes, total)
  local ev = {}
  for line in fs.read(d .. "/events.jsonl"):gmatch("[^\n]+") do ev[#ev + 1] = cjson.decode(line) end
  return compare.trace(ev, cjson.decode(fs.read(d .. "/summary.json")))
end

t.test("trace reads the spend at each node from its spent record and keeps held-out verdicts", function()
  local tr = trace_of({ { tokens = 1000, speedup = 1.2, t = 5, device = 2, heldout = true },
                        { tokens = 4000, status = "compile_error", t = 9, device = 3 },
                        { tokens = 6000, speedup = 1.9, t = 12, device = 7, heldout = false } }, 8000)
  t.eq(#tr.nodes, 3, "the reference is not a candidate")
  t.eq(tr.nodes[1].at.tokens, 1000)
  t.eq(tr.nodes[2].at.tokens, 4000)
  t.eq(tr.nodes[3].at.wall_s, 12)
  t.eq(tr.nodes[3].at.device_s, 7)
  t.eq(tr.nodes[3].at.llm_s, 3)
  t.eq(tr.nodes[1].verified, true)
  t.eq(tr.nodes[2].verified, nil)
  t.eq(tr.nodes[3].verified, false)
  t.eq(tr.nodes[2].compiled, false)
  t.eq(tr.total.tokens, 8000)
  t.eq(tr.has.device_s, true)
  t.eq(tr.rebuilt, false)
end)

t.test("spent records win over llm events, which concurrent runs of one process can mix up", function()
  local ev = {
    { type = "llm", input_tokens = 900, output_tokens = 100, cost_usd = 0.5, latency_s = 2 }, -- another run's call
    { type = "node", id = "n0002", kind = "implement", status = "ok", speedup = 1.5, t = 5,
      spent = { tokens = 300, usd = 0.1, llm_s = 1, device_s = 2 } },
  }
  local tr = compare.trace(ev, nil)
  t.eq(tr.nodes[1].at.tokens, 300)
  t.eq(tr.nodes[1].at.usd, 0.1)
  t.eq(tr.nodes[1].at.llm_s, 1)
  t.eq(tr.rebuilt, false)
end)

t.test("a resumed run carries what it spent across the resume, whether or not its counters restarted", function()
  local ev = {
    { type = "node", id = "n0002", kind = "implement", status = "ok", speedup = 1.5, t = 5,
      spent = { tokens = 700, usd = 0, llm_s = 1, device_s = 4 } },
    { type = "resume", t = 6 },
    { type = "node", id = "n0003", kind = "implement", status = "ok", speedup = 1.7, t = 9,
      spent = { tokens = 200, usd = 0, llm_s = 1, device_s = 1 } },
  }
  -- recorded while ctx counted its own session only: the counters restart
  local tr = compare.trace(ev, { cost = { input_tokens = 200, output_tokens = 0, device_s = 1 } })
  t.eq(tr.nodes[2].at.device_s, 5)
  t.eq(tr.nodes[2].at.tokens, 900)
  t.eq(tr.total.device_s, 5)
  t.eq(tr.total.tokens, 900)
  -- runs now record spent over all sessions: nothing is added after a resume
  ev[3].spent = { tokens = 900, usd = 0, llm_s = 2, device_s = 5 }
  local tr2 = compare.trace(ev, { cost = { input_tokens = 900, output_tokens = 0, device_s = 5 } })
  t.eq(tr2.nodes[2].at.tokens, 900)
  t.eq(tr2.nodes[2].at.device_s, 5)
end)

t.test("runs from before node events carried spent: tokens rebuilt from llm events, no device seconds", function()
  local tr = compare.trace({
    { type = "llm", input_tokens = 900, output_tokens = 100, cost_usd = 0.5, latency_s = 2 },
    { type = "node", id = "n0002", kind = "implement", status = "ok", speedup = 1.5, t = 5 },
    { type = "llm", input_tokens = 400, output_tokens = 100, cost_usd = 0.25, latency_s = 1 },
    { type = "node", id = "n0003", kind = "implement", status = "incorrect", t = 8 } }, nil)
  t.eq(tr.rebuilt, true)
  t.eq(tr.nodes[1].at.tokens, 1000)
  t.eq(tr.nodes[2].at.tokens, 1500)
  t.eq(tr.nodes[2].at.usd, 0.75)
  t.eq(tr.nodes[2].at.llm_s, 3)
  t.eq(tr.has.device_s, false)
  t.eq(tr.nodes[1].at.device_s, nil)
  t.eq(compare.at_budget(tr, { device_s = 100 }).correct, false)
  t.eq(compare.at_budget(tr, { wall_s = 100 }).speedup, 1.5)
end)

t.test("a budget cut removes a late find; a node failing the held-out check never counts", function()
  local tr = trace_of({ { tokens = 2000, speedup = 1.2, t = 10, heldout = true }, { tokens = 9000, speedup = 2.0, t = 90 },
                        { tokens = 9500, speedup = 3.0, t = 95, heldout = false } }, 10000)
  local at = compare.at_budget(tr, { tokens = 3000 })
  t.eq(at.speedup, 1.2)
  t.eq(at.unverified, false)
  t.eq(at.cut, true)
  local full = compare.at_budget(tr, { tokens = 10000 })
  t.eq(full.speedup, 2.0, "3.0 failed the held-out check")
  t.eq(full.unverified, true, "2.0 was never re-checked")
  t.eq(full.cut, false)
  t.eq(compare.at_budget(tr, { wall_s = 50 }).speedup, 1.2)
  t.eq(compare.at_budget(tr, { tokens = 1000 }).correct, false)
  t.eq(compare.at_budget(tr, { tokens = 1000 }).compiled, false)
  t.eq(compare.at_budget(tr, { tokens = 9000, wall_s = 80 }).speedup, 1.2, "every limit applies")
end)

t.test("wins, ties and losses: a tie when the repeat ranges overlap", function()
  local function outs(...)
    local o = {}
    for i, s in ipairs({ ... }) do o[i] = s and { correct = true, speedup = s } or { correct = false } end
    return o
  end
  t.eq(compare.wtl(outs(1.1, 1.3), outs(1.4, 1.5)), "win")
  t.eq(compare.wtl(outs(1.1, 1.3), outs(1.3, 1.5)), "tie", "touching ends overlap")
  t.eq(compare.wtl(outs(1.2, 1.6), outs(1.5, 1.8)), "tie")
  t.eq(compare.wtl(outs(1.5, 1.8), outs(1.1, 1.2)), "loss")
  t.eq(compare.wtl(outs(false, false), outs(1.5)), "win", "never solved counts 1.0")
  t.eq(compare.wtl(outs(false), outs(0.8)), "loss", "a slower correct kernel is below the baseline's 1.0")
end)

t.test("bootstrap over two tasks of one repeat: interval = the two ratios (hand-computed)", function()
  -- ratios 2 and 0.5: a replicate's geomean is 2 (p 1/4), 1 (1/2) or 0.5
  -- (1/4), so the 2.5 % and 97.5 % points are 0.5 and 2
  local units = { { { { correct = true, speedup = 1 } }, { { correct = true, speedup = 2 } } },
                  { { { correct = true, speedup = 2 } }, { { correct = true, speedup = 1 } } } }
  local b = compare.bootstrap(units, compare.geomean_ratio, { n = 2000, seed = 7 })
  t.near(b.estimate, 1.0, 1e-12)
  t.near(b.low, 0.5, 1e-12)
  t.near(b.high, 2.0, 1e-12)
  local again = compare.bootstrap(units, compare.geomean_ratio, { n = 2000, seed = 7 })
  t.same(again.replicates, b.replicates, "same seed, same replicates")
end)

t.test("quantile interpolates between order statistics", function()
  t.eq(compare.quantile({ 1, 2, 3, 4, 5 }, 0.5), 3)
  t.near(compare.quantile({ 1, 2, 3, 4 }, 0.5), 2.5, 1e-12)
  t.eq(compare.quantile({ 1, 2, 3, 4, 5 }, 0), 1)
  t.eq(compare.quantile({ 1, 2, 3, 4, 5 }, 1), 5)
end)

t.test("parse_budget takes every resource with suffixes and rejects unknown ones", function()
  t.same(assert(compare.parse_budget("tokens=2M,usd=5")), { tokens = 2000000, usd = 5 })
  t.same(assert(compare.parse_budget("llm_s=10m,device_s=600,wall_s=1h")), { llm_s = 600, device_s = 600, wall_s = 3600 })
  local r, err = compare.parse_budget("gpus=3")
  t.eq(r, nil)
  t.contains(err.message, "unknown budget 'gpus'")
  t.eq(compare.parse_budget("tokens=-1"), nil)
end)

local strategies = assert(compare.load({ DA, DB }))
assert(compare.check(strategies))

t.test("the default budget is the largest run of the bench that spent least", function()
  t.same(compare.default_budget(strategies), { tokens = 3000 })
end)

t.test("paired comparison at the default budget (hand-computed)", function()
  local r = assert(compare.run(strategies, { seed = 1 }))
  t.eq(r.budget.source, "default")
  local p = r.pairs[1]
  t.eq(p.a, "alpha")
  t.eq(p.b, "beta")
  -- at 3000 tokens: t1 B 1.2 / A 1.1 (lower medians; the late 2.0 and 2.2
  -- are cut), t2 1.5 / 1.2, t3 1.5 / 1.0 (A never solves it)
  local want = { t1 = 1.2 / 1.1, t2 = 1.5 / 1.2, t3 = 1.5 }
  for _, row in ipairs(r.per_task) do t.near(row.ratio, want[row.task], 1e-12, row.task) end
  t.near(p.geomean_ratio, (1.2 / 1.1 * 1.5 / 1.2 * 1.5) ^ (1 / 3), 1e-12)
  t.near(p.geomean_ratio, 1.2694, 1e-4)
  -- t1 ranges [1.1, 1.3] vs [1.2, 1.4] and t2 [1.2, 1.6] vs [1.5, 1.8]
  -- overlap: ties; t3 [1, 1] vs [1.5, 1.5]: a win
  t.eq(p.wins, 1)
  t.eq(p.ties, 2)
  t.eq(p.losses, 0)
  t.eq(p.tasks, 3)
  -- resampling tasks only: three tasks, so each end is the all-one-task
  -- replicate (p 1/27 > 2.5 %): the smallest and largest ratio
  t.near(p.tasks_only.low, 1.2 / 1.1, 1e-12)
  t.near(p.tasks_only.high, 1.5, 1e-12)
  -- with repeats resampled too, a replicate lies between the most extreme
  -- per-task ratios a redraw of repeats can give: t1 1.2/1.3 .. 1.4/1.1,
  -- t2 1.5/1.6 .. 1.8/1.2, t3 1.5
  t.ok(p.ci_low <= p.geomean_ratio and p.geomean_ratio <= p.ci_high, "the estimate lies in its interval")
  t.ok(p.ci_low >= 1.2 / 1.3 - 1e-12 and p.ci_high <= 1.5 + 1e-12)
  t.eq(p.replicates, 2000)
  t.ok(p.ci_low < p.tasks_only.low, "repeat noise widens the interval")
  -- A: t1 1.1 and t2 1.2 correct, t3 not; B correct on all three
  t.eq(r.strategies[1].correct, 2)
  t.eq(r.strategies[2].correct, 3)
  t.eq(r.strategies[1].compiled, 2, "t3's median repeat (r1, ranked first of two failures) only hit a compile error")
  t.eq(r.strategies[2].spent.tokens, 2 * 10000 + 4 * 3000, "what the runs spent in all")
  t.eq(r.strategies[2].runs_cut, 2, "both t1 runs of B spent 10000 tokens")
  t.eq(r.strategies[2].spent_within_budget.tokens, 6 * 3000)
  t.eq(r.strategies[2].unverified_runs, 5, "only B's t3 r1 node was re-checked")
  t.eq(r.strategies[1].unverified_runs, 0)
  local again = assert(compare.run(strategies, { seed = 1 }))
  t.eq(again.pairs[1].ci_low, p.ci_low, "seeded: the same interval")
  t.eq(again.pairs[1].ci_high, p.ci_high)
end)

t.test("a larger budget keeps B's late finds: t1 becomes a win", function()
  local r = assert(compare.run(strategies, { budget = { tokens = 10000 } }))
  local t1
  for _, row in ipairs(r.per_task) do if row.task == "t1" then t1 = row end end
  t.near(t1.ratio, 2.0 / 1.1, 1e-12)
  t.eq(t1.outcome, "win")
  t.eq(r.pairs[1].wins, 2)
  t.eq(r.strategies[2].runs_cut, 0)
end)

t.test("the verdict claims a direction only when the interval excludes 1.0", function()
  local ctx = { budget_text = "2 M tokens per run", tasks = 13, repeats_lo = 3, repeats_hi = 3 }
  t.eq(compare.verdict({ a = "A", b = "B", geomean_ratio = 1.21, ci_low = 1.05, ci_high = 1.40, level = 0.95 }, ctx),
    "B faster than A by 1.21× (95 % CI 1.05–1.40) at 2 M tokens per run on 13 tasks, 3 repeats")
  t.matches(compare.verdict({ a = "A", b = "B", geomean_ratio = 1.1, ci_low = 0.95, ci_high = 1.3, level = 0.95 }, ctx),
    "^no clear difference between B and A: B/A = 1.10× %(95 %% CI 0.95–1.30, includes 1.0%)")
  t.matches(compare.verdict({ a = "A", b = "B", geomean_ratio = 0.8, ci_low = 0.7, ci_high = 0.9, level = 0.95 }, ctx),
    "^B slower than A by 1.25×")
  ctx.unverified = 4
  t.contains(compare.verdict({ a = "A", b = "B", geomean_ratio = 1.21, ci_low = 1.05, ci_high = 1.40, level = 0.95 }, ctx),
    "4 runs count a node the held-out check never saw")
  ctx.unverified = 1
  t.contains(compare.verdict({ a = "A", b = "B", geomean_ratio = 1.21, ci_low = 1.05, ci_high = 1.40, level = 0.95 }, ctx),
    "(1 run counts a node the held-out check never saw)")
end)

t.test("benches run under different --budget limits get a note, equal ones none", function()
  t.eq(compare.run_budget_note({ { name = "a", run_budget = { tokens = 20000 } }, { name = "b", run_budget = { tokens = 20000 } } }), nil)
  t.contains(compare.run_budget_note({ { name = "a", run_budget = { tokens = 20000 } }, { name = "b" } }),
    "(a: 20 k tokens per run; b: no limit)")
end)

t.test("suggest_repeats: decided, more tasks needed, or a repeat count", function()
  t.eq(compare.suggest_repeats({ geomean_ratio = 1.2, ci_low = 1.1, ci_high = 1.3, tasks_only = { low = 1.15, high = 1.25 } }, 3).decided, true)
  local s = compare.suggest_repeats({ geomean_ratio = 1.1, ci_low = 0.9, ci_high = 1.3, tasks_only = { low = 0.95, high = 1.25 } }, 3)
  t.eq(s.decided, false)
  t.eq(s.repeats, nil)
  t.contains(s.reason, "more tasks")
  -- effect log 1.2 = 0.1823; half-width 0.2 (log), tasks-only half-width 0.1:
  -- repeat part 0.2^2 - 0.1^2 = 0.03 at K = 2; K' = ceil(2 * 0.03 / (0.1823^2 - 0.01)) = 3
  local lg = math.log(1.2)
  local s2 = compare.suggest_repeats({ geomean_ratio = 1.2, ci_low = math.exp(lg - 0.2), ci_high = math.exp(lg + 0.2),
    tasks_only = { low = math.exp(lg - 0.1), high = math.exp(lg + 0.1) } }, 2)
  t.eq(s2.repeats, math.ceil(2 * 0.03 / (lg * lg - 0.01)))
  t.eq(s2.repeats, 3)
end)

t.test("suggest_repeats never names thousands of repeats: past the cap it says what tightens the interval", function()
  -- effect log 1.05 = 0.04879, tasks-only half-width 0.048, half-width 0.1 at K = 2:
  -- K' = ceil(2 * (0.01 - 0.048^2) / (0.04879^2 - 0.048^2)) = 198, past the cap of 20
  local lg = math.log(1.05)
  local p = { geomean_ratio = 1.05, ci_low = math.exp(lg - 0.1), ci_high = math.exp(lg + 0.1),
    tasks_only = { low = math.exp(lg - 0.048), high = math.exp(lg + 0.048) }, tasks = 3 }
  local s = compare.suggest_repeats(p, 2)
  t.eq(s.repeats, nil)
  t.eq(s.needed, math.ceil(2 * (0.01 - 0.048 ^ 2) / (lg * lg - 0.048 ^ 2)))
  t.ok(s.needed > compare.MAX_REPEATS)
  t.contains(s.reason, "below what repeats can resolve")
  t.contains(s.reason, "more than 20")
  -- the repeat part (0.01 - 0.0023) is most of the interval: tasks T' = ceil(3 * 0.01 / 0.04879^2) = 13, or a larger budget
  t.eq(s.tasks, math.ceil(3 * 0.01 / (lg * lg)))
  t.contains(s.reason, "about 13 tasks at these repeats")
  t.contains(s.reason, "larger budget per run")
  t.eq(compare.suggest_repeats(p, 2, { max = 500 }).repeats, s.needed, "a higher cap names the count")
end)

t.test("anytime curves: the median line steps up when the budget reaches a find", function()
  local pts = compare.curve(strategies[2].tasks, "tokens", { 500, 1000, 3000, 9000 })
  -- 500: nothing found anywhere -> 1.0; 1000: t2 1.5, t3 1.5 (r1) -> lower
  -- medians t2 1.5, t3 1.0 (r2 finds at 2000), t1 1.0 -> geomean 1.5^(1/3)
  t.near(pts[1][2], 1.0, 1e-12)
  t.near(pts[2][2], 1.5 ^ (1 / 3), 1e-12)
  -- 3000: t1 1.2, t2 1.5, t3 1.5; 9000: t1 lower median of 2.0 and 2.2
  t.near(pts[3][2], (1.2 * 1.5 * 1.5) ^ (1 / 3), 1e-12)
  t.near(pts[4][2], (2.0 * 1.5 * 1.5) ^ (1 / 3), 1e-12)
  -- the band: repeat 1 alone vs repeat 2 alone at 3000: (1.2*1.5*1.5), (1.4*1.8*1.5)
  t.near(pts[3][3], (1.2 * 1.5 * 1.5) ^ (1 / 3), 1e-12)
  t.near(pts[3][4], (1.4 * 1.8 * 1.5) ^ (1 / 3), 1e-12)
end)

t.test("mkengine compare prints the verdict, its JSON is stable, the report is written", function()
  local code, out, err = mk { "compare", DA, DB }
  t.eq(code, 0, err)
  t.contains(out, "budget: 3 k tokens per run (default")
  t.matches(out, "verdict: beta faster than alpha by 1%.27× %(95 %% CI [%d.]+–[%d.]+%) at 3 k tokens per run on 3 tasks, 2 repeats")
  local c1, j1 = mk { "compare", DA, DB, "--json", "-o", tmp .. "/cmp.html" }
  t.eq(c1, 0)
  local r = cjson.decode(j1)
  local keys = {}
  for k in pairs(r) do keys[#keys + 1] = k end
  table.sort(keys)
  t.same(keys, { "budget", "pairs", "per_task", "strategies" })
  for _, k in ipairs({ "a", "b", "geomean_ratio", "ci_low", "ci_high", "wins", "ties", "losses", "tasks" }) do
    t.ok(r.pairs[1][k] ~= nil, "pair field " .. k)
  end
  local _, j2 = mk { "compare", DA, DB, "--json" }
  t.eq(cjson.decode(j2).pairs[1].ci_low, r.pairs[1].ci_low, "the same inputs print the same interval")
  local html = assert(fs.read(tmp .. "/cmp.html"))
  t.contains(html, "beta faster than alpha by 1.27×")
  t.contains(html, 'class="chart forest"')
  local _, bands = html:gsub('class="band"', "")
  t.ok(bands >= 4, "bands on the anytime curves")
end)

t.test("chromium: the compare report loads with no console error and draws its charts", function()
  local html = compare.html(assert(compare.run(strategies, {})), compare.curves(strategies))
  local r = dofile("tests/lua/lib/chromium.lua").probe(t, html, tmp, "compare")
  t.same(r.errors, {})
  -- anytime curves for tokens, LLM, device and wall seconds (nothing spent
  -- USD), and the per-task ratio chart
  t.eq(r.charts, 5)
end)

t.test("a sweep's bench entries each count as one strategy, labelled as in the sweep", function()
  local sw = tmp .. "/sweep"
  fs.mkdirs(sw)
  fs.write(sw .. "/results.json", cjson.encode({ kind = "sweep", entries = {
    { kind = "run", label = "a single run", run_dir = "1-run" },
    { kind = "bench", label = "alpha width=1", bench_dir = "../alpha" },
    { kind = "bench", label = "beta width=2", bench_dir = "../beta" } } }))
  local ss = assert(compare.load({ sw }))
  t.eq(#ss, 2)
  -- the sweep directory alone is enough: its bench entries are the sides
  local code, out, err = mk { "compare", sw }
  t.eq(code, 0, err)
  t.contains(out, "verdict: beta width=2")
  local one, _, err1 = mk { "compare", DA }
  t.eq(one, 2)
  t.contains(err1, "need at least two benches")
  t.eq(ss[1].label, "alpha width=1")
  local r = assert(compare.run(ss, { seed = 1 }))
  t.eq(r.pairs[1].b, "beta width=2")
  t.near(r.pairs[1].geomean_ratio, (1.2 / 1.1 * 1.5 / 1.2 * 1.5) ^ (1 / 3), 1e-12)
  write_bench(tmp .. "/alpha2", "alpha", "toy", A_TASKS, A_TOTALS)
  local same = assert(compare.load({ DA, tmp .. "/alpha2" }))
  t.eq(same[1].label, "alpha (alpha)", "equal names are told apart by directory")
  t.eq(same[2].label, "alpha (alpha2)")
  local r2 = assert(compare.run(same, {}))
  t.eq(r2.pairs[1].geomean_ratio, 1.0)
  t.eq(#compare.notes(r2.strategies), 0, "same budgets, spend recorded per node: nothing to note")
  t.matches(r2.pairs[1].verdict, "^no clear difference")
end)

t.test("different suites, missing tasks and incomplete benches exit 2 saying why", function()
  local other = tmp .. "/other"
  write_bench(other, "beta", "elsewhere", B_TASKS, B_TOTALS)
  local code, _, err = mk { "compare", DA, other }
  t.eq(code, 2)
  t.contains(err, "different suites")
  local fewer = tmp .. "/fewer"
  write_bench(fewer, "beta", "toy", { t1 = B_TASKS.t1, t2 = B_TASKS.t2 }, B_TOTALS)
  code, _, err = mk { "compare", DA, fewer }
  t.eq(code, 2)
  t.contains(err, "task t3 is in")
  local part = tmp .. "/part"
  write_bench(part, "beta", "toy", B_TASKS, B_TOTALS, { runs_done = 4 })
  code, _, err = mk { "compare", DA, part }
  t.eq(code, 2)
  t.contains(err, "incomplete (4 of 6 runs)")
  code, _, err = mk { "compare", DA }
  t.eq(code, 2)
  t.contains(err, "at least two")
  code, _, err = mk { "compare", DA, DB, "--budget", "gpus=1" }
  t.eq(code, 2)
  t.contains(err, "unknown budget")
  code, _, err = mk { "compare", DA, tmp .. "/nope" }
  t.eq(code, 2)
  t.contains(err, "does not exist")
end)

t.test("two small real benches of the cpu suite on the scripted model compare end to end", function()
  local base = { "--model", "scripted", "--repeat", "2", "--task", "rmsnorm", "--task", "softmax",
    "--set", "tune=false", "--set", "tests_agent=false", "--concurrency", "4", "--quiet" }
  -- both benches at once, each running its 4 runs at once: minutes, not ten
  local function bench(strategy, out, extra)
    local argv = { "bench", "examples/suites/cpu", strategy, "--out", out }
    for _, a in ipairs(base) do argv[#argv + 1] = a end
    for _, a in ipairs(extra) do argv[#argv + 1] = a end
    return task.spawn(function() return { mk(argv) } end)
  end
  local hs = { bench("parallel", tmp .. "/real-par", { "--set", "trajectories=2", "--set", "iters=2" }),
    bench("beam", tmp .. "/real-beam", { "--set", "width=2", "--set", "depth=1", "--set", "inner_iters=1" }) }
  for _, res in ipairs(task.gather(hs)) do t.eq(res[1], 0, tostring(res[2]) .. tostring(res[3])) end
  local code, out, err = mk { "compare", tmp .. "/real-par", tmp .. "/real-beam", "--json", "-o", tmp .. "/real.html" }
  t.eq(code, 0, err)
  local r = cjson.decode(out)
  t.eq(r.pairs[1].tasks, 2)
  t.eq(r.pairs[1].wins + r.pairs[1].ties + r.pairs[1].losses, 2)
  t.ok(r.pairs[1].ci_low <= r.pairs[1].geomean_ratio and r.pairs[1].geomean_ratio <= r.pairs[1].ci_high)
  t.eq(r.budget.source, "default")
  t.ok(r.budget.limits.tokens > 0, "scripted runs spend tokens")
  for _, s in ipairs(r.strategies) do
    t.eq(s.runs, 4)
    t.ok(s.spent.tokens > 0)
  end
  -- real node events carry `spent`, so device seconds are a usable budget
  local c2, out2, err2 = mk { "compare", tmp .. "/real-par", tmp .. "/real-beam", "--budget", "device_s=1h" }
  t.eq(c2, 0, err2)
  t.contains(out2, "verdict: ")
  local html = assert(fs.read(tmp .. "/real.html"))
  t.contains(html, "device seconds per run")
end)

local code = t.run()
fs.rm_rf(tmp)
return code

-- mk.study.metrics against hand-computed values.
local t = dofile("tests/lua/lib/t.lua")
local metrics = require "mk.study.metrics"

local function row(correct, speedup, compiled)
  return { correct = correct, speedup = speedup, compiled = compiled == nil and correct or compiled }
end

-- Four tasks: 2.0x, 0.5x (correct but slower), no correct kernel, 1.0x.
local rows = { row(true, 2.0), row(true, 0.5), row(false, nil, true), row(true, 1.0) }

t.test("unfloored geomean counts a slower correct kernel as measured and a failed task as 1.0", function()
  -- (2 * 0.5 * 1 * 1)^(1/4) = 1
  t.near(metrics.geomean_speedup(rows), 1.0, 1e-12)
  local r2 = { row(true, 4.0), row(true, 0.25), row(false), row(true, 2.0) }
  -- 4 * 0.25 * 1 * 2 = 2 -> 2^(1/4)
  t.near(metrics.geomean_speedup(r2), 2 ^ 0.25, 1e-12)
end)

t.test("floored geomean raises every task to at least 1.0", function()
  -- max(1,.) = 2, 1, 1, 1 -> 2^(1/4)
  t.near(metrics.geomean_speedup(rows, 1.0), 2 ^ 0.25, 1e-12)
  local r2 = { row(true, 4.0), row(true, 0.25), row(false), row(true, 2.0) }
  -- 4 * 1 * 1 * 2 = 8 -> 8^(1/4)
  t.near(metrics.geomean_speedup(r2, 1.0), 8 ^ 0.25, 1e-12)
end)

t.test("an incorrect task's speedup is ignored even when present", function()
  local r = { row(false, 10.0, true), row(true, 4.0) }
  t.near(metrics.geomean_speedup(r), 2.0, 1e-12) -- (1 * 4)^(1/2)
  t.eq(metrics.fast_p(r, 1), 0.5)
end)

t.test("interpret-timed speedups are not mixed into the geomeans nor fast_p above 0", function()
  local interp = row(true, 8.0)
  interp.timing_kind = "interpret"
  local r = { interp, row(true, 4.0) }
  t.near(metrics.geomean_speedup(r), 2.0, 1e-12) -- (1 * 4)^(1/2): the 8x is an interpreter's
  t.near(metrics.geomean_speedup(r, 1.0), 2.0, 1e-12)
  t.near(metrics.fast_p(r, 0), 1.0, 1e-12) -- still correct
  t.near(metrics.fast_p(r, 1), 0.5, 1e-12)
  t.eq(metrics.timed(interp), false)
  t.eq(metrics.timed(row(true, 4.0)), true)
  local a = metrics.aggregate(r)
  t.eq(a.interpret_timed, 1)
  t.eq(metrics.task_row("x", { interp }).timing_kind, "interpret")
end)

t.test("fast_p counts over all tasks, strictly greater than p", function()
  t.eq(metrics.fast_p(rows, 0), 3 / 4)   -- 2.0, 0.5, 1.0 are > 0
  t.eq(metrics.fast_p(rows, 1), 1 / 4)   -- only 2.0; 1.0 is exactly p
  t.eq(metrics.fast_p(rows, 1.5), 1 / 4)
  t.eq(metrics.fast_p(rows, 2), 0)       -- 2.0 is exactly p: not counted
end)

t.test("fast_p with a speedup exactly p does not count, just above does", function()
  t.eq(metrics.fast_p({ row(true, 1.5) }, 1.5), 0)
  t.eq(metrics.fast_p({ row(true, 1.5000001) }, 1.5), 1)
end)

t.test("fast_p of an empty suite is 0 and its geomean is 1", function()
  t.eq(metrics.fast_p({}, 1), 0)
  t.eq(metrics.geomean_speedup({}), 1.0)
end)

t.test("fast_table names thresholds 0, 1, 1.5, 2", function()
  local by, curve = metrics.fast_table(rows)
  t.same(by, { ["0"] = 0.75, ["1"] = 0.25, ["1.5"] = 0.25, ["2"] = 0 })
  t.eq(#curve, 4)
  t.eq(curve[3].p, 1.5)
end)

t.test("geomean rejects non-positive values", function()
  t.raises(function() metrics.geomean({ 1, 0 }) end, "element 2")
  t.raises(function() metrics.geomean({ -1 }) end, "not a positive")
  t.near(metrics.geomean({ 1, 4 }), 2, 1e-12)
end)

t.test("counts: compiled includes correct tasks and compiled-but-wrong ones", function()
  local c, k = metrics.counts({ row(true, 2), row(false, nil, true), row(false, nil, false) })
  t.eq(c, 2)
  t.eq(k, 1)
end)

t.test("median_run of 5 repeats picks the 3rd fastest, failed runs rank lowest", function()
  local runs = { row(true, 1.2), row(false), row(true, 3.0), row(true, 0.9), row(true, 1.5) }
  local m, i = metrics.median_run(runs)
  t.eq(i, 1)          -- order: fail(2), 0.9(4), 1.2(1), 1.5(5), 3.0(3)
  t.eq(m.speedup, 1.2)
end)

t.test("median_run of an even count takes the lower middle run", function()
  local runs = { row(true, 4), row(true, 1), row(true, 2), row(true, 3) }
  local m = metrics.median_run(runs)
  t.eq(m.speedup, 2)
  local m2 = metrics.median_run({ row(false), row(true, 5) })
  t.eq(m2.correct, false)
  t.eq(metrics.median_run({}), nil)
end)

t.test("median_run with mostly failed repeats reports a failed run", function()
  local m = metrics.median_run({ row(false), row(true, 9), row(false) })
  t.eq(m.correct, false)
end)

t.test("sum_costs adds fields and keeps every cost key", function()
  local s = metrics.sum_costs({
    { input_tokens = 100, output_tokens = 10, usd = 0.5, wall_s = 2 },
    { input_tokens = 50.0, usd = 0.25, device_s = 1.5 },
    nil,
  })
  t.eq(s.input_tokens, 150)
  t.eq(math.type(s.input_tokens), "integer")
  t.eq(s.output_tokens, 10)
  t.near(s.usd, 0.75, 1e-12)
  t.eq(s.device_s, 1.5)
  t.eq(s.llm_s, 0)
  t.eq(s.wall_s, 2)
end)

t.test("task_row carries the median run and sums cost over all repeats", function()
  local runs = {
    { correct = true, compiled = true, speedup = 2.0, cost = { usd = 1 } },
    { correct = false, compiled = true, cost = { usd = 2 } },
    { correct = true, compiled = true, speedup = 1.5, cost = { usd = 4 } },
  }
  local r = metrics.task_row("softmax", runs)
  t.eq(r.task, "softmax")
  t.eq(r.speedup, 1.5)
  t.eq(r.median_repeat, 3)
  t.eq(r.correct, true)
  t.eq(r.correct_runs, 2)
  t.eq(r.cost.usd, 7)
  t.eq(r.median_cost.usd, 4)
end)

t.test("aggregate reports counts, both geomeans, fast_p and total cost", function()
  local rs = {
    { task = "a", correct = true, compiled = true, speedup = 2.0, cost = { input_tokens = 10, usd = 0.1 } },
    { task = "b", correct = true, compiled = true, speedup = 0.5, cost = { input_tokens = 20, usd = 0.2 } },
    { task = "c", correct = false, compiled = true, cost = { input_tokens = 30 } },
    { task = "d", correct = false, compiled = false, cost = {} },
  }
  local a = metrics.aggregate(rs)
  t.eq(a.tasks, 4)
  t.eq(a.compiled, 3)
  t.eq(a.correct, 2)
  t.near(a.geomean_speedup, 1.0, 1e-12)            -- 2 * .5 * 1 * 1
  t.near(a.geomean_speedup_floored, 2 ^ 0.25, 1e-12) -- 2 * 1 * 1 * 1
  t.eq(a.fast_p["0"], 0.5)
  t.eq(a.fast_p["1"], 0.25)
  t.eq(a.fast_p["2"], 0)
  t.eq(a.cost.input_tokens, 60)
  t.near(a.cost.usd, 0.3, 1e-12)
end)

t.test("fast_curve is non-increasing and starts at the correct share", function()
  local pts = metrics.fast_curve(rows, 11)
  t.eq(#pts, 11)
  t.eq(pts[1].value, 0.75)
  for i = 2, #pts do t.ok(pts[i].value <= pts[i - 1].value, "non-increasing at " .. i) end
  t.eq(pts[#pts].value, 0)
end)

t.test("fast_steps drops exactly at each correct speedup", function()
  local pts = metrics.fast_steps(rows)
  -- correct speedups 0.5, 1.0, 2.0 of 4 tasks
  t.eq(#pts, 5)
  t.same({ pts[1].p, pts[1].value }, { 0, 0.75 })
  t.same({ pts[2].p, pts[2].value }, { 0.5, 0.5 })
  t.same({ pts[3].p, pts[3].value }, { 1.0, 0.25 })
  t.same({ pts[4].p, pts[4].value }, { 2.0, 0 })
  t.near(pts[5].p, 2.2, 1e-12)
  t.eq(pts[5].value, 0)
  t.same(metrics.fast_steps({}), { { p = 0, value = 0 }, { p = 2, value = 0 } })
end)

t.test("repeat_geomeans: the floored geomean of repeat k of every task, a missing or failed run 1.0", function()
  local rs = { { task = "a", speedups = { 2.0, 0, 1.5 } }, { task = "b", speedups = { 0.5, 4.0 } } }
  local g = metrics.repeat_geomeans(rs)
  t.eq(#g, 3)
  t.near(g[1], math.sqrt(2.0 * 1.0), 1e-12, "a slower kernel is floored at 1.0")
  t.near(g[2], math.sqrt(1.0 * 4.0), 1e-12, "a run without a correct kernel counts 1.0")
  t.near(g[3], math.sqrt(1.5 * 1.0), 1e-12, "a task without a third run counts 1.0")
  t.same(metrics.aggregate(rs).repeat_geomeans, g)
end)

return t.run()

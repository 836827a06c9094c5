-- Escalation of the Pallas target (targets/pallas/escalate.lua M.escalate):
-- a kernel tiled for the task's own sizes (an empty grid, its own shape
-- check) is re-tested at larger scales before any verdict, and one that
-- cannot be checked within the limits gets status "unchecked". Real JAX,
-- TPU interpret mode on the CPU; the task is tests/python/tasks/big_blocks.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local pallas = require("mk.eval.targets").get("pallas")
local cpu = dofile("tests/lua/lib/pallas_cpu.lua")

local CANDS = "tests/python/candidates"

local function read(p) return assert(fs.read(p)) end

t.test("larger scales double the recorded cap up to the task's own sizes, or halve the factor", function()
  local d = t.tmpdir("mk-pallas-scales-")
  assert(fs.write(d .. "/cases.json", '{"test_scale": 256}'))
  local labels = {}
  -- sizes as the harness's JSON gives them (cjson: 1024.0)
  for _, s in ipairs(pallas.larger_scales({ config = { m = 1024.0, k = 512.0, n = 1024.0, seed = 4096.0 } }, d)) do
    labels[#labels + 1] = s.label
  end
  t.eq(table.concat(labels, ", "), "test scale 512, the task's own sizes")
  assert(fs.write(d .. "/cases.json", '{"test_scale": {"factor": 8.0, "config": {"m": 128}}}'))
  labels = {}
  for _, s in ipairs(pallas.larger_scales({ config = {} }, d)) do labels[#labels + 1] = s.label end
  t.eq(table.concat(labels, ", "), "scale factor 4, scale factor 2, the task's own sizes")
  -- a suite whose widths alone were scaled escalates in the same tier
  assert(fs.write(d .. "/cases.json", '{"test_scale": {"factor": 4.0, "tier": "widths"}}'))
  local scales = pallas.larger_scales({ config = {} }, d)
  t.eq(#scales, 2)
  t.eq(scales[1].label, "scale factor 2 (widths only)")
  t.eq(table.concat(scales[1].args, " "), "--scale-factor 2 --scale-tier widths")
  t.eq(table.concat(scales[2].args, " "), "--scale-factor 1")
  assert(fs.write(d .. "/cases.json", '{"test_scale": {"factor": 2.0, "tier": null}}'))
  t.eq(table.concat(pallas.larger_scales({ config = {} }, d)[1].args, " "), "--scale-factor 1")
  -- when all sizes together are over the budget: the widths alone, from the test scale's factor down
  assert(fs.write(d .. "/cases.json", '{"test_scale": {"factor": 4.0, "tier": null}}'))
  labels = {}
  for _, s in ipairs(pallas.widths_scales(d)) do labels[#labels + 1] = table.concat(s.args, " ") end
  t.eq(table.concat(labels, ", "), "--scale-factor 4 --scale-tier widths, --scale-factor 2 --scale-tier widths")
  assert(fs.write(d .. "/cases.json", '{"test_scale": {"factor": 4.0, "tier": "widths"}}'))
  t.eq(#pallas.widths_scales(d), 0)
  fs.rm_rf(d)
end)

t.test("kernels tiled for the task's sizes are checked at a larger scale, never blamed at the test scale", function()
  local ok, why = cpu.setup(pallas)
  t.ok(ok, why)
  local task = assert(require("mk.eval.targets").load_task("tests/python/tasks/big_blocks"))
  task.seeds, task.heldout_seeds = { 0, 1 }, { 1001 }
  local ev = require("mk.eval").new(task, { jobs = 1, bench = { min_reps = 2, max_reps = 3, warmup = 1 } })
  local timed = {} -- the scale each baseline step reported it timed the reference at -> how many times
  local froze = { n = 0, cpu_s = 0, peak = 0 } -- the freezes at a larger scale within one evaluation
  pallas.on_result = function(sub, v)
    if sub == "freeze" and v.status == "ok" then
      froze.n, froze.cpu_s = froze.n + 1, froze.cpu_s + (tonumber(v.cpu_s) or 0)
      froze.peak = math.max(froze.peak, tonumber(v.peak_rss_mb) or 0)
    end
    if sub == "baseline" and v.status == "ok" then
      local ts = type(v.timed_scale) == "table" and v.timed_scale or {}
      local l = pallas.scale_label(ts.factor, ts.tier) or "unknown"
      timed[l] = (timed[l] or 0) + 1
    end
  end
  -- an empty grid at the test scale of 256: escalated to 512, where it is correct (held-out too)
  ev:freeze()
  local procs = ev.procs.peak_rss_mb
  t.ok(procs and procs > 0, "the suite's freeze counts in the evaluator's own processes")
  local r = ev:evaluate(read(CANDS .. "/pallas_big_blocks.py"), { tune = false })
  t.eq(r.status, "ok", r.message)
  -- the freeze at the larger scale counts in the evaluation's CPU seconds and peak memory
  t.ok(froze.n >= 1, "a larger scale frozen")
  t.ok(r.cpu_s >= froze.cpu_s and froze.cpu_s > 0, string.format("%s < %s", r.cpu_s, froze.cpu_s))
  t.ok(r.peak_rss_mb >= froze.peak, string.format("%s < %s", r.peak_rss_mb, froze.peak))
  t.ok(r.checked_at, r.message) -- the scale its blocks tile (scale factor 1 or 2, whichever the freeze chose)
  t.contains(r.message, "checked at " .. tostring(r.checked_at) .. " (at the test scale: empty grid (0, 0")
  -- timed at that scale, and the reference with it: the ratio compares equal sizes
  t.eq(r.timed_at, r.checked_at)
  t.eq(r.baseline_timed_at, r.checked_at)
  t.eq(timed[r.checked_at], 1)
  t.contains(r.message, "both timed at " .. r.checked_at)
  -- interpret mode (this CPU) still shows no speedup, at any scale
  t.contains(r.message, "no speedup")
  local h = ev:heldout(read(CANDS .. "/pallas_big_blocks.py"))
  t.eq(h.status, "ok", h.message)
  -- its own shape check raised at 256: the same; the reference is not timed again at that scale
  r = ev:evaluate(read(CANDS .. "/pallas_big_blocks_checked.py"), { tune = false })
  t.eq(r.status, "ok", r.message)
  t.contains(r.message, "its own check raised")
  t.eq(r.baseline_timed_at, r.timed_at)
  for label, n in pairs(timed) do t.eq(n, 1, "baseline steps timed at " .. label) end
  -- the test scale's baseline is another measurement, at the test scale
  local b0 = ev:baseline()
  t.ok(b0.timed_at and b0.timed_at ~= r.timed_at, tostring(b0.timed_at))
  t.eq(timed[b0.timed_at], 1)
  pallas.on_result = nil
  -- numpy refused its trace-time table at 256 (no raise of its own), but it traces at the task's sizes
  r = ev:evaluate(read(CANDS .. "/pallas_big_blocks_table.py"), { tune = false })
  t.eq(r.status, "ok", r.message)
  t.contains(r.message, "it traces at the task's own sizes")
  -- a wrong kernel of the same tiling is incorrect where it can be checked, and says where
  r = ev:evaluate(read(CANDS .. "/pallas_big_blocks_wrong.py"), { tune = false })
  t.eq(r.status, "incorrect", r.message)
  t.contains(r.message, "checked at ")
  ev:close()
  -- no larger scale can be frozen within the limits: its own status, not incorrect, not compile_error
  -- (without the sampled run at the task's own sizes: pallas_sampled_test.lua has it)
  local keep = pallas.defaults.escalate_timeout
  pallas.defaults.escalate_timeout, pallas.defaults.sampled = 0.01, false
  local ev2 = require("mk.eval").new(task, { jobs = 1 })
  r = ev2:evaluate(read(CANDS .. "/pallas_big_blocks_checked.py"), { tune = false })
  pallas.defaults.escalate_timeout, pallas.defaults.sampled = keep, true
  t.eq(r.status, "unchecked", r.message)
  t.eq(r.correct, false)
  t.contains(r.message, "the reference could not be frozen")
  ev2:close()
  cpu.teardown(pallas)
end)

return t.run()

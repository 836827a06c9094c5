-- The Pallas target's frozen suites in the shared suite cache
-- (mk.eval.suites; issue 34): an evaluator with suite_cache freezes the
-- task's suite there once, and the suites at larger scales its held-out
-- confirmation needs beside it, so a second evaluation of the task (another
-- evaluator, another engine) verifies them and pays no freeze. A scale
-- whose reference cannot be frozen is remembered too. Real JAX, TPU
-- interpret mode on the CPU; tests/python/tasks/big_blocks with
-- pallas_big_blocks.py at 128-deep steps (confirmed at scale factors 2 and
-- 1 after the test scale's 4).
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local eval = require "mk.eval"
local suites = require "mk.eval.suites"
local targets = require "mk.eval.targets"
local pallas = targets.get("pallas")
local cpu = dofile("tests/lua/lib/pallas_cpu.lua")

local tmp = t.tmpdir("mk-pallas-suite-cache-") -- removed when the tests end
suites.root = function() return tmp .. "/cache/mkengine" end

local function kernel()
  local src, n = assert(fs.read("tests/python/candidates/pallas_big_blocks.py"))
    :gsub("BM, BN, BK = 512, 512, 512", "BM, BN, BK = 128, 128, 128")
  assert(n == 1, "pallas_big_blocks.py changed: update this test's substitution")
  return src
end

-- One evaluation (search, then held-out with its confirmation) by a new
-- evaluator: its held-out result and the freeze steps the harness ran.
local function evaluate_once(src)
  local freezes = {}
  pallas.on_result = function(step, v)
    if step == "freeze" then freezes[#freezes + 1] = v.test_scale and math.tointeger(v.test_scale.factor) or "?" end
  end
  local task = assert(targets.load_task("tests/python/tasks/big_blocks"))
  task.seeds, task.heldout_seeds = { 0 }, { 1001 }
  local ev = eval.new(task, { jobs = 1, suite_cache = true, bench = { min_reps = 2, max_reps = 3, warmup = 1 } })
  local r = ev:evaluate(src, { tune = false, profile = false })
  local h = ev:heldout(src)
  local dir = ev.tests_dir
  ev:close()
  pallas.on_result = nil
  return r, h, freezes, dir
end

t.test("a second evaluation of a task freezes nothing: its suite and larger scales come from the cache", function()
  local ok, why = cpu.setup(pallas)
  t.ok(ok, why)
  local r, h, freezes, dir = evaluate_once(kernel())
  t.eq(r.status, "ok", r.message)
  t.eq(h.confirmed_at, "the task's own sizes", h.message)
  t.eq(table.concat(freezes, " "), "4 2 1", "the test scale, then the two larger scales the confirmation checked")
  t.eq(dir:match("^(.*)/%x+$"), suites.dir(), "the suite is in the cache")
  t.ok(fs.exists(dir .. "/frozen.json") and fs.exists(dir .. ".scale-f2/frozen.json") and
    fs.exists(dir .. ".scale-f1/frozen.json"), "the larger scales beside it")
  local r2, h2, freezes2, dir2 = evaluate_once(kernel())
  t.eq(r2.status, "ok", r2.message)
  t.eq(dir2, dir)
  t.eq(#freezes2, 0, "no freeze: " .. table.concat(freezes2, " "))
  t.eq(h2.confirmed_at, "the task's own sizes", h2.message)
  cpu.teardown(pallas)
end)

t.test("a scale whose reference cannot be frozen is remembered and not tried again", function()
  -- scale_ignored's output ignores its largest input at every size: frozen at its test scale with a
  -- warning, refused at its own sizes, where the confirmation of its reference (as a candidate) looks
  local ok, why = cpu.setup(pallas)
  t.ok(ok, why)
  local task = assert(targets.load_task("tests/python/tasks/scale_ignored"))
  local src = task.reference
  pallas.defaults.sampled = false -- the sampled run's own suite (pallas_sampled_test.lua) is another freeze
  local function once()
    local freezes = {}
    pallas.on_result = function(step, v) if step == "freeze" then freezes[#freezes + 1] = v.status end end
    local ev = eval.new(task, { jobs = 1, suite_cache = true, plain_ok = true })
    local h = ev:heldout(src)
    ev:close()
    pallas.on_result = nil
    return h, freezes
  end
  local h, freezes = once()
  t.eq(h.status, "ok", h.message)
  t.matches(h.confirm_note, "^not confirmed %(the task's own sizes not checked: .*does not change when the largest")
  t.eq(table.concat(freezes, " "), "ok error", "the test scale frozen, the task's own sizes refused")
  local h2, freezes2 = once()
  t.eq(h2.confirm_note, h.confirm_note)
  t.eq(#freezes2, 0, "neither frozen nor tried again: " .. table.concat(freezes2, " "))
  pallas.defaults.sampled = true
  cpu.teardown(pallas)
end)

return t.run()

-- A Pallas run that runs out of time in interpret mode
-- (targets/pallas/target.lua out_of_time): the outputs its calls left are
-- checked; all correct makes it "unchecked" (re-checked on a device worker
-- when the run has one), one wrong makes it "incorrect", none at all
-- leaves it "timeout". Real JAX, TPU interpret mode on the CPU; the
-- kernel (tests/python/candidates/pallas_slow_case.py, and its twin off by
-- 0.5) never ends on the
-- 5 x 7 case of tests/python/tasks/tiny_rmsnorm, after four calls that end.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local pallas = require("mk.eval.targets").get("pallas")

local CANDS = "tests/python/candidates"
-- seconds a run may take: several times what the four calls before the
-- endless one need (seconds), so that a busy machine
-- does not change the verdict
local LIMIT = 45

t.test("a run out of time is judged by the calls that ended", function()
  local py = os.getenv("MK_PYTHON") or pallas.default_python()
  t.ok(os.execute(py .. " -c 'import jax' >/dev/null 2>&1") == true, "JAX is not importable by " .. py)
  pallas.env = { MK_PALLAS_POISON_MB = "1", JAX_PLATFORMS = "cpu" }
  local task = assert(require("mk.eval.targets").load_task("tests/python/tasks/tiny_rmsnorm"))
  task.seeds, task.heldout_seeds, task.timeout = { 0, 1 }, { 1001 }, LIMIT
  local ev = require("mk.eval").new(task, { jobs = 2 })
  ev:freeze()
  local src = assert(fs.read(CANDS .. "/pallas_slow_case.py"))
  local off, n = src:gsub("\nOFF = 0%.0", "\nOFF = 0.5") -- its twin: every output off by 0.5
  t.eq(n, 1)
  local ok = ev:evaluate(src, { tune = false })
  local wrong = ev:evaluate(off, { tune = false })
  -- s0 and s1 (two calls each) ended and were correct; c0 never ends
  t.eq(ok.status, "unchecked", ok.message)
  t.eq(ok.correct, false)
  t.eq(ok.reason, "time")
  t.contains(ok.message, "ran past the " .. LIMIT .. " s limit after 4 of 6 calls, each correct")
  t.contains(ok.message, "re-checked on a device worker")
  -- the same calls, wrong: a verdict, whatever the rest would have been
  t.eq(wrong.status, "incorrect", wrong.message)
  t.contains(wrong.message, "case s0 (first call")
  t.contains(wrong.message, "before the run ran past its " .. LIMIT .. " s limit")
  ev:close()
  pallas.env = nil
end)

return t.run()

-- A Pallas run that runs out of time in interpret mode
-- (targets/pallas/test.lua out_of_time): the outputs its calls left are
-- checked; all correct makes it "unchecked" (re-checked on a device worker
-- when the run has one), one wrong makes it "incorrect"; when none ended,
-- it is "unchecked" if the interpreter was still simulating the kernel,
-- else "timeout". Real JAX, TPU interpret mode on the CPU; the kernel
-- (tests/python/candidates/pallas_slow_case.py) never ends on the 5 x 7
-- case of tests/python/tasks/tiny_rmsnorm, after four calls that end; its
-- twins are wrong, never stuck but slow, or stuck from the start.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local pallas = require("mk.eval.targets").get("pallas")
local cpu = dofile("tests/lua/lib/pallas_cpu.lua")

local CANDS = "tests/python/candidates"
-- seconds a run may take: several times what the four calls before the
-- endless one need (seconds), so that a busy machine
-- does not change the verdict
local LIMIT = 45
local SHORT = 20 -- ... and one where no call need end

-- The kernel with `name = value` lines of its constants changed.
local function twin(src, changes)
  for name, value in pairs(changes) do
    local n
    src, n = src:gsub("\n" .. name .. " = [^\n]*", "\n" .. name .. " = " .. value)
    t.eq(n, 1, name)
  end
  return src
end

t.test("a run out of time is judged by the calls that ended, or by the interpreter's progress", function()
  t.ok(cpu.setup(pallas))
  local task = assert(require("mk.eval.targets").load_task("tests/python/tasks/tiny_rmsnorm"))
  task.seeds, task.heldout_seeds, task.timeout = { 0, 1 }, { 1001 }, LIMIT
  local ev = require("mk.eval").new(task, { jobs = 2 })
  ev:freeze()
  local src = assert(fs.read(CANDS .. "/pallas_slow_case.py"))
  local function evaluate(changes) return ev:evaluate(twin(src, changes), { tune = false }) end
  -- s0 and s1 (two calls each) ended and were correct; c0 never ends
  local r = evaluate({})
  t.eq(r.status, "unchecked", r.message)
  t.eq(r.correct, false)
  t.eq(r.reason, "time")
  t.contains(r.message, "ran past the " .. LIMIT .. " s limit after 4 of 6 calls, each correct")
  t.contains(r.message, "re-checked on a device worker")
  -- the same calls, wrong: a verdict, whatever the rest would have been
  r = evaluate({ OFF = "0.5" })
  t.eq(r.status, "incorrect", r.message)
  t.contains(r.message, "case s0 (first call")
  t.contains(r.message, "before the run ran past its " .. LIMIT .. " s limit")
  -- no call ends: the interpreter's progress decides. A billion grid steps,
  -- still being simulated when stopped: unchecked ...
  task.timeout = SHORT
  r = evaluate({ GRID = "10**9", HANG_COLS = "0" })
  t.eq(r.status, "unchecked", r.message)
  t.contains(r.message, "no call ended within the " .. SHORT .. " s limit, but the interpreter was still simulating")
  t.contains(r.message, "in case s0, first call")
  -- ... stuck before any grid step (a loop that never ends): a hang
  r = evaluate({ HANG_COLS = "-1" })
  t.eq(r.status, "timeout", r.message)
  ev:close()
  cpu.teardown(pallas)
end)

return t.run()

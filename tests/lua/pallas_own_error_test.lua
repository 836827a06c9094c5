-- A kernel's error against the reference's own (issue 34): where the
-- freeze kept the reference evaluated in float32 (a bfloat16 task), each
-- check reports how many times the reference's own error a kernel's is,
-- and a kernel far beyond it, still within a loose tolerance, gets a
-- warning (tests/python/tasks/bf16_rowdot: float32 sums of bf16 products,
-- tolerance 1e-2; pallas_rowdot.py, and its twin 0.4% off). Real JAX, TPU
-- interpret mode on the CPU, through `mkengine eval --json`.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local cpu = dofile("tests/lua/lib/pallas_cpu.lua")

local KERNEL = "tests/python/candidates/pallas_rowdot.py"

local function eval_json(src) return cpu.eval_json(t, fs.realpath("tests/python/tasks/bf16_rowdot"), src) end

t.test("a kernel as precise as the reference: its error ratio is small, no warning", function()
  local j = eval_json(assert(fs.read(KERNEL)))
  t.eq(j.status, "ok", j.message)
  t.ok(j.error_ratio < 1, tostring(j.error_ratio))
  t.ok(j.heldout.error_ratio < 1, tostring(j.heldout.error_ratio))
  t.eq(j.warning, nil)
  t.ok(not j.message:find("warning", 1, true), j.message)
end)

t.test("a kernel 0.4% off passes the loose tolerance with a warning naming its error against the reference's", function()
  local j = eval_json((assert(fs.read(KERNEL)):gsub("SCALE = 1%.0\n", "SCALE = 1.004\n")))
  t.eq(j.status, "ok", j.message)
  t.ok(j.error_ratio > 100, tostring(j.error_ratio))
  t.matches(j.warning, "^within the tolerance, but %d+x the reference's own error %(case s%d")
  t.contains(j.message, "; warning: within the tolerance, but ")
  t.ok(j.heldout.error_ratio > 100 and j.heldout.warning ~= nil, tostring(j.heldout.error_ratio))
end)

return t.run()

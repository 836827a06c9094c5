-- Confirmation of the Pallas target (targets/pallas/confirm.lua M.confirm):
-- a kernel that passes its held-out cases at the test scale is run on them
-- again at larger scales, and a bug that only shows there (an accumulator
-- overwritten when K takes more than one step) is the verdict. Real JAX,
-- TPU interpret mode on the CPU; the task is tests/python/tasks/big_blocks
-- (own sizes 1024 x 512 by 512 x 1024, test scale factor 4: K is 128), the
-- kernels pallas_big_blocks.py with smaller blocks (kernels() below).
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local pallas = require("mk.eval.targets").get("pallas")
local cpu = dofile("tests/lua/lib/pallas_cpu.lua")

local CANDS = "tests/python/candidates"

local function read(p) return assert(fs.read(p)) end

-- pallas_big_blocks.py's matmul with 128-deep steps (right at every scale
-- from the test scale's 128 up), and its twin that overwrites the
-- accumulator at each K step instead of adding to it (`acc = dot`): right
-- while K is one step, as at the test scale, wrong from two on
local function kernels()
  local src = read(CANDS .. "/pallas_big_blocks.py")
  local good, n = src:gsub("BM, BN, BK = 512, 512, 512", "BM, BN, BK = 128, 128, 128")
  local bad, m = good:gsub("acc_ref%[%.%.%.%] %+= jnp%.dot", "acc_ref[...] = jnp.dot")
  assert(n == 1 and m == 1, "pallas_big_blocks.py changed: update this test's substitutions")
  return good, bad
end

t.test("a bug that shows only at larger sizes fails the held-out check there; a right kernel is confirmed", function()
  local ok, why = cpu.setup(pallas)
  t.ok(ok, why)
  local task = assert(require("mk.eval.targets").load_task("tests/python/tasks/big_blocks"))
  task.seeds, task.heldout_seeds = { 0 }, { 1001 }
  local ev = require("mk.eval").new(task, { jobs = 1, bench = { min_reps = 2, max_reps = 3, warmup = 1 } })
  -- at the test scale K is one step: the overwriting kernel passes the search cases and the held-out ones there
  local good, bad = kernels()
  local r = ev:evaluate(bad, { tune = false, profile = false })
  t.eq(r.status, "ok", r.message)
  local h = ev:heldout(bad)
  t.eq(h.status, "incorrect", h.message)
  t.eq(h.correct, false)
  t.eq(h.checked_at, "scale factor 2") -- the first halving: K takes two steps
  t.contains(h.message, "at scale factor 2 (the held-out cases re-checked at a larger scale")
  t.contains(h.message, "case h1001")
  -- the same tiling without the bug: confirmed at each halving, up to the task's own sizes
  h = ev:heldout(good)
  t.eq(h.status, "ok", h.message)
  t.eq(h.confirmed_at, "the task's own sizes")
  t.contains(h.message, "confirmed at the task's own sizes")
  ev:close()
  -- without confirmation the bug is not seen: the check at larger sizes is what catches it
  local ev2 = require("mk.eval").new(task, { jobs = 1, confirm = false })
  h = ev2:heldout(bad)
  t.eq(h.status, "ok", h.message)
  t.eq(h.confirmed_at, nil)
  ev2:close()
  -- a larger scale estimated over the time allowed is not run: the test scale's verdict stands, and says so
  -- (the sampled run at the task's own sizes left out: pallas_sampled_test.lua has it)
  local keep = pallas.defaults.confirm_s
  pallas.defaults.confirm_s, pallas.defaults.sampled = 1e-6, false
  local ev3 = require("mk.eval").new(task, { jobs = 1 })
  h = ev3:heldout(good)
  pallas.defaults.confirm_s, pallas.defaults.sampled = keep, true
  t.eq(h.status, "ok", h.message)
  t.eq(h.confirmed_at, nil)
  t.matches(h.confirm_note, "^not confirmed %(scale factor 2 not checked: estimated at %d+ s%)$")
  ev3:close()
  cpu.teardown(pallas)
end)

return t.run()

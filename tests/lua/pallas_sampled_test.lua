-- The check at the task's own sizes by a sampled run (targets/pallas/
-- sampled.lua, harness sampling.py): a kernel whose blocks only fit the
-- task's own sizes, with no larger scale frozen in time (escalate_timeout
-- forced tiny: today's "unchecked"), is run there with its pallas_call's
-- body executed at a sample of its parallel grid points, corners included,
-- and the output blocks those write compared. Real JAX, TPU interpret mode
-- on the CPU; the task is tests/python/tasks/big_blocks (own sizes 1024 x
-- 512 by 512 x 1024, test scale factor 4), the kernels twins of
-- pallas_big_blocks.py (kernels() below).
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local pallas = require("mk.eval.targets").get("pallas")
local cpu = dofile("tests/lua/lib/pallas_cpu.lua")
local ESCALATE_TIMEOUT = pallas.defaults.escalate_timeout -- restored by the next test even when one fails

local function sub(src, a, b)
  local out, n = src:gsub(a, b)
  assert(n == 1, "pallas_big_blocks.py changed: update this test's substitution of " .. a)
  return out
end

-- a right kernel of 512 x 128 output blocks (empty grid at the test
-- scale's 256 rows; 2 x 8 blocks at the task's own sizes), and twins
local function kernels()
  local src = assert(fs.read("tests/python/candidates/pallas_big_blocks.py"))
  local good = sub(src, "BM, BN, BK = 512, 512, 512", "BM, BN, BK = 512, 128, 512")
  return {
    good = good,
    -- an index bug in the last tile row only: half its value
    last_row = sub(good, "        o_ref%[%.%.%.%] = acc_ref%[%.%.%.%]\n",
      "        last = pl.program_id(0) == pl.num_programs(0) - 1\n" ..
      "        o_ref[...] = jnp.where(last, acc_ref[...] * 0.5, acc_ref[...])\n"),
    -- a shortcut taken only at the task's own sizes
    own_shortcut = sub(good, "%)%(a, b%)\n", ")(a, b if m != 1024 else b * 0.98)\n"),
    -- no dimension declared parallel: the sampler cannot sample it
    arbitrary = sub(good, '"parallel", "parallel", "arbitrary"', '"arbitrary", "arbitrary", "arbitrary"'),
    -- 128-square blocks fit the test scale; the shortcut shows only at the task's own sizes
    small_shortcut = sub(sub(src, "BM, BN, BK = 512, 512, 512", "BM, BN, BK = 128, 128, 128"),
      "%)%(a, b%)\n", ")(a, b if m != 1024 else b * 0.98)\n"),
  }
end

local function task()
  local tk = assert(require("mk.eval.targets").load_task("tests/python/tasks/big_blocks"))
  tk.seeds, tk.heldout_seeds = { 0 }, { 1001 }
  return tk
end

t.test("kernels made for the task's own sizes are checked there by a sampled run when no larger scale can be", function()
  local ok, why = cpu.setup(pallas)
  t.ok(ok, why)
  local k = kernels()
  pallas.defaults.escalate_timeout = 0.01 -- no larger scale is frozen in time: today's "unchecked"
  local ev = require("mk.eval").new(task(), { jobs = 1, bench = { min_reps = 2, max_reps = 3, warmup = 1 } })
  local r = ev:evaluate(k.good, { tune = false, profile = false })
  t.eq(r.status, "ok", r.message)
  t.matches(r.checked_at, "^the task's own sizes %(sampled: %d+ of 16 output blocks, every step of grid dimension 2%)$")
  t.contains(r.message, "by a sampled run")
  local h = ev:heldout(k.good)
  t.eq(h.status, "ok", h.message)
  -- the last tile row wrong: the sample always holds it (corners), and the verdict names the block
  r = ev:evaluate(k.last_row, { tune = false, profile = false })
  t.eq(r.status, "incorrect", r.message)
  t.matches(r.message, "output 0 block %(1, %d+%)")
  t.contains(r.message, "at the task's own sizes (sampled:")
  -- wrong only at the task's own sizes
  r = ev:evaluate(k.own_shortcut, { tune = false, profile = false })
  t.eq(r.status, "incorrect", r.message)
  -- what the sampler cannot run faithfully keeps today's verdict, saying why, found from the shapes
  -- before anything is frozen or run at the task's own sizes
  local steps = {}
  pallas.on_result = function(step) steps[#steps + 1] = step end
  r = ev:evaluate(k.arbitrary, { tune = false, profile = false })
  pallas.on_result = nil
  t.eq(r.status, "unchecked", r.message)
  t.contains(r.message, "not checked at the task's own sizes: no leading grid dimension is declared parallel")
  local planned
  for i, step in ipairs(steps) do
    if step == "sample_plan" then planned = i end
  end
  t.ok(planned, "planned first: " .. table.concat(steps, ", "))
  for i = planned, #steps do
    t.ok(steps[i] ~= "freeze" and steps[i] ~= "sample", "nothing frozen or run after the plan: " .. table.concat(steps, ", "))
  end
  ev:close()
  pallas.defaults.escalate_timeout = ESCALATE_TIMEOUT
  cpu.teardown(pallas)
end)

t.test("the held-out confirmation ends with a sampled run at the task's own sizes", function()
  local ok, why = cpu.setup(pallas)
  t.ok(ok, why)
  local k = kernels()
  local keep = pallas.defaults.confirm_halvings
  pallas.defaults.escalate_timeout, pallas.defaults.confirm_halvings = ESCALATE_TIMEOUT, 1 -- scale factor 2 in full; the task's own sizes only sampled
  local ev = require("mk.eval").new(task(), { jobs = 1, bench = { min_reps = 2, max_reps = 3, warmup = 1 } })
  local r = ev:evaluate(k.small_shortcut, { tune = false, profile = false })
  t.eq(r.status, "ok", r.message) -- right at the test scale
  local h = ev:heldout(k.small_shortcut)
  t.eq(h.status, "incorrect", h.message)
  t.contains(h.message, "at the task's own sizes (sampled:")
  local g = kernels().good:gsub("BM, BN, BK = 512, 128, 512", "BM, BN, BK = 128, 128, 128")
  h = ev:heldout(g)
  t.eq(h.status, "ok", h.message)
  t.matches(h.confirmed_at or "", "^the task's own sizes %(sampled: ")
  t.contains(h.confirm_note, "confirmed at scale factor 2 and at the task's own sizes (sampled: ")
  -- the confirmation's allowance spent: the sampled run is not started, and the note says so
  local keep_total = pallas.defaults.heldout_total_s
  pallas.defaults.heldout_total_s = 0
  h = ev:heldout(k.small_shortcut .. "\n# the same kernel, another build\n")
  pallas.defaults.heldout_total_s = keep_total
  t.eq(h.status, "ok", h.message) -- right at scale factor 2; its shortcut at the task's own sizes not reached
  t.contains(h.confirm_note, "not checked at the task's own sizes: no time left for it")
  ev:close()
  pallas.defaults.confirm_halvings = keep
  cpu.teardown(pallas)
end)

return t.run()

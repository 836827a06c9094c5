-- Every scripted-bank kernel of the five C example tasks goes through the
-- real evaluation path (mk.eval: sandboxed compile, frozen tests, bench vs
-- the reference) and gets the verdict its bank entry expects. This is also
-- the "good and wrong candidate per task" end-to-end test. The speed half
-- of the labels (fast: faster than the reference, slow: slower) is the
-- bench's (bench/suite_bench.lua), not this test's.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local eval = require "mk.eval"

-- Small benchmark sizes and one thread keep the suite quick and stable on a
-- shared 2-core machine; `mkengine eval` uses the tasks' real sizes.
local SMALL = {
  rmsnorm = { rows = 256, cols = 384 },
  matmul = { m = 128, n = 128, k = 128 },
  softmax = { rows = 128, cols = 512 },
  gemm_add_relu = { m = 128, n = 128, k = 128 },
  layernorm = { rows = 128, cols = 1024 },
}

local function bank_of(dir)
  return dofile(dir .. "/scripted/bank.lua")
end

for _, name in ipairs { "rmsnorm", "matmul", "softmax", "gemm_add_relu", "layernorm" } do
  local dir = "examples/tasks/c/" .. name
  t.test(name .. " bank has >= 3 plans and >= 6 kernels mixing all four expectations, one tunable", function()
    local bank = bank_of(dir)
    t.ok(#bank.plans >= 3, "plans")
    local n, kinds, tunable = 0, {}, false
    for id, k in pairs(bank.kernels) do
      n = n + 1
      kinds[k.expect] = true
      local src = assert(fs.read(dir .. "/scripted/" .. k.file), "missing " .. k.file)
      if #require("mk.eval.targets").get("c").tunables(src) > 0 then tunable = true end
      if k.expect == "compile_error" then t.ok(bank.kernels[k.fix], id .. " needs a fix kernel") end
    end
    t.ok(n >= 6, "kernels")
    for _, e in ipairs { "fast", "slow", "incorrect", "compile_error" } do t.ok(kinds[e], "no kernel expects " .. e) end
    t.ok(tunable, "no tunable kernel")
    for _, p in ipairs(bank.plans) do
      for _, k in ipairs(p.kernels) do t.ok(bank.kernels[k], "plan " .. p.id .. " names unknown kernel " .. k) end
    end
  end)

  t.test(name .. ": every bank kernel gets the verdict it expects", function()
    local bank = bank_of(dir)
    local ev = eval.new(dir, { bench_sizes = SMALL[name], threads = 1, llc_bytes = 1 << 20,
      bench = { min_time = 0.05, min_reps = 5 }, tune_bench = { min_time = 0.02, min_reps = 3, warmup = 1 } })
    local ids = {}
    for id in pairs(bank.kernels) do ids[#ids + 1] = id end
    table.sort(ids)
    local failures = {}
    for _, id in ipairs(ids) do
      local k = bank.kernels[id]
      local r = ev:evaluate(fs.read(dir .. "/scripted/" .. k.file))
      local want = (k.expect == "fast" or k.expect == "slow") and "ok" or k.expect
      local ok = r.status == want
      -- fast and slow kernels are correct ones with a measured speedup; which
      -- side of 1 it falls on depends on the machine and its load, so that is
      -- measured by bench/suite_bench.lua (BENCHMARKS.md), not asserted here
      if ok and want == "ok" then ok = type(r.speedup) == "number" and r.speedup > 0 end
      if ok and (k.expect == "fast" or k.expect == "slow") then
        ok = ev:heldout(fs.read(dir .. "/scripted/" .. k.file)).correct
      end
      if not ok then
        failures[#failures + 1] = string.format("%s: expected %s, got %s (speedup %s): %s", id, k.expect, r.status,
          tostring(r.speedup), r.message)
      end
      if r.status ~= "ok" then t.ok(#r.message > 0, id .. ": a failure must carry a message") end
    end
    ev:close()
    t.eq(table.concat(failures, "\n"), "")
  end)
end

return t.run()

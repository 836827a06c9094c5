-- The CPU suite (examples/suites/cpu): its composition, every task loads and
-- has a well-formed scripted-model bank, autotuning works on a bank kernel,
-- and every bank kernel of the LLM-style tasks gets the verdict its `expect`
-- promises through the real evaluation path (mk.eval: sandboxed compile,
-- frozen tests, benchmark against the reference, held-out seeds). The fused
-- tasks' kernels are evaluated by suite_banks_fused_test.lua.
local t = dofile("tests/lua/lib/t.lua")
local sb = dofile("tests/lua/lib/suite_banks.lua")
local fs = require "mk.fs"
local eval = require "mk.eval"

t.test("the cpu suite has at least 12 tasks, a third LLM-style and at least 6 fused", function()
  local all = sb.all_tasks()
  t.ok(#all >= 12, "suite tasks: " .. #all)
  local llm = 0
  for _, n in ipairs(all) do if sb.LLM_STYLE[n] then llm = llm + 1 end end
  t.ok(llm * 3 >= #all, string.format("%d LLM-style of %d", llm, #all))
  t.ok(#all - llm >= 6, "fused tasks: " .. (#all - llm))
end)

for _, name in ipairs(sb.tasks()) do
  t.test(name .. ": task loads as a C task and its bank is well formed", function()
    sb.check_structure(t, name)
  end)
end

for _, name in ipairs(sb.tasks("llm")) do
  t.test(name .. ": every bank kernel gets its expected verdict from mk.eval", function()
    sb.check_verdicts(t, name)
  end)
end

t.test("autotuning a bank's tunable kernel tries its configurations and keeps a correct one", function()
  local name = "matmul_scale_residual"
  local only = os.getenv("MK_SUITE_TASKS")
  if only and only ~= "" and not only:find(name, 1, true) then t.skip("task not selected by MK_SUITE_TASKS") end
  local dir = sb.SUITE .. "/" .. name
  local ev = eval.new(dir, sb.EVAL_OPTS)
  local ok, r = pcall(function()
    return ev:evaluate(fs.read(dir .. "/scripted/blocked_omp.c"), { tune = true, tune_budget = 2 })
  end)
  ev:close()
  if not ok then error(r, 0) end
  t.eq(r.status, "ok", r.message)
  t.ok(r.correct)
  t.ok(r.tune, "no tune record")
  t.eq(#r.tune.tried, 2)
  t.eq(r.tune.space, 4)
  for _, e in ipairs(r.tune.tried) do t.eq(e.status, "ok", e.message) end
  t.ok(r.tune.params.KB, "tuned KB")
end)

return t.run()

-- Every bank kernel of the CPU suite's fused (KernelBench level-2 style)
-- tasks gets the verdict its `expect` promises through mk.eval. The LLM-style
-- tasks, the suite's composition and bank structure are checked by
-- suite_banks_test.lua.
local t = dofile("tests/lua/lib/t.lua")
local sb = dofile("tests/lua/lib/suite_banks.lua")

for _, name in ipairs(sb.tasks("fused")) do
  t.test(name .. ": every bank kernel gets its expected verdict from mk.eval", function()
    sb.check_verdicts(t, name)
  end)
end

return t.run()

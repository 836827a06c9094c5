-- luacheck: globals mk
-- The halving strategy (examples/strategies/halving.lua) over 3 sample
-- counts x 2 seeds on one task; prints the median best speedup per count.
--   mkengine sweep examples/sweeps/halving_n.lua --model scripted [-- TASK_DIR]
local task = arg[1] or "tests/tasks/rmsnorm_small"

local configs = {}
for _, n in ipairs({ 1, 2, 3 }) do
  for _, seed in ipairs(mk.seeds(2)) do
    configs[#configs + 1] = { strategy = "examples/strategies/halving.lua", task = task, seed = seed,
      set = { n = n, rounds = 1, tune = false, tests_agent = false }, label = string.format("n%d s%d", n, seed) }
  end
end

local summaries = mk.map(configs, mk.run, { concurrency = 2 })

local by, rows = {}, {}
for i, c in ipairs(configs) do
  local s = summaries[i]
  by[c.set.n] = by[c.set.n] or {}
  table.insert(by[c.set.n], s and s.best and s.best.speedup or 1.0) -- no correct kernel: the reference, 1.0x
end
for _, n in ipairs({ 1, 2, 3 }) do
  rows[#rows + 1] = { n = n, median_best = mk.metrics.median(by[n]) }
  print(string.format("n=%d median best %.4fx", n, rows[#rows].median_best))
end
return rows

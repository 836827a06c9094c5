-- luacheck: globals mk
-- Beam width x depth x seeds on one task, run 4 at a time in one process
-- (runs share the device slots and the LLM cache).
--   mkengine sweep examples/sweeps/beam_grid.lua --model scripted [-- TASK_DIR]
--   mkengine report runs/sweep-...-beam_grid -o grid.html
local task = arg[1] or "examples/suites/cpu/softmax"

local configs = {}
for _, g in ipairs(mk.grid { width = { 2, 3 }, depth = { 2, 3 } }) do
  for _, seed in ipairs(mk.seeds(2)) do
    configs[#configs + 1] = {
      strategy = "beam", task = task, seed = seed,
      set = { width = g.width, depth = g.depth },
      label = string.format("w%d d%d s%d", g.width, g.depth, seed),
    }
  end
end

local summaries = mk.map(configs, mk.run, { concurrency = 4 })

-- best speedup per (width, depth), median over seeds
local by = {}
for i, c in ipairs(configs) do
  local key = string.format("width=%d depth=%d", c.set.width, c.set.depth)
  local s = summaries[i]
  by[key] = by[key] or {}
  table.insert(by[key], s and s.best and s.best.speedup or 1.0)
end
local rows = {}
for key, xs in pairs(by) do rows[#rows + 1] = { config = key, median_best = mk.metrics.median(xs) } end
table.sort(rows, function(a, b) return a.config < b.config end)
for _, r in ipairs(rows) do print(string.format("%-20s median best %.2fx", r.config, r.median_best)) end
return rows

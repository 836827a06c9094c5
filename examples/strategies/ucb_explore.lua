-- ucb_explore: explore or exploit, chosen by UCB1 at every step
-- (docs/tutorial-sim.md).
--   explore  a fresh kernel from the reference (no plan), with its fix loop
--   exploit  one Auto iteration (plan, implement, fix, tune, profile) on
--            the best kernel so far
-- The reward of a step is the gain in best speedup it brought, in log:
-- max(0, ln(best after / best before)), the reference counting 1.0. Each
-- arm is tried once, then the arm with the highest mean reward + c *
-- sqrt(2 ln t / n) runs; exploit waits for a correct kernel to start from.
-- It runs until `steps` or the run's --budget is spent.
local function ucb(arm, t, c)
  if arm.n == 0 then return math.huge end
  return arm.sum / arm.n + c * math.sqrt(2 * math.log(t) / arm.n)
end

local function best_speedup(ctx)
  local b = ctx:best()
  return b and b.metrics.speedup or 1.0
end

-- A fresh kernel from the reference and its repairs.
local function explore(ctx, root, s, max_fix)
  local key = ctx:path(root) .. "/ucb" .. s
  local n = ctx:step(key, function()
    local out, err = ctx.agents.implement { key = key }
    if not out then return nil, err end
    return ctx:evaluated("implement", { root }, out, {})
  end)
  if n then ctx:repair(n, key, { max_fix = max_fix }) end
end

return {
  defaults = { steps = 60, c = 0.5, max_fix = 6 },
  run = function(ctx, opts)
    local root = ctx.graph:root()
    local arms = { explore = { n = 0, sum = 0 }, exploit = { n = 0, sum = 0 } }
    for s = 1, opts.steps do
      if ctx:exhausted() then break end
      local before = best_speedup(ctx)
      local pick = "explore"
      if ctx:best() and ucb(arms.exploit, s, opts.c) > ucb(arms.explore, s, opts.c) then pick = "exploit" end
      if pick == "explore" then
        explore(ctx, root, s, opts.max_fix)
      else
        ctx:auto(ctx:best(), { iters = 1, tag = "ucb" .. s })
      end
      local arm = arms[pick]
      arm.n, arm.sum = arm.n + 1, arm.sum + math.max(0, math.log(best_speedup(ctx) / before))
      ctx:event { type = "ucb", step = s, arm = pick, explore = arms.explore.n, exploit = arms.exploit.n }
    end
    return ctx:best()
  end,
}

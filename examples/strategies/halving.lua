-- halving: successive halving, written from docs/strategies.md alone.
-- Sample `n` kernels zero-shot, then in each round keep the faster half of
-- the correct ones and refine each with one Auto iteration, until one is
-- left or the budget is spent.
return {
  defaults = { n = 4, rounds = 2 },
  run = function(ctx, opts)
    local root = ctx.graph:root()
    local idx = {}
    for i = 1, opts.n do idx[i] = i end
    local pool = ctx:map(idx, function(i)
      local key = ctx:path(root) .. "/sample" .. i
      local node = ctx:step(key, function()
        local out, err = ctx.agents.implement { key = key }
        if not out then return nil, err end
        return ctx:evaluated("implement", { root }, out, {})
      end)
      return node
    end)
    for r = 1, opts.rounds do
      local alive = {}
      for i = 1, opts.n do
        if pool[i] and pool[i].status == "ok" then alive[#alive + 1] = pool[i] end
      end
      if #alive <= 1 or ctx:exhausted() then break end
      table.sort(alive, ctx.better)
      local keep = {}
      for i = 1, math.max(1, #alive // 2) do keep[i] = alive[i] end
      pool = ctx:map(keep, function(node)
        local best = ctx:auto(node, { iters = 1, tag = "halve" .. r })
        return best or node
      end)
    end
    return ctx:best()
  end,
}

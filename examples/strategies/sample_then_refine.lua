-- sample_then_refine: a few zero-shot samples, then refine the two fastest
-- correct kernels with one Auto iteration each, `rounds` times.
-- Run: mkengine run examples/strategies/sample_then_refine.lua TASK --model scripted
return {
  defaults = { samples = 4, rounds = 2 },
  run = function(ctx, opts)
    local root = ctx.graph:root()
    local idx = {}
    for i = 1, opts.samples do idx[i] = i end
    -- 1. independent samples, concurrently; each is a memoised step (resume)
    ctx:map(idx, function(i)
      local key = ctx:path(root) .. "/sample" .. i
      return ctx:step(key, function()
        local out, err = ctx.agents.implement { key = key }
        if not out then return nil, err end
        return ctx:evaluated("implement", { root }, out, {})
      end)
    end)
    -- 2. refine the two fastest correct kernels
    for r = 1, opts.rounds do
      if ctx:exhausted() then break end
      local good = ctx.graph:nodes(function(n) return n.status == "ok" and n.kind ~= "reference" end)
      table.sort(good, function(a, b) return a.metrics.latency_s < b.metrics.latency_s end)
      ctx:map({ good[1], good[2] }, function(n)
        return ctx:auto(n, { iters = 1, tag = "refine" .. r })
      end)
    end
    return ctx:best()
  end,
}

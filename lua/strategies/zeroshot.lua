-- zeroshot: n independent implement-only samples (no plan, no fix, no
-- tuning), keep the fastest correct one. The baseline of the published
-- recipe (best-of-100 compiles only 10/50 tasks there).
return {
  defaults = { n = 100 },
  run = function(ctx, opts)
    local root = ctx.graph:root()
    local idx = {}
    for i = 1, opts.n do idx[i] = i end
    ctx:map(idx, function(i)
      local key = ctx:path(root) .. "/zs" .. i
      return ctx:step(key, function()
        local out, err = ctx.agents.implement { key = key }
        if not out then return nil, err end
        return ctx:evaluated("implement", { root }, out, {})
      end)
    end)
    return ctx:best()
  end,
}

-- parallel: `trajectories` independent Auto runs of `iters` iterations from
-- the reference, run concurrently and unpruned; the fastest correct node wins.
return {
  defaults = { trajectories = 5, iters = 5, max_fix = 6, tune = true },
  run = function(ctx, opts)
    local root = ctx.graph:root()
    local idx = {}
    for i = 1, opts.trajectories do idx[i] = i end
    ctx:map(idx, function(i)
      return ctx:auto(root, { iters = opts.iters, tag = "t" .. i })
    end)
    return ctx:best()
  end,
}

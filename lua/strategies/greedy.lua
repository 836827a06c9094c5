-- greedy: always expand the current best node (or the reference while
-- there is none) with one Auto iteration, `steps` times.
return {
  defaults = { steps = 8, max_fix = 6, tune = true },
  run = function(ctx, opts)
    for s = 1, opts.steps do
      if ctx:exhausted() then break end
      local from = ctx:best() or ctx.graph:root()
      ctx:auto(from, { iters = 1, tag = "g" .. s })
    end
    return ctx:best()
  end,
}

-- auto: one Auto trajectory from the reference (plan → implement → fix →
-- test → tune → profile, `iters` times), returning the fastest correct node.
return {
  defaults = { iters = 5, max_fix = 6, tune = true },
  run = function(ctx, opts)
    return ctx:auto(ctx.graph:root(), { iters = opts.iters, max_fix = opts.max_fix, tag = "auto" })
  end,
}

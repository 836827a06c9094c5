-- beam: keep the `width` best nodes; each depth expands every beam node
-- into `branches` children, each an inner Auto run of `inner_iters`
-- iterations steered by a direction drawn from the target's menu. Children
-- that regress (or fail) may be kept to fill the beam when there are not
-- enough good ones.
return {
  defaults = { width = 3, depth = 3, branches = 2, inner_iters = 2, max_fix = 6, tune = true, keep_regressions = true },
  run = function(ctx, opts)
    local beam = { ctx.graph:root() }
    for d = 1, opts.depth do
      if ctx:exhausted() then break end
      local jobs = {}
      for _, node in ipairs(beam) do
        for b = 1, opts.branches do jobs[#jobs + 1] = { node = node, b = b } end
      end
      local children = {}
      ctx:map(jobs, function(j)
        local tag = "beam" .. d .. "b" .. j.b
        local dir = ctx:direction(ctx:path(j.node) .. "/" .. tag)
        local best, made = ctx:auto(j.node, { iters = opts.inner_iters, tag = tag, direction = dir })
        local child = best or made[#made]
        if child then children[#children + 1] = child end
      end)
      table.sort(children, ctx.better)
      local next_beam = {}
      local seen = {}
      for _, c in ipairs(children) do
        if #next_beam == opts.width then break end
        if not seen[c.id] and (c.status == "ok" or opts.keep_regressions) then
          seen[c.id] = true
          next_beam[#next_beam + 1] = c
        end
      end
      if #next_beam == 0 then break end
      beam = next_beam
      ctx:log("beam depth %d: %s", d, table.concat((function()
        local s = {}
        for i, n in ipairs(beam) do s[i] = n.id .. "(" .. n.status .. ")" end
        return s
      end)(), " "))
    end
    return ctx:best()
  end,
}

-- evolve: a population per island; each generation makes `population`
-- children per island by mutation (refine a tournament winner with its
-- profile: one Auto iteration) or crossover (combine two tournament
-- winners); the best `population` of parents and children survive. Every
-- `migrate_every` generations each island's best joins the next island.
return {
  defaults = { population = 4, generations = 3, tournament = 2, crossover = 0.3, islands = 1,
    migrate_every = 2, max_fix = 3, tune = false },
  run = function(ctx, opts)
    local root = ctx.graph:root()
    local function tournament(pop, r)
      local best
      for _ = 1, math.min(opts.tournament, #pop) do
        local c = r:pick(pop)
        if not best or ctx.better(c, best) then best = c end
      end
      return best
    end
    local function child_of(island, g, i, pop)
      local key = ctx:path(root) .. "/evo/is" .. island .. "/g" .. g .. "/c" .. i
      local r = ctx:rng(key)
      if g == 0 then -- initial population: one Auto iteration from the reference
        local best, made = ctx:auto(root, { iters = 1, tag = "evo/is" .. island .. "/init" .. i, tune = opts.tune })
        return best or made[#made]
      end
      local a = tournament(pop, r)
      if r:float() < opts.crossover and #pop >= 2 then
        local b = tournament(pop, r)
        if b ~= a then
          local n = ctx:step(key .. "/x", function()
            local out, err = ctx.agents.implement { parent = a, second = b, key = key .. "/x" }
            if not out then return nil, err end
            return ctx:evaluated("crossover", { a, b }, out, {})
          end)
          return n and ctx:repair(n, key .. "/x", { max_fix = opts.max_fix })
        end
      end
      local best, made = ctx:auto(a, { iters = 1, tag = "evo/is" .. island .. "/g" .. g .. "/m" .. i, tune = opts.tune })
      return best or made[#made]
    end

    local pops = {}
    for g = 0, opts.generations do
      if ctx:exhausted() then break end
      local jobs = {}
      for is = 1, opts.islands do
        for i = 1, opts.population do jobs[#jobs + 1] = { is = is, i = i } end
      end
      local kids = {}
      ctx:map(jobs, function(j)
        local c = child_of(j.is, g, j.i, pops[j.is] or {})
        if c then
          kids[j.is] = kids[j.is] or {}
          table.insert(kids[j.is], c)
        end
      end)
      for is = 1, opts.islands do
        local all = {}
        for _, n in ipairs(pops[is] or {}) do all[#all + 1] = n end
        for _, n in ipairs(kids[is] or {}) do all[#all + 1] = n end
        table.sort(all, ctx.better)
        local seen, keep = {}, {}
        for _, n in ipairs(all) do
          if not seen[n.id] and #keep < opts.population then
            seen[n.id] = true
            keep[#keep + 1] = n
          end
        end
        pops[is] = keep
      end
      if opts.islands > 1 and g > 0 and g % opts.migrate_every == 0 then
        local bests = {}
        for is = 1, opts.islands do bests[is] = pops[is][1] end
        for is = 1, opts.islands do
          local to = pops[is % opts.islands + 1]
          if bests[is] and #to > 0 then to[#to] = bests[is] end
          table.sort(to, ctx.better)
        end
      end
    end
    return ctx:best()
  end,
}

--- mkengine tree RUN: the search tree drawn in the terminal, the path from
--- the root to the best node marked.
local cli = require("mk.cli")
local figure = require("mk.search.figure")
local graph = require("mk.search.graph")
local show = require("mk.cli.show")

local M = {
  summary = "draw a run's search tree, best path marked",
  usage = "usage: mkengine tree RUN [--depth N]",
  help = [[
Each node appears under its first parent as "id kind status latency speedup";
only forks indent, so an only child continues in its parent's column. A
kernel has one figure, the median of all its measurements (`mkengine show`);
an older node of the same kernel says "= n0007" (the node holding it).
Nodes on the path from the root to the best node are marked '*', the best
node '<- best'. A node with several parents lists the others as "(+ n0003)".
--depth N stops after N levels. Reads only; safe on a live run.]],
}

-- "n0004 tune ok 0.250 ms 4.00x": a node with its kernel's figure (pool,
-- mk.search.figure), or "n0002 implement ok = n0004" for an older node of
-- that kernel.
local function node_label(pool, n)
  local f, holder = pool:of(n)
  if not f then return n:label() end
  local s = string.format("%s %s %s", n.id, n.kind, n.status)
  if holder then return s .. " = " .. holder end
  s = s .. " " .. graph.format_latency(f.latency_s) .. " " .. graph.format_speedup(f.speedup)
  if (f.measurements or 1) > 1 then s = s .. string.format(" (%d×)", f.measurements) end
  return s
end

--- The tree as text. `pool` and `best` (mk.search.figure.of_run): the
--- kernels' figures and the best node; without them, each node's own
--- metrics and the graph's best.
function M.render(g, max_depth, pool, best)
  best = pool and best or (not pool and g:best()) or nil
  pool = pool or figure.pool()
  local on_path = {}
  if best then
    for _, n in ipairs(g:lineage(best)) do on_path[n] = true end
  end
  local lines = {}
  local function label(n)
    local s = node_label(pool, n)
    if #n.parents > 1 then s = s .. " (+ " .. table.concat(n.parents, " ", 2) .. ")" end
    if n == best then s = s .. "  <- best" end
    return (on_path[n] and "* " or "  ") .. s
  end
  -- Iterative pre-order walk (searches can be deep). Only forks indent: an
  -- only child continues in its parent's column, so long chains stay
  -- narrow. Each stack item: node, text before its label, its column.
  local stack = {}
  for i = #g.list, 1, -1 do
    local n = g.list[i]
    if #n.parents == 0 then stack[#stack + 1] = { n, "", "", 0 } end
  end
  while #stack > 0 do
    local n, lead, col, depth = table.unpack(table.remove(stack))
    lines[#lines + 1] = lead .. label(n)
    if not max_depth or depth < max_depth then
      local kids = {}
      for _, c in ipairs(g:children(n)) do
        if c.parents[1] == n.id then kids[#kids + 1] = c end
      end
      if #kids == 1 then
        stack[#stack + 1] = { kids[1], col, col, depth + 1 }
      else
        for i = #kids, 1, -1 do
          local last = i == #kids
          stack[#stack + 1] = { kids[i], col .. (last and "└── " or "├── "), col .. (last and "    " or "│   "), depth + 1 }
        end
      end
    end
  end
  return table.concat(lines, "\n")
end

function M.run(args)
  local opts, pos = cli.parse(args, { options = { depth = "number" } }, M.usage)
  if #pos > 1 then cli.usage_error("too many arguments", M.usage) end
  local run = show.open_run(pos[1], M.usage)
  local g = run.graph
  if g:len() == 0 then
    print("(no nodes yet)")
  else
    local pool, best = show.figures(run)
    print(M.render(g, opts.depth and math.tointeger(opts.depth), pool, best))
  end
  run:close()
  return 0
end

return M

--- mkengine tree RUN: the search tree drawn in the terminal, the path from
--- the root to the best node marked.
local cli = require "mk.cli"
local show = require "mk.cli.show"

local M = {
  summary = "draw a run's search tree, best path marked",
  usage = "usage: mkengine tree RUN [--depth N]",
  help = [[
Each node appears under its first parent as "id kind status latency speedup".
Nodes on the path from the root to the best node are marked '*', the best
node '<- best'. A node with several parents lists the others as "(+ n0003)".
--depth N stops after N levels. Reads only; safe on a live run.]],
}

function M.render(g, max_depth)
  local best = g:best()
  local on_path = {}
  if best then
    for _, n in ipairs(g:lineage(best)) do on_path[n] = true end
  end
  local lines = {}
  local function label(n)
    local s = n:label()
    if #n.parents > 1 then s = s .. " (+ " .. table.concat(n.parents, " ", 2) .. ")" end
    if n == best then s = s .. "  <- best" end
    return (on_path[n] and "* " or "  ") .. s
  end
  local function walk(n, prefix, last, depth)
    lines[#lines + 1] = prefix .. (depth == 0 and "" or (last and "└── " or "├── ")) .. label(n)
    if max_depth and depth >= max_depth then return end
    local kids = {}
    for _, c in ipairs(g:children(n)) do
      if c.parents[1] == n.id then kids[#kids + 1] = c end
    end
    local next_prefix = depth == 0 and "" or (prefix .. (last and "    " or "│   "))
    for i, c in ipairs(kids) do walk(c, next_prefix, i == #kids, depth + 1) end
  end
  for _, n in ipairs(g.list) do
    if #n.parents == 0 then walk(n, "", true, 0) end
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
    print(M.render(g, opts.depth and math.tointeger(opts.depth)))
  end
  run:close()
  return 0
end

return M

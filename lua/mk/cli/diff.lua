--- mkengine diff RUN A B: what changed between two nodes (files, plan,
--- node.json), as a patch with a stat.
local cli = require("mk.cli")
local show = require("mk.cli.show")

local M = {
  summary = "diff two nodes of a run (patch and stat)",
  usage = "usage: mkengine diff RUN A B [--stat] [--context N]",
  help = [[
A and B are node ids (n0004 or 4), 'best', 'root', step keys or commit
prefixes. Prints the diffstat, then the patch from A to B. --stat prints the
stat only; --context N sets the lines of context (default 3). The same diff is
`git --git-dir RUN/graph.git diff nodes/A nodes/B`.]],
}

function M.run(args)
  local opts, pos = cli.parse(args, { flags = { stat = true }, options = { context = "number" } }, M.usage)
  if #pos ~= 3 then cli.usage_error("expected RUN A B", M.usage) end
  local run = show.open_run(pos[1], M.usage)
  local a, b = show.node(run, pos[2]), show.node(run, pos[3])
  local patch, st = run.graph:diff(a, b, { context = opts.context and math.tointeger(opts.context) or 3 })
  if not patch then cli.input_error("cannot diff: " .. st.message) end
  print(string.format("%s -> %s", a:label(), b:label()))
  if st.changed == 0 then
    print("(no differences)")
  else
    io.stdout:write(st.text)
    if not opts.stat then io.stdout:write("\n", patch) end
  end
  run:close()
  return 0
end

return M

--- mkengine report PATH [-o FILE]: one self-contained HTML page for a run
--- directory, a bench directory or a sweep (see docs/reporting.md).
local cli = require("mk.cli")
local fs = require("mk.fs")
local report = require("mk.study.report")

local M = {
  summary = "write one self-contained HTML report for a run, bench or sweep",
  usage = "usage: mkengine report PATH [-o report.html] [--json]",
  help = [[
PATH is a run directory (runs/<time>-<strategy>-<task>/), a bench directory
(holding results.json from 'mkengine bench') or a sweep (its directory or
results.json). The page needs no network: search trees as SVG (click a node
for its plan, code and metrics), best speedup against wall time and tokens,
cost breakdown, and for suites the per-task table and fast_p curve.

options:
  -o, --out FILE   where to write (default PATH/report.html for a directory)
  --json           print {"kind":..., "out":...} instead of a sentence]],
}

function M.run(args)
  local opts, pos = cli.parse(args, { flags = { json = true }, options = { out = "string" }, short = { o = "out" } }, M.usage)
  local path = pos[1]
  if not path then cli.usage_error("missing PATH", M.usage) end
  if #pos > 1 then cli.usage_error("unexpected argument '" .. pos[2] .. "'", M.usage) end
  local out = opts.out or (fs.isdir(path) and (path:gsub("/+$", "") .. "/report.html")) or "report.html"
  local ok, data = report.write(path, out)
  if not ok then cli.input_error(data.message) end
  if opts.json then
    io.stdout:write(cli.json({ kind = data.kind, out = out }), "\n")
  else
    io.stdout:write(string.format("wrote %s report to %s\n", data.kind, out))
  end
  return 0
end

return M

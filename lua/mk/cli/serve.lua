--- mkengine serve [PATH]: the live run viewer (docs/ui.md).
local cli = require "mk.cli"

local M = {
  summary = "serve the live run viewer for runs, benches and sweeps (browser; decisions for hitl)",
  usage = "usage: mkengine serve [PATH] [--host ADDR] [--port N] [--json]",
  help = [[
PATH is a run directory, a bench or sweep directory, or a directory holding
them (default runs/). The printed URL opens the run's page for a run, else
the index of what PATH holds. Open it in a browser: the search tree as
it grows, best speedup against tokens, spend against the budget, each node's
plan, code, diff, messages, metrics, profile and prompts, and the questions a
strategy asks a person (hitl), answered there. The engine that writes a run
may be another process: the viewer only reads run directories.

Writes (answers, stop) need the token printed at start; the URL printed
carries it after '#', which the browser keeps to itself.

options:
  --host ADDR   address to listen on (default 127.0.0.1; 0.0.0.0 exposes the
                viewer to the network: anyone with the token can steer runs)
  --port N      port (default: a free one)
  --json        print {"url":..., "token":...} on one line instead of a sentence]],
}

--- Start the viewer on root and print where it is. Returns the server.
---@param root string
---@param o table {host, port, json, single, run}
function M.start(root, o)
  local c0 = os.clock()
  local server = require "mk.ui.server"
  local s, err = server.start { root = root, host = o.host, port = o.port and math.tointeger(o.port), single = o.single,
    run = o.run }
  if not s then cli.input_error("cannot start the viewer: " .. err.message) end
  s:charge(os.clock() - c0) -- loading the viewer's modules is part of what it costs the engine
  if o.json then
    io.stdout:write(cli.json { url = s.url, token = s.token, port = s.port }, "\n")
    io.stdout:flush()
  else
    io.stderr:write(string.format("mkengine: viewer at %s#token=%s\n", s.url, s.token))
    io.stderr:write(string.format("mkengine: token for answers and stop: %s\n", s.token))
  end
  return s
end

function M.run(args)
  local o, pos = cli.parse(args, { flags = { json = true }, options = { host = "string", port = "number" } }, M.usage)
  if #pos > 1 then cli.usage_error("unexpected argument '" .. pos[2] .. "'", M.usage) end
  if o.port and (not math.tointeger(o.port) or o.port < 0 or o.port > 65535) then
    cli.usage_error("--port must be an integer 0..65535", M.usage)
  end
  local fs = require "mk.fs"
  local root = (pos[1] or "runs"):gsub("(.)/+$", "%1")
  if not fs.isdir(root) then cli.input_error(root .. " is not a directory") end
  local s = M.start(root, o)
  require("mk.services.task").await(s.loop)
  return 0
end

return M

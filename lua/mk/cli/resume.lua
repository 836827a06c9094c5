--- mkengine resume RUN: continue a run that stopped (killed, crashed,
--- interrupted). Nodes already committed are answered from the graph, never
--- recomputed; the run then finishes as if it had not stopped.
local cli = require("mk.cli")
local fs = require("mk.fs")
local rundir = require("mk.search.rundir")
local agents = require("agents")
local runner = require("mk.search.runner")
local run_cli = require("mk.cli.run")

local M = {
  summary = "continue a stopped run from its run directory",
  usage = "usage: mkengine resume RUN [--quiet] [--json] [--debug] [--ui [--host ADDR] [--port N]]",
  help = [[
RUN is a run directory made by 'mkengine run'. The strategy is re-run with
the options stored in RUN/run.json; every step that was committed before the
stop is read back from RUN/graph.git instead of being recomputed. Only one
engine can work on a run: a second 'resume' of the same run exits with 2.
Decisions a person took (hitl, from the terminal or the browser) are recorded
in RUN and replayed. --ui serves the run in the browser while it continues.]],
}

function M.run(args)
  local opts, pos = cli.parse(args, { flags = { quiet = true, json = true, debug = true, ui = true },
    options = run_cli.UI_OPTIONS }, M.usage)
  if #pos ~= 1 then cli.usage_error("expected exactly one RUN directory", M.usage) end
  local dir = pos[1]:gsub("/+$", "")
  local _, err = rundir.validate(dir)
  if not err then
    -- probe the lock so a busy run is refused before anything starts
    local lock, lerr = fs.lock(dir .. "/.lock")
    if not lock then err = { message = dir .. " is in use by another engine (" .. lerr.message .. ")" } end
    if lock then lock:unlock() end
  end
  if err then cli.input_error(err.message) end
  opts.agents = agents
  local summary, rerr = run_cli.with_ui(opts)(function(o) return runner.resume(dir, o) end)
  if not summary then
    if type(rerr) == "table" and (rerr.kind == "locked" or rerr.kind == "not_a_run" or rerr.kind == "corrupt") then
      cli.input_error(rerr.message)
    end
    error(type(rerr) == "table" and rerr.message or tostring(rerr), 0)
  end
  if opts.json then
    io.stdout:write(cli.json({ type = "summary", summary = summary }), "\n")
  elseif not opts.quiet then
    print(string.format("run %s: %s, %s nodes, best %s", dir, tostring(summary.status), tostring(summary.nodes),
      type(summary.best) == "table" and tostring(summary.best.node) or "none"))
  end
  -- same exit codes as `mkengine run`: 0 when a correct kernel was found
  return type(summary.best) == "table" and 0 or 1
end

return M

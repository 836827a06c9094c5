--- mkengine worker: serve evaluations on this host over stdin/stdout (the
--- engine starts it, through a pipe, ssh or srun; see docs/workers.md).
local cli = require("mk.cli")
local worker = require("mk.eval.worker")

local M = {
  summary = "serve evaluations to an engine over stdin/stdout (started by --workers)",
  usage = "usage: mkengine worker [--slots N] [--name NAME] [--cache DIR]",
  help = [[
Speaks the worker protocol (JSON lines, see docs/workers.md) on stdin and
stdout: says hello (version, targets, slots, host facts), receives task
files content-addressed (only missing files travel, kept in the cache),
evaluates candidates with the same sandbox and checker as `mkengine eval`
and answers with the same result table. Exits on EOF, `bye`, or when the
engine has been silent for five heartbeats.

  --slots N     evaluations at a time (default 1)
  --name NAME   reported to the engine (default the host name)
  --cache DIR   where shipped task files and frozen tests are kept
                (default $XDG_CACHE_HOME/mkengine/worker)

Exit status: 0 after the engine said bye or closed the connection, 2 when
the engine runs another mkengine version.]],
}

function M.run(args)
  local o, pos = cli.parse(args, { options = { slots = "number", name = "string", cache = "string" } }, M.usage)
  if #pos > 0 then cli.usage_error("unexpected argument " .. pos[1], M.usage) end
  local slots = o.slots and math.tointeger(o.slots)
  if o.slots and (not slots or slots < 1) then cli.usage_error("--slots must be a positive integer", M.usage) end
  return worker.serve { slots = slots, name = o.name, cache = o.cache }
end

return M

--- mkengine script FILE.lua [ARGS...]: run a Lua file as the engine's main
--- task, with the global `arg` set as the standalone `lua` does. The exit
--- code is the integer the chunk returns (default 0).
local cli = require("mk.cli")
local util = require("mk.services.util")

local M = {
  summary = "run a Lua file as the main task (arg set as in lua)",
  usage = "usage: mkengine script FILE.lua [ARGS...]",
}

function M.run(args)
  local file = args[1]
  if not file then cli.usage_error("missing FILE.lua", M.usage) end
  local f, err = io.open(file, "r")
  if not f then cli.usage_error("cannot open script " .. file .. ": " .. tostring(err):gsub("^[^:]*: ", ""), M.usage) end
  f:close()
  local chunk, cerr = loadfile(file)
  if not chunk then
    -- a syntax error already names file:line
    util.raise({ exit = 1, message = cerr })
  end
  local a = { [0] = file, [-1] = "mkengine script" }
  for i = 2, #args do a[i - 1] = args[i] end
  _G.arg = a
  local code = chunk(table.unpack(a, 1, #a))
  return math.tointeger(code) or 0
end

return M

--- mkengine export RUN DEST: a self-contained copy of a run directory, its
--- frozen suite copied in from the shared cache (runs refer to it by hash).
local cli = require("mk.cli")
local fs = require("mk.fs")
local proc = require("mk.proc")
local cjson = require("cjson.safe")

local M = {
  summary = "copy a run directory with its frozen test suite inlined",
  usage = "usage: mkengine export RUN DEST",
  help = [[
A run keeps its frozen test suite once per task content in the engine's
cache (suite.json names it by hash), so that repeats and other runs of the
same task share it. `export` copies RUN to DEST (which must not exist) and
copies the suite into DEST/tests, so DEST can be moved to another machine,
resumed (`mkengine resume DEST`) and reported without the cache. The
copied suite is verified in full (SHA-256 of every file) when it is next
used.]],
}

local function cp(src, dst)
  local r = proc.run { argv = { "cp", "-a", src, dst }, timeout = 3600 }
  if not r or r.status ~= "exited" or r.code ~= 0 then
    cli.input_error("cannot copy " .. src .. " to " .. dst .. ": " .. tostring(r and r.stderr or "cp failed"))
  end
end

function M.run(args)
  local _, pos = cli.parse(args, { flags = {}, options = {} }, M.usage)
  if #pos ~= 2 then cli.usage_error("expected RUN and DEST", M.usage) end
  local run, dest = pos[1], pos[2]
  if not fs.exists(run .. "/run.json") then cli.input_error(run .. " is not a run directory (no run.json)") end
  if fs.exists(dest) then cli.input_error(dest .. " exists: export writes a new directory") end
  local suite
  if not fs.exists(run .. "/tests/frozen.json") then
    local s = fs.read(run .. "/suite.json")
    suite = s and cjson.decode(s)
    if type(suite) ~= "table" or type(suite.path) ~= "string" then
      cli.input_error(run .. " has no frozen suite (neither tests/ nor suite.json): was it ever started?")
    end
    if not fs.exists(suite.path .. "/frozen.json") then
      cli.input_error("the run's suite " .. suite.key .. " is no longer in the cache (" .. suite.path
        .. "); `mkengine resume " .. run .. "` freezes it again")
    end
  end
  cp(run, dest)
  fs.remove(dest .. "/.lock")
  if suite then
    fs.rm_rf(dest .. "/tests")
    cp(suite.path, dest .. "/tests")
    suite.inlined = true
    fs.write(dest .. "/suite.json", cjson.encode(suite) .. "\n", { atomic = true })
  end
  print(string.format("mkengine export: %s -> %s%s", run, dest, suite and (" (suite " .. suite.key:sub(1, 12)
    .. " inlined)") or ""))
  return 0
end

return M

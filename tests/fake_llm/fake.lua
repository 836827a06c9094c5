--- Start and stop the loopback fake LLM server (tests/fake_llm/server.py)
--- from a Lua test or benchmark. The server watches this process and exits
--- with it, so a crashed test never leaves it running.
local task = require "mk.task"
local fs = require "mk.fs"

local M = { key = "sk-test-fake-123" }

local function my_pid()
  local f = io.open("/proc/self/stat", "r")
  if not f then return nil end
  local pid = f:read("*n")
  f:close()
  return pid
end

--- Start a server; returns {port=, pid=, url=, stop=function}.
function M.start(opts)
  opts = opts or {}
  local dir = fs.tmpdir("mk-fake-llm-")
  local port_file = dir .. "/port"
  local script = require("mk.home").path("tests/fake_llm/server.py")
  local cmd = string.format("python3 %q --port-file %q --idle-exit %d %s >%q 2>&1 &",
    script, port_file, opts.idle_exit or 120, my_pid() and ("--watch-pid " .. my_pid()) or "", dir .. "/log")
  assert(os.execute(cmd))
  local t0 = task.now()
  while not fs.exists(port_file) do
    if task.now() - t0 > 10 then error("fake LLM server did not start: " .. (fs.read(dir .. "/log") or "")) end
    task.sleep(0.02)
  end
  local line = assert(fs.read(port_file))
  local port, pid = line:match("^(%d+) (%d+)")
  local s = { port = tonumber(port), pid = tonumber(pid), dir = dir }
  s.url = "http://127.0.0.1:" .. port
  function s.stop()
    os.execute("kill " .. s.pid .. " 2>/dev/null")
    fs.rm_rf(dir)
  end
  return s
end

--- GET /_stats -> {requests=, by_model=}
function M.stats(s)
  local http = require "mk.http"
  local r = assert(http.request { url = s.url .. "/_stats" })
  return require("cjson").decode(r.body)
end

return M

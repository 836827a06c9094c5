--- Start and stop the loopback fake LLM server (tests/fake_llm/server.py)
--- from a Lua test or benchmark. The server watches this process and exits
--- with it, so a crashed test never leaves it running.
local task = require "mk.services.task"
local fs = require "mk.fs"

local M = { key = "sk-test-fake-123" }

local function my_pid()
  local f = io.open("/proc/self/stat", "r")
  if not f then return nil end
  local pid = f:read("*n")
  f:close()
  return pid
end

--- The environment variable the tests read the fake key from.
M.key_env = "MK_FAKE_LLM_KEY"

--- Keys come only from the environment, and Lua cannot set it: when the
--- fake key is not set, run this script again in a child engine that has
--- it, and return the child's exit code (nil when already set).
function M.reexec_with_key()
  if os.getenv(M.key_env) == M.key then return nil end
  local exe = os.getenv("MKENGINE_BUILD") and (os.getenv("MKENGINE_BUILD") .. "/mkengine")
  if not exe or not fs.exists(exe) then
    local p = io.popen("readlink /proc/" .. my_pid() .. "/exe")
    exe = p:read("*l")
    p:close()
  end
  local cmd = string.format("%s=%s %q script %q", M.key_env, M.key, exe, arg[0])
  for i = 1, #arg do cmd = cmd .. string.format(" %q", arg[i]) end
  local ok, _, code = os.execute(cmd)
  return ok and 0 or (code or 1)
end

--- Start a server; returns {port=, pid=, url=, stop=function}. opts.bench =
--- true starts bench_server.py (answers after opts.delay s, default 1);
--- with opts.program it answers full rewrites of a Python program.
function M.start(opts)
  opts = opts or {}
  local dir = fs.tmpdir("mk-fake-llm-")
  local port_file = dir .. "/port"
  local script, extra
  if opts.bench then -- the single-threaded asyncio server of the benchmark
    script = require("mk.home").path("tests/fake_llm/bench_server.py")
    extra = string.format("--delay %g --workers %d%s", opts.delay or 1, opts.workers or 1,
      opts.program and " --program" or "")
  else
    script = require("mk.home").path("tests/fake_llm/server.py")
    extra = string.format("--idle-exit %d", opts.idle_exit or 120)
  end
  local cmd = string.format("python3 %q --port-file %q %s %s >%q 2>&1 &",
    script, port_file, extra, my_pid() and ("--watch-pid " .. my_pid()) or "", dir .. "/log")
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

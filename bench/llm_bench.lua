-- Benchmark: N concurrent streaming chat calls (default 256) through
-- mk.services.llm -> mk.http to the loopback fake server, which answers each after
-- 1 s. Reports wall time and the engine's CPU time per call (os.clock is
-- this process only; the Python server is another process).
--   mkengine script bench/llm_bench.lua [N] [rounds] [provider (threaded server only)]
-- The server is tests/fake_llm/bench_server.py (asyncio, OpenAI format);
-- MK_BENCH_THREADED=1 uses the threaded fake server (slower server side).
local fake = dofile("tests/fake_llm/fake.lua")
local rerun = fake.reexec_with_key()
if rerun then return rerun end

local llm = require "mk.services.llm"
local task = require "mk.services.task"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local n = tonumber(arg[1]) or 256
local rounds = tonumber(arg[2]) or 3
local threaded = os.getenv("MK_BENCH_THREADED") == "1" -- the threaded fake server instead
-- the threaded server speaks all three formats; the bench server only OpenAI's
local provider = threaded and (arg[3] or "openai") or "openai"

local workers = tonumber(os.getenv("MK_BENCH_WORKERS")) or 1 -- server processes
local srv = fake.start { bench = not threaded, delay = 1, workers = workers }
local c = llm.client {
  provider = provider, model = "delay-1000", api_key_env = fake.key_env,
  base_url = provider == "openai" and (srv.url .. "/v1") or srv.url,
  max_concurrency = n, max_retries = 0, timeout = 30,
}

local lat = {}
local function round(tag)
  local cpu0, t0 = os.clock(), task.now()
  local hs = {}
  lat = {}
  for i = 1, n do
    hs[i] = task.spawn(function()
      local chunks = 0
      local r, err = c:chat { messages = { { role = "user", content = tag .. " call number " .. i } }, stream = true,
        on_delta = function() chunks = chunks + 1 end }
      if not r then error(err.message) end
      assert(r.text == "echo: " .. tag .. " call number " .. i, "wrong text")
      lat[#lat + 1] = r.latency_s
      return chunks
    end)
  end
  local chunks = 0
  for _, k in ipairs(task.gather(hs)) do chunks = chunks + k end
  return task.now() - t0, os.clock() - cpu0, chunks
end

local machine = stats.machine()
round("warmup")
local walls, cpus = {}, {}
for r = 1, rounds do
  local wall, cpu, chunks = round("r" .. r)
  print(string.format("round %d: %d streaming calls (%d deltas) in %.3f s wall, engine CPU %.3f s = %.3f ms/call;"
    .. " call latency %s", r, n, chunks, wall, cpu, cpu / n * 1000, stats.fmt(lat, 1, "s")))
  walls[r], cpus[r] = wall, cpu / n
end
print(string.format("%d calls: wall %s (target < 1.3 s); engine CPU per call %s (target < 1 ms)", n,
  stats.fmt(walls, 1, "s"), stats.fmt(cpus, 1e3, "ms")))
stats.report(machine)
srv.stop()

-- What starting a process costs the engine, and whether it grows with the
-- engine's size (issue 24 item 1; goal: within 20 % at 12 MB and 1 GB RSS).
-- proc.run of /bin/true, timed as engine CPU (os.clock: this process only,
-- so other load on the machine does not count) and as wall per run, in R
-- rounds of N runs; prints the median round and the spread (min-max) of the
-- rounds, first at the engine's own size, then with 1 GB held, then the
-- machine's state (bench/lib/stats.lua).
--   mkengine script bench/spawn_bench.lua [N=300] [R=5] [HOLD_MB=1024]
local fs = require "mk.fs"
local proc = require "mk.proc"
local task = require "mk.services.task"
local stats = dofile("bench/lib/stats.lua")

local N = math.tointeger(tonumber(arg and arg[1]) or 300)
local R = math.tointeger(tonumber(arg and arg[2]) or 5)
local HOLD = math.tointeger(tonumber(arg and arg[3]) or 1024)

local function rss_mb() return (tonumber((fs.read("/proc/self/status") or ""):match("VmRSS:%s*(%d+)")) or 0) / 1024 end

local function rounds(label)
  assert(proc.run { argv = { "/bin/true" } }.code == 0) -- warm-up
  local cpu, wall = {}, {}
  for r = 1, R do
    local c0, t0 = os.clock(), task.now()
    for _ = 1, N do assert(proc.run { argv = { "/bin/true" }, timeout = 10 }.code == 0) end
    cpu[r], wall[r] = (os.clock() - c0) / N * 1e3, (task.now() - t0) / N * 1e3
  end
  print(string.format("proc.run /bin/true, engine RSS %.0f MB (%s), per run over rounds of %d: engine CPU %s, wall %s",
    rss_mb(), label, N, stats.fmt(cpu, 1, "ms"), stats.fmt(wall, 1, "ms")))
  return stats.median(cpu)
end

local before = stats.machine()
local small = rounds("as started")
local held = {}
for i = 1, HOLD // 64 do held[i] = string.rep(string.char(65 + i % 26), 64 << 20) end
local big = rounds(HOLD .. " MB held")
print(string.format("ratio (held / as started): %.2f (%d MB held)", big / small, #held * 64))
stats.report(before)

-- What starting a process costs the engine, and whether it grows with the
-- engine's size (issue 24 item 1; goal: within 20 % at 12 MB and 1 GB RSS).
-- proc.run of /bin/true, timed as engine CPU (os.clock: this process only,
-- so other load on the machine does not count) and as wall per run, in R
-- rounds of N runs; prints the median round and the spread (min-max) of the
-- rounds, first at the engine's own size, then with 1 GB held.
--   mkengine script bench/spawn_bench.lua [N=300] [R=5] [HOLD_MB=1024]
local fs = require "mk.fs"
local proc = require "mk.proc"
local task = require "mk.services.task"

local N = math.tointeger(tonumber(arg and arg[1]) or 300)
local R = math.tointeger(tonumber(arg and arg[2]) or 5)
local HOLD = math.tointeger(tonumber(arg and arg[3]) or 1024)

local function rss_mb() return (tonumber((fs.read("/proc/self/status") or ""):match("VmRSS:%s*(%d+)")) or 0) / 1024 end

local function median(xs)
  local s = { table.unpack(xs) }
  table.sort(s)
  local m = #s // 2
  return #s % 2 == 1 and s[m + 1] or (s[m] + s[m + 1]) / 2, s[1], s[#s]
end

local function rounds(label)
  assert(proc.run { argv = { "/bin/true" } }.code == 0) -- warm-up
  local cpu, wall = {}, {}
  for r = 1, R do
    local c0, t0 = os.clock(), task.now()
    for _ = 1, N do assert(proc.run { argv = { "/bin/true" }, timeout = 10 }.code == 0) end
    cpu[r], wall[r] = (os.clock() - c0) / N * 1e3, (task.now() - t0) / N * 1e3
  end
  local cm, clo, chi = median(cpu)
  local wm, wlo, whi = median(wall)
  print(string.format("proc.run /bin/true, engine RSS %5.0f MB (%s): engine CPU median %.3f ms (%.3f-%.3f), wall median %.3f ms (%.3f-%.3f); %d rounds of %d",
    rss_mb(), label, cm, clo, chi, wm, wlo, whi, R, N))
  return cm
end

print("load average " .. ((fs.read("/proc/loadavg") or "?"):match("^(%S+ %S+ %S+)")))
local small = rounds("as started")
local held = {}
for i = 1, HOLD // 64 do held[i] = string.rep(string.char(65 + i % 26), 64 << 20) end
local big = rounds(HOLD .. " MB held")
print(string.format("ratio (held / as started): %.2f (%d MB held)", big / small, #held * 64))

-- Shared by every bench/ script: a figure with its spread, and the state of
-- the machine it was measured under (this VM is shared, so a figure without
-- them misleads).
--   local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")
--   local m = stats.machine()              -- snapshot before
--   ... measure, collecting samples xs ...
--   print("per call " .. stats.fmt(xs, 1e3, "ms"))   -- "0.70 ms (IQR 0.66-0.76, n=500)"
--   stats.report(m)                         -- "machine: load 0.62 -> 0.80, ..."
-- fmt gives the median with min-max for fewer than 10 samples (repeats of
-- a whole measurement) and with the interquartile range for 10 or more
-- (samples of one call), always with n.
local M = {}

local function sorted(xs)
  local c = {}
  for i, x in ipairs(xs) do c[i] = x end
  table.sort(c)
  return c
end

-- Quantile q (0..1) of a sorted list, linear between neighbours.
local function quantile(s, q)
  if #s == 0 then return nil end
  local pos = 1 + q * (#s - 1)
  local lo = math.floor(pos)
  local hi = math.min(lo + 1, #s)
  return s[lo] + (s[hi] - s[lo]) * (pos - lo)
end

function M.quantile(xs, q) return quantile(sorted(xs), q) end
function M.median(xs) return quantile(sorted(xs), 0.5) end

-- { n, median, min, max, q1, q3, p90 } of a list of numbers.
function M.summary(xs)
  local s = sorted(xs)
  if #s == 0 then return { n = 0 } end
  return { n = #s, median = quantile(s, 0.5), min = s[1], max = s[#s], q1 = quantile(s, 0.25),
    q3 = quantile(s, 0.75), p90 = quantile(s, 0.9) }
end

local function num(x)
  local a = math.abs(x)
  if a >= 100 then return string.format("%.0f", x) end
  if a >= 10 then return string.format("%.1f", x) end
  if a >= 1 then return string.format("%.2f", x) end
  return string.format("%.3f", x)
end

-- "MEDIAN UNIT (min-max LO-HI, n=N)" or "(IQR Q1-Q3, n=N)"; scale multiplies
-- every sample (1e3 for seconds shown as ms).
function M.fmt(xs, scale, unit)
  scale = scale or 1
  local s = M.summary(xs)
  if s.n == 0 then return "no samples" end
  local u = unit and (" " .. unit) or ""
  if s.n == 1 then return string.format("%s%s (n=1)", num(s.median * scale), u) end
  local kind, lo, hi = "min-max", s.min, s.max
  if s.n >= 10 then kind, lo, hi = "IQR", s.q1, s.q3 end
  return string.format("%s%s (%s %s-%s, n=%d)", num(s.median * scale), u, kind, num(lo * scale), num(hi * scale), s.n)
end

local function read(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- CPU ticks (utime + stime) and name of every process, from /proc/*/stat.
local function cpu_by_pid()
  local out = {}
  local ok, fs = pcall(require, "mk.fs")
  local names = ok and fs.list("/proc") or {}
  for _, pid in ipairs(names) do
    local s = pid:match("^%d+$") and read("/proc/" .. pid .. "/stat")
    local comm, rest
    if s then comm, rest = s:match("^%d+ %((.*)%) (.*)$") end
    if rest then
      local f = {}
      for x in rest:gmatch("%S+") do f[#f + 1] = x end
      -- after "pid (comm)": state is f[1]; utime, stime are fields 14, 15 (f[12], f[13])
      out[pid] = { comm = comm, ticks = (tonumber(f[12]) or 0) + (tonumber(f[13]) or 0) }
    end
  end
  return out
end

local function cpu_totals()
  local l = (read("/proc/stat") or ""):match("^cpu%s+([^\n]+)") or ""
  local f = {}
  for x in l:gmatch("%d+") do f[#f + 1] = tonumber(x) end
  local total = 0
  for _, x in ipairs(f) do total = total + x end
  return total, f[8] or 0 -- steal is the 8th field
end

local function loadavg() return (read("/proc/loadavg") or "?"):match("^(%S+ %S+ %S+)") or "?" end

local function self_pids()
  local mine = {}
  local s = read("/proc/self/stat") or ""
  local pid = s:match("^(%d+)")
  if pid then mine[pid] = true end
  return mine
end

local function sleep(s)
  local ok, task = pcall(require, "mk.services.task")
  if ok and pcall(task.sleep, s) then return end
  os.execute(string.format("sleep %.3f", s))
end

-- State of the machine over a short window (default 0.5 s): load average,
-- the other processes that used more than 10 % of a core in it (name and
-- share), and the CPU steal the hypervisor reported.
function M.machine(window)
  window = window or 0.5
  local hz = 100
  local mine = self_pids()
  local a, t0, st0 = cpu_by_pid(), cpu_totals()
  sleep(window)
  local b, t1, st1 = cpu_by_pid(), cpu_totals()
  local busy = {}
  for pid, pb in pairs(b) do
    local pa = a[pid]
    local share = pa and (pb.ticks - pa.ticks) / hz / window or 0
    if not mine[pid] and share > 0.10 then busy[#busy + 1] = { comm = pb.comm, share = share } end
  end
  table.sort(busy, function(x, y) return x.share > y.share end)
  local steal = (t1 > t0) and (st1 - st0) / (t1 - t0) or 0
  return { load = loadavg(), busy = busy, steal = steal, time = os.date("!%Y-%m-%d %H:%M UTC") }
end

local function cores()
  local n = 0
  for _ in ("\n" .. (read("/proc/cpuinfo") or "")):gmatch("\nprocessor%s*:") do n = n + 1 end
  return n
end

local function describe(m)
  local names = {}
  for i = 1, math.min(#m.busy, 4) do names[i] = string.format("%s %.0f%%", m.busy[i].comm, 100 * m.busy[i].share) end
  local extra = #m.busy > 4 and string.format(", +%d", #m.busy - 4) or ""
  return string.format("load %s, %d other busy process%s%s, steal %.0f%%", m.load, #m.busy,
    #m.busy == 1 and "" or "es", #names > 0 and (" (" .. table.concat(names, ", ") .. extra .. ")") or "",
    100 * m.steal)
end

-- Prints the machine state before the measurement (given) and now:
--   machine, 2026-12-03 18:20 UTC: before load ..., after load ...
-- Returns the printed line.
function M.report(before, out)
  local after = M.machine()
  local line = string.format("machine, %s (%d cores): before: %s; after: %s", before.time, cores(), describe(before),
    describe(after))
  local emit = out or print
  emit(line)
  return line
end

M.describe = describe

return M

--- targets/c/contention.lua: whether a benchmark was timed while something
--- else held the CPU. Its figure would then measure the wait for a core (or
--- for the memory bus another process saturates) as much as the kernel:
--- such a benchmark is flagged (`contended`, with why) so that the
--- evaluator takes it again and, failing that, marks it, never keeping it
--- silently as the kernel's figure (mk.eval, mk.search.records).
---
--- Read around the benchmark process from /proc: the machine's busy CPU
--- time less the benchmark's own gives what other processes used, in cores
--- on average; the hypervisor's steal gives what other machines took. The
--- load average and the share of timed calls that an involuntary context
--- switch interrupted (mkc-run's `clean` count) are recorded beside them.
local fs = require("mk.fs")
local task_lib = require("mk.services.task")

local C = {}

--- The thresholds: other processes using more than `other_cores` cores on
--- average during the benchmark, or steal above `steal` of the machine's
--- CPU time, flag it. A benchmark's options `contention = {other_cores =,
--- steal =}` override them (a negative threshold flags every benchmark).
C.LIMITS = { other_cores = 0.5, steal = 0.05 }

-- The machine's CPU counters: busy (user, nice, system, irq, softirq),
-- steal and all jiffies over every CPU, and the number of CPUs.
local function cpu_counters()
  local text = fs.read("/proc/stat") or ""
  local f = {}
  for x in (text:match("^cpu%s+([^\n]+)") or ""):gmatch("%d+") do f[#f + 1] = tonumber(x) end
  local ncpu = 0
  for _ in text:gmatch("\ncpu%d+ ") do ncpu = ncpu + 1 end
  local total = 0
  for i = 1, math.min(#f, 8) do total = total + f[i] end -- guest time is already in user
  return { busy = (f[1] or 0) + (f[2] or 0) + (f[3] or 0) + (f[6] or 0) + (f[7] or 0), steal = f[8] or 0,
    total = total, ncpu = math.max(ncpu, 1), t = task_lib.now() }
end

--- A snapshot of the machine before a benchmark.
function C.before() return cpu_counters() end

local function load1()
  return tonumber((fs.read("/proc/loadavg") or ""):match("^(%S+)"))
end

--- The contention over a benchmark from the snapshot taken before it,
--- the benchmark process's own CPU seconds `own_cpu_s` and mkc-run's
--- answer `j` (reps, clean); `after` defaults to the machine now. Returns
--- {other_cores, steal, load1, cpus, disturbed, why}: `why` (a sentence)
--- when it is flagged, else nil.
---@param before table from C.before
---@param own_cpu_s number|nil
---@param j table|nil
---@param limits table|nil {other_cores, steal}
---@param after table|nil a snapshot as C.before gives
function C.judge(before, own_cpu_s, j, limits, after)
  after = after or cpu_counters()
  limits = limits or {}
  local lim_cores = limits.other_cores or C.LIMITS.other_cores
  local lim_steal = limits.steal or C.LIMITS.steal
  local dt = math.max(after.t - before.t, 1e-6)
  local dtot = math.max(after.total - before.total, 1)
  -- busy share of the whole machine, in cores, less the benchmark's own use
  local busy_cores = (after.busy - before.busy) / dtot * after.ncpu
  local other = math.max(0, busy_cores - (own_cpu_s or 0) / dt)
  local steal = (after.steal - before.steal) / dtot
  local reps = j and tonumber(j.reps) or 0
  local r = { other_cores = other, steal = steal, load1 = load1(), cpus = after.ncpu,
    disturbed = reps > 0 and (reps - (tonumber(j.clean) or reps)) / reps or nil }
  local why = {}
  if other > lim_cores then
    why[#why + 1] = string.format("other processes used %.2f of %d cores while it ran", other, after.ncpu)
  end
  if steal > lim_steal then why[#why + 1] = string.format("the hypervisor stole %.0f %% of the CPU time", 100 * steal) end
  if #why > 0 then
    r.why = table.concat(why, "; ") .. (r.load1 and string.format(" (load average %.2f)", r.load1) or "")
  end
  return r
end

return C

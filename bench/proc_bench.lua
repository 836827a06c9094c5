-- Spawn + wait overhead of mk.proc, for the "engine overhead per
-- evaluation" figure: each evaluation runs a handful of processes (compile,
-- test, bench), so this cost times that count is what the engine adds.
--   build/mkengine script bench/proc_bench.lua [N]
local proc = require "mk.proc"
local sandbox = require "mk.services.sandbox"
local task = require "mk.services.task"
local fs = require "mk.fs"
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local n = math.tointeger(tonumber(arg and arg[1]) or 200)

local function measure(label, count, fn)
  fn() -- warm-up (sandbox probe, page cache)
  local per, cpu = {}, {}
  for i = 1, count do
    local s, c = task.now(), os.clock()
    fn()
    per[i], cpu[i] = task.now() - s, os.clock() - c
  end
  print(string.format("%-40s wall %s, engine CPU %s", label, stats.fmt(per, 1e3, "ms"), stats.fmt(cpu, 1e3, "ms")))
end

local machine = stats.machine()
local work = fs.realpath(fs.tmpdir("proc-bench"))

measure("io.popen('true') (sh -c + true), reference", n, function()
  local p = io.popen("true")
  p:read("a")
  p:close()
end)
measure("proc.run{argv={'true'}}", n, function()
  assert(proc.run { argv = { "true" } }.code == 0)
end)
measure("proc.run true, timeout + limits", n, function()
  assert(proc.run { argv = { "true" }, timeout = 10, limits = { mem_mb = 1024, cpu_s = 10, fsize_mb = 64 } }.code == 0)
end)
if sandbox.available() then
  measure("proc.run true, sandbox (bubblewrap)", n // 4, function()
    local r = proc.run(sandbox.apply { argv = { "true" }, sandbox = { workdir = work } })
    assert(r.code == 0, r.stderr)
  end)
else
  print("sandbox: unavailable, skipped")
end

-- Throughput with concurrency (what `--jobs` compiles see), 3 rounds each.
for _, jobs in ipairs { 8, 50 } do
  local sem = task.semaphore(jobs)
  local per = {}
  for r = 1, 3 do
    local hs = {}
    local t0 = task.now()
    for i = 1, n do
      hs[i] = task.spawn(function() return sem:with(proc.run, { argv = { "true" } }) end)
    end
    task.gather(hs)
    per[r] = (task.now() - t0) / n
  end
  print(string.format("%-40s wall per process %s", "proc.run true, " .. jobs .. " at a time", stats.fmt(per, 1e3, "ms")))
end

local caps = {}
for i = 1, 3 do
  local t0 = task.now()
  local r = proc.run { argv = { "head", "-c", "50000000", "/dev/zero" } }
  assert(#r.stdout == 50000000)
  caps[i] = task.now() - t0
end
print(string.format("%-40s %s", "50 MB of stdout captured", stats.fmt(caps, 1e3, "ms")))
fs.rm_rf(work)
stats.report(machine)

-- Spawn + wait overhead of mk.proc, for the "engine overhead per
-- evaluation" figure: each evaluation runs a handful of processes (compile,
-- test, bench), so this cost times that count is what the engine adds.
--   build/mkengine script bench/proc_bench.lua [N]
local proc = require "mk.proc"
local sandbox = require "mk.services.sandbox"
local task = require "mk.services.task"
local fs = require "mk.fs"

local n = math.tointeger(tonumber(arg and arg[1]) or 200)

local function median(xs)
  table.sort(xs)
  local m = #xs // 2
  if #xs % 2 == 1 then return xs[m + 1] end
  return (xs[m] + xs[m + 1]) / 2
end

local function measure(label, count, fn)
  fn() -- warm-up (sandbox probe, page cache)
  local per = {}
  local t0 = task.now()
  for i = 1, count do
    local s = task.now()
    fn()
    per[i] = task.now() - s
  end
  local total = task.now() - t0
  print(string.format("%-48s n=%-5d median %8.3f ms   mean %8.3f ms", label, count,
    median(per) * 1e3, total / count * 1e3))
end

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

-- Throughput with concurrency (what `--jobs` compiles see).
for _, jobs in ipairs { 8, 50 } do
  local sem = task.semaphore(jobs)
  local hs = {}
  local t0 = task.now()
  for i = 1, n do
    hs[i] = task.spawn(function() return sem:with(proc.run, { argv = { "true" } }) end)
  end
  task.gather(hs)
  local total = task.now() - t0
  print(string.format("%-48s n=%-5d %8.3f ms per process (%.0f processes/s)",
    "proc.run true, " .. jobs .. " at a time", n, total / n * 1e3, n / total))
end

local t0 = task.now()
local r = proc.run { argv = { "head", "-c", "50000000", "/dev/zero" } }
assert(#r.stdout == 50000000)
print(string.format("%-48s %8.3f ms (process wall %.3f ms)", "50 MB of stdout captured", (task.now() - t0) * 1e3,
  r.wall_s * 1e3))
fs.rm_rf(work)

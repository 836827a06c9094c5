-- Workers on a real single-node Slurm cluster started here (munged,
-- slurmctld, slurmd; generated slurm.conf under a temp dir): a worker per
-- `salloc ... srun mkengine worker`, the allocation released at the end,
-- a job cancelled mid-evaluation (scancel) retried on a new allocation,
-- the allocation given back when the engine is SIGKILLed, and `mkengine
-- run parallel --workers` end to end. Needs root (slurmd).
local t = dofile("tests/lua/lib/t.lua")
local daemons = dofile("tests/lua/lib/daemons.lua")
local fs = require "mk.fs"
local proc = require "mk.proc"
local task = require "mk.services.task"
local cjson = require "cjson"
local pool_lib = require "mk.eval.pool"
local eval = require "mk.eval"

local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
local TASK = "tests/tasks/rmsnorm_small"
local CANDS = "examples/tasks/c/rmsnorm/scripted/"
local tmp = fs.realpath(t.tmpdir("mk-slurm-test"))
fs.chmod(tmp, tonumber("755", 8)) -- munged wants its socket directory reachable by all
local BENCH = { min_time = 0.02, warmup = 1, min_reps = 2, max_reps = 5 }

local cluster, why

local function workers_file(name, slots)
  local path = tmp .. "/" .. name .. ".lua"
  fs.write(path, string.format([[
return { { kind = "slurm", partition = %q, slots = %d, time = "30", name = %q, command = %q, cache = %q,
  env = { SLURM_CONF = %q } } }
]], cluster.partition, slots, name, MK, tmp .. "/cache-" .. name, cluster.conf))
  return path
end

local function until_true(fn, secs)
  local t0 = task.now()
  while task.now() - t0 < (secs or 60) do
    if fn() then return true end
    task.sleep(0.05)
  end
  return false
end

t.test("slurm: a worker runs inside an salloc allocation; the allocation is released at the end", function()
  cluster, why = daemons.slurm(tmp .. "/cluster")
  if not cluster then return t.skip(why) end
  local pool = pool_lib.new(pool_lib.load(workers_file("sl1", 2)))
  local ev = eval.new(TASK, { pool = pool, bench = BENCH, probes = 1 })
  t.ok(until_true(function() return #daemons.squeue(cluster) == 1 end, 60), "one job while the worker runs")
  local ok, err = pcall(function()
    local r = ev:evaluate(fs.read(CANDS .. "naive.c"), { tune = false })
    t.eq(r.status, "ok", r.message)
    t.eq(r.worker, "sl1")
    t.eq(ev:evaluate(fs.read(CANDS .. "wrong_eps.c"), { tune = false }).status, "incorrect")
  end)
  pool:close() -- also when a check failed: the next tests count jobs
  if not ok then error(err, 0) end
  t.ok(until_true(function() return #daemons.squeue(cluster) == 0 end, 30), "allocation released")
end)

t.test("faults: the Slurm job cancelled mid-evaluation: a new allocation takes the retry", function()
  if not cluster then return t.skip(why) end
  local pool = pool_lib.new(pool_lib.load(workers_file("sl2", 1)), { hb = 0.3, hb_timeout = 5, log = function() end })
  local ev = eval.new(TASK, { pool = pool, bench = BENCH, probes = 1 })
  ev:freeze()
  local c = pool.conns[1]
  local h = task.spawn(function() return ev:evaluate(fs.read(CANDS .. "naive.c") .. "\n// fault\n", { tune = false }) end)
  t.ok(until_true(function() return c.state == "ready" and next(c.pending) ~= nil end), "the worker got work")
  local jobs = daemons.squeue(cluster)
  t.eq(#jobs, 1)
  local r = proc.run { argv = { "scancel", jobs[1] }, env = cluster.env, timeout = 30 }
  t.eq(r.code, 0, r.stderr)
  local res = task.await(h)
  t.eq(res.status, "ok", res.message)
  t.ok(pool.stats.retried >= 1, "the evaluation was retried")
  local after = daemons.squeue(cluster)
  t.eq(#after, 1, "a new allocation")
  t.ok(after[1] ~= jobs[1], "not the cancelled job")
  pool:close()
  t.ok(until_true(function() return #daemons.squeue(cluster) == 0 end, 30), "allocation released")
end)

t.test("run: mkengine run parallel --workers on the local Slurm partition commits every node once", function()
  if not cluster then return t.skip(why) end
  local dir = tmp .. "/run"
  local r = assert(proc.run { argv = { MK, "run", "parallel", TASK, "--model", "scripted", "--set", "trajectories=2",
    "--set", "iters=2", "--set", "tune=false", "--run-dir", dir, "--workers", workers_file("slrun", 2), "--quiet" },
    timeout = 590 })
  t.eq(r.code, 0, r.stderr)
  t.eq(cjson.decode(fs.read(dir .. "/summary.json")).status, "done")
  local seen, n = {}, 0
  for line in (fs.read(dir .. "/events.jsonl") or ""):gmatch("[^\n]+") do
    local e = cjson.decode(line)
    if e.type == "node" then
      t.ok(not seen[e.id], "node " .. tostring(e.id) .. " committed once")
      seen[e.id] = true
      n = n + 1
    end
  end
  t.ok(n >= 3, "nodes committed: " .. n)
  t.ok(fs.isdir(tmp .. "/cache-slrun/tasks"), "evaluations ran on the Slurm worker")
  -- salloc has returned; slurmctld drops the job from squeue a moment later
  t.ok(until_true(function() return #daemons.squeue(cluster) == 0 end, 30), "allocation released when the run ended")
end)

t.test("faults: the engine SIGKILLed: its Slurm worker gives the allocation back", function()
  if not cluster then return t.skip(why) end
  local script = tmp .. "/engine.lua"
  fs.write(script, string.format([[
local pool = require("mk.eval.pool").new(require("mk.eval.pool").load(%q))
local ev = require("mk.eval").new(%q, { pool = pool })
ev:freeze()
print("frozen")
io.stdout:flush()
require("mk.services.task").sleep(1000)
]], workers_file("sldie", 1), TASK))
  local eng = assert(proc.spawn { argv = { MK, "script", script } })
  t.eq(eng:read_line(), "frozen", eng:stderr())
  t.eq(#daemons.squeue(cluster), 1, "the worker's allocation")
  t.ok(eng:kill(9), "SIGKILL the engine")
  t.eq(eng:wait().status, "signaled")
  -- salloc died with the engine (SIGKILLed by the process wrapper): the
  -- worker, left without its engine, cancels its own job
  t.ok(until_true(function() return #daemons.squeue(cluster) == 0 end, 30), "allocation released")
end)

t.test("slurm: the cluster stops and nothing is left", function()
  if cluster then cluster.stop() end
  -- (the bracket keeps pgrep's own shell from matching)
  local r = proc.run { argv = { "sh", "-c", "pgrep -f '[s]lurm.* -f " .. tmp .. "|[m]unged .*" .. tmp .. "' || true" } }
  t.eq(r.stdout, "")
  fs.rm_rf(tmp)
end)

return t.run()

-- Remote evaluation throughput (mk.eval.pool + `mkengine worker`):
--   1. dispatch overhead: a request the worker answers from its own result
--      memo (the evaluation itself costs ~0), so the round trip is the
--      protocol alone: engine -> pipe or loopback ssh -> worker -> back;
--   2. one real evaluation: local evaluator vs the same on a warm worker;
--   3. a queue of distinct candidates on 1, 2 and 4 worker slots: wall,
--      evaluations per minute, and the slots' busy share while the queue
--      is not empty (slot-seconds held by requests / (slots x wall)).
-- Starts its own sshd on 127.0.0.1 (tests/lua/lib/daemons.lua).
-- Usage: MKENGINE_HOME=$PWD build/mkengine script bench/workers_bench.lua [N_ROUNDTRIPS] [QUEUE]
local fs = require "mk.fs"
local task = require "mk.services.task"
local pool_lib = require "mk.eval.pool"
local eval = require "mk.eval"
local daemons = dofile("tests/lua/lib/daemons.lua")
local stats = dofile((arg[0]:match("^(.*)/") or ".") .. "/lib/stats.lua")

local N = tonumber(arg and arg[1]) or 50
local QUEUE = tonumber(arg and arg[2]) or 8
local MK = fs.realpath("build/mkengine")
local TASK = "tests/tasks/rmsnorm_small"
local SRC = fs.read("examples/tasks/c/rmsnorm/scripted/naive.c")
local OPTS = { bench = { min_time = 0.05, warmup = 1, min_reps = 3, max_reps = 20 }, probes = 1 }
local tmp = fs.realpath(fs.tmpdir("mk-workers-bench"))

local function workers_file(name, body)
  local p = tmp .. "/" .. name .. ".lua"
  fs.write(p, "return " .. body .. "\n")
  return p
end

local machine = stats.machine()
print(string.format("workers bench: %d round trips, queue of %d", N, QUEUE))

local sshd = assert(daemons.sshd(tmp .. "/sshd"))

-- 1. dispatch overhead
local function roundtrips(label, wfile)
  local pool = pool_lib.new(pool_lib.load(wfile))
  local ev = eval.new(TASK, { pool = pool, bench = OPTS.bench, probes = OPTS.probes })
  local eo = {}
  for k, v in pairs(ev.opts) do if k ~= "pool" then eo[k] = v end end
  local files = { [ev.task.candidate_file] = SRC }
  pool:request(ev.task, "evaluate", files, { tune = false }, eo) -- evaluates once, warms everything
  local ts = {}
  for i = 1, N do
    local t0 = task.now()
    pool:request(ev.task, "evaluate", files, { tune = false }, eo)
    ts[i] = task.now() - t0
  end
  print(string.format("%-34s %s, p90 %.2f ms", label, stats.fmt(ts, 1e3, "ms"), stats.quantile(ts, 0.9) * 1e3))
  pool:close()
end

roundtrips("round trip, local worker (pipe)", workers_file("rt-local",
  string.format("{ { kind = 'local', command = %q, cache = %q } }", MK, tmp .. "/c-local")))
roundtrips("round trip, ssh worker (loopback)", workers_file("rt-ssh",
  string.format("{ { kind = 'ssh', host = 'mkworker', ssh_options = { '-F', %q }, command = %q, cache = %q } }",
    sshd.config, MK, tmp .. "/c-ssh")))

-- 2. one real evaluation, local vs warm ssh worker (distinct sources: no memo)
do
  local ev = eval.new(TASK, OPTS)
  ev:baseline()
  local pool = pool_lib.new(pool_lib.load(tmp .. "/rt-ssh.lua"))
  local rev = eval.new(TASK, { pool = pool, bench = OPTS.bench, probes = OPTS.probes })
  rev:baseline()
  local tl, tr = {}, {}
  for i = 1, 5 do
    local t0 = task.now()
    assert(ev:evaluate(SRC .. "\n// local " .. i .. "\n", { tune = false }).status == "ok")
    tl[i] = task.now() - t0
    t0 = task.now()
    assert(rev:evaluate(SRC .. "\n// remote " .. i .. "\n", { tune = false }).status == "ok")
    tr[i] = task.now() - t0
  end
  print(string.format("%-34s local %s, ssh worker %s (interleaved)",
    "one evaluation (compile+test+bench)", stats.fmt(tl, 1, "s"), stats.fmt(tr, 1, "s")))
  ev:close()
  pool:close()
end

-- 3. a queue on 1, 2, 4 slots (one local worker with that many slots)
for _, slots in ipairs { 1, 2, 4 } do
  local wfile = workers_file("q" .. slots, string.format("{ { kind = 'local', slots = %d, command = %q, cache = %q } }",
    slots, MK, tmp .. "/c-q"))
  local pool = pool_lib.new(pool_lib.load(wfile))
  local ev = eval.new(TASK, { pool = pool, bench = OPTS.bench, probes = OPTS.probes })
  ev:baseline()
  pool.stats.busy_s = 0
  local t0 = task.now()
  local hs = {}
  for i = 1, QUEUE do
    hs[i] = task.spawn(function() return ev:evaluate(SRC .. "\n// q" .. slots .. " " .. i .. "\n", { tune = false }) end)
  end
  for _, h in ipairs(hs) do assert(task.await(h).status == "ok") end
  local wall = task.now() - t0
  print(string.format("%-34s wall %.2f s  %.1f evaluations/min  busy share %.1f%%", slots .. " slot(s), " .. QUEUE ..
    " queued", wall, QUEUE / wall * 60, 100 * pool.stats.busy_s / (slots * wall)))
  pool:close()
end

sshd.stop()
fs.rm_rf(tmp)
stats.report(machine)

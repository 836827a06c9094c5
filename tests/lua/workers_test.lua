-- Remote evaluation: `mkengine worker` and mk.pool with real workers
-- (local processes and a real OpenSSH server on 127.0.0.1 started here),
-- the faults they must survive (SIGKILL mid-evaluation, SIGSTOP, sshd
-- killed, no worker left), and `mkengine run --workers` end to end.
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
local tmp = fs.realpath(t.tmpdir("mk-workers-test"))
-- small benchmark settings: the verdicts, not the timings, are under test
local EVAL_OPTS = { bench = { min_time = 0.02, warmup = 1, min_reps = 2, max_reps = 5 }, probes = 1 }
-- expected verdicts of three scripted candidates
local EXPECT = { ["naive.c"] = "ok", ["wrong_eps.c"] = "incorrect", ["simd_typo.c"] = "compile_error" }

local function workers_file(name, specs)
  local path = tmp .. "/" .. name .. ".lua"
  local function ser(v)
    if type(v) == "table" then
      local parts = {}
      for k, x in pairs(v) do
        parts[#parts + 1] = (type(k) == "string" and "[" .. string.format("%q", k) .. "] = " or "") .. ser(x)
      end
      return "{ " .. table.concat(parts, ", ") .. " }"
    end
    return type(v) == "string" and string.format("%q", v) or tostring(v)
  end
  fs.write(path, "return " .. ser(specs) .. "\n")
  return path
end

local function local_worker(name, extra)
  local s = { kind = "local", slots = 1, name = name, command = MK, cache = tmp .. "/cache-" .. name }
  for k, v in pairs(extra or {}) do s[k] = v end
  return s
end

local function conn(pool, name)
  for _, c in ipairs(pool.conns) do
    if c.spec.name == name then return c end
  end
end

-- Evaluate the three candidates (twice each: six evaluations) at once;
-- returns {file = {statuses}}.
local function evaluate_all(ev)
  local hs, names = {}, {}
  for _ = 1, 2 do
    for name in pairs(EXPECT) do
      names[#names + 1] = name
      local src = fs.read(CANDS .. name)
      -- a distinct comment per copy: no memoised result, a real evaluation each
      hs[#hs + 1] = task.spawn(function()
        return ev:evaluate(src .. "\n// copy " .. #hs .. "\n", { tune = false })
      end)
    end
  end
  local out = {}
  for i, h in ipairs(hs) do
    local r = task.await(h)
    out[names[i]] = out[names[i]] or {}
    table.insert(out[names[i]], r)
  end
  return out
end

local function check_verdicts(got)
  for name, want in pairs(EXPECT) do
    t.eq(#got[name], 2, name .. " evaluated twice")
    for _, st in ipairs(got[name]) do
      t.eq(st.status, want, name .. ": " .. tostring(st.message))
      if st.status == "ok" then t.ok((st.cpu_s or 0) > 0, name .. ": the worker reports cpu_s") end
    end
  end
end

-- Wait (bounded) until fn() is true.
local function until_true(fn, secs)
  local t0 = task.now()
  while task.now() - t0 < (secs or 60) do
    if fn() then return true end
    task.sleep(0.05)
  end
  return false
end

local function busy(c) return c.state == "ready" and next(c.pending) ~= nil end

t.test("worker: says hello with version, targets, slots and host facts; refuses another version", function()
  local h = assert(proc.spawn { argv = { MK, "worker", "--slots", "3", "--cache", tmp .. "/cache-hello" } })
  local hello = cjson.decode(h:read_line())
  t.eq(hello.t, "hello")
  t.eq(hello.version, require("mk.home").version)
  t.eq(math.tointeger(hello.slots), 3)
  t.ok(hello.host.cores >= 1, "cores reported")
  local has_c = false
  for _, n in ipairs(hello.targets) do has_c = has_c or n == "c" end
  t.ok(has_c, "target c offered")
  h:write(cjson.encode { t = "hello", version = "0.0.0-other", protocol = 1 } .. "\n")
  local msg = cjson.decode(h:read_line())
  t.eq(msg.t, "refused")
  t.contains(msg.message, "0.0.0-other")
  t.eq(h:wait().code, 2)
end)

t.test("pool: a worker of another version is refused and drained, the request fails cleanly", function()
  -- test double: a "worker" that announces another version (a shell script)
  local fake = tmp .. "/old-worker.sh"
  fs.write(fake, "#!/bin/sh\necho '{\"t\":\"hello\",\"version\":\"0.0.1-old\",\"protocol\":1,\"slots\":1," ..
    "\"targets\":[\"c\"],\"name\":\"old\"}'\nsleep 100\n")
  fs.chmod(fake, tonumber("755", 8))
  local logs = {}
  local pool = pool_lib.new(pool_lib.load(workers_file("old", { local_worker("old", { command = fake }) })),
    { log = function(m) logs[#logs + 1] = m end })
  local ev = eval.new(TASK, { pool = pool })
  local ok, err = pcall(ev.freeze, ev)
  t.ok(not ok)
  t.eq(err.kind, "no_workers")
  t.contains(err.message, "mkengine resume")
  t.contains(table.concat(logs, "\n"), "0.0.1-old")
  t.eq(pool:status()[1].state, "drained")
  pool:close()
end)

t.test("pool: bad workers files are input errors", function()
  for _, body in ipairs { "return {}", "return { { kind = 'ftp' } }", "return { { kind = 'ssh' } }",
    "return { { kind = 'local', slots = 0 } }", "syntax error here" } do
    local path = tmp .. "/bad.lua"
    fs.write(path, body)
    local ok, err = pcall(pool_lib.load, path)
    t.ok(not ok, body)
    t.eq(err.exit, 2, body)
  end
end)

t.test("pool: local workers give the verdicts a local evaluator gives; tasks ship once, content-addressed", function()
  local w = workers_file("two", { local_worker("a", { slots = 2 }), local_worker("b") })
  local pool = pool_lib.new(pool_lib.load(w))
  local ev = eval.new(TASK, { pool = pool, bench = EVAL_OPTS.bench, probes = 1 })
  t.eq(ev:freeze().status, "ok")
  t.ok(ev:baseline().latency_s > 0)
  check_verdicts(evaluate_all(ev))
  local r = ev:evaluate(fs.read(CANDS .. "naive.c"), { tune = false })
  t.ok(r.worker ~= nil, "the result names its worker")
  t.ok(r.speedup > 0 and r.baseline_latency_s > 0)
  t.eq(ev:heldout(fs.read(CANDS .. "naive.c")).correct, true)
  t.ok(pool.shipped_bytes > 0, "the task travelled")
  pool:close()
  -- a new pool on the same worker caches: no file travels again
  local pool2 = pool_lib.new(pool_lib.load(w))
  local ev2 = eval.new(TASK, { pool = pool2, bench = EVAL_OPTS.bench, probes = 1 })
  t.eq(ev2:freeze().status, "ok")
  t.eq(pool2.shipped_bytes or 0, 0, "bytes shipped to warm workers")
  pool2:close()
end)

t.test("faults: a worker SIGKILLed mid-evaluation loses nothing: retried elsewhere, same verdicts", function()
  local pool = pool_lib.new(pool_lib.load(workers_file("kill", { local_worker("a"), local_worker("b") })),
    { hb = 0.3, hb_timeout = 3, log = function() end })
  local ev = eval.new(TASK, { pool = pool, bench = EVAL_OPTS.bench, probes = 1 })
  ev:freeze()
  local victim = conn(pool, "a")
  local killer = task.spawn(function()
    t.ok(until_true(function() return busy(victim) end), "worker a got work")
    t.ok(victim.child:kill(9), "SIGKILL sent")
  end)
  check_verdicts(evaluate_all(ev))
  task.await(killer)
  t.ok(pool.stats.retried >= 1, "an evaluation was retried")
  pool:close()
end)

t.test("faults: a hung worker (SIGSTOP: no heartbeat) is killed and its evaluation retried", function()
  local pool = pool_lib.new(pool_lib.load(workers_file("stop", { local_worker("a"), local_worker("b") })),
    { hb = 0.3, hb_timeout = 2, log = function() end })
  local ev = eval.new(TASK, { pool = pool, bench = EVAL_OPTS.bench, probes = 1 })
  ev:freeze()
  local victim = conn(pool, "a")
  local first
  local stopper = task.spawn(function()
    t.ok(until_true(function() return busy(victim) end), "worker a got work")
    first = victim.child
    t.ok(first:kill(19), "SIGSTOP sent")
  end)
  check_verdicts(evaluate_all(ev))
  task.await(stopper)
  t.ok(pool.stats.retried >= 1, "an evaluation was retried")
  -- the kill is asynchronous: the wrapper reaps the tree, then exits
  t.ok(until_true(function() return not first:running() end, 15), "the stopped worker was killed")
  pool:close()
end)

t.test("faults: with no worker left the request fails with no_workers and a resume hint", function()
  local pool = pool_lib.new(pool_lib.load(workers_file("none", { local_worker("gone", { command = "/bin/false" }) })),
    { restarts = 1, log = function() end })
  local ev = eval.new(TASK, { pool = pool })
  local ok, err = pcall(ev.evaluate, ev, fs.read(CANDS .. "naive.c"))
  t.ok(not ok)
  t.eq(err.kind, "no_workers")
  t.contains(err.message, "no worker left")
  pool:close()
end)

local sshd, sshd_why
local function ssh_worker(name)
  return { kind = "ssh", host = sshd.host, slots = 1, name = name, command = MK,
    ssh_options = { "-F", sshd.config }, cache = tmp .. "/cache-" .. name, env = { MK_FROM_ENV = "1" } }
end

t.test("ssh: a worker over a real OpenSSH server (BatchMode, multiplexed, host key checked) evaluates", function()
  sshd, sshd_why = daemons.sshd(tmp .. "/sshd")
  if not sshd then return t.skip(sshd_why) end
  local pool = pool_lib.new(pool_lib.load(workers_file("ssh", { ssh_worker("s1") })))
  local ev = eval.new(TASK, { pool = pool, bench = EVAL_OPTS.bench, probes = 1 })
  local r = ev:evaluate(fs.read(CANDS .. "naive.c"), { tune = false })
  t.eq(r.status, "ok", r.message)
  t.eq(r.worker, "s1")
  t.ok(fs.isdir(tmp .. "/cache-s1/tasks"), "the task was shipped over ssh")
  pool:close()
  -- a host key that does not match is refused (no prompt, BatchMode)
  local bad = tmp .. "/bad_known_hosts"
  fs.write(bad, "[127.0.0.1]:" .. sshd.port .. " ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBadKeyBadKeyBadKeyBadKeyBadKeyBadKeyBadKeyBa\n")
  local spec = ssh_worker("s2")
  spec.ssh_options = { "-F", sshd.config, "-o", "UserKnownHostsFile=" .. bad }
  local logs = {}
  local p2 = pool_lib.new(pool_lib.load(workers_file("sshbad", { spec })),
    { restarts = 0, log = function(m) logs[#logs + 1] = m end })
  local ok, err = pcall(eval.new(TASK, { pool = p2 }).freeze, eval.new(TASK, { pool = p2 }))
  t.ok(not ok and err.kind == "no_workers", "a wrong host key gives no worker")
  t.contains(table.concat(logs, "\n"), "drained")
  p2:close()
end)

t.test("faults: sshd killed mid-evaluation: the ssh worker is drained, its work finishes locally", function()
  if not sshd then return t.skip(sshd_why) end
  local pool = pool_lib.new(pool_lib.load(workers_file("sshkill", { ssh_worker("s3"), local_worker("l") })),
    { hb = 0.3, hb_timeout = 3, restarts = 1, log = function() end })
  local ev = eval.new(TASK, { pool = pool, bench = EVAL_OPTS.bench, probes = 1 })
  ev:freeze()
  local victim = conn(pool, "s3")
  local killer = task.spawn(function()
    t.ok(until_true(function() return busy(victim) end), "the ssh worker got work")
    sshd.stop() -- the listener and every session (the tree dies)
  end)
  check_verdicts(evaluate_all(ev))
  task.await(killer)
  t.ok(pool.stats.retried >= 1, "an evaluation was retried")
  t.ok(until_true(function() return victim.state == "drained" end, 30), "the ssh worker is drained")
  pool:close()
end)

t.test("run: mkengine run parallel --workers over loopback ssh commits every node once", function()
  if not sshd then return t.skip(sshd_why) end
  sshd, sshd_why = daemons.sshd(tmp .. "/sshd2")
  if not sshd then return t.skip(sshd_why) end
  local w = workers_file("runssh", { ssh_worker("r1") })
  local dir = tmp .. "/run-ssh"
  local r = assert(proc.run { argv = { MK, "run", "parallel", TASK, "--model", "scripted", "--set", "trajectories=2",
    "--set", "iters=2", "--set", "tune=false", "--run-dir", dir, "--workers", w, "--quiet" }, timeout = 590 })
  t.eq(r.code, 0, r.stderr)
  local s = cjson.decode(fs.read(dir .. "/summary.json"))
  t.eq(s.status, "done")
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
  t.ok(fs.isdir(tmp .. "/cache-r1/tasks"), "evaluations ran on the ssh worker")
  sshd.stop()
end)

t.test("faults: a run with no worker left stops (exit 1, failed); resume continues once workers are back", function()
  local w = tmp .. "/resume-workers.lua"
  fs.write(w, string.format("return { { kind = 'local', command = '/bin/false', cache = %q } }\n", tmp .. "/cache-res"))
  local dir = tmp .. "/run-resume"
  local r = assert(proc.run { argv = { MK, "run", "parallel", TASK, "--model", "scripted", "--set", "trajectories=2",
    "--set", "iters=2", "--set", "tune=false", "--run-dir", dir, "--workers", w, "--quiet" }, timeout = 300 })
  t.eq(r.code, 1, r.stderr)
  t.contains(r.stderr, "no worker left")
  t.ok(not r.stderr:find("stack traceback", 1, true), "one clear message, no traceback: " .. r.stderr)
  t.eq(cjson.decode(fs.read(dir .. "/run.json")).status, "failed")
  -- the workers are back (same file, now a real worker): resume finishes the run
  fs.write(w, string.format("return { { kind = 'local', name = 'res', command = %q, cache = %q } }\n", MK,
    tmp .. "/cache-res"))
  r = assert(proc.run { argv = { MK, "resume", dir, "--quiet" }, timeout = 590 })
  t.eq(r.code, 0, r.stderr)
  t.eq(cjson.decode(fs.read(dir .. "/summary.json")).status, "done")
end)

t.test("workers: nothing left behind", function()
  local r = proc.run { argv = { "sh", "-c", "pgrep -f 'worker --slots 1 --name (a|b|l|s[0-9]|r1)' || true" } }
  t.eq(r.stdout, "", "no worker process survives")
  fs.rm_rf(tmp)
end)

return t.run()

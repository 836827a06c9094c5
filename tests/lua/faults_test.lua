-- Faults that would cost money or record something false (issue 18), each
-- provoked for real: signals in the middle of a run, a SIGKILLed engine's
-- leftovers, a budget across kill + resume, a full disk (a small tmpfs), an
-- endless task.lua, invalid UTF-8 from a candidate, corrupt inputs.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local task = require "mk.services.task"
local cjson = require "cjson"

local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
local TASK = fs.realpath("tests/tasks/rmsnorm_small")
local tmp = fs.tmpdir("mk-faults-test")

local sh = t.sh

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- Run `mkengine ARGS` in the background; returns pid and a function that
-- waits for its end and returns exit code, output.
local function spawn(args, tmpdir, name)
  local base = tmp .. "/" .. name
  local cmd = { MK }
  for _, a in ipairs(args) do cmd[#cmd + 1] = q(a) end
  local script = string.format("TMPDIR=%s; export TMPDIR; %s > %s.out 2>&1 & echo $! > %s.pid; wait $!; echo $? > %s.rc",
    q(tmpdir), table.concat(cmd, " "), q(base), q(base), q(base))
  os.execute("sh -c " .. q(script) .. " &")
  local pid
  for _ = 1, 500 do
    pid = tonumber((fs.read(base .. ".pid") or ""):match("%d+"))
    if pid then break end
    task.sleep(0.01)
  end
  return assert(pid, "no pid"), function(limit)
    local t0 = task.now()
    while not fs.exists(base .. ".rc") or not (fs.read(base .. ".rc") or ""):match("%d") do
      if task.now() - t0 > (limit or 600) then error("engine " .. name .. " did not end") end
      task.sleep(0.05)
    end
    return tonumber(fs.read(base .. ".rc"):match("%d+")), fs.read(base .. ".out") or ""
  end
end

local function wait_for_nodes(dir, n, limit)
  local t0 = task.now()
  while task.now() - t0 < (limit or 300) do
    local _, c = (fs.read(dir .. "/events.jsonl") or ""):gsub('"type":"node"', "")
    if c >= n then return c end
    task.sleep(0.1)
  end
  error("no " .. n .. " nodes in " .. dir)
end

local function read_json(path) return cjson.decode((assert(fs.read(path), "missing " .. path))) end

local function entries(dir)
  local out = {}
  for _, n in ipairs(fs.list(dir) or {}) do out[#out + 1] = n end
  table.sort(out)
  return out
end

t.test("SIGTERM and SIGINT mid-run: run.json says stopped, nothing left in TMPDIR, exit 128 + signal", function()
  for _, sig in ipairs { { "TERM", 143 }, { "INT", 130 } } do
    local tdir = tmp .. "/tmp-" .. sig[1]
    assert(fs.mkdirs(tdir))
    local dir = tmp .. "/sig-" .. sig[1]
    local pid, wait = spawn({ "run", "parallel", TASK, "--model", "scripted", "--set", "trajectories=2",
      "--set", "iters=2", "--set", "tune=false", "--set", "tests_agent=false", "--run-dir", dir, "--quiet" },
      tdir, "sig" .. sig[1])
    wait_for_nodes(dir, 2)
    t.ok(#entries(tdir) > 0, "the evaluator works in TMPDIR")
    os.execute("kill -" .. sig[1] .. " " .. pid)
    local code, out = wait(120)
    t.eq(code, sig[2], out)
    t.contains(out, "stopped by SIG" .. sig[1])
    t.eq(read_json(dir .. "/run.json").status, "stopped")
    t.same(entries(tdir), {}, "TMPDIR is empty after SIG" .. sig[1])
    t.contains(fs.read(dir .. "/events.jsonl"), '"type":"stopped"')
    -- and the run resumes from there
    local rc, rout = sh(string.format("TMPDIR=%s %s resume %s --quiet", q(tdir), q(MK), q(dir)))
    t.ok(rc == 0 or rc == 1, rout)
    local st = read_json(dir .. "/run.json").status
    t.ok(st == "done" or st == "no_correct_kernel", st)
    t.same(entries(tdir), {})
  end
end)

t.test("directories a SIGKILLed engine left are swept at the next start; others are never touched", function()
  local tdir = tmp .. "/tmp-kill"
  assert(fs.mkdirs(tdir))
  local dir = tmp .. "/killed"
  local pid, wait = spawn({ "run", "parallel", TASK, "--model", "scripted", "--set", "trajectories=2",
    "--set", "tune=false", "--set", "tests_agent=false", "--run-dir", dir, "--quiet" }, tdir, "kill9")
  wait_for_nodes(dir, 2)
  os.execute("kill -9 " .. pid)
  wait(60)
  local left = entries(tdir)
  t.eq(#left, 1, "the killed engine left its work directory")
  t.matches(left[1], "^mkeval%-")
  -- someone else's directory with a similar name, and one held by a live engine
  assert(fs.mkdirs(tdir .. "/mkeval-not-ours"))
  local workdir = require "mk.services.workdir"
  local old = os.getenv("TMPDIR")
  local live, live_lock = workdir.new("mkeval-live")
  t.ok(live and old == os.getenv("TMPDIR"))
  local live_in = tdir .. "/mkeval-live-held"
  assert(fs.rename(live, live_in))
  local code, out = sh(string.format("TMPDIR=%s %s eval %s %s/reference.c --no-tune --no-profile --min-time 0.01",
    q(tdir), q(MK), q(TASK), q(TASK)))
  t.eq(code, 0, out)
  t.same(entries(tdir), { "mkeval-live-held", "mkeval-not-ours" })
  workdir.release(live_in, live_lock)
end)

-- tokens of every model call the run's event log records (all sessions)
local function ledger_tokens(dir)
  local n = 0
  for line in (fs.read(dir .. "/events.jsonl") or ""):gmatch("[^\n]+") do
    local e = cjson.decode(line)
    if e.type == "llm" then n = n + e.input_tokens + e.output_tokens end
  end
  return n
end

t.test("a budget holds across kill + resume: earlier sessions' spending counts, the summary sums them", function()
  local dir = tmp .. "/budget"
  local LIMIT = 12000
  local args = { "run", "parallel", TASK, "--model", "scripted", "--set", "trajectories=1", "--set", "iters=12",
    "--set", "tune=false", "--set", "tests_agent=false", "--budget", "tokens=" .. LIMIT, "--run-dir", dir, "--quiet" }
  local pid, wait = spawn(args, tmp, "budget")
  -- kill -9 once most of the budget is spent: a resume that forgot it would spend a whole budget again
  local t0 = task.now()
  while ledger_tokens(dir) < 0.75 * LIMIT do
    if task.now() - t0 > 300 then error("the run did not spend its budget") end
    task.sleep(0.05)
  end
  os.execute("kill -9 " .. pid)
  wait(60)
  local before = ledger_tokens(dir)
  local code, out = sh(string.format("%s resume %s --quiet", q(MK), q(dir)))
  t.ok(code == 0 or code == 1, out)
  local s1 = read_json(dir .. "/summary.json")
  local total = ledger_tokens(dir)
  -- at most the budget plus the step in flight at the kill (recomputed) and the one that crossed the limit
  t.ok(total <= LIMIT + 5500, string.format("spent %d tokens in all (%d before the kill) for a %d budget",
    total, before, LIMIT))
  t.contains(tostring(s1.budget_exhausted), "tokens")
  -- the summary counts every session, not only the last
  t.eq(s1.cost.input_tokens + s1.cost.output_tokens, total)
  t.ok(s1.cost.device_s > 0)
  -- resuming the finished run spends nothing and forgets nothing
  code, out = sh(string.format("%s resume %s --quiet", q(MK), q(dir)))
  t.ok(code == 0 or code == 1, out)
  local s2 = read_json(dir .. "/summary.json")
  t.eq(ledger_tokens(dir), total)
  t.eq(s2.cost.input_tokens, s1.cost.input_tokens)
  t.eq(s2.cost.output_tokens, s1.cost.output_tokens)
  t.near(s2.cost.device_s, s1.cost.device_s, 1e-6)
  t.ok(s2.cost.wall_s >= s1.cost.wall_s)
  t.eq(s2.cost.calls, s1.cost.calls)
end)

local code = t.run()
fs.rm_rf(tmp)
return code

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
local tmp = t.tmpdir("mk-faults-test")

local sh = t.sh

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- Run `mkengine ARGS` in the background; returns pid and a function that
-- waits for its end and returns exit code, output.
-- `env` (optional) is {NAME = value} for the engine's environment.
local function spawn(args, tmpdir, name, env)
  local base = tmp .. "/" .. name
  local cmd = { MK }
  for _, a in ipairs(args) do cmd[#cmd + 1] = q(a) end
  local exports = ""
  for k, v in pairs(env or {}) do exports = exports .. string.format("%s=%s; export %s; ", k, q(v), k) end
  local script = string.format("%sTMPDIR=%s; export TMPDIR; %s > %s.out 2>&1 & echo $! > %s.pid; wait $!; echo $? > %s.rc",
    exports, q(tmpdir), table.concat(cmd, " "), q(base), q(base), q(base))
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

t.test("SIGTERM, SIGINT and SIGHUP mid-run: run.json says stopped, nothing left in TMPDIR, exit 128 + signal", function()
  for _, sig in ipairs { { "TERM", 143 }, { "INT", 130 }, { "HUP", 129 } } do
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

t.test("a run started with every run option set, SIGKILLed mid-run, resumes with those options", function()
  local tdir, xdg = tmp .. "/tmp-opts", tmp .. "/xdg-opts"
  assert(fs.mkdirs(tdir))
  local dir, workers = tmp .. "/opts", tmp .. "/opts-workers.lua"
  fs.write(workers, string.format("return { { kind = 'local', name = 'opts', slots = 1, command = %q, cache = %q } }\n",
    MK, tmp .. "/cache-opts"))
  local env = { XDG_CACHE_HOME = xdg } -- the --llm-cache rw entries
  local pid, wait = spawn({ "run", "parallel", TASK, "--model", "scripted", "--set", "trajectories=2", "--set", "iters=2",
    "--set", "tune=false", "--set", "tests_agent=false", "--jobs", "1", "--budget", "tokens=900000", "--seed", "7",
    "--llm-cache", "rw", "--timeout", "60", "--workers", workers, "--ui", "--port", "0", "--run-dir", dir, "--quiet" },
    tdir, "opts", env)
  wait_for_nodes(dir, 3)
  os.execute("kill -9 " .. pid)
  wait(60)
  local before = {}
  for id in fs.read(dir .. "/events.jsonl"):gmatch('"type":"node"[^\n]-"id":"(n%d+)"') do before[id] = true end
  local rc, out = sh(string.format("XDG_CACHE_HOME=%s TMPDIR=%s %s resume %s --ui --port 0 --quiet", q(xdg), q(tdir),
    q(MK), q(dir)))
  t.ok(rc == 0 or rc == 1, out)
  t.ok(not out:find("must be an integer", 1, true) and not out:find("traceback", 1, true), out)
  local s = read_json(dir .. "/summary.json")
  t.ok(s.status == "done" or s.status == "no_correct_kernel", s.status)
  t.eq(math.tointeger(s.seed), 7)
  t.ok(s.cost.input_tokens + s.cost.output_tokens <= 900000, "the budget holds across the resume")
  t.contains(out, "viewer", "--ui served the resumed run")
  t.ok(fs.isdir(tmp .. "/cache-opts/tasks"), "the resumed run evaluated on its worker")
  t.ok(#entries(xdg .. "/mkengine/llm") > 0, "--llm-cache rw recorded replies")
  local g = require("mk.search.graph").open(dir .. "/graph.git", { readonly = true })
  local keys = {}
  for _, n in ipairs(g:nodes()) do
    t.ok(not keys[n.key], "step " .. tostring(n.key) .. " computed twice")
    keys[n.key] = true
  end
  for id in pairs(before) do t.ok(g:get(id), "node " .. id .. " lost") end
  t.same(entries(tdir), {}, "TMPDIR is empty: the killed engine's work and ssh control directories were swept")
end)

t.test("resume checks every option run.json stores: a bad one is an input error naming it", function()
  local dir = tmp .. "/opts"
  local original = assert(fs.read(dir .. "/run.json"))
  for field, bad in pairs { jobs = 1.5, seed = "seven", llm_cache = "rwx", timeout = -1, set = "x=1" } do
    local copy = cjson.decode(original)
    copy.options[field] = bad
    fs.write(dir .. "/run.json", cjson.encode(copy), { atomic = true })
    local rc, out = sh(string.format("TMPDIR=%s %s resume %s --quiet", q(tmp), q(MK), q(dir)))
    t.eq(rc, 2, out)
    t.contains(out, "run.json: option '" .. field .. "' must be")
  end
  fs.write(dir .. "/run.json", original, { atomic = true })
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

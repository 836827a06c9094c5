-- The Pallas target's harness processes (targets/pallas/sessions.lua), on
-- real JAX in TPU interpret mode on the CPU: through mk.eval, each
-- candidate's compile, run, bench and profile run in order in one process of
-- its own, its checks in another, and a candidate that changes JAX's
-- process-wide state cannot reach the next one.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local pallas = require("mk.eval.targets").get("pallas")

local TINY = "tests/python/tasks/tiny_rmsnorm"
local CANDS = "tests/python/candidates"

local function read(p) return assert(fs.read(p)) end

-- An evaluator of the tiny task with every harness answer recorded.
local seen
local function setup()
  seen = {}
  pallas.env = { MK_PALLAS_POISON_MB = "1", JAX_PLATFORMS = "cpu" }
  pallas.on_result = function(sub, v)
    seen[#seen + 1] = { sub = sub, pid = v.process, n = v.session_step, status = v.status }
  end
  local task = assert(require("mk.eval.targets").load_task(TINY))
  task.seeds, task.heldout_seeds = { 0 }, {}
  task.plain_ok = true -- its candidates are plain JAX (pallas.not_a_kernel)
  local ev = require("mk.eval").new(task, { jobs = 1, bench = { min_reps = 3, max_reps = 3, warmup = 1 } })
  ev:freeze()
  ev:baseline()
  return ev
end

local function teardown(ev)
  ev:close()
  pallas.env, pallas.on_result = nil, nil
end

-- Evaluate a candidate file: its result, and the harness answers of its steps.
local function evaluate(ev, name)
  seen = {}
  local r = ev:evaluate(read(CANDS .. "/" .. name), { tune = false, profile = true })
  return r, seen
end

-- "compile#1 run#2 ..." (the step's number in its process), and the pids
-- of the candidate's steps and of its checks.
local function shape(steps)
  local s, dev, chk = {}, {}, {}
  for _, x in ipairs(steps) do
    s[#s + 1] = x.sub .. "#" .. tostring(math.tointeger(x.n) or x.n)
    local set = x.sub == "check" and chk or dev
    set[tostring(x.pid)] = true
  end
  local function keys(set)
    local out = {}
    for k in pairs(set) do out[#out + 1] = k end
    table.sort(out)
    return out
  end
  return table.concat(s, " "), keys(dev), keys(chk)
end

t.test("a candidate's compile, run, bench, profile run in order in one process; its checks in another", function()
  local ev = setup()
  local r, steps = evaluate(ev, "good.py")
  t.eq(r.status, "ok", r.message)
  local order, dev, chk = shape(steps)
  t.eq(order, "compile#1 run#2 check#1 bench#3 check#2 profile#4")
  t.eq(#dev, 1, "one process for the candidate's steps")
  t.eq(#chk, 1, "one process for its checks")
  t.ok(dev[1] ~= chk[1], "the checker is not the candidate's process")
  t.eq(pallas.processes().sessions, 0, "the candidate's processes end with its evaluation")
  teardown(ev)
end)

t.test("a candidate that turns on JAX's 64-bit mode does not reach the next one", function()
  local ev = setup()
  local r1, s1 = evaluate(ev, "leak_x64.py")
  t.eq(r1.status, "ok", r1.message)
  local r2, s2 = evaluate(ev, "probe_x64.py")
  -- probe_x64 adds 1 to its outputs when it finds 64-bit mode on at import
  t.eq(r2.status, "ok", "the probe after leak_x64: " .. tostring(r2.message))
  local _, dev1, chk1 = shape(s1)
  local _, dev2, chk2 = shape(s2)
  t.eq(#dev1, 1)
  t.eq(#dev2, 1)
  t.ok(dev1[1] ~= dev2[1], "each candidate has a process of its own")
  t.ok(chk1[1] ~= chk2[1] and chk2[1] ~= dev1[1], "and so do their checks")
  teardown(ev)
end)

t.test("over a series of candidates no process serves two, and none outlives its candidate", function()
  -- what keeps memory from building up over a run: a candidate's processes
  -- end with its evaluation, and only pre-started ones (that ran nothing)
  -- wait for the next (bench/pallas_memory_bench.lua measures their memory)
  local ev = setup()
  local owner = {} -- harness process id -> the candidate whose steps it ran
  for i, name in ipairs { "good.py", "wrong_eps.py", "leak_x64.py", "zeros.py", "probe_x64.py" } do
    local r, steps = evaluate(ev, name)
    t.ok(r.status == "ok" or r.status == "incorrect", name .. ": " .. tostring(r.message))
    t.ok(#steps >= 2, name)
    for _, x in ipairs(steps) do
      t.ok(owner[x.pid] == nil or owner[x.pid] == i, x.sub .. " of " .. name .. " ran in a process of candidate "
        .. tostring(owner[x.pid]))
      owner[x.pid] = i
    end
    local alive = pallas.processes()
    t.eq(alive.sessions, 0, "no candidate's process is kept after " .. name)
    t.ok(alive.idle <= 2 * pallas.pool_max_idle, "pre-started processes stay bounded: " .. alive.idle)
  end
  teardown(ev)
  t.eq(pallas.processes().idle + pallas.processes().sessions, 0, "none left once the evaluator is closed")
end)

t.test("with no pool every step is a fresh process, verdicts unchanged", function()
  local keep = pallas.pool_size
  pallas.pool_size = 0
  local ev = setup()
  local r, steps = evaluate(ev, "probe_x64.py")
  pallas.pool_size = keep
  t.eq(r.status, "ok", r.message)
  local pids = {}
  for _, x in ipairs(steps) do pids[tostring(x.pid)] = true; t.eq(x.n, nil, x.sub .. " ran in no session") end
  local n = 0
  for _ in pairs(pids) do n = n + 1 end
  t.eq(n, #steps, "one process per step")
  local bad = ev:evaluate(read(CANDS .. "/wrong_eps.py"), { tune = false })
  t.eq(bad.status, "incorrect")
  teardown(ev)
end)

return t.run()

-- mkengine side of bench/peers: N iterations of the engine's node loop
-- against the loopback model at URL, K in flight. One iteration: a prompt
-- holding the parent's program (the best node so far), one chat call (full
-- rewrite), the reply's code block extracted (agents.common.extract_code),
-- the candidate written, the evaluator run as a process, a node committed to
-- the git graph with its score. EVAL = python: `python3 evaluate.py
-- --program_path FILE` (the evaluator ShinkaEvolve runs, as a process);
-- EVAL = worker: one long-lived `python3 evaluate.py --serve` per task,
-- sent the candidate's path, answering evaluate()'s JSON (OpenEvolve's
-- arrangement: its evaluate() runs inside a worker process that stays up);
-- EVAL = true: /bin/true (the engine's own cost and one process start).
--   MK_PEERS_KEY=k mkengine script bench/peers/mkengine_loop.lua N K URL [EVAL=python] [DIR]
local fs = require "mk.fs"
local llm = require "mk.services.llm"
local proc = require "mk.proc"
local task = require "mk.services.task"
local graph = require "mk.search.graph"
local common = require "agents.common"
local json = require "cjson"

local N = math.tointeger(tonumber(arg[1])) or error("usage: mkengine_loop.lua N K URL [python|worker|true] [DIR]", 0)
local K = math.tointeger(tonumber(arg[2])) or 2
local URL = arg[3] or error("usage: mkengine_loop.lua N K URL [python|worker|true] [DIR]", 0)
local EVAL = arg[4] or "python"
local HERE = fs.realpath((arg[0]:match("^(.*)/") or "."))
local PY = os.getenv("MK_PEERS_PYTHON") or "python3"

local c = llm.client { provider = "openai", model = "loopback", api_key_env = "MK_PEERS_KEY", base_url = URL,
  max_concurrency = K, max_retries = 0, timeout = 30 }
local dir = arg[5] or fs.tmpdir("mk-peers")
local g = assert(graph.open(dir .. "/graph.git", { create = true }))
local best = assert(g:add { parents = {}, kind = "root", files = { ["program.py"] = assert(fs.read(HERE .. "/initial.py")) },
  status = "ok", metrics = { score = 3 } })
local best_code = fs.read(HERE .. "/initial.py")

local workers = {} -- EVAL = worker: task number -> its evaluator process

local function evaluate(path, w)
  if EVAL == "worker" then
    local ev = workers[w]
    if not ev then
      ev = assert(proc.spawn { argv = { PY, HERE .. "/evaluate.py", "--serve" } })
      workers[w] = ev
    end
    assert(ev:write(path .. "\n"))
    local line = ev:read_line() or error("evaluator worker ended: " .. ev:stderr(), 0)
    return json.decode(line).error == nil
  end
  local argv = EVAL == "true" and { "/bin/true" } or { PY, HERE .. "/evaluate.py", "--program_path", path }
  local r, err = proc.run { argv = argv, timeout = 60 }
  if not r then error("evaluator: " .. tostring(err and err.message), 0) end
  return r.code == 0
end

local started, done = 0, 0
local function worker(w)
  while started < N do
    started = started + 1
    local i = started
    local parent, code = best, best_code
    local prompt = "Rewrite this program to score higher; answer with the whole program.\n```python\n" .. code .. "```\n"
    local reply, cerr = c:chat { messages = { { role = "user", content = prompt } }, max_tokens = 4096 }
    if not reply then error("chat: " .. tostring(cerr and cerr.message), 0) end
    local program = common.extract_code(reply.text, "python", "solve") or error("no code in reply " .. i, 0)
    local path = string.format("%s/cand-%d.py", dir, w)
    assert(fs.write(path, program))
    local ok = evaluate(path, w)
    local score = tonumber(program:match("return x %* (%d+)")) or 0
    local node = assert(g:add { parents = { parent.id }, kind = "implement", files = { ["program.py"] = program },
      plan = "rewrite " .. i, status = ok and "ok" or "crash", metrics = { score = score } })
    if ok and score > (best.metrics.score or 0) then best, best_code = node, program end
    done = done + 1
  end
end

local hs = {}
for w = 1, K do hs[w] = task.spawn(worker, w) end
task.gather(hs)
-- the evaluator processes are waited for, so their CPU is counted (rusage)
task.gather((function()
  local ws = {}
  for _, ev in pairs(workers) do
    ev:close()
    ws[#ws + 1] = task.spawn(function() return ev:wait() end)
  end
  return ws
end)())
print(string.format("mkengine: %d iterations, %d nodes, best score %s", done, g:len(), tostring(best.metrics.score)))
g:close()
if not arg[5] then fs.rm_rf(dir) end

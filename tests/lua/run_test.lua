-- `mkengine run` end to end with the real evaluator (C target): on the
-- offline scripted model, over real HTTP against a loopback server that
-- replies like a model, with a human-decisions file, with a user strategy,
-- and its exit codes for bad input.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local proc = require "mk.proc"
local task = require "mk.services.task"
local cjson = require "cjson"

local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
local TASK = "tests/tasks/rmsnorm_small"
local tmp = t.tmpdir("mk-run-test")

-- The engine's temporary directories (evaluators of runs killed below
-- included) go under tmp, which t.run removes.
local function mk(args, env)
  local argv = { MK }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  env = env or {}
  env.TMPDIR = env.TMPDIR or tmp
  local r = assert(proc.run { argv = argv, timeout = 900, env = env, max_output = 4 * 1024 * 1024 })
  return r.code, r.stdout .. r.stderr
end

local function summary(dir) return cjson.decode(assert(fs.read(dir .. "/summary.json"))) end

local function all_files(dir, out)
  out = out or {}
  for _, name in ipairs(fs.list(dir) or {}) do
    local p = dir .. "/" .. name
    local st = fs.stat(p)
    if st and st.type == "dir" then all_files(p, out) elseif st and st.type == "file" then out[#out + 1] = p end
  end
  return out
end

t.test("run auto on the scripted model finds a correct kernel, checked on held-out inputs", function()
  local dir = tmp .. "/auto"
  local code, out = mk { "run", "auto", TASK, "--model", "scripted", "--seed", "3", "--set", "iters=3",
    "--set", "tune=false", "--run-dir", dir, "--quiet" }
  local s = summary(dir)
  t.eq(s.model_label:find("scripted model", 1, true) ~= nil, true, "summary labels the scripted model")
  if s.best ~= cjson.null then
    t.eq(code, 0, out)
    t.ok(s.best.speedup > 0)
    t.ok(fs.exists(dir .. "/best/kernel.c"), "best/ holds the kernel")
    local ev = fs.read(dir .. "/events.jsonl")
    t.contains(ev, '"type":"heldout"')
  else
    t.eq(code, 1, "no correct kernel means exit 1")
  end
  t.ok(s.nodes >= 2)
  t.ok(fs.isdir(dir .. "/graph.git"))
  local suite = cjson.decode((assert(fs.read(dir .. "/suite.json"), "suite.json names the frozen suite")))
  t.ok(fs.exists(suite.path .. "/manifest.sha256"), "the frozen suite exists in the cache")
end)

t.test("beam on the scripted model ends with a kernel faster than the baseline", function()
  local dir = tmp .. "/beam"
  local code, out = mk { "run", "beam", TASK, "--model", "scripted", "--seed", "2", "--set", "width=2",
    "--set", "depth=2", "--set", "branches=2", "--set", "inner_iters=2", "--set", "tune=false",
    "--run-dir", dir, "--quiet" }
  t.eq(code, 0, out)
  local s = summary(dir)
  t.eq(s.status, "done")
  t.ok(s.best.speedup > 1.0, "best speedup " .. tostring(s.best.speedup))
  -- the reported figure is the reported kernel's as every reader pools it:
  -- its latest node's commit and the measure events after it (settling the lead)
  local g = assert(require("mk.search.graph").open(dir .. "/graph.git", { readonly = true }))
  local pool, best = require("mk.search.figure").of_run(dir, g.list, { status = "done" })
  t.eq(best.id, s.best.node)
  t.near(pool:of(best).latency_s, s.best.latency_s, 1e-12)
  t.eq(select(2, pool:of(best)), nil, "the summary names the node holding the figure")
  -- the scripted model always answers a fix with code (its bank's fix)
  for _, m in ipairs(g:nodes()) do
    if m.kind == "fix" then t.ok(not (m.meta and m.meta.no_code), m.id .. " has code") end
  end
  g:close()
end)

t.test("zeroshot, greedy and evolve run end to end on the real evaluator", function()
  for _, case in ipairs({
    { "zeroshot", "n=3" }, { "greedy", "steps=2" }, { "evolve", "population=2", "generations=1" },
  }) do
    local dir = tmp .. "/" .. case[1]
    local args = { "run", case[1], TASK, "--model", "scripted", "--seed", "5", "--set", "tune=false",
      "--set", "tests_agent=false", "--run-dir", dir, "--quiet" }
    for i = 2, #case do
      args[#args + 1] = "--set"
      args[#args + 1] = case[i]
    end
    local code, out = mk(args)
    t.ok(code == 0 or code == 1, case[1] .. ": " .. out)
    local s = summary(dir)
    t.eq(s.strategy, case[1])
    t.eq(code == 0, type(s.best) == "table", case[1] .. " exit code matches the verdict")
    t.ok(s.nodes >= 3, case[1] .. " made nodes")
  end
end)

t.test("--budget stops a run cleanly with what it has", function()
  local dir = tmp .. "/budget"
  local code, out = mk { "run", "parallel", TASK, "--model", "scripted", "--budget", "tokens=3000",
    "--set", "tests_agent=false", "--set", "tune=false", "--run-dir", dir, "--quiet" }
  t.ok(code == 0 or code == 1, out)
  local s = summary(dir)
  t.contains(tostring(s.budget_exhausted), "tokens")
  t.ok(s.nodes <= 4, "a 3,000-token budget allows only a few nodes, got " .. s.nodes)
  t.ok(s.cost.input_tokens + s.cost.output_tokens < 6000, "spending stops soon after the limit")
  code, out = mk { "run", "parallel", TASK, "--model", "scripted", "--budget", "tokens=lots", "--root", tmp .. "/bad" }
  t.eq(code, 2)
  t.contains(out, "budget")
end)

t.test("the tutorial strategy (a user file) runs and finds a correct kernel", function()
  local dir = tmp .. "/tutorial"
  local code, out = mk { "run", "examples/strategies/sample_then_refine.lua", TASK, "--model", "scripted",
    "--set", "samples=3", "--set", "rounds=1", "--set", "tune=false", "--run-dir", dir, "--quiet" }
  t.eq(code, 0, out)
  t.ok(summary(dir).nodes >= 4)
end)

t.test("hitl follows a decisions file: reject a plan, edit code, accept", function()
  local dir = tmp .. "/hitl"
  local good = "examples/suites/cpu/rmsnorm/scripted/stream_store.c"
  local dec = tmp .. "/decisions.txt"
  fs.write(dec, "reject   # first plan\naccept\nedit " .. fs.realpath(good) .. "\n")
  local code, out = mk { "run", "hitl", TASK, "--model", "scripted", "--set", "iters=2", "--set",
    "decisions=" .. dec, "--run-dir", dir, "--quiet" }
  t.eq(code, 0, out)
  local s = summary(dir)
  t.eq(s.nodes, 2) -- the reference and the edited kernel
  t.eq(fs.read(dir .. "/best/kernel.c"), fs.read(good))
end)

-- Start the loopback model-like server (a labelled test double) on `port`
-- (nil: a free one); returns its port and pid.
local function model_server(name, port)
  local pf = tmp .. "/port-" .. name
  local kernel = fs.realpath("examples/suites/cpu/rmsnorm/scripted/stream_store.c")
  local f = io.open("/proc/self/stat")
  local pid = f:read("n")
  f:close()
  os.execute(string.format("python3 tests/fake_llm/model_server.py --kernel %s --port %d --port-file %s --watch-pid %d "
    .. ">/dev/null 2>&1 &", kernel, port or 0, pf, pid))
  local t0 = task.now()
  while not fs.exists(pf) and task.now() - t0 < 30 do task.sleep(0.05) end
  local p, spid = assert(fs.read(pf), "the model server did not start"):match("^(%d+) (%d+)")
  return p, spid
end

t.test("the same loop runs over real HTTP against a loopback model-like server", function()
  local port, spid = model_server("http")
  local key = "sk-test-model-456"
  local dir = tmp .. "/http"
  local env = { OPENAI_BASE_URL = "http://127.0.0.1:" .. port .. "/v1", OPENAI_API_KEY = key }
  local code, out = mk({ "run", "auto", TASK, "--model", "openai:fake-model", "--set", "iters=1", "--run-dir", dir,
    "--llm-cache", "off", "--quiet" }, env)
  t.eq(code, 0, out)
  local s = summary(dir)
  t.eq(s.model, "openai:fake-model")
  t.eq(s.cost.cached_calls, 0)
  t.ok(s.cost.input_tokens > 0 and s.cost.output_tokens > 0, "token counts come from the wire")
  for _, p in ipairs(all_files(dir)) do
    t.ok(not (fs.read(p) or ""):find(key, 1, true), "API key written to " .. p)
  end
  -- recorded, then the same run again: the prompts made before any
  -- measurement (tests, plan) are the same, so their answers are replays,
  -- and the run says so
  env.XDG_CACHE_HOME = tmp .. "/xdg-http"
  for i = 1, 2 do
    code, out = mk({ "run", "auto", TASK, "--model", "openai:fake-model", "--set", "iters=1", "--run-dir",
      dir .. "-cache" .. i, "--llm-cache", "rw" }, env)
    t.eq(code, 0, out)
  end
  os.execute("kill " .. spid)
  s = summary(dir .. "-cache2")
  t.ok(s.cost.cached_calls >= 2 and s.cost.cached_calls <= s.cost.calls, "the second run's replays are counted")
  t.contains(out, string.format("%d of %d model calls were answers replayed from the LLM cache", s.cost.cached_calls,
    s.cost.calls))
  t.eq(summary(dir .. "-cache1").cost.cached_calls, 0)
  for _, p in ipairs(all_files(env.XDG_CACHE_HOME)) do
    t.ok(not (fs.read(p) or ""):find(key, 1, true), "API key written to " .. p)
  end
end)

t.test("a run whose model endpoint is down stops saying so; resume continues it once the endpoint is back", function()
  local port, spid = model_server("down")
  os.execute("kill " .. spid) -- a port that was just free: now closed
  local t0 = task.now()
  while task.now() - t0 < 10 and proc.run({ argv = { "kill", "-0", spid } }).code == 0 do task.sleep(0.05) end
  local cfg = tmp .. "/few-retries.lua"
  fs.write(cfg, "return { defaults = { max_retries = 2, backoff_base = 0.01, backoff_max = 0.05 } }\n")
  local dir = tmp .. "/down"
  local env = { OPENAI_BASE_URL = "http://127.0.0.1:" .. port .. "/v1", OPENAI_API_KEY = "sk-test-model-456" }
  local args = { "run", "auto", TASK, "--model", "openai:fake-model", "--set", "iters=1", "--llm-config", cfg,
    "--llm-cache", "off", "--run-dir", dir }
  local code, out = mk(args, env)
  t.eq(code, 1, out)
  t.contains(out, "the model endpoint " .. env.OPENAI_BASE_URL .. " failed (network)")
  t.contains(out, "mkengine resume " .. dir)
  t.ok(not out:find("no correct kernel", 1, true), "not reported as a search without result: " .. out)
  t.ok(not out:find("traceback", 1, true), out)
  local s = summary(dir)
  t.eq(s.status, "model_unavailable")
  t.eq(s.endpoint, env.OPENAI_BASE_URL)
  t.ok((s.llm_failures.network or 0) >= 1, "failures counted by kind")
  t.eq(cjson.decode(fs.read(dir .. "/run.json")).status, "model_unavailable")
  -- the endpoint is back on the same port: resume finishes the run
  local _, spid2 = model_server("back", tonumber(port))
  code, out = mk({ "resume", dir }, env)
  os.execute("kill " .. spid2)
  t.eq(code, 0, out)
  s = summary(dir)
  t.eq(s.status, "done")
  t.ok((s.llm_failures.network or 0) >= 1, "the first session's failures are still counted")
end)

t.test("a run killed with SIGKILL resumes without recomputing or losing nodes", function()
  local dir = tmp .. "/resume"
  local args = { MK, "run", "parallel", TASK, "--model", "scripted", "--set", "trajectories=2", "--set", "iters=2",
    "--set", "tune=false", "--run-dir", dir, "--quiet" }
  local h = task.spawn(function() return proc.run { argv = args, timeout = 900, env = { TMPDIR = tmp } } end)
  -- wait until a few candidate nodes are committed, then kill -9
  local t0 = task.now()
  while task.now() - t0 < 300 do
    local ev = fs.read(dir .. "/events.jsonl") or ""
    local _, n = ev:gsub('"type":"node"', "")
    if n >= 3 then break end
    task.sleep(0.2)
  end
  os.execute("pkill -9 -f -- '--run-dir " .. dir .. "'")
  task.try_await(h)
  local before = fs.read(dir .. "/events.jsonl")
  local ids_before = {}
  for id in before:gmatch('"type":"node"[^\n]-"id":"(n%d+)"') do ids_before[id] = true end
  local code, out = mk { "resume", dir, "--quiet" }
  t.eq(code == 0 or code == 1, true, out)
  local s = summary(dir)
  t.eq(s.status == "done" or s.status == "no_correct_kernel", true)
  -- keys are unique: nothing recomputed twice
  local keys = {}
  local g = require("mk.search.graph").open(dir .. "/graph.git", { readonly = true })
  for _, n in ipairs(g:nodes()) do
    t.ok(not keys[n.key], "duplicate key " .. tostring(n.key))
    keys[n.key] = true
  end
  for id in pairs(ids_before) do t.ok(g:get(id), "node " .. id .. " lost") end
end)

t.test("bad input: unknown strategy, missing task and bad option exit 2; no model is explained", function()
  local code, out = mk { "run", "nosuch", TASK, "--model", "scripted", "--root", tmp .. "/bad" }
  t.eq(code, 2); t.contains(out, "unknown strategy 'nosuch'")
  code, out = mk { "run", "beam", tmp .. "/no-task", "--model", "scripted", "--root", tmp .. "/bad" }
  t.eq(code, 2); t.contains(out, "task directory not found")
  code, out = mk { "run", "beam", TASK, "--model", "scripted", "--set", "widht=2", "--root", tmp .. "/bad" }
  t.eq(code, 2); t.contains(out, "unknown option 'widht'")
  code, out = mk { "run", "beam", TASK, "--root", tmp .. "/bad" }
  t.eq(code, 2); t.contains(out, "--model scripted")
  code, out = mk { "run", "beam" }
  t.eq(code, 2); t.contains(out, "usage: mkengine run")
end)

t.test("a Lua error in a user strategy exits 1 with file:line and a traceback", function()
  local path = tmp .. "/broken_strategy.lua"
  fs.write(path, "return { defaults = {}, run = function(ctx, opts)\n  local x = nil\n  return x.field\nend }\n")
  local code, out = mk { "run", path, TASK, "--model", "scripted", "--set", "tests_agent=false", "--root", tmp .. "/bad" }
  t.eq(code, 1)
  t.contains(out, "broken_strategy.lua:3:")
  t.contains(out, "stack traceback")
end)

t.test("a strategy returning a non-node: a warning with its file:line, and the correct kernel it found is kept", function()
  local path = tmp .. "/returns_number.lua"
  fs.write(path, "return { defaults = {}, run = function(ctx, opts)\n  ctx:auto(ctx.graph:root())\n  return 42\nend }\n")
  local dir = tmp .. "/returns-number"
  local code, out = mk { "run", path, TASK, "--model", "scripted", "--set", "iters=1", "--set", "tests_agent=false",
    "--run-dir", dir }
  t.eq(code, 0, out)
  t.contains(out, "returns_number.lua:1: run() must return a node of the graph or nil, got number 42")
  t.eq(summary(dir).status, "done")
end)

local code = t.run()
fs.rm_rf(tmp)
return code

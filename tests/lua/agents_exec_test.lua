-- The agents end to end against a model that answers like a chat model:
-- `mkengine run auto` with the exec provider running
-- tests/fake_llm/realistic_c.py (a labelled test double: prose, the kernel,
-- then a usage example; a first reply cut by the token limit; a first
-- kernel that does not compile; a fix only when the fix prompt carries the
-- plan, the reference and the error). The real C evaluator judges the
-- kernels. --dump-prompts writes every request, which is checked too.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local proc = require "mk.proc"
local cjson = require "cjson"

local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
local tmp = fs.tmpdir("mk-agents-exec")

local function mk(args)
  local argv = { MK }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local r = assert(proc.run { argv = argv, timeout = 900, max_output = 4 * 1024 * 1024 })
  return r.code, r.stdout .. r.stderr
end

t.test("auto with realistic replies repairs the first kernel and finds a correct one", function()
  local dir, dump = tmp .. "/run", tmp .. "/prompts"
  local code, out = mk { "run", "auto", "tests/tasks/rmsnorm_small", "--model",
    "exec:python3 tests/fake_llm/realistic_c.py", "--set", "iters=1", "--llm-cache", "off",
    "--run-dir", dir, "--dump-prompts", dump, "--quiet" }
  t.eq(code, 0, out)
  local s = cjson.decode(assert(fs.read(dir .. "/summary.json")))
  t.ok(s.best ~= cjson.null and s.best.node ~= nil and s.best.latency_s > 0, "a correct kernel was found")
  -- one request per step: tests, plan, implement (cut, then asked again with
  -- more room), fix, tune, profile
  local names = {}
  for _, f in ipairs(fs.list(dump)) do names[#names + 1] = f end
  table.sort(names)
  t.same(names, { "0001-tests.txt", "0002-plan.txt", "0003-implement.txt", "0004-implement.txt", "0005-fix.txt",
    "0006-tune.txt", "0007-profile.txt" })
  t.contains(fs.read(dump .. "/0003-implement.txt"), "max_tokens: 8192")
  t.contains(fs.read(dump .. "/0004-implement.txt"), "max_tokens: 16384")
  local fix = fs.read(dump .. "/0005-fix.txt")
  t.contains(fix, "## Plan the kernel implements")
  t.contains(fix, "Single pass per row with SIMD reductions")
  t.contains(fix, "## Reference implementation")
  t.contains(fix, "benchmark size (timed): {cols=2048, rows=256}")
  t.contains(fix, "'inv' undeclared")
  -- the shapes the tests agent proposed reach the later prompts
  t.contains(fs.read(dump .. "/0006-tune.txt"), "{cols=17, rows=3}")
end)

t.test("an unknown agent setting is a usage error naming the option", function()
  local code, out = mk { "run", "auto", "tests/tasks/rmsnorm_small", "--model", "scripted",
    "--set", "agent_max_tokenz=5", "--run-dir", tmp .. "/bad", "--quiet" }
  t.eq(code, 2)
  t.contains(out, "unknown option 'agent_max_tokenz'")
end)

return t.run()

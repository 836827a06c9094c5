-- Frozen suites stored once per task content (mk.eval.suites): evaluators
-- and bench repeats share one read-only copy, concurrent freezers wait for
-- one another, a tampered copy is refused (also with its mtime restored), a
-- cached baseline is reused, and `mkengine export` inlines the suite so the
-- copy resumes without the cache.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local proc = require "mk.proc"
local task_lib = require "mk.services.task"
local cjson = require "cjson"
local eval = require "mk.eval"
local suites = require "mk.eval.suites"
local targets = require "mk.eval.targets"

local tmp = fs.tmpdir("mk-suites-test")
local CACHE = tmp .. "/cache"
-- this process's cache (the subprocesses below get MKENGINE_CACHE)
suites.root = function() return CACHE .. "/mkengine" end
local TASK = "tests/tasks/rmsnorm_small"
local SMALL = { bench_sizes = { rows = 32, cols = 256 }, llc_bytes = 1 << 16, threads = 1,
  bench = { min_time = 0.02, min_reps = 3 } }
local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")

local function opts(extra)
  local o = {}
  for k, v in pairs(SMALL) do o[k] = v end
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

local function suite_dirs()
  local out = {}
  for _, n in ipairs(fs.list(suites.dir()) or {}) do
    if n:match("^%x+$") then out[#out + 1] = n end
  end
  table.sort(out)
  return out
end

t.test("the key follows the task's content and benchmark size, not where it is loaded from", function()
  local task = assert(targets.load_task(TASK))
  local c = targets.get("c")
  local k1 = suites.key(task, c, { bench_sizes = { rows = 32, cols = 256 } })
  t.eq(#k1, 64)
  t.eq(suites.key(assert(targets.load_task(TASK)), c, { bench_sizes = { cols = 256, rows = 32 } }), k1)
  t.ok(suites.key(task, c, { bench_sizes = { rows = 32, cols = 512 } }) ~= k1, "bench size is part of the key")
  local copy = tmp .. "/copy"
  fs.mkdirs(copy)
  fs.write(copy .. "/task.lua", fs.read(TASK .. "/task.lua"))
  fs.write(copy .. "/reference.c", fs.read(TASK .. "/reference.c") .. "\n/* changed */\n")
  t.ok(suites.key(assert(targets.load_task(copy)), c, { bench_sizes = { rows = 32, cols = 256 } }) ~= k1,
    "the reference is part of the key")
end)

t.test("two evaluators of one task share one read-only frozen suite; the second only verifies it", function()
  local a = eval.new(TASK, opts { suite_cache = true })
  local ra = a:freeze()
  t.eq(ra.fresh, true)
  t.eq(#suite_dirs(), 1)
  t.eq(a.tests_dir, suites.path(a.suite_key))
  t.eq(fs.stat(a.tests_dir .. "/manifest.sha256").mode, 292)
  t.eq(fs.stat(a.tests_dir .. "/expected/search_37x129_s1/out.bin").mode, 292)
  t.eq(fs.stat(a.tests_dir .. "/manifest.seal").mode, 292)
  local b = eval.new(TASK, opts { suite_cache = true })
  local rb = b:freeze()
  t.eq(rb.fresh, false)
  t.eq(b.tests_dir, a.tests_dir)
  t.eq(#suite_dirs(), 1)
  -- a candidate evaluates against the shared suite, with the time breakdown
  local r = b:evaluate(fs.read(TASK .. "/reference.c"), { tune = false })
  t.eq(r.status, "ok", r.message)
  for _, k in ipairs { "compile_s", "test_s", "bench_s", "check_s", "engine_s", "wall_s", "queue_s" } do
    t.eq(type(r.timing[k]), "number", k)
    t.ok(r.timing[k] >= 0, k)
  end
  t.ok(r.timing.compile_s > 0 and r.timing.test_s > 0 and r.timing.bench_s > 0 and r.timing.check_s > 0)
  t.ok(r.timing.compile_s + r.timing.test_s + r.timing.bench_s + r.timing.check_s <= r.timing.wall_s + 1e-6)
  -- the benchmark process's parts: the loop holds its poisoning and checks,
  -- and all of them fit in the process's wall time and in bench_s
  local bp = r.timing.bench_parts
  t.ok(bp and bp.loop_s > 0 and bp.prep_s > 0 and bp.verify_s > 0, "bench_parts")
  t.ok(bp.prep_s + bp.verify_s <= bp.loop_s + 1e-6, "prep + verify within the loop")
  t.ok(bp.setup_s + bp.loop_s + bp.probes_s + bp.outs_s <= bp.process_s + 1e-6, "parts within the process")
  t.ok(bp.process_s <= r.timing.bench_s + 1e-6, "process within bench_s")
  -- cpu_s: what its processes (compiler, runner, checker) used, measured by
  -- their wrapper: more than nothing, less than 256 cores all along
  t.ok(r.cpu_s > 0.02, "cpu_s " .. tostring(r.cpu_s))
  t.ok(r.cpu_s < 256 * r.wall_s, "cpu_s bounded")
  a:close(); b:close()
  t.ok(fs.exists(suites.path(a.suite_key) .. "/frozen.json"), "closing an evaluator keeps the shared suite")
end)

t.test("concurrent evaluators freeze a missing suite once", function()
  local o = opts { suite_cache = true, bench_sizes = { rows = 16, cols = 128 } }
  local evs, hs = {}, {}
  for i = 1, 3 do
    evs[i] = eval.new(TASK, o)
    hs[i] = task_lib.spawn(function() return evs[i]:freeze() end)
  end
  local fresh = 0
  for i = 1, 3 do
    local r = task_lib.await(hs[i])
    t.eq(r.status, "ok")
    if r.fresh then fresh = fresh + 1 end
    t.eq(evs[i].tests_dir, evs[1].tests_dir)
  end
  t.eq(fresh, 1)
  t.eq(#suite_dirs(), 2)
  for i = 1, 3 do evs[i]:close() end
end)

t.test("a cached suite with a modified file is refused, even with its mtime put back", function()
  local o = opts { suite_cache = true, bench_sizes = { rows = 8, cols = 64 } }
  local a = eval.new(TASK, o)
  a:freeze()
  local f = a.tests_dir .. "/expected/search_37x129_s2/out.bin"
  local before = fs.stat(f).mtime
  fs.chmod(f, 420)
  local data = fs.read(f)
  fs.write(f, data:sub(1, 8) .. "\0\0\0\0" .. data:sub(13))
  fs.chmod(f, 292)
  -- restore the mtime: the seal also records ctime, which utime cannot set
  local r = proc.run { argv = { "touch", "-m", "-d", "@" .. string.format("%.9f", before), f } }
  t.eq(r.code, 0)
  t.eq(fs.stat(f).mtime, before)
  local b = eval.new(TASK, o)
  local ok, err = pcall(b.freeze, b)
  t.eq(ok, false)
  t.contains(tostring(err), "search_37x129_s2/out.bin")
  a:close(); b:close()
end)

t.test("a baseline measured before is reused with baseline_cache, measured anew without", function()
  -- no benchmark counts as contended here (that is the next test): on a busy machine every one would
  local calm = { min_time = SMALL.bench.min_time, min_reps = SMALL.bench.min_reps,
    contention = { other_cores = 1e9, steal = 1 } }
  local o = opts { suite_cache = true, baseline_cache = true, bench = calm }
  local a = eval.new(TASK, o)
  local ba = a:baseline()
  t.eq(ba.cached, nil)
  local b = eval.new(TASK, o)
  local bb = b:baseline()
  t.eq(bb.cached, true)
  t.eq(bb.latency_s, ba.latency_s)
  local c = eval.new(TASK, opts { suite_cache = true, bench = calm })
  t.eq(c:baseline().cached, nil)
  a:close(); b:close(); c:close()
end)

t.test("a baseline timed under contention is not kept in the baseline cache", function()
  -- every benchmark counts as contended; min_reps differs from the test above so its cached baseline is not this one's
  local busy = { min_time = SMALL.bench.min_time, min_reps = SMALL.bench.min_reps + 1, contention = { other_cores = -1 } }
  local o = opts { suite_cache = true, baseline_cache = true, bench = busy }
  local a = eval.new(TASK, o)
  local ba = a:baseline()
  t.ok(ba.contended, "flagged")
  t.eq(ba.retakes, 1)
  local b = eval.new(TASK, o)
  t.eq(b:baseline().cached, nil, "measured anew")
  a:close(); b:close()
end)

t.test("a bench of 2 tasks x 3 repeats stores each frozen suite once; export inlines it", function()
  local suite = tmp .. "/suite"
  for _, n in ipairs { "rms_a", "rms_b" } do
    fs.mkdirs(suite .. "/" .. n)
    fs.write(suite .. "/" .. n .. "/task.lua", (fs.read(TASK .. "/task.lua"):gsub('name = "rmsnorm_small"',
      'name = "' .. n .. '"'):gsub("rows = 256, cols = 2048", "rows = 64, cols = 512")))
    fs.write(suite .. "/" .. n .. "/reference.c", fs.read(TASK .. "/reference.c"))
    t.eq(proc.run({ argv = { "ln", "-s", fs.realpath(TASK .. "/scripted"), suite .. "/" .. n .. "/scripted" } }).code, 0)
  end
  local before = #suite_dirs()
  local bench = require "mk.study.bench"
  local res = assert(bench.run { suite = suite, strategy = "parallel", repeats = 3, out = tmp .. "/bench",
    model = "scripted", concurrency = 2, set = { trajectories = 1, iters = 1, tune = false, tests_agent = false } })
  t.eq(res.failed_runs, 0, res.tasks[1].error or (res.tasks[1].runs and cjson.encode(res.tasks[1].runs[1])))
  t.eq(#suite_dirs(), before + 2)
  local keys = {}
  for _, n in ipairs { "rms_a", "rms_b" } do
    for r = 1, 3 do
      local dir = tmp .. "/bench/" .. n .. "/r" .. r
      local s = cjson.decode(assert(fs.read(dir .. "/suite.json")))
      t.ok(fs.exists(s.path .. "/frozen.json"), dir)
      t.eq(#(fs.list(dir .. "/tests") or {}), 0, "no suite copy in the run directory")
      keys[n] = keys[n] or s.key
      t.eq(s.key, keys[n], "repeats share the suite")
    end
  end
  t.ok(keys.rms_a ~= keys.rms_b)
  -- evaluated nodes carry the time breakdown in their metrics
  local g = assert(require("mk.search.graph").open(tmp .. "/bench/rms_a/r1/graph.git", { create = false, readonly = true }))
  local timing
  for _, n in ipairs(g:nodes()) do
    if n.kind ~= "reference" and n.metrics.timing then timing = n.metrics.timing end
  end
  t.ok(timing and timing.wall_s > 0 and timing.compile_s > 0, "a node's metrics.timing")
  g:close()
  -- export: a copy with the suite inlined resumes without the cache
  local run = tmp .. "/bench/rms_a/r1"
  local dest = tmp .. "/exported"
  local env = { MKENGINE_CACHE = CACHE, PATH = os.getenv("PATH"), HOME = os.getenv("HOME") }
  local r = proc.run { argv = { MK, "export", run, dest }, env = env, timeout = 120 }
  t.eq(r.code, 0, r.stderr)
  t.ok(fs.exists(dest .. "/tests/frozen.json"))
  t.eq(cjson.decode(fs.read(dest .. "/suite.json")).inlined, true)
  local again = proc.run { argv = { MK, "export", run, dest }, env = env, timeout = 60 }
  t.eq(again.code, 2, "export refuses an existing destination")
  local empty = { MKENGINE_CACHE = tmp .. "/empty-cache", PATH = os.getenv("PATH"), HOME = os.getenv("HOME") }
  local rr = proc.run { argv = { MK, "resume", dest, "--quiet" }, env = empty, timeout = 600 }
  t.ok(rr.code == 0 or rr.code == 1, rr.stderr)
  t.eq(#(fs.list(tmp .. "/empty-cache/mkengine/suites") or {}), 0, "the inlined suite was used, not re-frozen")
end)

local code = t.run()
fs.rm_rf(tmp)
return code

-- The memory limit of the Pallas target's harness processes (issue 34):
-- every harness process of an evaluation runs under one (mk.eval's mem_mb,
-- `--mem-mb`, else a share of the machine's available memory); a candidate
-- past it is `unchecked` (reason "memory"), never a crash, with a message
-- naming the limit; a reference past it cannot be frozen; `mkengine eval
-- --json` reports the largest resident memory of its harness processes.
-- Real JAX, TPU interpret mode on the CPU, the tiny RMSNorm task and
-- tests/python/candidates/hog.py (1 GiB allocated when imported).
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local cjson = require "cjson"
local eval = require "mk.eval"
local pallas = require("mk.eval.targets").get("pallas")
local cpu = dofile("tests/lua/lib/pallas_cpu.lua")

local MK = fs.realpath((os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine")
local TINY = "tests/python/tasks/tiny_rmsnorm"
local HOG = "tests/python/candidates/hog.py"

t.test("the default limit is the available memory over the evaluations at once plus one, capped", function()
  t.eq(eval.default_mem_mb(2, 12000), 4000, "jobs 2: a third")
  t.eq(eval.default_mem_mb(4, 10000), 2000)
  t.eq(eval.default_mem_mb(1, 400000), eval.mem_cap_mb, "capped")
  t.eq(eval.default_mem_mb(8, 3000), eval.mem_floor_mb, "never below the floor")
  t.eq(eval.default_mem_mb(0, 9000), 4500, "at least one evaluation")
  local avail = eval.available_mb()
  t.ok(type(avail) == "number" and avail > 0, "MemAvailable read from /proc/meminfo")
  t.eq(eval.default_mem_mb(2), eval.default_mem_mb(2, avail) and eval.default_mem_mb(2))
end)

t.test("an evaluator on the Pallas target bounds its processes by default, the C target keeps its own", function()
  local ev = eval.new(TINY, { jobs = 3 })
  t.ok(ev.mem_mb >= eval.mem_floor_mb and ev.mem_mb <= eval.mem_cap_mb, tostring(ev.mem_mb))
  ev:close()
  ev = eval.new(TINY, { mem_mb = 777 })
  t.eq(ev.mem_mb, 777, "opts.mem_mb is the limit")
  ev:close()
  ev = eval.new("examples/tasks/c/rmsnorm", {})
  t.eq(ev.mem_mb, nil, "the C target's runner derives its own from the data")
  ev:close()
end)

t.test("a candidate past the memory limit is unchecked with a message naming the limit, never a crash", function()
  local ok, why = cpu.setup(pallas)
  t.ok(ok, why)
  local task = assert(require("mk.eval.targets").load_task(TINY))
  task.seeds, task.heldout_seeds = { 0 }, { 1001 }
  local ev = eval.new(task, { jobs = 1, mem_mb = 700 })
  local r = ev:evaluate(assert(fs.read(HOG)), { tune = false, profile = false })
  t.eq(r.status, "unchecked", r.message)
  t.eq(r.correct, false)
  t.eq(r.reason, "memory")
  t.matches(r.message, "^not checked on this machine: harness compile used %d+ MiB, over its limit of 700 MiB " ..
    "while importing the candidate %(each harness process is limited to 700 MiB: mkengine eval/run/bench %-%-mem%-mb")
  t.ok(r.peak_rss_mb > 700, "the peak of its harness processes: " .. tostring(r.peak_rss_mb))
  -- the same candidate under a limit it fits: no longer unchecked (plain JAX: rejected at its compile step)
  local ev2 = eval.new(task, { jobs = 1, mem_mb = 4096 })
  local r2 = ev2:evaluate(assert(fs.read(HOG)), { tune = false, profile = false })
  t.eq(r2.status, "rejected", r2.message)
  t.ok(r2.peak_rss_mb > 1024 and r2.peak_rss_mb < 4096, tostring(r2.peak_rss_mb))
  ev2:close()
  ev:close()
  cpu.teardown(pallas)
end)

local function eval_cli(args)
  local cache = t.tmpdir("mk-limits-cache-")
  local code, out = t.sh("MKENGINE_CACHE=" .. cache .. " JAX_PLATFORMS=cpu MK_PALLAS_POISON_MB=1 " .. MK .. " eval "
    .. args)
  fs.rm_rf(cache)
  return code, out
end

t.test("mkengine eval --mem-mb: unchecked, with the peak and the limit in --json", function()
  local code, out = eval_cli(TINY .. " " .. HOG .. " --mem-mb 700 --json --no-profile --fresh")
  t.eq(code, 0, out)
  local j = cjson.decode(out:match("[^\n]*$") ~= "" and out:match("[^\n]*$") or out:match("([^\n]+)\n*$"))
  t.eq(j.status, "unchecked", out)
  t.eq(j.reason, "memory")
  t.eq(j.mem_mb, 700)
  t.ok(type(j.peak_rss_mb) == "number" and j.peak_rss_mb > 700, tostring(j.peak_rss_mb))
  t.contains(j.message, "over its limit of 700 MiB while importing the candidate")
  code, out = eval_cli(TINY .. " " .. HOG .. " --mem-mb 0")
  t.eq(code, 2, out)
  t.contains(out, "--mem-mb must be positive")
end)

t.test("a reference past the memory limit cannot be frozen: one line, exit 1, no verdict", function()
  -- importing JAX alone passes 100 MiB
  local code, out = eval_cli(TINY .. " tests/python/candidates/good.py --mem-mb 100 --fresh")
  t.eq(code, 1, out)
  t.matches(out, "cannot evaluate: .*harness freeze used %d+ MiB, over its limit of 100 MiB")
end)

return t.run()

-- mk.study.bench with an injected runner (no LLM, no compiler): suite discovery,
-- K repeats with distinct seeds, bounded concurrency, results.json with
-- hand-checkable metrics, resume of finished / interrupted / missing runs,
-- failing runs. The last test runs the real runner.
local t = dofile("tests/lua/lib/t.lua")
local cjson = require "cjson"
local fs = require "mk.fs"
local task = require "mk.services.task"
local bench = require "mk.study.bench"

local tmp = t.tmpdir("mk-bench-test-")

-- a suite of 3 tasks plus things that are not tasks
local suite = tmp .. "/suite"
for _, n in ipairs({ "gemm_relu", "rmsnorm", "softmax" }) do
  fs.mkdirs(suite .. "/" .. n)
  fs.write(suite .. "/" .. n .. "/task.lua", "return {}\n")
end
fs.mkdirs(suite .. "/notes")
fs.write(suite .. "/README.md", "a suite\n")
fs.mkdirs(suite .. "/.hidden")
fs.write(suite .. "/.hidden/task.lua", "return {}\n")

-- Outcome table: speedup of (task, seed); nil = no correct kernel.
local SPEED = {
  softmax = { 2.0, 1.5, 3.0 },     -- median 2.0
  rmsnorm = { 0.8, 0.9, 0.7 },     -- median 0.8 (correct but slower)
  gemm_relu = { false, 1.2, false }, -- median: a failed run
}

local calls, running, max_running = {}, 0, 0

local function fake_runner(o)
  calls[#calls + 1] = o
  running = running + 1
  max_running = math.max(max_running, running)
  task.sleep(0.01)
  running = running - 1
  local name = o.task:match("([^/]+)$")
  local s = SPEED[name][o.seed]
  fs.mkdirs(o.run_dir)
  fs.write(o.run_dir .. "/run.json", cjson.encode({ strategy = o.strategy, task = name, seed = o.seed }))
  local summary = {
    strategy = o.strategy, task = name, status = "done", nodes = 4, correct_nodes = s and 2 or 0, compiled_nodes = 3,
    best = s and { node = "3", speedup = s, latency_s = 1e-3 / s } or cjson.null,
    cost = { input_tokens = 1000, output_tokens = 100, usd = 0.01, llm_s = 2, device_s = 1, wall_s = 5 },
    seed = o.seed,
  }
  fs.write(o.run_dir .. "/summary.json", cjson.encode(summary))
  summary.run_dir = o.run_dir
  return summary
end

local function reset() calls, running, max_running = {}, 0, 0 end

t.test("tasks lists task directories in name order and skips other entries", function()
  local ts = assert(bench.tasks(suite))
  t.eq(#ts, 3)
  t.eq(ts[1].name, "gemm_relu")
  t.eq(ts[3].name, "softmax")
  t.eq(ts[3].dir, suite .. "/softmax")
  local one = assert(bench.tasks(suite .. "/rmsnorm"))
  t.eq(#one, 1)
  t.eq(one[1].name, "rmsnorm")
  local none, err = bench.tasks(suite .. "/notes")
  t.eq(none, nil)
  t.eq(err.kind, "bad_suite")
end)

local out = tmp .. "/b1"

t.test("bench runs every task K times with seeds base..base+K-1 and at most `concurrency` at once", function()
  reset()
  local res = assert(bench.run { suite = suite, strategy = "beam", repeats = 3, out = out, concurrency = 2,
    runner = fake_runner, resume = function() error("no resume expected") end, set = { width = 2 }, model = "scripted" })
  t.eq(#calls, 9)
  t.eq(max_running, 2)
  local seeds = {}
  for _, c in ipairs(calls) do
    seeds[c.task:match("[^/]+$") .. c.seed] = true
    t.eq(c.strategy, "beam")
    t.eq(c.set.width, 2)
    t.eq(c.model, "scripted")
    t.eq(c.quiet, true)
    t.matches(c.run_dir, "/b1/[%w_]+/r[123]$")
  end
  for _, n in ipairs({ "softmax", "rmsnorm", "gemm_relu" }) do
    for k = 1, 3 do t.ok(seeds[n .. k], n .. " seed " .. k) end
  end
  t.eq(res.failed_runs, 0)
end)

t.test("results.json holds median runs and hand-computed metrics", function()
  local res = cjson.decode(assert(fs.read(out .. "/results.json")))
  t.eq(res.kind, "bench")
  t.eq(res["repeat"], 3)
  local by = {}
  for _, r in ipairs(res.tasks) do by[r.task] = r end
  t.eq(by.softmax.speedup, 2.0)
  t.eq(by.rmsnorm.speedup, 0.8)
  t.eq(by.rmsnorm.correct, true)
  t.eq(by.gemm_relu.correct, false)
  t.eq(by.gemm_relu.compiled, true)
  t.eq(by.gemm_relu.correct_runs, 1)
  t.eq(#by.softmax.runs, 3)
  t.eq(by.softmax.runs[by.softmax.median_repeat].speedup, 2.0)
  local a = res.aggregate
  t.eq(a.tasks, 3)
  t.eq(a.correct, 2)
  t.eq(a.compiled, 3)
  t.near(a.geomean_speedup, (2.0 * 0.8 * 1.0) ^ (1 / 3), 1e-12)
  t.near(a.geomean_speedup_floored, 2.0 ^ (1 / 3), 1e-12)
  t.near(a.fast_p["0"], 2 / 3, 1e-12)
  t.near(a.fast_p["1"], 1 / 3, 1e-12)
  t.near(a.fast_p["1.5"], 1 / 3, 1e-12)
  t.eq(a.fast_p["2"], 0) -- softmax's median is exactly 2.0
  t.eq(a.cost.input_tokens, 9000)
  t.near(a.cost.usd, 0.09, 1e-9)
  t.eq(by.softmax.cost.wall_s, 15)
  t.ok(res.finished, "finished stamp")
end)

t.test("the table shows both geomeans on one line and a row per task", function()
  local res = cjson.decode(assert(fs.read(out .. "/results.json")))
  local txt = bench.format(res)
  t.matches(txt, "geomean speedup 1%.17x %(failed tasks = 1%.0%)   |   floored at 1%.0: 1%.26x")
  t.matches(txt, "\nsoftmax%s+yes%s+yes%s+2%.00x%s+3/3")
  t.matches(txt, "\ngemm_relu%s+yes%s+no%s+%-%s+1/3")
  t.contains(txt, "fast_1 0.33")
  t.eq(txt:find("\27", 1, true), nil, "no control characters")
end)

t.test("rerunning the same bench reads finished runs instead of running them", function()
  reset()
  local res = assert(bench.run { suite = suite, strategy = "beam", repeats = 3, out = out, runner = fake_runner,
    resume = function() error("no resume expected") end })
  t.eq(#calls, 0)
  t.near(res.aggregate.geomean_speedup, (2.0 * 0.8) ^ (1 / 3), 1e-12)
end)

t.test("resume: an interrupted run is resumed, a missing one started, finished ones read", function()
  reset()
  fs.remove(out .. "/softmax/r2/summary.json") -- killed before the end: run.json stays
  fs.rm_rf(out .. "/rmsnorm/r3")                -- never started
  local resumed = {}
  local res = assert(bench.run { suite = suite, strategy = "beam", repeats = 3, out = out, runner = fake_runner,
    resume = function(dir)
      resumed[#resumed + 1] = dir
      return fake_runner({ strategy = "beam", task = suite .. "/softmax", seed = 2, run_dir = dir })
    end })
  t.eq(#resumed, 1)
  t.matches(resumed[1], "softmax/r2$")
  t.eq(#calls, 2) -- the resume's own call + rmsnorm r3
  t.eq(calls[2].task, suite .. "/rmsnorm")
  t.eq(calls[2].seed, 3)
  local how = {}
  for _, r in ipairs(res.tasks) do for _, x in ipairs(r.runs) do how[r.task .. x["repeat"]] = x.how end end
  t.eq(how.softmax2, "resumed")
  t.eq(how.rmsnorm3, "ran")
  t.eq(how.softmax1, "read")
end)

t.test("a run that raises is recorded as an error, the others finish, and a rerun retries it", function()
  reset()
  local o2 = tmp .. "/b2"
  local function flaky(o)
    if o.task:match("rmsnorm$") and o.seed == 1 then error("strategy blew up") end
    return fake_runner(o)
  end
  local res = assert(bench.run { suite = suite, strategy = "beam", repeats = 1, out = o2, runner = flaky })
  t.eq(res.failed_runs, 1)
  local by = {}
  for _, r in ipairs(res.tasks) do by[r.task] = r end
  t.eq(by.rmsnorm.correct, false)
  t.contains(by.rmsnorm.runs[1].error, "strategy blew up")
  t.eq(by.softmax.speedup, 2.0)
  reset()
  local res2 = assert(bench.run { suite = suite, strategy = "beam", repeats = 1, out = o2, runner = fake_runner })
  t.eq(#calls, 1)
  t.eq(res2.failed_runs, 0)
end)

t.test("a bench is labelled by --label, else its strategy file's stem, never its path", function()
  t.eq(bench.label { strategy = "beam" }, "beam")
  t.eq(bench.label { strategy = "my/strategies/bandit.lua" }, "bandit")
  t.eq(bench.label { strategy = "my/bandit.lua", label = "ucb c=1" }, "ucb c=1")
  reset()
  local res = assert(bench.run { suite = suite, strategy = tmp .. "/my/bandit.lua", repeats = 1, out = tmp .. "/labelled",
    runner = fake_runner })
  t.eq(res.label, "bandit")
  t.eq(res.strategy, tmp .. "/my/bandit.lua", "the strategy itself is kept")
  local html = require("mk.study.report").html(assert(require("mk.study.report").load(tmp .. "/labelled")))
  t.contains(html, "bandit on suite suite")
  t.ok(not html:find("bandit.lua on suite", 1, true), "a path in the report's title")
end)

t.test("a run that ended without a correct kernel and without a compiled node did not compile", function()
  -- the runner's own summary (not read back from disk) carries best = cjson.null, which is truthy in Lua
  local o = bench.outcome({ status = "no_correct_kernel", best = cjson.null, correct_nodes = 0, compiled_nodes = 0 })
  t.eq(o.compiled, false)
  t.eq(o.correct, false)
  t.eq(bench.outcome({ best = cjson.null, correct_nodes = 0, compiled_nodes = 2 }).compiled, true)
end)

t.test("bad arguments raise and a bad suite returns bad_suite", function()
  t.raises(function() bench.run { strategy = "beam" } end, "opts.suite")
  t.raises(function() bench.run { suite = suite, strategy = "beam", repeats = 0, runner = fake_runner } end, "repeat")
  local r, err = bench.run { suite = tmp .. "/nope", strategy = "beam", runner = fake_runner }
  t.eq(r, nil)
  t.eq(err.kind, "bad_suite")
  local r2, err2 = bench.run { suite = suite, strategy = "beam", runner = fake_runner, tasks = { "softmax", "nope" } }
  t.eq(r2, nil)
  t.contains(err2.message, "no task named 'nope'")
end)

t.test("a runner that is not a function is a clear error, not a failure of every run", function()
  t.raises(function() bench.run { suite = suite, strategy = "beam", runner = "beam" } end,
    "opts.runner must be a function, got string")
  t.raises(function() bench.run { suite = suite, strategy = "beam", runner = fake_runner, resume = {} } end,
    "opts.resume must be a function, got table")
end)

t.test("a failing machine stops the bench at once and leaves its directory unlocked", function()
  reset()
  local o3 = tmp .. "/b3"
  local infra = require "mk.eval.infra"
  local function disk_full(o)
    if o.task:match("rmsnorm$") then infra.raise("cannot write: No space left on device") end
    return fake_runner(o)
  end
  local err = t.raises(function()
    bench.run { suite = suite, strategy = "beam", repeats = 2, out = o3, runner = disk_full, concurrency = 1 }
  end)
  t.ok(infra.is(err), "the infra error is raised as is")
  t.eq(#calls, 1, "gemm_relu ran, rmsnorm failed the machine, nothing after it started")
  local lock = fs.lock(o3 .. "/.bench.lock")
  t.ok(lock, "the bench's lock was released when the error left bench.run")
  lock:unlock()
end)

t.test("the real runner benches 3 tasks of the cpu suite with the scripted model", function()
  local ts = assert(bench.tasks("examples/suites/cpu"))
  t.ok(#ts >= 3, "the cpu suite has at least 3 tasks")
  local names = { ts[1].name, ts[2].name, ts[3].name }
  -- a small parallel search (2 trajectories x 2 iterations, no tuning) keeps this under a few minutes
  local res = assert(bench.run { suite = "examples/suites/cpu", strategy = "parallel", repeats = 1, tasks = names,
    out = tmp .. "/real", model = "scripted", concurrency = 3, set = { trajectories = 2, iters = 2, tune = false } })
  t.eq(#res.tasks, 3)
  t.eq(res.failed_runs, 0)
  t.eq(res.aggregate.compiled, 3)
  t.ok(res.aggregate.correct >= 1, "the scripted bank has correct kernels")
  for _, r in ipairs(res.tasks) do
    t.ok(fs.exists(tmp .. "/real/" .. r.task .. "/r1/summary.json"), r.task)
    t.ok(r.cost.input_tokens > 0, "tokens counted for " .. r.task)
    -- three runs shared this process: each run's log holds its own calls only
    local summary = cjson.decode(fs.read(tmp .. "/real/" .. r.task .. "/r1/summary.json"))
    local ncalls, input = 0, 0
    for line in fs.read(tmp .. "/real/" .. r.task .. "/r1/events.jsonl"):gmatch("[^\n]+") do
      local e = cjson.decode(line)
      if e.type == "llm" then ncalls, input = ncalls + 1, input + e.input_tokens end
    end
    t.ok(ncalls > 0, "llm events in " .. r.task)
    t.eq(ncalls, summary.cost.calls, "llm events of " .. r.task .. " = its calls")
    t.eq(input, summary.cost.input_tokens, "llm events of " .. r.task .. " = its input tokens")
  end
  local report = require "mk.study.report"
  local html = report.html(assert(report.load(tmp .. "/real")))
  local _, trees = html:gsub('<svg class="tree"', "")
  t.eq(trees, 3)
end)

local code = t.run()
fs.rm_rf(tmp)
return code

-- Every hostile candidate in tests/hostile gets the status named in its
-- header while the engine keeps running, and nothing escapes: no file
-- appears outside the candidate's directory, the frozen tests stay intact.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local eval = require "mk.eval"

local DIR = "tests/hostile"
local evs = {}

local function evaluator(task)
  if evs[task] then return evs[task] end
  local dir = fs.exists("examples/tasks/c/" .. task .. "/task.lua") and ("examples/tasks/c/" .. task) or (DIR .. "/" .. task)
  local sizes = ({ rmsnorm = { rows = 256, cols = 384 }, matmul = { m = 192, n = 192, k = 192 } })[task]
  evs[task] = eval.new(dir, { bench_sizes = sizes, threads = 1, llc_bytes = 1 << 20, timeout = 10, mem_mb = 512,
    bench = { min_time = 0.05, min_reps = 5 } })
  evs[task]:freeze()
  return evs[task]
end

-- float32 from 4 little-endian bytes, printed exactly as a C literal
local function first_float(path)
  local s = assert(fs.read(path))
  return string.format("%.9gf", (string.unpack("<f", s)))
end

local function fill(src, ev)
  src = src:gsub("@TESTS_DIR@", (fs.realpath(ev.tests_dir)))
  if src:find("@SEEN@", 1, true) then
    local vals = {}
    for _, c in ipairs(fs.list(ev.tests_dir .. "/inputs") or {}) do
      if c:match("^search_") or c:match("^bench_") then
        vals[#vals + 1] = first_float(ev.tests_dir .. "/inputs/" .. c .. "/x.bin")
      end
    end
    src = src:gsub("@SEEN@", table.concat(vals, ", "))
  end
  return src
end

local files = {}
for _, f in ipairs(fs.list(DIR)) do
  if f:match("%.c$") then files[#files + 1] = f end
end

t.test("the hostile set covers every cheat and fault class of issue 4", function()
  local have = {}
  for _, f in ipairs(files) do have[f:gsub("%.c$", "")] = true end
  for _, n in ipairs { "compile_error", "wrong", "nan", "unwritten", "zeros_small", "hang", "crash", "membomb",
    "forkbomb", "huge_output", "write_outside", "read_expected", "seen_seeds", "some_calls", "call_reference",
    "patched_timer" } do
    t.ok(have[n], "missing hostile candidate " .. n)
  end
end)

for _, f in ipairs(files) do
  local src0 = fs.read(DIR .. "/" .. f)
  local expect = src0:match("// expect: (%S+)")
  local task = src0:match("// task: (%S+)")
  local check = src0:match("// check: (%S+)")
  local msg = src0:match("// message: ([^\n]+)")
  t.test(f .. " is classified " .. expect .. (check and (" by the " .. check .. " check") or ""), function()
    local ev = evaluator(task)
    local src = fill(src0, ev)
    local r = ev:evaluate(src)
    local got = r
    if check == "heldout" then
      t.eq(r.status, "ok", f .. " should pass the search tests first: " .. tostring(r.message))
      got = ev:heldout(src)
      t.eq(got.correct, false)
    end
    t.eq(got.status, expect, f .. ": " .. tostring(got.message))
    if expect ~= "ok" then t.eq(got.correct, false) end
    if msg then t.contains(got.message, msg) end
    if f == "patched_timer_hidden.c" then
      t.ok(r.latency_s >= 4e-3, "latency must reflect the real work, got " .. tostring(r.latency_s))
    end
  end)
end

t.test("nothing escaped: no files written outside, frozen tests still verify", function()
  t.ok(not fs.exists("/tmp/mkengine-pwned"), "/tmp/mkengine-pwned exists")
  t.ok(not fs.exists("/tmp/mkengine-pwned-hidden"), "/tmp/mkengine-pwned-hidden exists")
  for name, ev in pairs(evs) do
    ev.frozen = nil
    local ok, err = pcall(ev.freeze, ev)
    t.ok(ok, name .. ": " .. tostring(err))
    t.eq(ev.frozen.fresh, false)
  end
end)

t.test("probes made ahead: hidden from the candidate, used once, and they still catch cheats", function()
  local task_lib = require "mk.services.task"
  for _, case in ipairs { { "rmsnorm", "probe_wrong.c", "incorrect" }, { "matmul", "memo_copy.c", "rejected" } } do
    local ev = evaluator(case[1])
    ev:baseline()
    t.ok(ev.stock_h, "a stock is being made after the baseline")
    local stock = task_lib.await(ev.stock_h)
    t.eq(#stock.probes, 3)
    t.ok(fs.exists(stock.ref.rblob), "the reference's outputs are ready")
    -- beside the benchmarks' directories in the scratch root, never inside
    -- one (only a benchmark's own directory is bound into its sandbox)
    t.eq(stock.ref.pdir:match("^(.*)/[^/]+$"), ev.scratch)
    t.eq(stock.ref.pdir:match("/probe%-ref%-%x+$") ~= nil, true)
    -- the probes' inputs, saved by the reference's run, in a directory of
    -- their own that the candidate's runner maps (the outputs stay apart)
    t.eq(stock.ref.inputs_root:match("^(.*)/[^/]+$"), ev.scratch)
    t.ok(fs.exists(stock.ref.inputs_root .. "/inputs/probe1"), "probe inputs saved")
    t.ok(not fs.exists(stock.ref.inputs_root .. "/probe.bin"), "no reference output beside the inputs")
    -- (a source this evaluator has not seen: not an earlier result from its cache)
    local r = ev:evaluate(fill(fs.read(DIR .. "/" .. case[2]), ev) .. "/* made ahead */\n")
    t.eq(r.status, case[3], case[2] .. ": " .. tostring(r.message))
    t.eq(r.probes_ahead, true, "the benchmark used the stock")
    t.ok(not fs.exists(stock.ref.pdir), "a stock is used by one benchmark, then removed")
    t.ok(not fs.exists(stock.ref.inputs_root), "its inputs too")
    t.ok(ev.stock_h, "the next stock is being made")
    -- the stock's run is device time of the candidate that used it
    t.ok(r.device_s >= stock.wall_s, "device_s counts the stock's run")
  end
end)

t.test("probes made ahead whose reference run fails give no stock and leave nothing behind", function()
  -- a time limit no process meets: the reference's run times out
  local c = require("mk.eval.targets").get("c")
  local ev = evaluator("rmsnorm")
  local task = setmetatable({ timeout = 1e-3 }, { __index = ev.task })
  if ev.stock_h then require("mk.services.task").await(ev.stock_h) end -- nothing else writes there meanwhile
  local before = #(fs.list(ev.scratch) or {})
  local stock, err = c.probe_prepare(task, ev.tests_dir, 3, { dir = ev.scratch })
  t.eq(stock, nil)
  t.contains(err, "the reference failed on probe inputs made ahead")
  t.eq(#(fs.list(ev.scratch) or {}), before, "its directories are removed")
end)

t.test("at the benchmark size inputs are mapped from their files, and still read-only", function()
  -- big enough (> 1 MB per input) for the runner to map the frozen files;
  -- the kernel writes its input only at the benchmark size, so the search
  -- tests pass and the benchmark must catch it
  local ev = eval.new("examples/tasks/c/rmsnorm", { bench_sizes = { rows = 1024, cols = 384 }, threads = 1,
    llc_bytes = 1 << 20, timeout = 10, mem_mb = 1024, bench = { min_time = 0.05, min_reps = 5 }, probes = 0 })
  local src = fs.read("examples/tasks/c/rmsnorm/reference.c"):gsub("void kernel%(", "static void ref_kernel(", 1) .. [[
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  ref_kernel(x, scale, out, rows, cols);
  if ((long)rows * cols >= 1024L * 384) ((float *)x)[0] = 0.0f;
}
]]
  local r = ev:evaluate(src, { tune = false })
  t.eq(r.status, "crash", r.message)
  t.contains(r.message, "read-only input 'x'")
  local good = ev:evaluate(fs.read("examples/tasks/c/rmsnorm/scripted/simd.c"), { tune = false })
  t.eq(good.status, "ok", good.message)
  ev:close()
end)

t.test("an evaluator closed while its probes were about to be made leaves no files", function()
  -- the stock task waits for the device; the device is freed (the task is
  -- woken) and the evaluator closed before that task runs again
  local task_lib = require "mk.services.task"
  local ev = eval.new("examples/tasks/c/rmsnorm", { bench_sizes = { rows = 256, cols = 384 }, threads = 1,
    llc_bytes = 1 << 20, timeout = 10, mem_mb = 512, bench = { min_time = 0.05, min_reps = 5 },
    suite_cache = true }) -- a shared suite outlives the evaluator, as in runs
  ev:baseline()
  task_lib.await(ev.stock_h)
  ev.stock_h = nil
  local scratch = ev.scratch
  ev:_exclusive(function()
    ev:_restock(3)
    task_lib.yield() -- the stock task now waits for the device we hold
  end)
  ev:close()
  for _ = 1, 5 do task_lib.yield() end
  t.ok(not fs.exists(scratch), "nothing under " .. scratch)
end)

t.test("after the hostile set the engine still evaluates a good kernel", function()
  local ev = evaluator("rmsnorm")
  local r = ev:evaluate(fs.read("examples/tasks/c/rmsnorm/scripted/simd.c"))
  t.eq(r.status, "ok", r.message)
  t.eq(r.correct, true)
  t.ok(r.latency_s > 0 and r.baseline_latency_s > 0)
  for _, e in pairs(evs) do e:close() end
end)

return t.run()

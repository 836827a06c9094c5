-- Unit behaviour of the C target and the evaluation service: task loading
-- and its errors, signatures, tunables, the static screen, autotune
-- configurations, frozen-test integrity, and `mkengine eval`.
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local proc = require "mk.proc"
local cjson = require "cjson"
local targets = require "mk.eval.targets"
local c = require("mk.eval.targets").get("c")
local eval = require "mk.eval"

local RMS = "examples/tasks/c/rmsnorm"

local function tmp() return t.tmpdir("mkc-test") end

local function write_task(dir, task_src, ref)
  fs.mkdirs(dir)
  fs.write(dir .. "/task.lua", task_src)
  fs.write(dir .. "/reference.c", ref or "void kernel(const float *x, float *out, int n) { for (int i = 0; i < n; i++) out[i] = x[i]; }\n")
  return dir
end

t.test("load_task detects the C target and fills the interface fields", function()
  local task = assert(targets.load_task(RMS))
  t.eq(task.target, "c")
  t.eq(task.name, "rmsnorm")
  t.eq(task.candidate_file, "kernel.c")
  t.eq(task.signature, "void kernel(const float *x, const float *scale, float *out, int rows, int cols)")
  t.eq(task.tolerance.atol, 1e-4)
  t.eq(task.tolerance.rtol, 1e-4)
  t.eq(task.flops, 4 * 4096 * 4096)
  t.eq(task.bytes, 4 * (2 * 4096 * 4096 + 4096))
  t.contains(task.reference, "void kernel")
  t.eq(targets.detect(RMS), "c")
  t.ok(task.dir:sub(1, 1) == "/", "dir is absolute")
end)

t.test("every irregular rmsnorm test shape avoids multiples of 8", function()
  local task = assert(targets.load_task(RMS))
  for _, s in ipairs(task.test_sizes) do t.ok(s.rows % 8 ~= 0 and s.cols % 8 ~= 0, "shape " .. s.rows .. "x" .. s.cols) end
end)

t.test("load_task reports bad tasks as bad_task with the file and problem", function()
  local d = tmp()
  local task, err = targets.load_task(d .. "/missing")
  t.eq(task, nil); t.eq(err.kind, "bad_task")
  task, err = targets.load_task(d)
  t.eq(task, nil); t.eq(err.kind, "bad_task"); t.contains(err.message, "is not a task")
  write_task(d .. "/syntax", "return {")
  task, err = targets.load_task(d .. "/syntax")
  t.eq(task, nil)
  t.eq(err.kind, "bad_task"); t.contains(err.message, "task.lua")
  write_task(d .. "/noout", [[return { name = "x", description = "d", sizes = { n = 4 },
    args = { { name = "x", kind = "in", shape = { "n" } }, { name = "n", kind = "int" } } }]])
  task, err = targets.load_task(d .. "/noout")
  t.eq(task, nil)
  t.eq(err.kind, "bad_task"); t.contains(err.message, "nothing to check")
  write_task(d .. "/badsym", [[return { name = "x", description = "d", sizes = { n = 4 },
    args = { { name = "x", kind = "in", shape = { "m" } }, { name = "out", kind = "out", shape = { "n" } } } }]])
  task, err = targets.load_task(d .. "/badsym")
  t.eq(task, nil)
  t.eq(err.kind, "bad_task"); t.contains(err.message, "unknown size symbol 'm'")
  fs.rm_rf(d)
end)

t.test("tunables parses mk:tune lines and ignores everything else", function()
  local tn = c.tunables("// mk:tune BLOCK 32 64 128\nint x; // mk:tune NOT 1\n  //   mk:tune UNROLL 1,2, 4\n")
  t.same(tn, { { name = "BLOCK", values = { "32", "64", "128" } }, { name = "UNROLL", values = { "1", "2", "4" } } })
  t.same(c.tunables("int main;"), {})
end)

t.test("autotune takes the whole grid within budget and a reproducible seeded sample beyond", function()
  local tn = { { name = "A", values = { "1", "2", "3" } }, { name = "B", values = { "x", "y" } } }
  local all, space = eval._configs_of(tn, 8, 0)
  t.eq(#all, 6); t.eq(space, 6)
  local s1 = eval._configs_of(tn, 4, 7)
  local s2 = eval._configs_of(tn, 4, 7)
  t.eq(#s1, 4)
  t.same(s1, s2)
  local seen = {}
  for _, cfg in ipairs(s1) do
    local k = cfg.A .. cfg.B
    t.ok(not seen[k], "sample repeats a configuration"); seen[k] = true
  end
end)

t.test("the static screen rejects I/O, processes, timers and constructors but not look-alike names", function()
  t.contains(c.screen("void kernel(){ FILE *f = fopen(\"x\", \"r\"); }"), "fopen")
  t.contains(c.screen("void kernel(){ fork(); }"), "fork")
  t.contains(c.screen("void kernel(){ struct timespec t; clock_gettime(0, &t); }"), "clock_gettime")
  t.contains(c.screen("__attribute__((constructor)) void f(void){}"), "constructor")
  t.contains(c.screen('#include "../../secret.h"\n'), "include")
  t.contains(c.screen("int mk_call;"), "mk_")
  t.eq(c.screen("int open_count, time_step; float reopen; // fopen( in a comment\nvoid kernel(void){ int time = 3; (void)time; }"), nil)
  t.eq(c.screen(fs.read(RMS .. "/scripted/simd.c")), nil)
end)

t.test("freeze is idempotent and detects a tampered expected file", function()
  local task = assert(targets.load_task(RMS))
  local d = tmp()
  local r = c.freeze(task, d .. "/tests", { bench_sizes = { rows = 16, cols = 24 }, llc_bytes = 1 << 16 })
  t.eq(r.status, "ok", r.message)
  t.eq(r.fresh, true)
  t.ok(r.cases >= 16)
  t.eq(#r.manifest_sha, 64)
  local again = c.freeze(task, d .. "/tests", { bench_sizes = { rows = 16, cols = 24 } })
  t.eq(again.status, "ok"); t.eq(again.fresh, false)
  local f = d .. "/tests/expected/search_37x129_s1/out.bin"
  fs.chmod(f, 420)
  local data = fs.read(f)
  fs.write(f, "\0\0\0\0" .. data:sub(5))
  local bad = c.freeze(task, d .. "/tests")
  t.eq(bad.status, "error"); t.contains(bad.message, "expected/search_37x129_s1/out.bin")
  -- a candidate check against the tampered suite is an engine error, never a pass
  local b = c.compile(task, { ["kernel.c"] = task.reference }, d .. "/b", { trusted = true })
  local tr = c.test(task, b, d .. "/tests")
  t.eq(tr.status, "error"); t.contains(tr.message, "tampered")
  fs.rm_rf(d)
end)

t.test("the expected outputs are not visible inside the candidate's sandbox", function()
  local sandbox = require "mk.services.sandbox"
  if not sandbox.available() then return t.skip("bubblewrap unavailable") end
  local task = assert(targets.load_task(RMS))
  local d = tmp()
  t.eq(c.freeze(task, d .. "/tests", { bench_sizes = { rows = 16, cols = 24 }, llc_bytes = 1 << 16 }).status, "ok")
  fs.mkdirs(d .. "/w")
  local r = proc.run(sandbox.apply { argv = { "/bin/sh", "-c", "ls " .. d .. "/tests/expected; ls " .. d ..
    "/tests/inputs | head -1" }, sandbox = { workdir = d .. "/w", ro = { d .. "/tests/inputs" } } })
  t.contains(r.stderr, "No such file")
  t.contains(r.stdout, "bench_")
  fs.rm_rf(d)
end)

t.test("remeasure re-times the build evaluate made; files it never measured say not_evaluated", function()
  local ev = eval.new(RMS, { bench_sizes = { rows = 64, cols = 96 }, threads = 1, llc_bytes = 1 << 16,
    bench = { min_time = 0.02 } })
  local src = fs.read(RMS .. "/scripted/simd.c")
  local before = ev:remeasure(src)
  t.eq(before.status, "error"); t.eq(before.kind, "not_evaluated")
  local builds = ev.builds
  local r = ev:evaluate(src)
  t.eq(r.status, "ok", r.message)
  local again = ev:remeasure(src)
  t.eq(again.status, "ok", again.message)
  t.ok(again.latency_s > 0 and again.latency_s < 100 * r.latency_s, "a fresh timing of the same kernel")
  t.eq(ev.builds, builds + 1, "re-timing compiles nothing")
  ev:close()
end)

t.test("contention: other processes' CPU or steal during a benchmark flags it, with the figures", function()
  local C = c._internal.contention
  -- 2 CPUs over 1 s: 200 jiffies; 150 busy, the benchmark itself 0.9 s: others 0.6 cores
  local before = { busy = 1000, steal = 10, total = 5000, ncpu = 2, t = 10 }
  local after = { busy = 1150, steal = 10, total = 5200, ncpu = 2, t = 11 }
  local r = C.judge(before, 0.9, { reps = 100, clean = 80 }, nil, after)
  t.near(r.other_cores, 0.6, 1e-9)
  t.near(r.disturbed, 0.2, 1e-12)
  t.contains(r.why, "other processes used 0.60 of 2 cores")
  local quiet = C.judge(before, 0.9, nil, { other_cores = 1 }, after)
  t.eq(quiet.why, nil, "under the threshold given")
  local stolen = C.judge(before, 1.5, nil, nil, { busy = 1150, steal = 30, total = 5200, ncpu = 2, t = 11 })
  t.eq(stolen.other_cores, 0)
  t.contains(stolen.why, "the hypervisor stole 10 % of the CPU time")
end)

t.test("a benchmark flagged as contended is retaken once, then kept marked, never silently; not retaken under lasting contention", function()
  local function ev_with(limits)
    return eval.new(RMS, { bench_sizes = { rows = 64, cols = 96 }, threads = 1, llc_bytes = 1 << 16,
      bench = { min_time = 0.02, contention = limits } })
  end
  local src = fs.read(RMS .. "/scripted/simd.c")
  local ev = ev_with({ other_cores = -1 }) -- every benchmark counts as contended
  local r = ev:evaluate(src)
  t.eq(r.status, "ok", r.message)
  t.eq(r.retakes, 1)
  t.contains(r.contended, "other processes used")
  t.contains(r.message, "timed under contention")
  t.ok(ev:baseline().contended, "the baseline too")
  local again = ev:remeasure(src)
  t.eq(again.retakes, 1); t.ok(again.contended)
  -- three retakes in a row flagged too (baseline, candidate, re-measurement): the machine is busy, not a moment
  local busy = ev:remeasure(src)
  t.eq(busy.retakes, nil, "no retake that would only double the cost")
  t.ok(busy.contended, "still marked")
  ev:close()
  local calm = ev_with({ other_cores = 1e9, steal = 1 }) -- nothing counts
  local r2 = calm:evaluate(src)
  t.eq(r2.status, "ok", r2.message)
  t.eq(r2.retakes, nil); t.eq(r2.contended, nil)
  t.ok(r2.contention and r2.contention.other_cores >= 0, "the figures are kept")
  calm:close()
end)

t.test("timed calls go on past min_time while the median is unsettled, up to max_time", function()
  -- correct outputs, but every other call spins a few ms longer: the median's
  -- interval spans both modes, so the loop runs until max_time; with
  -- max_time = min_time it stops at min_time as before
  local ev = eval.new(RMS, { bench_sizes = { rows = 64, cols = 96 }, threads = 1, llc_bytes = 1 << 16 })
  ev:freeze()
  local src = fs.read(RMS .. "/reference.c") .. [[
static int calls;
void kernel_bimodal(const float *x, const float *scale, float *out, int rows, int cols) {
  kernel_ref(x, scale, out, rows, cols);
  if (++calls % 2) for (volatile long i = 0; i < 3000000; i++) {}
}
]]
  src = src:gsub("void kernel%(", "static void kernel_ref(", 1):gsub("kernel_bimodal", "kernel")
  local b = ev:_compile({ ["kernel.c"] = src })
  t.eq(b.status, "ok", b.message)
  local function timed(o)
    local r = ev.target.bench(ev.task, b, ev:_bench_opts(o))
    t.eq(r.status, "ok", r.message)
    local sum = 0
    for _, x in ipairs(r.times) do sum = sum + x end
    return sum, r
  end
  local long = timed { min_time = 0.05, max_time = 0.5, max_reps = 2000, warmup = 1 }
  t.ok(long >= 0.5, "unsettled: timed until max_time, got " .. long)
  local short, r = timed { min_time = 0.05, max_time = 0.05, max_reps = 2000, warmup = 1 }
  -- (one call past min_time; a preempted call on a loaded machine may add)
  t.ok(short >= 0.05 and short < 0.3, "max_time = min_time: stops at min_time, got " .. short)
  t.ok(r.reps >= 5)
  ev:close()
end)

t.test("evaluate reports statuses, speedup and a profile with achieved rates and a bound", function()
  local ev = eval.new(RMS, { bench_sizes = { rows = 64, cols = 96 }, threads = 1, llc_bytes = 1 << 16,
    bench = { min_time = 0.02 } })
  local r = ev:evaluate(fs.read(RMS .. "/scripted/simd.c"), { profile = true })
  t.eq(r.status, "ok", r.message); t.eq(r.correct, true)
  t.ok(r.latency_s > 0 and r.baseline_latency_s > 0)
  t.near(r.speedup, r.baseline_latency_s / r.latency_s, 1e-9)
  t.ok(r.device_s > 0)
  t.ok(r.profile and r.profile.text and r.profile.text:find("GB/s"), "profile text")
  t.ok(r.profile.bound == "memory" or r.profile.bound == "compute")
  t.ok(r.profile.gbps > 0 and r.profile.peak_gbps > 0)
  t.ok(r.profile.counters or r.profile.counters_message, "counters or why not")
  -- the same kernel again comes from the cache
  t.eq(ev:evaluate(fs.read(RMS .. "/scripted/simd.c"), { profile = true }), r)
  -- tuned kernel: every configuration tried, best kept
  local tr = ev:evaluate(fs.read(RMS .. "/scripted/tuned.c"))
  t.eq(tr.status, "ok", tr.message)
  t.eq(#tr.tune.tried, 3)
  t.ok(tr.tune.params.ROWS_PER_CHUNK, "best params")
  local h = ev:heldout(fs.read(RMS .. "/scripted/tuned.c"))
  t.eq(h.correct, true); t.eq(h.status, "ok")
  local bad = ev:evaluate(fs.read(RMS .. "/scripted/wrong_eps.c"))
  t.eq(bad.status, "incorrect"); t.eq(bad.correct, false); t.contains(bad.message, "elements wrong")
  local ce = ev:evaluate("void kernel(int x) {}")
  t.eq(ce.status, "compile_error"); t.contains(ce.message, "conflicting types")
  ev:close()
end)

t.test("concurrent evaluations compile in parallel but never overlap a benchmark with anything", function()
  local task_lib = require "mk.services.task"
  local ev = eval.new(RMS, { bench_sizes = { rows = 64, cols = 96 }, threads = 1, llc_bytes = 1 << 16, jobs = 2,
    bench = { min_time = 0.02 } })
  ev:freeze()
  -- record when each target operation runs
  local spans, orig = {}, {}
  for _, op in ipairs { "compile", "test", "bench" } do
    orig[op] = c[op]
    c[op] = function(...)
      local s = { op = op, t0 = task_lib.now() }
      local r = orig[op](...)
      s.t1 = task_lib.now()
      spans[#spans + 1] = s
      return r
    end
  end
  local ok, err = pcall(function()
    local hs = {}
    for _, k in ipairs { "simd.c", "naive.c", "skip_tail.c", "wrong_eps.c" } do
      hs[#hs + 1] = task_lib.spawn(function() return ev:evaluate(fs.read(RMS .. "/scripted/" .. k)) end)
    end
    local rs = task_lib.gather(hs)
    t.eq(rs[1].status, "ok"); t.eq(rs[2].status, "ok"); t.eq(rs[3].status, "incorrect"); t.eq(rs[4].status, "incorrect")
  end)
  for op, f in pairs(orig) do c[op] = f end
  if not ok then error(err, 0) end
  local overlapped_compiles = false
  for _, a in ipairs(spans) do
    for _, b in ipairs(spans) do
      if a ~= b and a.t0 < b.t1 and b.t0 < a.t1 then
        t.ok(a.op ~= "bench", a.op .. " overlapped " .. b.op)
        if a.op == "compile" and b.op == "compile" then overlapped_compiles = true end
      end
    end
  end
  t.ok(overlapped_compiles, "compiles should run two at a time")
  ev:close()
end)

local function mkengine(args)
  local exe = (os.getenv("MKENGINE_BUILD") or "build") .. "/mkengine"
  local argv = { exe, "eval" }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  return proc.run { argv = argv, timeout = 300 }
end

t.test("mkengine eval --json prints one verdict object and exits 0 whatever the verdict", function()
  local d = tmp()
  fs.write(d .. "/wrong.c", fs.read(RMS .. "/scripted/wrong_eps.c"))
  -- a small copy of the task keeps this quick
  local src = fs.read(RMS .. "/task.lua"):gsub("sizes = { rows = 4096, cols = 4096 }", "sizes = { rows = 64, cols = 96 }")
  write_task(d .. "/rms", src, fs.read(RMS .. "/reference.c"))
  local r = mkengine { d .. "/rms", d .. "/wrong.c", "--json", "--threads", "1", "--min-time", "0.02" }
  t.eq(r.code, 0, r.stderr)
  local j = cjson.decode(r.stdout)
  t.eq(j.status, "incorrect"); t.eq(j.correct, false); t.ok(#j.message > 0)
  fs.write(d .. "/good.c", fs.read(RMS .. "/scripted/simd.c"))
  r = mkengine { d .. "/rms", d .. "/good.c", "--json", "--threads", "1", "--min-time", "0.02", "--timeout", "20" }
  t.eq(r.code, 0, r.stderr)
  j = cjson.decode(r.stdout)
  t.eq(j.status, "ok"); t.eq(j.correct, true)
  t.ok(j.latency_s > 0 and j.baseline_latency_s > 0 and j.speedup > 0)
  t.ok(type(j.profile) == "table" and j.profile.text, "profile")
  fs.rm_rf(d)
end)

t.test("mkengine eval exits 2 on a bad task or a missing candidate", function()
  local r = mkengine { "/nonexistent/task", RMS .. "/reference.c" }
  t.eq(r.code, 2)
  t.contains(r.stderr, "task")
  r = mkengine { RMS, "/nonexistent/kernel.c", "--json" }
  t.eq(r.code, 2)
  t.contains(r.stderr, "candidate")
end)

return t.run()

-- Target `pallas` (targets/pallas/target.lua + targets/pallas/harness/),
-- on real JAX: the harness runs under the engine's default interpreter
-- (.venv/bin/python from scripts/setup.sh, or $MK_PYTHON). JAX missing
-- there is a failure, not a skip. On a CPU the Pallas kernels run in TPU
-- interpret mode (statuses asserted; speeds asserted on a TPU only).
local t = dofile("tests/lua/lib/t.lua")
local fs = require "mk.fs"
local pallas = require("mk.eval.targets").get("pallas")

local SUITE = "examples/suites/pallas"
local TINY = "tests/python/tasks/tiny_rmsnorm"
local CANDS = "tests/python/candidates"

local function sh_ok(cmd)
  return os.execute(cmd .. " >/dev/null 2>&1") == true
end

local default_py = os.getenv("MK_PYTHON") or pallas.default_python()
local HAVE_JAX = sh_ok(default_py .. " -c 'import jax'")

local function read(p) return assert(fs.read(p)) end

t.test("detect recognises JAXBench, MaxKernel and task.lua layouts", function()
  t.ok(pallas.detect(SUITE .. "/rmsnorm"))
  t.ok(pallas.detect("tests/python/tasks/tiny_maxkernel"))
  t.ok(pallas.detect("examples/tasks/pallas/rmsnorm"))
  local d = t.tmpdir("mk-pallas-")
  assert(fs.write(d .. "/task.lua", 'return { name = "x", target = "c" }'))
  t.eq(pallas.detect(d), false, "a C task.lua is not a Pallas task")
  t.eq(pallas.detect(d .. "/missing"), false)
  fs.rm_rf(d)
end)

t.test("the emulated chip is named as tpu_chips.lua names it, v6e by default", function()
  t.eq(pallas.chip_kind(pallas.chip), "TPU v6 lite")
  for _, n in ipairs { "v6e", "TPU v6e", "trillium", "TPU v6 lite" } do t.eq(pallas.chip_kind(n), "TPU v6 lite", n) end
  for _, n in ipairs { "v5e", "TPU v5e", "TPU v5 lite" } do t.eq(pallas.chip_kind(n), "TPU v5 lite", n) end
  local kind, why = pallas.chip_kind("cpu")
  t.eq(kind, nil)
  t.contains(why, "unknown TPU chip cpu")
  local d = t.tmpdir("mk-pallas-chip-")
  assert(fs.write(d .. "/task.lua", 'return { name = "x", target = "pallas", chip = "v9z" }'))
  assert(fs.write(d .. "/reference.py", "def create_inputs():\n    return ()\n\ndef workload():\n    return 0\n"))
  local task, err = pallas.load(d)
  t.eq(task, nil)
  t.contains(err.message, "chip: unknown TPU chip v9z")
  fs.rm_rf(d)
end)

t.test("load of a JAXBench baseline.py gives the interface fields", function()
  local task = assert(pallas.load(SUITE .. "/rmsnorm"))
  t.eq(pallas.last_runner, "proc", "inside a task the harness runs through mk.proc")
  t.eq(task.name, "rmsnorm")
  t.eq(task.target, "pallas")
  t.eq(task.format, "jaxbench")
  t.eq(task.candidate_file, "kernel.py")
  t.eq(task.signature, "def workload(x, scale):")
  t.eq(task.entry, "workload")
  t.near(task.tolerance.atol, 1e-3, 1e-12)
  t.near(task.tolerance.rtol, 1e-3, 1e-12)
  t.contains(task.reference, "def workload(x, scale):")
  t.contains(task.description, "RMSNorm")
  t.eq(task.dir:sub(1, 1), "/")
  t.eq(#task.test_configs, 2)
end)

t.test("every suite task loads with a signature and a description", function()
  local n = 0
  for _, name in ipairs(fs.list(SUITE)) do
    if fs.isdir(SUITE .. "/" .. name) then
      local task, err = pallas.load(SUITE .. "/" .. name)
      t.ok(task, name .. ": " .. tostring(err and err.message))
      t.matches(task.signature, "^def workload%(")
      t.ok(#task.description > 20, name)
      n = n + 1
    end
  end
  t.ok(n >= 5, "at least five suite tasks")
end)

t.test("load of a MaxKernel task reads kernel_task.yaml", function()
  local task = assert(pallas.load("tests/python/tasks/tiny_maxkernel"))
  t.eq(task.name, "tiny_scaled_relu")
  t.eq(task.format, "maxkernel")
  t.eq(task.signature, "def computation(x, alpha):")
  t.near(task.tolerance.atol, 1e-5, 1e-15)
  t.near(task.tolerance.rtol, 1e-3, 1e-15)
end)

t.test("load of our task.lua format takes metadata from task.lua", function()
  local task = assert(pallas.load("examples/tasks/pallas/rmsnorm"))
  t.eq(task.format, "mk")
  t.contains(task.description, "Row-wise RMS normalisation")
  t.near(task.tolerance.atol, 1e-4, 1e-15)
  t.same(task.heldout_seeds, { 1001, 1002 })
  t.eq(task.reference_file, "reference.py")
end)

t.test("load of a bad directory returns bad_task", function()
  local task, err = pallas.load("/nonexistent/task")
  t.eq(task, nil)
  t.eq(err.kind, "bad_task")
  local d = t.tmpdir("mk-pallas-")
  assert(fs.write(d .. "/baseline.py", "def create_inputs():\n    pass\n"))
  task, err = pallas.load(d)
  t.eq(task, nil)
  t.eq(err.kind, "bad_task")
  t.contains(err.message, "workload")
  fs.rm_rf(d)
end)

t.test("tunables parses the Python and C forms and refuses bad lines", function()
  t.same(pallas.tunables("# mk:tune block_m = [128, 256]\nx = 1\n#mk:tune mode=['a', \"b\"]\n// mk:tune B 8 16\n"), {
    { name = "block_m", values = { 128, 256 } },
    { name = "mode", values = { "a", "b" } },
    { name = "B", values = { 8, 16 } },
  })
  t.same(pallas.tunables("# mk:tune f = [0.5, True]\n"), { { name = "f", values = { 0.5, true } } })
  t.raises(function() pallas.tunables("# mk:tune a = 3\n") end)
  t.raises(function() pallas.tunables("# mk:tune a = []\n") end)
  t.raises(function() pallas.tunables("# mk:tune a = [1]\n# mk:tune a = [2]\n") end)
  t.same(pallas.tunables(read(CANDS .. "/tunable.py")), { { name = "eps_scale", values = { 1, 10000 } } })
end)

t.test("decode takes the last JSON line of the harness output", function()
  t.same(pallas.decode('noise\n{"status": "ok", "n": 1}\n\n'), { status = "ok", n = 1 })
  t.eq(pallas.decode("not json\n"), nil)
  t.eq(pallas.decode(""), nil)
end)

t.test("the engine's interpreter has JAX (scripts/setup.sh installs it into .venv/)", function()
  t.ok(HAVE_JAX, "JAX is not importable by " .. default_py .. ": run scripts/setup.sh")
  if default_py ~= os.getenv("MK_PYTHON") then
    -- named by the venv's real directory (.venv may link to a shared one the sandbox shows as itself)
    t.eq(default_py, fs.realpath(".venv") .. "/bin/python", "the default MK_PYTHON is the project's venv")
  end
end)

t.test("without JAX a step returns status error with kind no_jax, never raises", function()
  pallas.python = "/usr/bin/python3" -- Debian's: numpy, no JAX
  pallas.env = { PYTHONPATH = fs.realpath("tests/python/nojax") }
  local task = assert(pallas.load(TINY))
  local d = t.tmpdir("mk-pallas-")
  local r = pallas.freeze(task, d .. "/tests")
  pallas.python, pallas.env = nil, nil
  t.eq(r.status, "error")
  t.eq(r.kind, "no_jax")
  t.contains(r.message, "JAX")
  fs.rm_rf(d)
end)

local function e2e_setup()
  if not HAVE_JAX then return nil, "JAX is not importable by " .. default_py end
  -- TPU interpret mode on the CPU, also on a host with an accelerator
  -- (scripts/device_check.sh covers native runs).
  pallas.env = { MK_PALLAS_POISON_MB = "1", JAX_PLATFORMS = "cpu" }
  return true
end

local function e2e_teardown()
  pallas.python, pallas.env = nil, nil
end

t.test("freeze, compile, test, bench, profile, baseline end to end (real JAX)", function()
  local ok, why = e2e_setup()
  t.ok(ok, why)
  local task = assert(pallas.load(TINY))
  task.seeds, task.heldout_seeds = { 0, 1 }, { 1001 }
  local d = t.tmpdir("mk-pallas-")
  local tests = d .. "/tests"
  local f = pallas.freeze(task, tests)
  t.eq(f.status, "ok", f.message)
  t.eq(f.fresh, true)
  t.eq(#f.cases, 4)
  t.eq(#f.manifest_sha, 64)
  local again = pallas.freeze(task, tests)
  t.eq(again.status, "ok", again.message)
  t.eq(again.fresh, false)
  t.eq(again.manifest_sha, f.manifest_sha)

  -- plain JAX, or a pallas_call that only copies what plain JAX computed: no Pallas kernel
  local good = pallas.compile(task, { ["kernel.py"] = read(CANDS .. "/good.py") }, d .. "/good", { tests_dir = tests })
  t.eq(good.status, "rejected", good.message)
  t.contains(good.message, "kernel.py is no Pallas kernel: no pallas_call runs")
  local deco = pallas.compile(task, { ["kernel.py"] = read(CANDS .. "/pallas_plain_work.py") }, d .. "/deco",
    { tests_dir = tests })
  t.eq(deco.status, "rejected", deco.message)
  t.contains(deco.message, "its plain-JAX part, outside every pallas_call, does 100% as much work as the whole " ..
    "reference (mul 50%, div 25%, reduce_sum 25%), its Pallas kernels 0%: the work must be done by Pallas kernels")
  t.eq(deco.work.calls, 1)
  t.eq(deco.work.pallas, 0, "a copy is no work")
  t.ok(deco.work.plain >= deco.work.reference, "the reference's work, all of it in plain JAX")
  -- the Pallas kernels of this project's bank are kernels
  local rows = pallas.compile(task, { ["kernel.py"] = read("examples/tasks/pallas/rmsnorm/scripted/pallas_rows.py") },
    d .. "/rows", { tests_dir = tests })
  t.eq(rows.status, "ok", rows.message)
  t.eq(rows.work.plain, 0)
  t.ok(rows.work.pallas > 0.5 * rows.work.reference, rows.work.pallas)
  -- a task (or an evaluator) may allow plain JAX: the rest of this test checks the harness with it
  task.plain_ok = true
  good = pallas.compile(task, { ["kernel.py"] = read(CANDS .. "/good.py") }, d .. "/good", { tests_dir = tests })
  t.eq(good.status, "ok", good.message)
  local r = pallas.test(task, good, tests)
  t.eq(r.status, "ok", r.message)
  t.eq(r.correct, true)
  t.eq(#r.cases, 6)
  r = pallas.test(task, good, tests, { group = "heldout" })
  t.eq(r.status, "ok", r.message)
  t.eq(#r.cases, 2)

  t.eq(good.interpret, "tpu", "TPU interpret mode is the default on the CPU")
  t.eq(good.timing_kind, "interpret")
  local cpu = { s = 0 }
  local b = pallas.bench(task, good, { tests_dir = tests, iters = 5, warmup = 1, cpu = cpu })
  t.eq(b.status, "ok", b.message)
  t.ok(b.latency_s > 0)
  t.ok(cpu.s > 0, "the bench's processes' CPU seconds are counted in opts.cpu")
  t.eq(b.timing_kind, "interpret")
  t.eq(b.reps, 3, "interpreted kernels get M.interpret_timing's 3 calls, not a benchmark")
  local plain = pallas.compile(task, { ["kernel.py"] = read(CANDS .. "/good.py") }, d .. "/plain",
    { tests_dir = tests, interpret = true })
  t.eq(plain.interpret, "plain", "interpret = true is plain interpret mode")
  local p = pallas.profile(task, good, { tests_dir = tests, latency_s = b.latency_s })
  t.eq(p.status, "ok", p.message)
  t.contains(p.text, "latency")
  local base = pallas.baseline(task, { tests_dir = tests, iters = 3, warmup = 1 })
  t.eq(base.status, "ok", base.message)
  t.ok(base.latency_s > 0)
  t.eq(math.tointeger(base.flops), 4 * 16 * 128)

  local wrong = pallas.compile(task, { ["kernel.py"] = read(CANDS .. "/wrong_eps.py") }, d .. "/wrong", { tests_dir = tests })
  t.eq(wrong.status, "ok")
  r = pallas.test(task, wrong, tests)
  t.eq(r.status, "incorrect")
  t.eq(r.correct, false)
  t.contains(r.message, "outside atol")
  t.matches(r.message, "inputs %(%d+, %d+%) float32, %(%d+,%) float32") -- the failing case's shapes
  local wb = pallas.bench(task, wrong, { tests_dir = tests, iters = 3, warmup = 1 })
  t.eq(wb.status, "incorrect", "the timed runs' output is checked")
  t.contains(wb.message, "timed runs")

  local typo = pallas.compile(task, { ["kernel.py"] = read(CANDS .. "/syntax.py") }, d .. "/typo", { tests_dir = tests })
  t.eq(typo.status, "compile_error")
  t.eq(typo.phase, "import")
  t.contains(typo.message, "SyntaxError")
  r = pallas.test(task, typo, tests)
  t.eq(r.status, "compile_error", "test passes a failed build's status through")

  local tun = pallas.compile(task, { ["kernel.py"] = read(CANDS .. "/tunable.py") }, d .. "/tun",
    { tests_dir = tests, defines = { eps_scale = 1 } })
  t.eq(pallas.test(task, tun, tests).status, "ok", "the tuned value reaches the candidate")

  local bad = pallas.compile(task, { ["kernel.py"] = read(CANDS .. "/rejected.py") }, d .. "/bad", { tests_dir = tests })
  t.eq(bad.status, "rejected")
  e2e_teardown()
  fs.rm_rf(d)
end)

t.test("mk.eval evaluates a Pallas candidate: autotune keeps the correct configuration, held-out passes", function()
  local ok, why = e2e_setup()
  t.ok(ok, why)
  local task = assert(require("mk.eval.targets").load_task(TINY))
  t.eq(task.target, "pallas")
  task.plain_ok = true -- its candidates are plain JAX
  local ev = require("mk.eval").new(task, { jobs = 2, bench = { min_reps = 3, max_reps = 5, warmup = 1 } })
  local src = read(CANDS .. "/tunable_ok.py")
  local r = ev:evaluate(src, { profile = true })
  t.eq(r.status, "ok", r.message)
  t.ok(r.speedup > 0)
  t.same(r.tune.params, { eps_scale = 1 })
  t.eq(#r.tune.tried, 2)
  t.contains(r.profile.text, "latency")
  -- the separate check processes (tests and every benchmark's output) are
  -- check time, not left unaccounted in engine_s
  local tm = r.timing
  t.ok(tm.check_s > 0, "check_s " .. tostring(tm.check_s))
  t.ok(tm.compile_s + tm.test_s + tm.bench_s + tm.check_s + tm.queue_s <= tm.wall_s + 1e-6)
  t.eq(ev:heldout(src).correct, true)
  local bad = ev:evaluate(read(CANDS .. "/zeros.py"))
  t.eq(bad.status, "incorrect")
  t.contains(bad.message, "all zeros")
  ev:close()
  e2e_teardown()
end)

t.test("with opts.sandbox a candidate runs under bubblewrap without the expected outputs", function()
  local ok, why = e2e_setup()
  t.ok(ok, why)
  local sb = require "mk.services.sandbox"
  if not sb.available() then e2e_teardown(); return t.skip("bubblewrap cannot run here") end
  local task = assert(pallas.load(TINY))
  task.seeds, task.heldout_seeds = { 0 }, {}
  task.plain_ok = true -- good.py is plain JAX
  local d = t.tmpdir("mk-pallas-")
  local tests = d .. "/tests"
  t.eq(pallas.freeze(task, tests).status, "ok")
  local opts = { tests_dir = tests, sandbox = true }
  local b = pallas.compile(task, { ["kernel.py"] = read(CANDS .. "/good.py") }, d .. "/good", opts)
  t.eq(b.status, "ok", b.message)
  local r = pallas.test(task, b, tests, opts)
  t.eq(r.status, "ok", r.message)
  local bb = pallas.bench(task, b, { tests_dir = tests, sandbox = true, iters = 3, warmup = 1 })
  t.eq(bb.status, "ok", bb.message)
  -- A probe through the same sandbox: the inputs are visible, expected/ is not.
  local proc = require "mk.proc"
  local res = proc.run(sb.apply { argv = { "/bin/sh", "-c", "ls " .. tests .. "/inputs >/dev/null && ls " .. tests ..
    "/expected" }, sandbox = { workdir = d .. "/good", ro = { tests .. "/inputs" } } })
  t.ok(res.code ~= 0, "expected/ must not be visible in the sandbox")
  pallas.sandbox_ro = {}
  e2e_teardown()
  fs.rm_rf(d)
end)

t.test("bank kernels through mk.eval in TPU interpret mode: verdicts, race and lowering messages, interpret timing", function()
  local ok, why = e2e_setup()
  t.ok(ok, why)
  local task = assert(require("mk.eval.targets").load_task("examples/tasks/pallas/rmsnorm"))
  -- Every bank kernel's status is checked in-process by the Python tests
  -- (TestSuiteBanks); here one of each kind goes the whole way through
  -- mk.eval: separate run and check processes, the pool, the sandbox.
  task.seeds, task.heldout_seeds = { 0 }, {}
  local ev = require("mk.eval").new(task, { jobs = 1, bench = { min_reps = 5, max_reps = 20, warmup = 2 } })
  local bank = dofile("examples/tasks/pallas/rmsnorm/scripted/bank.lua")
  for _, id in ipairs { "pallas_rows", "pallas_block5", "pallas_dma_race", "pallas_wrong_eps" } do
    local k = bank.kernels[id]
    local r = ev:evaluate(read("examples/tasks/pallas/rmsnorm/scripted/" .. k.file), { tune = false })
    local want = (k.expect == "fast" or k.expect == "slow") and "ok" or k.expect
    t.eq(r.status, want, id .. ": " .. tostring(r.message))
    if id == "pallas_dma_race" then t.contains(r.message, "data race") end
    if id == "pallas_block5" then t.contains(r.message, "lowering for TPU (Mosaic) failed") end
    if want == "ok" then
      t.eq(r.timing_kind, "interpret", id)
      t.contains(r.message, "interpret timings")
      io.stderr:write(string.format("  %s: %s\n", id, r.message))
    end
  end
  t.ok(pallas.pool_stats.warm > 0, "steps ran in pre-started workers")
  ev:close()
  e2e_teardown()
end)

return t.run()

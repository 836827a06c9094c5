-- The simulated model and device (docs/simulator.md): the state file, the
-- task parameters and the device's law, the model's rules, the sim
-- target's verdicts and determinism, and whole runs of the real engine on
-- `--model sim` (labelled a simulation, deterministic per seed).
local t = dofile("tests/lua/lib/t.lua")
local cjson = require "cjson"
local fs = require "mk.fs"
local kernel = require "mk.services.sim.kernel"
local model = require "mk.services.sim.model"
local rng = require "mk.services.rng"
local simtask = require "mk.services.sim.task"
local targets = require "mk.eval.targets"

local SUITE = "examples/suites/sim-jaxbench"
local tmp = t.tmpdir("mk-sim-test-")

-- A sim task folder under tmp with `spec` over a small default.
local function task_dir(name, spec)
  local dir = tmp .. "/" .. name
  assert(fs.mkdirs(dir))
  local fields = { 'target = "sim"', string.format("name = %q", name) }
  for k, v in pairs(spec or {}) do
    fields[#fields + 1] = k .. " = " .. (type(v) == "table" and v[1] or tostring(v))
  end
  assert(fs.write(dir .. "/task.lua", "return { " .. table.concat(fields, ", ") .. " }\n"))
  simtask.reset()
  return dir
end

t.test("a state file reads back as it was written, tunables included", function()
  local st = { task = "x", draw = "0a0b", size = 1500, block = 256,
    opts = { { name = "tile_grid", botched = false }, { name = "double_buffer", botched = true } },
    defects = { "vmem", "mask" }, tunables = { { name = "block", values = { 128, 256, 512 } } } }
  local text = kernel.format(st)
  t.contains(text, "opts tile_grid double_buffer*")
  t.contains(text, "defects compile:vmem incorrect:mask")
  t.contains(text, "# mk:tune block = [128, 256, 512]")
  t.same(kernel.parse(text), st)
end)

t.test("a parsed state is the caller's own: changing it does not change the next parse of the text", function()
  local text = "kernel x\nopts tile_grid\nblock 256\n"
  local a = kernel.parse(text)
  a.opts[1].botched, a.block = true, 1024
  local b = kernel.parse(text)
  t.eq(b.opts[1].botched, false)
  t.eq(b.block, 256)
end)

t.test("a state file the format does not have is an error naming the line", function()
  local st, err = kernel.parse("kernel x\nopts tile_grid\nwhatever 3\n")
  t.eq(st, nil)
  t.contains(err, "line 3")
  t.contains(select(2, kernel.parse("kernel x\ndefects compile:mask\n")), "unknown defect 'compile:mask'")
  t.contains(select(2, kernel.parse("opts tile_grid\n")), "no 'kernel <task>' line")
end)

t.test("the law: no optimisation runs at naive, all of them with the best block at the headroom", function()
  local p = assert(simtask.load(task_dir("law", { headroom = 4, naive = 0.5,
    opts = { "{ tile_grid = 3, double_buffer = 1 }" }, tune = { "{ best = 512, gain = 1.25, max = 1024 }" } })))
  t.near(p.opts.tile_grid, 0.75, 1e-12, "weights are normalised")
  local none = { task = "law", opts = {}, defects = {}, tunables = {}, block = 512 }
  t.near(simtask.speedup(p, none), 0.5 * 1.25, 1e-9)
  local all = kernel.copy(none)
  all.opts = { { name = "tile_grid" }, { name = "double_buffer" } }
  t.near(simtask.speedup(p, all), 4, 1e-9)
  t.near(simtask.speedup(p, all, 2048), 4 / 1.25, 1e-9, "two octaves from the best block: no tuning gain")
  all.opts[2].botched = true
  t.ok(simtask.speedup(p, all) < 4 * 0.5, "a botched optimisation costs its weight and more")
  t.same(simtask.missing(p, all), { "double_buffer" })
  t.near(simtask.remaining(p, all), 0.25, 1e-12)
end)

t.test("a bad parameter is a bad_task error naming the file and the parameter", function()
  local _, err = simtask.load(task_dir("bad1", { fix = 1.5 }))
  t.eq(err.kind, "bad_task")
  t.contains(err.message, "bad1/task.lua: fix must be in [0, 1]")
  _, err = simtask.load(task_dir("bad2", { opts = { "{ warp_speed = 1 }" } }))
  t.contains(err.message, "unknown optimisation 'warp_speed'")
  _, err = simtask.load(task_dir("bad3", { fixx = 0.5 }))
  t.contains(err.message, "unknown parameter 'fixx'")
end)

t.test("the model's rules follow their probabilities at the extremes", function()
  local p = assert(simtask.load(task_dir("rules", { compile = 1, correct = 1, crash = 0, heldout = 0,
    prior_opt = 1, botch = 0, fix = 1, fix_new = 0, direction = 1, hint = 1, break_compile = 0, break_correct = 0,
    opts = { "{ tile_grid = 1, skip_blocks = 1 }" } })))
  local r = rng.new(1)
  local st = model.fresh(p, r)
  t.same(st.defects, {}, "compile = correct = 1: a fresh kernel has no defect")
  t.eq(#st.opts, 2, "prior_opt = 1: every useful optimisation")
  t.eq(model.plan(p, r, { direction = "grid_order", hint = "skip_blocks" }), "grid_order", "direction = 1 wins")
  t.eq(model.plan(p, r, { hint = "skip_blocks" }), "skip_blocks", "hint = 1 follows the profile")
  st.defects = { "vmem" }
  local fixed = model.fix(p, r, st, { error = kernel.DEFECTS.vmem.msg })
  t.same(fixed.defects, {}, "fix = 1 repairs the error shown")
  local child = model.implement(p, r, { opt = "grid_order", parent = fixed })
  t.ok(kernel.applied(child, "grid_order"), "the plan's optimisation is applied")
  t.ok(child.draw ~= fixed.draw, "a new sample is a new file")
  local tuned = model.tune(p, r, child)
  t.eq(tuned.tunables[1].name, "block")
  t.eq(model.defect_in("blah\n" .. kernel.DEFECTS.mask.msg), "mask")
end)

t.test("the sim target is discovered and derives verdicts from the state", function()
  t.ok(targets.folder("sim") ~= nil, "targets/sim is a target folder")
  local task = assert(targets.load_task(SUITE .. "/6p_Paged_Attention"))
  t.eq(task.target, "sim")
  t.eq(task.candidate_file, "kernel.sim")
  local sim = targets.get("sim")
  local function build(defects, block)
    local st = { task = task.name, draw = "1", size = 100, block = block or 256, opts = { { name = "tile_grid" } },
      defects = defects, tunables = {} }
    return sim.compile(task, { ["kernel.sim"] = kernel.format(st) }, tmp .. "/b")
  end
  local b = build({ "mosaic" })
  t.eq(b.status, "compile_error")
  t.contains(b.message, "Mosaic failed to compile")
  t.eq(build({}, 4096).status, "compile_error", "a block past the task's VMEM fails to compile")
  t.eq(sim.test(task, build({ "oob" }), nil, {}).status, "crash")
  t.eq(sim.test(task, build({ "race" }), nil, {}).status, "incorrect")
  local h = build({ "ragged" })
  t.eq(sim.test(task, h, nil, { group = "search" }).status, "ok", "a held-out-only bug passes the search tests")
  t.eq(sim.test(task, h, nil, { group = "heldout" }).status, "incorrect", "... and fails the held-out ones")
  local garbage = sim.compile(task, { ["kernel.sim"] = "def kernel(x): return x\n" }, tmp .. "/g")
  t.eq(garbage.status, "compile_error")
  t.contains(garbage.message, "SyntaxError")
end)

t.test("the sim device's measurements are deterministic per file and build, noisy between", function()
  local task = assert(targets.load_task(SUITE .. "/8p_GEMM"))
  local sim = targets.get("sim")
  local text = kernel.format { task = task.name, draw = "ab", size = 100, block = 1024, opts = { { name = "tile_grid" } },
    defects = {}, tunables = {} }
  local function series()
    local b = sim.compile(task, { ["kernel.sim"] = text }, tmp .. "/d")
    return { sim.bench(task, b).latency_s, sim.bench(task, b).latency_s }
  end
  local a, b = series(), series()
  t.same(a, b, "the same file measured the same way twice gives the same figures")
  t.ok(a[1] ~= a[2], "two measurements of one build differ (device noise)")
  t.eq(sim.baseline(task).latency_s, sim.baseline(task).latency_s)
  t.contains(sim.profile(task, sim.compile(task, { ["kernel.sim"] = text }, tmp .. "/p"), { latency_s = a[1] }).text,
    "-> next: ")
end)

local runner = require("mk.search.runner").with_agents(require("agents"))

local function run(strategy, seed, set)
  return runner.run { strategy = strategy, task = SUITE .. "/13p_Cross_Entropy", model = "sim", seed = seed, set = set,
    root = tmp .. "/runs", quiet = true }
end

t.test("a run on --model sim goes through the real engine, labelled a simulation, with simulated spend", function()
  local s = run("auto", 3)
  t.contains(s.model_label, "simulated model")
  t.contains(s.simulation, "SIMULATION")
  t.eq(s.target, "sim")
  t.ok(s.nodes > 3)
  t.ok(s.cost.input_tokens > 1000 and s.cost.output_tokens > 1000)
  t.ok(s.cost.usd > 0, "priced as the named model")
  t.ok(s.cost.llm_s > s.cost.wall_s, "model latency is simulated (recorded, not slept)")
  t.ok(fs.isdir(s.run_dir .. "/graph.git"))
  local ev = fs.read(s.run_dir .. "/events.jsonl")
  t.contains(ev, '"agent":"plan"')
  t.contains(ev, '"agent":"fix"')
end)

t.test("the same seed gives the same run; another seed another one", function()
  local function outcome(s)
    return cjson.encode { s.nodes, s.best ~= cjson.null and s.best.speedup or 0, s.cost.input_tokens }
  end
  local a, b, c = run("parallel", 5, { trajectories = 2, iters = 2 }), run("parallel", 5, { trajectories = 2, iters = 2 }),
    run("parallel", 6, { trajectories = 2, iters = 2 })
  t.eq(outcome(a), outcome(b))
  t.ok(outcome(a) ~= outcome(c))
end)

t.test("a bench on the simulated suite says it is a simulation in its table", function()
  local bench = require "mk.study.bench"
  local res = assert(bench.run { suite = SUITE, strategy = "zeroshot", repeats = 2, model = "sim",
    set = { n = 5 }, out = tmp .. "/bench", tasks = { "12p_RMSNorm", "18k_Conv2D_ReLU_BiasAdd" } })
  t.contains(res.simulation, "SIMULATION")
  local text = bench.format(res)
  t.contains(text, "SIMULATION: simulated model and device")
  t.contains(text, "model: simulated model")
  t.contains(text, "floored geomean of each repeat")
  -- and so does compare, over two such benches
  assert(bench.run { suite = SUITE, strategy = "zeroshot", repeats = 2, model = "sim", set = { n = 3 },
    out = tmp .. "/bench3", tasks = { "12p_RMSNorm", "18k_Conv2D_ReLU_BiasAdd" } })
  local compare = require "mk.study.compare"
  local strategies = assert(compare.load { tmp .. "/bench3", tmp .. "/bench" })
  t.contains(compare.format(assert(compare.run(strategies, { n = 50 }))), "SIMULATION: simulated model and device")
end)

t.test("a sweep's table opens with the simulation line when an entry is simulated", function()
  local sweep = require "mk.study.sweep"
  local note = simtask.note("sim", { "sim" })
  t.contains(note, "SIMULATION: simulated model and device")
  t.eq(simtask.note("openai:gpt-5", { "sim" }):match("simulated (%a+)"), "device", "a real model on a sim task")
  t.eq(simtask.note("scripted", { "c" }), nil)
  local text = sweep.format { entries = { { index = 1, kind = "run", label = "a", summary = { simulation = note,
    nodes = 3, correct_nodes = 1, cost = {} } } } }
  t.eq(text:match("^[^\n]+"), note)
end)

t.test("the simulated model's latency is recorded, and slept only when the client asks (sim_sleep)", function()
  local prov = require "mk.services.llm.providers.sim"
  local task_lib = require "mk.services.task"
  local slept = {}
  local sleep = task_lib.sleep
  task_lib.sleep = function(s) slept[#slept + 1] = s end
  local req = { messages = { { role = "user", content = "Write an optimisation plan for the next version" } },
    meta = { task_dir = fs.realpath(SUITE .. "/12p_RMSNorm"), task_name = "12p_RMSNorm", seed = 7, agent = "plan" } }
  local a = prov.call({ model = "sim" }, req)
  local b = prov.call({ model = "sim", sim_sleep = 0.5 }, req)
  task_lib.sleep = sleep
  t.ok(a.latency_s > 1, "a simulated latency: time to first token and ~70 tokens/s")
  t.eq(b.latency_s, a.latency_s)
  t.eq(#slept, 1, "slept once: only the client with sim_sleep")
  t.near(slept[1], 0.5 * a.latency_s, 1e-12)
  t.contains(a.text, "[sim:opt=")
end)

t.test("the simulated model refuses a task that is not a sim task", function()
  local prov = require "mk.services.llm.providers.sim"
  local r, err = prov.call({ model = "sim" }, { messages = { { role = "user", content = "hi" } },
    meta = { task_dir = "tests/tasks/rmsnorm_small", task_name = "rmsnorm_small" } })
  t.eq(r, nil)
  t.eq(err.kind, "bad_request")
  t.contains(err.message, "only tasks of the sim target")
end)

return t.run()

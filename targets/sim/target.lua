--- targets/sim/target.lua: the simulated device. A candidate is a state
--- file (`kernel.sim`, mk.services.sim.kernel) naming the optimisations and
--- defects of the kernel it stands for; compile, test, bench and profile
--- derive the verdict, the latency and the profile text from that state and
--- the task's parameters (mk.services.sim.task, the task folder's
--- task.lua), with no process, file or wait: a run of the real engine on
--- this target costs only the engine's own work. Deterministic: the noise
--- of a measurement is drawn from the candidate's text (which carries the
--- model's draw, itself seeded by the run seed and the step key), its block
--- size and how many times that build was measured. Simulated durations
--- (compile, tests, benchmark, profile) are reported as the steps' wall_s,
--- so a run's device seconds are the simulated device's. docs/simulator.md.
local hash = require "mk.hash"
local kernel = require "mk.services.sim.kernel"
local model = require "mk.services.sim.model"
local rng = require "mk.services.rng"
local simtask = require "mk.services.sim.task"

local M = { name = "sim" }

-- simulated seconds of each step on the device
local COMPILE_S, TEST_S, PROFILE_S = 4.0, 1.5, 2.0

function M.detect() return false end -- a sim task names its target in task.lua

--- The reference as the prompts show it: the XLA program the baseline times.
function M.reference(p)
  return "# the reference: " .. (p.description ~= "" and p.description or p.name) .. "\n"
    .. kernel.format { task = p.name, reference = true, size = math.floor(p.size / 4) }
end

function M.load(dir)
  local p, err = simtask.load(dir)
  if not p then return nil, err end
  return {
    name = p.name, target = "sim", dir = dir, candidate_file = "kernel.sim",
    description = (p.description ~= "" and p.description .. ". " or "")
      .. "A simulated task: its kernels are state files read by the simulated device.",
    reference = M.reference(p), signature = "kernel.sim: a state file (kernel, opts, block; see the rules)",
    tolerance = { atol = 1e-2, rtol = 1e-2 }, sim = p,
  }
end

-- Nothing to freeze: the device knows each kernel's verdict from its state.
function M.freeze() return { status = "ok", fresh = true, cases = 2, manifest_sha = "sim", message = "" } end

local function failed(status, message, wall_s)
  return { status = status, correct = false, message = message, log = message, wall_s = wall_s }
end

function M.compile(task, files, workdir, opts)
  local src = files[task.candidate_file]
  if type(src) ~= "string" then error("sim.compile: files must hold " .. task.candidate_file, 2) end
  local p = task.sim
  local st, perr = kernel.parse(src)
  if not st then return failed("compile_error", "SyntaxError: " .. perr, 1.0) end
  if st.task ~= p.name then
    return failed("compile_error", "NameError: kernel.sim is a kernel of task '" .. st.task .. "', not '" .. p.name
      .. "'", 1.0)
  end
  local wall = COMPILE_S * (1 + 0.1 * #st.opts)
  local block = opts and opts.defines and tonumber(opts.defines.block) or st.block
  local broken = kernel.of_class(st, "compile")[1] -- the first error stops the compiler
  if broken then return failed("compile_error", kernel.DEFECTS[broken].msg, wall) end
  if block and block > p.tune.max then
    return failed("compile_error", kernel.DEFECTS.vmem.msg .. " (block " .. block .. ")", wall)
  end
  -- the noise's seed: the file's digest (rng hashes its seed byte by byte in Lua; a digest is short)
  local seed = hash.sha256(src)
  return { status = "ok", message = "", workdir = workdir, state = st, seed = seed, block = block,
    defines = opts and opts.defines, measures = 0, wall_s = wall }
end

function M.test(_, build, _, opts)
  local group = opts and opts.group or "search"
  local st = build.state
  for _, class in ipairs { "crash", "incorrect", group == "heldout" and "heldout" or nil } do
    local d = kernel.of_class(st, class)[1]
    if d then
      local status = class == "crash" and "crash" or "incorrect"
      local r = failed(status, kernel.DEFECTS[d].msg, TEST_S)
      r.cases = { { id = 1, ok = false, message = r.message } }
      return r
    end
  end
  return { status = "ok", correct = true, message = "", cases = { { id = 1, ok = true } }, wall_s = TEST_S }
end

-- A benchmark of true latency `lat`: one measured median, the spread of its
-- calls and the simulated time it took.
local function timed(p, lat, r, steady)
  local x = simtask.measure(p, lat, r, steady)
  local reps = math.max(5, math.min(200, math.floor(0.5 / x)))
  return { status = "ok", correct = true, latency_s = x, spread = 1.3 * p.noise, min_s = x * (1 - 1.3 * p.noise),
    reps = reps, message = "", wall_s = 0.3 + reps * x }
end

function M.baseline(task)
  local p = task.sim
  -- the baseline's own noise, without a disturbed run: it is measured once for all the run's speedups
  return timed(p, p.baseline_ms / 1000, rng.new("sim-baseline", p.name), true)
end

function M.bench(task, build)
  local p = task.sim
  build.measures = build.measures + 1
  local r = rng.new("sim-bench", build.seed, tostring(build.block), build.measures)
  return timed(p, p.baseline_ms / 1000 / simtask.speedup(p, build.state, build.block), r)
end

local SPLITS = { "DMA wait %d %%, compute %d %%, per-step overhead %d %%",
  "compute %d %%, DMA wait %d %%, per-step overhead %d %%" }

function M.profile(task, build, opts)
  local p, st = task.sim, build.state
  local r = rng.new("sim-profile", build.seed, tostring(build.block))
  local speedup = simtask.speedup(p, st, build.block)
  local a = r:int(30, 60)
  local b = r:int(15, 100 - a - 5)
  local next_opt = model.hint(p, r, st)
  local lines = {
    "simulated profile (targets/sim: derived from the kernel's state, not measured)",
    string.format("latency %.3f ms, %.2fx the baseline's speed; %d %% of the simulated roofline",
      (opts.latency_s or 0) * 1000, speedup, math.floor(100 * speedup / p.headroom + 0.5)),
    "time: " .. string.format(r:pick(SPLITS), a, b, 100 - a - b),
    string.format("block %s%s", tostring(build.block or "?"), #st.tunables > 0 and " (tuned)" or " (not tunable)"),
    next_opt and ("bottleneck: " .. kernel.OPT[next_opt].text .. " -> next: " .. next_opt)
      or "bottleneck: none left that the profile can name (the kernel is near the device's limit)",
  }
  return { status = "ok", text = table.concat(lines, "\n"), message = "", wall_s = PROFILE_S }
end

function M.tunables(source)
  local st = type(source) == "string" and kernel.parse(source)
  if not st then return {} end
  return st.tunables
end

function M.facts(task)
  return {
    { "device", "a simulated accelerator (mkengine sim target): no hardware; verdicts and latencies follow the "
      .. "task's parameters" },
    { "baseline", string.format("the XLA program, about %.3f ms", task.sim.baseline_ms) },
  }
end

return M

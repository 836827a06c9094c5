-- bench/sim_calibrate.lua: the simulated JAXBench suite and its calibration
-- against the published table (docs/simulator.md, "Calibration").
--
--   build/mkengine script bench/sim_calibrate.lua write [DIR]
--       write the 50 task.lua files of DIR (default
--       examples/suites/sim-jaxbench) from DESIGN and SUITE_KNOBS below
--   build/mkengine script bench/sim_calibrate.lua study [--repeat K] [--out DIR] [--only s1,s2] [--lanes N] [--seed S]
--       run `mkengine bench SUITE STRATEGY --model sim --repeat K` for the
--       four strategies of the published protocol at their defaults (N
--       benches at once, default 2: one per core) and print the table
--       beside the published one
--   build/mkengine script bench/sim_calibrate.lua fit [--repeat K] [--rounds R] [--out DIR]
--       coordinate search over FIT's knobs: each step rewrites the suite in
--       a scratch directory, runs the study there and keeps the knob value
--       whose table is nearest the published one (LOSS below); prints the
--       knobs it ends with, to be copied into SUITE_KNOBS and DEFAULTS
--
-- DESIGN holds what each task is (its family, headroom, how a naive kernel
-- does, whether a first try compiles, its optimisations); SUITE_KNOBS what
-- the tasks share; the simulated model's parameters are the DEFAULTS of
-- mk.services.sim.task. A task file holds its own parameters; a user can
-- copy one and edit it, adding any other parameter.
local fs = require("mk.fs")
local home = require("mk.home")
local proc = require("mk.proc")
local task_lib = require("mk.services.task")
local simtask = require("mk.services.sim.task")
local util = require("mk.services.util")

-- The published table (MaxKernel on JAXBench, docs/simulator.md): median run of 5.
local PUBLISHED = {
  { strategy = "zeroshot", compiled = 10, correct = 10, geomean = 1.08, fast_1 = 6 },
  { strategy = "auto", compiled = 49, correct = 48, geomean = 1.39, fast_1 = 22, band = { 1.19, 1.42 } },
  { strategy = "parallel", compiled = 50, correct = 50, geomean = 1.58, fast_1 = 34 },
  { strategy = "beam", compiled = 50, correct = 50, geomean = 1.49, fast_1 = 31 },
}
local TOL = { count = 3, geomean = 0.06 }

-- What the suite's tasks share: how likely a first try compiles on the 10
-- tasks a zero-shot sample can compile and on the others, the factor on
-- each task's own odds of a right first try, and `reach` (every headroom
-- above 1 is raised to this power). The simulated model's own parameters
-- (fix, hint, insight, ...) are mk.services.sim.task's DEFAULTS, fitted
-- with the same procedure; `fit` varies them too, written into each task.
local SUITE_KNOBS = {
  compile_easy = 0.12,
  compile_hard = 0.0003,
  correct = 0.55,
  reach = 0.95,
}
local MODEL_KNOBS = { "fix", "fix_new", "break_compile", "break_correct", "crash", "heldout", "botch", "insight",
  "hint", "direction", "prior_opt", "profile_truth", "profile_read", "tune_good", "run_sd" }

-- The knobs as they stand: the suite's and the model's defaults.
local function knobs_now()
  local k = {}
  for name, v in pairs(SUITE_KNOBS) do k[name] = v end
  for _, name in ipairs(MODEL_KNOBS) do k[name] = simtask.DEFAULTS[name] end
  return k
end

-- The knobs `fit` searches, with the step it moves each by.
-- (insight, hint and profile_truth are set per class below, so not here)
local FIT = { { "reach", 0.05 }, { "run_sd", 0.2 }, { "break_correct", 0.02 }, { "botch", 0.04 },
  { "direction", 0.1 }, { "fix", 0.1 }, { "break_compile", 0.05 }, { "prior_opt", 0.05 } }

-- Useful optimisations per family: {name, weight}; weights are shares of the headroom.
local FAMILY = {
  attention = { online_softmax = 0.45, tile_grid = 0.15, skip_blocks = 0.15, double_buffer = 0.15, bf16_io = 0.1 },
  paged = { scalar_prefetch = 0.45, skip_blocks = 0.2, double_buffer = 0.15, tile_grid = 0.1, group_tiles = 0.1 },
  gemm = { tile_grid = 0.3, fuse_epilogue = 0.3, vmem_accumulate = 0.2, big_blocks = 0.2 },
  gemm_reduce = { fuse_chain = 0.5, tile_grid = 0.15, vmem_accumulate = 0.15, fuse_epilogue = 0.1, grid_order = 0.1 },
  gemm_softmax = { fuse_chain = 0.4, online_softmax = 0.3, tile_grid = 0.1, vmem_accumulate = 0.1, grid_order = 0.1 },
  conv = { tile_grid = 0.3, emit_pipeline = 0.3, fuse_epilogue = 0.2, vmem_accumulate = 0.2 },
  norm = { fuse_chain = 0.45, big_blocks = 0.2, parallel_axes = 0.2, bf16_io = 0.15 },
  xent = { online_softmax = 0.45, fuse_chain = 0.25, big_blocks = 0.15, bf16_io = 0.15 },
  scan = { chunked_scan = 0.55, tile_grid = 0.15, vmem_accumulate = 0.15, fuse_chain = 0.15 },
  ragged = { group_tiles = 0.5, scalar_prefetch = 0.25, tile_grid = 0.15, skip_blocks = 0.1 },
}
local TUNE = { -- best block, its gain, the largest block that fits VMEM
  attention = { 512, 1.12, 1024 }, paged = { 256, 1.1, 1024 }, gemm = { 1024, 1.15, 2048 },
  gemm_reduce = { 512, 1.1, 2048 }, gemm_softmax = { 512, 1.1, 1024 }, conv = { 256, 1.1, 1024 },
  norm = { 1024, 1.08, 2048 }, xent = { 512, 1.08, 2048 }, scan = { 256, 1.1, 1024 }, ragged = { 256, 1.1, 1024 },
}

-- What a class of task changes in the model's odds: on an `easy` task the
-- right optimisation is obvious (a plan finds it, the profile names it);
-- on a `hard` one it is not, and its optimisations weigh more alike (the
-- square roots of the family's weights); `none` is a task XLA wins
-- (headroom <= 1).
local CLASS = {
  easy = { insight = 0.85, profile_truth = 0.95, hint = 0.8 },
  hard = { insight = 0.2, profile_truth = 0.3, hint = 0.4 },
  none = {},
}

-- The 50 tasks, named after JAXBench's (names only), with their family and
-- class. H: headroom (best
-- speedup over XLA); naive: a correct kernel with no optimisation; zs: a
-- first try can compile (the 10 tasks zero-shot sampling compiles);
-- correct: this task's factor on SUITE_KNOBS.correct; ms: the baseline's latency;
-- size: tokens of a real kernel.
local DESIGN = {
  { "1p_Flash_Attention", "attention", "easy", H = 2.6, naive = 0.8, ms = 4.1, size = 3000, desc = "Causal flash attention" },
  { "2p_GQA_Attention", "attention", "easy", H = 2.8, naive = 0.8, ms = 3.6, size = 3000, desc = "Grouped-query attention" },
  { "3p_MLA_Attention", "attention", "hard", H = 1.4, naive = 0.25, ms = 5.2, size = 3400,
    desc = "Multi-head latent attention (low-rank KV)" },
  { "4p_Sparse_Attention", "attention", "easy", H = 5.6, naive = 0.8, ms = 6.3, size = 3200,
    desc = "Block-sparse attention over a top-k block mask", opts = { skip_blocks = 0.5, online_softmax = 0.2,
      tile_grid = 0.1, scalar_prefetch = 0.1, double_buffer = 0.1 } },
  { "5p_Flex_Attention", "attention", "easy", H = 3.0, naive = 0.8, ms = 4.4, size = 3200,
    desc = "Attention with a score-modifying function and a block mask" },
  { "6p_Paged_Attention", "paged", "easy", H = 7.5, naive = 0.8, ms = 2.4, size = 2800,
    desc = "Paged attention decode over a block table of KV pages" },
  { "7p_Ragged_Paged_Attention", "paged", "hard", H = 1.8, naive = 0.25, ms = 3.1, size = 3600,
    desc = "Ragged paged attention: mixed prefill and decode sequences" },
  { "8p_GEMM", "gemm", "easy", H = 1.03, naive = 0.85, ms = 9.8, size = 1800, noise = 0.005, desc = "Dense bf16 matrix multiply" },
  { "9p_SwiGLU_MLP", "gemm", "none", H = 0.98, naive = 0.6, ms = 7.7, size = 2200, desc = "SwiGLU MLP block" },
  { "10p_Sparse_MoE", "ragged", "easy", H = 3.2, naive = 0.8, ms = 5.5, size = 3200,
    desc = "Sparse mixture-of-experts layer with top-k routing" },
  { "11p_Megablox_GMM", "ragged", "hard", H = 1.6, naive = 0.25, ms = 4.8, size = 3000,
    desc = "Grouped matrix multiply over ragged expert groups" },
  { "12p_RMSNorm", "norm", "easy", H = 2.4, naive = 1, ms = 0.42, size = 1200, zs = true, correct = 1.3,
    desc = "RMS normalisation over the hidden axis" },
  { "13p_Cross_Entropy", "xent", "easy", H = 3.0, naive = 1, ms = 1.9, size = 1600, zs = true, correct = 1.2,
    desc = "Softmax cross-entropy over a large vocabulary" },
  { "14p_Ragged_Dot", "ragged", "hard", H = 1.8, naive = 0.25, ms = 3.9, size = 2600, desc = "Ragged dot product by groups" },
  { "15p_RetNet_Retention", "scan", "easy", H = 2.6, naive = 0.8, ms = 3.3, size = 3000, desc = "RetNet retention" },
  { "16p_Mamba2_SSD", "scan", "easy", H = 3.4, naive = 0.8, ms = 4.6, size = 3400,
    desc = "Mamba-2 state-space duality scan" },
  { "17p_Triangle_Multiplication", "gemm_reduce", "hard", H = 2, naive = 0.25, ms = 5.9, size = 2800,
    desc = "Triangle multiplicative update" },
  { "18k_Conv2D_ReLU_BiasAdd", "conv", "none", H = 0.8, naive = 0.4, ms = 1.3, size = 2400, desc = "Conv2D, ReLU, bias add" },
  { "19k_Matmul_Subtract_Multiply_ReLU", "gemm", "none", H = 0.94, naive = 0.75, ms = 1.1, size = 1700, zs = true,
    desc = "Matmul, subtract, multiply, ReLU" },
  { "20k_Gemm_Multiply_LeakyReLU", "gemm", "none", H = 0.95, naive = 0.75, ms = 1.1, size = 1700, zs = true,
    desc = "GEMM, multiply, LeakyReLU" },
  { "21k_Gemm_Divide_Sum_Scaling", "gemm_reduce", "easy", H = 2.6, naive = 1, ms = 1.2, size = 1800, zs = true,
    desc = "GEMM, divide, sum, scaling" },
  { "22k_Conv2d_InstanceNorm_Divide", "conv", "none", H = 0.9, naive = 0.45, ms = 1.6, size = 2400,
    desc = "Conv2d, instance norm, divide" },
  { "23k_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp", "gemm_reduce", "easy", H = 2.8, naive = 0.8, ms = 1.4, size = 2200,
    desc = "Matmul, sum, max, avg pool, two logsumexps" },
  { "24k_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish", "gemm_reduce", "easy", H = 2.2, naive = 0.8, ms = 1.5, size = 2200,
    desc = "Matmul, scale, residual add, clamp, logsumexp, Mish" },
  { "25k_Conv3d_GroupNorm_Mean", "conv", "none", H = 0.85, naive = 0.4, ms = 2.8, size = 2600,
    desc = "Conv3d, group norm, mean" },
  { "26k_BMM_InstanceNorm_Sum_ResidualAdd_Multiply", "gemm_reduce", "hard", H = 2, naive = 0.25, ms = 1.7, size = 2300,
    desc = "Batched matmul, instance norm, sum, residual add, multiply" },
  { "27k_Matmul_Mish_Mish", "gemm", "hard", H = 1.5, naive = 0.25, ms = 1.1, size = 1700,
    desc = "Matmul, Mish, Mish" },
  { "28k_ConvTranspose3d_LayerNorm_GELU_Scaling", "conv", "none", H = 0.7, naive = 0.35, ms = 3.4, size = 2800,
    desc = "ConvTranspose3d, layer norm, GELU, scaling" },
  { "29k_Matmul_Swish_Sum_GroupNorm", "gemm_reduce", "easy", H = 1.9, naive = 0.8, ms = 1.5, size = 2300,
    desc = "Matmul, Swish, sum, group norm" },
  { "30k_Matmul_Scaling_ResidualAdd", "gemm", "none", H = 0.95, naive = 0.75, ms = 1.0, size = 1600, zs = true,
    desc = "Matmul, scaling, residual add" },
  { "31k_Gemm_BatchNorm_GELU_ReLU", "gemm_reduce", "hard", H = 1.7, naive = 0.25, ms = 1.3, size = 2100,
    desc = "GEMM, batch norm, GELU, ReLU" },
  { "32k_Gemm_Sigmoid_LogSumExp", "gemm_softmax", "easy", H = 2.3, naive = 1, ms = 1.2, zs = true, size = 2000,
    desc = "GEMM, sigmoid, logsumexp" },
  { "33k_Conv3d_Mish_Tanh", "conv", "none", H = 0.75, naive = 0.4, ms = 2.9, size = 2500, desc = "Conv3d, Mish, tanh" },
  { "34k_Conv2d_Activation_BatchNorm", "conv", "none", H = 0.85, naive = 0.4, ms = 1.5, size = 2400,
    desc = "Conv2d, activation, batch norm" },
  { "35k_Gemm_Scaling_Hardtanh_GELU", "gemm", "none", H = 0.98, naive = 0.75, ms = 1.1, size = 1800,
    desc = "GEMM, scaling, hardtanh, GELU" },
  { "36k_Matmul_Sigmoid_Sum", "gemm_reduce", "easy", H = 2.5, naive = 1, ms = 1.1, size = 1700, zs = true,
    desc = "Matmul, sigmoid, sum" },
  { "37k_Matmul_Swish_Scaling", "gemm", "hard", H = 1.4, naive = 0.25, ms = 1.1, size = 1600,
    desc = "Matmul, Swish, scaling" },
  { "38k_Matmul_Dropout_Softmax", "gemm_softmax", "easy", H = 2.0, naive = 1, ms = 1.4, zs = true, size = 2100,
    desc = "Matmul, dropout, softmax" },
  { "39k_Conv2d_GELU_GlobalAvgPool", "conv", "none", H = 0.9, naive = 0.45, ms = 1.2, size = 2300,
    desc = "Conv2d, GELU, global average pool" },
  { "40k_Gemm_GroupNorm_Min_BiasAdd", "gemm_reduce", "hard", H = 2, naive = 0.25, ms = 1.4, size = 2200,
    desc = "GEMM, group norm, min, bias add" },
  { "41k_Gemm_Add_ReLU", "gemm", "none", H = 0.93, naive = 0.75, ms = 1.0, size = 1500, zs = true, desc = "GEMM, add, ReLU" },
  { "42k_Gemm_Max_Subtract_GELU", "gemm_reduce", "easy", H = 2.0, naive = 0.8, ms = 1.2, size = 2000,
    desc = "GEMM, max, subtract, GELU" },
  { "43k_Gemm_BatchNorm_Scaling_Softmax", "gemm_softmax", "easy", H = 2.2, naive = 0.8, ms = 1.4, size = 2200,
    desc = "GEMM, batch norm, scaling, softmax" },
  { "44k_Matmul_Divide_GELU", "gemm", "none", H = 0.98, naive = 0.75, ms = 1.1, size = 1600, desc = "Matmul, divide, GELU" },
  { "45k_Gemm_GroupNorm_Swish_Multiply_Swish", "gemm_reduce", "hard", H = 1.9, naive = 0.25, ms = 1.5, size = 2300,
    desc = "GEMM, group norm, Swish, multiply, Swish" },
  { "46k_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp", "conv", "none", H = 0.95, naive = 0.45, ms = 1.9,
    size = 2800, desc = "Conv2d, group norm, tanh, HardSwish, residual add, logsumexp" },
  { "47k_Matmul_Add_Swish_Tanh_GELU_Hardtanh", "gemm", "none", H = 0.98, naive = 0.6, ms = 1.2, size = 1900,
    desc = "Matmul, add, Swish, tanh, GELU, hardtanh" },
  { "48k_Matmul_BatchNorm_BiasAdd_Divide_Swish", "gemm_reduce", "hard", H = 1.8, naive = 0.25, ms = 1.3, size = 2100,
    desc = "Matmul, batch norm, bias add, divide, Swish" },
  { "49k_Matmul_AvgPool_GELU_Scale_Max", "gemm_reduce", "easy", H = 2.1, naive = 0.8, ms = 1.2, size = 2000,
    desc = "Matmul, average pool, GELU, scale, max" },
  { "50k_Matmul_GELU_Softmax", "gemm_softmax", "easy", H = 2.0, naive = 0.8, ms = 1.3, size = 1900,
    desc = "Matmul, GELU, softmax" },
}

local SUITE = "examples/suites/sim-jaxbench"

-- ---------------------------------------------------------------- writing

local function num(x)
  if math.type(x) == "integer" then return tostring(x) end
  local s = string.format("%.4g", x)
  return s:find("[%.e]") and s or (s .. ".0")
end

local function clamp01(x) return math.max(0, math.min(1, x)) end

-- The parameters of one task that differ from the defaults: its own
-- (baseline, headroom, naive, odds of a first try, size, optimisations,
-- block) and, with `model`, every model knob that differs from
-- mk.services.sim.task's DEFAULTS (a fit's trial).
local function params(d, k, model)
  local t = TUNE[d[2]]
  local own = CLASS[d[3]]
  local p = {
    baseline_ms = d.ms, headroom = d.H >= 1 and d.H ^ k.reach or d.H, naive = d.naive,
    compile = d.zs and k.compile_easy or k.compile_hard, correct = clamp01(k.correct * (d.correct or 1)),
    size = d.size, noise = d.noise,
  }
  for _, name in ipairs(MODEL_KNOBS) do
    if own[name] ~= nil then
      p[name] = own[name]
    elseif model and k[name] ~= simtask.DEFAULTS[name] then
      p[name] = k[name]
    end
  end
  local opts = d.opts or FAMILY[d[2]]
  if d[3] == "hard" then -- a weaker key optimisation: a kernel needs more of them
    local even = {}
    for name, w in pairs(opts) do even[name] = math.sqrt(w) end
    opts = even
  end
  return p, opts, { best = t[1], gain = t[2], max = t[3] }
end

local ORDER = { "baseline_ms", "noise", "headroom", "naive", "compile", "correct", "size" }

-- The text of one task.lua: its own parameters on a few lines (the rest
-- are the defaults of docs/simulator.md).
local function task_file(d, k, model)
  local p, opts, tune = params(d, k, model)
  local own, odds = {}, {}
  for _, key in ipairs(ORDER) do
    if p[key] ~= nil then own[#own + 1] = key .. " = " .. num(p[key]) end
  end
  for _, key in ipairs(MODEL_KNOBS) do
    if p[key] ~= nil then odds[#odds + 1] = key .. " = " .. num(p[key]) end
  end
  local names = {}
  for name in pairs(opts) do names[#names + 1] = name end
  table.sort(names, function(a, b) return opts[a] > opts[b] or (opts[a] == opts[b] and a < b) end)
  local o = {}
  for _, name in ipairs(names) do o[#o + 1] = name .. " = " .. num(opts[name]) end
  local L = {
    "-- A simulated task (targets/sim), named after JAXBench's " .. d[1] .. " (its name only). Its own",
    "-- parameters; every other one takes the default of docs/simulator.md. Written by",
    "-- bench/sim_calibrate.lua: copy the folder and edit freely.",
    string.format('return { target = "sim", name = %q, family = %q,', d[1], d[2]),
    string.format("  description = %q,", d.desc),
    "  " .. table.concat(own, ", ") .. ",",
  }
  if #odds > 0 then L[#L + 1] = "  " .. table.concat(odds, ", ") .. "," end
  L[#L + 1] = "  opts = { " .. table.concat(o, ", ") .. " },"
  L[#L + 1] = string.format("  tune = { best = %d, gain = %s, max = %d } }", tune.best, num(tune.gain), tune.max)
  return table.concat(L, "\n") .. "\n"
end

local function write(dir, k, model)
  for _, d in ipairs(DESIGN) do
    assert(fs.mkdirs(dir .. "/" .. d[1]))
    assert(fs.write(dir .. "/" .. d[1] .. "/task.lua", task_file(d, k, model)))
  end
  return #DESIGN
end

-- ---------------------------------------------------------------- study

local function read_results(dir) return util.read_json(dir .. "/results.json") end

-- Run the benches of `strategies` on `suite`, `lanes` at once (one
-- mkengine process each); returns {strategy = results} and the wall time.
local function study(suite, out, K, strategies, lanes, seed)
  local t0 = task_lib.now()
  local res = { cpu_s = {} }
  task_lib.map(strategies, lanes, function(s)
    local dir = out .. "/" .. s
    local r = proc.run { argv = { home.exe, "bench", suite, s, "--model", "sim", "--repeat", tostring(K), "--out", dir,
      "--quiet", "--concurrency", "4", "--seed", tostring(seed or 1) } }
    if not r or (r.code ~= 0 and not read_results(dir)) then
      error("bench " .. s .. " failed: " .. tostring(r and (r.stderr .. r.stdout) or "spawn"))
    end
    res[s] = read_results(dir)
    res.cpu_s[s] = r.cpu_s
  end)
  return res, task_lib.now() - t0
end

-- The study's figures for one strategy: {compiled, correct, geomean, fast_1, band}.
local function figures(r)
  local a = r.aggregate
  local lo, hi = math.huge, -math.huge
  for _, g in ipairs(a.repeat_geomeans or {}) do lo, hi = math.min(lo, g), math.max(hi, g) end
  return { compiled = a.compiled, correct = a.correct, geomean = a.geomean_speedup_floored,
    fast_1 = math.floor(a.fast_p["1"] * a.tasks + 0.5), band = lo <= hi and { lo, hi } or nil }
end

-- Distance to the published table: each count off by TOL.count and each
-- geomean off by TOL.geomean counts 1 (squared, summed).
local function loss(res)
  local l = 0
  for _, p in ipairs(PUBLISHED) do
    local r = res[p.strategy]
    if r then
      local f = figures(r)
      for _, key in ipairs { "compiled", "correct", "fast_1" } do l = l + ((f[key] - p[key]) / TOL.count) ^ 2 end
      l = l + ((f.geomean - p.geomean) / TOL.geomean) ^ 2
    end
  end
  return l
end

local function table_text(res, wall)
  local L = { string.format("%-9s %-19s %-19s %-19s %-19s %s", "strategy", "compiled sim/pub", "correct sim/pub",
    "geomean sim/pub", "fast_1 sim/pub", "band over repeats") }
  local all_ok = true
  for _, p in ipairs(PUBLISHED) do
    local r = res[p.strategy]
    if r then
      local f = figures(r)
      local function cnt(key)
        local ok = math.abs(f[key] - p[key]) <= TOL.count
        all_ok = all_ok and ok
        return string.format("%2d / %2d %-8s", f[key], p[key], ok and "ok" or "OFF")
      end
      local gok = math.abs(f.geomean - p.geomean) <= TOL.geomean
      all_ok = all_ok and gok
      L[#L + 1] = string.format("%-9s %-19s %-19s %.2f / %.2f %-6s %-19s %s", p.strategy, cnt("compiled"), cnt("correct"),
        f.geomean, p.geomean, gok and "ok" or "OFF", cnt("fast_1"),
        f.band and string.format("%.2f-%.2f%s", f.band[1], f.band[2],
          p.band and string.format(" (published %.2f-%.2f)", p.band[1], p.band[2]) or "") or "-")
    end
  end
  local cpu, parts = 0, {}
  for _, p in ipairs(PUBLISHED) do
    local c = res.cpu_s and res.cpu_s[p.strategy]
    if c then cpu, parts[#parts + 1] = cpu + c, string.format("%s %.1f", p.strategy, c) end
  end
  L[#L + 1] = string.format("loss %.2f (0 = the published table; within tolerance: %s); study wall %.1f s, "
    .. "CPU %.1f s (%s)", loss(res), all_ok and "yes" or "no", wall or 0, cpu, table.concat(parts, ", "))
  return table.concat(L, "\n")
end

-- ---------------------------------------------------------------- main

local function opts_of(args)
  local o = { ["repeat"] = 5, lanes = 2, rounds = 1 }
  local i = 2
  while args[i] do
    local k = args[i]:match("^%-%-(.+)$")
    if not k then o.pos = args[i]; i = i + 1
    else o[k] = args[i + 1]; i = i + 2 end
  end
  o["repeat"], o.lanes, o.rounds = tonumber(o["repeat"]), tonumber(o.lanes), tonumber(o.rounds)
  return o
end

local function strategies_of(o)
  local list = {}
  if o.only then
    for s in o.only:gmatch("[^,]+") do list[#list + 1] = s end
  else
    for _, p in ipairs(PUBLISHED) do list[#list + 1] = p.strategy end
  end
  return list
end

local function fit(o)
  local k = knobs_now()
  local base = o.out or ("/tmp/sim-fit-" .. os.time())
  local step = 0
  local function evaluate(knobs)
    step = step + 1
    local suite = base .. "/suite" .. step
    write(suite, knobs, true)
    local res, wall = study(suite, base .. "/study" .. step, o["repeat"], strategies_of(o), o.lanes)
    fs.rm_rf(base .. "/study" .. step) -- ~500 files a run: a fit would fill a tmpfs's inodes
    fs.rm_rf(suite)
    local l = loss(res)
    print(string.format("step %d: loss %.2f (%.0f s)", step, l, wall))
    return l, res
  end
  local best = evaluate(k)
  for _ = 1, o.rounds do
    for _, f in ipairs(FIT) do
      local name, d = f[1], f[2]
      for _, sign in ipairs { 1, -1 } do
        local trial = util.copy(k)
        trial[name] = math.max(0, trial[name] + sign * d)
        if name ~= "reach" then trial[name] = math.min(1, trial[name]) end
        local l = evaluate(trial)
        if l < best then
          best, k = l, trial
          print(string.format("  %s -> %s", name, num(k[name])))
          break
        end
      end
    end
  end
  print("fitted knobs (suite ones into SUITE_KNOBS, model ones into mk.services.sim.task's DEFAULTS):")
  local names = {}
  for name in pairs(k) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do print(string.format("  %s = %s,", name, num(k[name]))) end
  return 0
end

local args = arg or {}
local cmd = args[1]
local o = opts_of(args)
if cmd == "write" then
  local dir = o.pos or home.path(SUITE)
  print(string.format("wrote %d tasks in %s", write(dir, knobs_now()), dir))
  return 0
elseif cmd == "study" then
  local out = o.out or ("/tmp/sim-study-" .. os.time())
  local res, wall = study(o.suite or home.path(SUITE), out, o["repeat"], strategies_of(o), o.lanes, o.seed)
  print(string.format("study: %s, --repeat %d, --seed %s, benches in %s", o.suite or SUITE, o["repeat"],
    tostring(o.seed or 1), out))
  print(table_text(res, wall))
  return 0
elseif cmd == "fit" then
  return fit(o)
end
io.stderr:write("usage: mkengine script bench/sim_calibrate.lua write [DIR] | study [--repeat K] [--out DIR] "
  .. "[--only s1,s2] [--lanes N] [--suite DIR] [--seed S] | fit [--repeat K] [--rounds R] [--out DIR] [--only ...]\n")
return 2

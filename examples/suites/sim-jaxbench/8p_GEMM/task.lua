-- A simulated task (targets/sim), named after JAXBench's 8p_GEMM (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "8p_GEMM", family = "gemm",
  description = "Dense bf16 matrix multiply",
  baseline_ms = 9.8, noise = 0.005, headroom = 1.028, naive = 0.85, compile = 0.0003, correct = 0.55, size = 1800,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { fuse_epilogue = 0.3, tile_grid = 0.3, big_blocks = 0.2, vmem_accumulate = 0.2 },
  tune = { best = 1024, gain = 1.15, max = 2048 } }

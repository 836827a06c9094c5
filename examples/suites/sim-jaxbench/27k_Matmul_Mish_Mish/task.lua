-- A simulated task (targets/sim), named after JAXBench's 27k_Matmul_Mish_Mish (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "27k_Matmul_Mish_Mish", family = "gemm",
  description = "Matmul, Mish, Mish",
  baseline_ms = 1.1, headroom = 1.47, naive = 0.25, compile = 0.0003, correct = 0.55, size = 1700,
  insight = 0.2, hint = 0.4, profile_truth = 0.3,
  opts = { fuse_epilogue = 0.5477, tile_grid = 0.5477, big_blocks = 0.4472, vmem_accumulate = 0.4472 },
  tune = { best = 1024, gain = 1.15, max = 2048 } }

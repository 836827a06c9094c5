-- A simulated task (targets/sim), named after JAXBench's 29k_Matmul_Swish_Sum_GroupNorm (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "29k_Matmul_Swish_Sum_GroupNorm", family = "gemm_reduce",
  description = "Matmul, Swish, sum, group norm",
  baseline_ms = 1.5, headroom = 1.84, naive = 0.8, compile = 0.0003, correct = 0.55, size = 2300,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { fuse_chain = 0.5, tile_grid = 0.15, vmem_accumulate = 0.15, fuse_epilogue = 0.1, grid_order = 0.1 },
  tune = { best = 512, gain = 1.1, max = 2048 } }

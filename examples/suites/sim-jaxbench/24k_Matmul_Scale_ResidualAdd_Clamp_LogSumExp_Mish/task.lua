-- A simulated task (targets/sim), named after JAXBench's 24k_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "24k_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish", family = "gemm_reduce",
  description = "Matmul, scale, residual add, clamp, logsumexp, Mish",
  baseline_ms = 1.5, headroom = 2.115, naive = 0.8, compile = 0.0003, correct = 0.55, size = 2200,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { fuse_chain = 0.5, tile_grid = 0.15, vmem_accumulate = 0.15, fuse_epilogue = 0.1, grid_order = 0.1 },
  tune = { best = 512, gain = 1.1, max = 2048 } }

-- A simulated task (targets/sim), named after JAXBench's 26k_BMM_InstanceNorm_Sum_ResidualAdd_Multiply (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "26k_BMM_InstanceNorm_Sum_ResidualAdd_Multiply", family = "gemm_reduce",
  description = "Batched matmul, instance norm, sum, residual add, multiply",
  baseline_ms = 1.7, headroom = 1.932, naive = 0.25, compile = 0.0003, correct = 0.55, size = 2300,
  insight = 0.2, hint = 0.4, profile_truth = 0.3,
  opts = { fuse_chain = 0.7071, tile_grid = 0.3873, vmem_accumulate = 0.3873, fuse_epilogue = 0.3162, grid_order = 0.3162 },
  tune = { best = 512, gain = 1.1, max = 2048 } }

-- A simulated task (targets/sim), named after JAXBench's 49k_Matmul_AvgPool_GELU_Scale_Max (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "49k_Matmul_AvgPool_GELU_Scale_Max", family = "gemm_reduce",
  description = "Matmul, average pool, GELU, scale, max",
  baseline_ms = 1.2, headroom = 2.024, naive = 0.8, compile = 0.0003, correct = 0.55, size = 2000,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { fuse_chain = 0.5, tile_grid = 0.15, vmem_accumulate = 0.15, fuse_epilogue = 0.1, grid_order = 0.1 },
  tune = { best = 512, gain = 1.1, max = 2048 } }

-- A simulated task (targets/sim), named after JAXBench's 48k_Matmul_BatchNorm_BiasAdd_Divide_Swish (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "48k_Matmul_BatchNorm_BiasAdd_Divide_Swish", family = "gemm_reduce",
  description = "Matmul, batch norm, bias add, divide, Swish",
  baseline_ms = 1.3, headroom = 1.748, naive = 0.25, compile = 0.0003, correct = 0.55, size = 2100,
  insight = 0.2, hint = 0.4, profile_truth = 0.3,
  opts = { fuse_chain = 0.7071, tile_grid = 0.3873, vmem_accumulate = 0.3873, fuse_epilogue = 0.3162, grid_order = 0.3162 },
  tune = { best = 512, gain = 1.1, max = 2048 } }

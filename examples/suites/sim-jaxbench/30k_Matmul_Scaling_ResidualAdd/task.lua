-- A simulated task (targets/sim), named after JAXBench's 30k_Matmul_Scaling_ResidualAdd (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "30k_Matmul_Scaling_ResidualAdd", family = "gemm",
  description = "Matmul, scaling, residual add",
  baseline_ms = 1.0, headroom = 0.95, naive = 0.75, compile = 0.12, correct = 0.55, size = 1600,
  opts = { fuse_epilogue = 0.3, tile_grid = 0.3, big_blocks = 0.2, vmem_accumulate = 0.2 },
  tune = { best = 1024, gain = 1.15, max = 2048 } }

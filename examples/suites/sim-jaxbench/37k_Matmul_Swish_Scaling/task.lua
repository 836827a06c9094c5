-- A simulated task (targets/sim), named after JAXBench's 37k_Matmul_Swish_Scaling (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "37k_Matmul_Swish_Scaling", family = "gemm",
  description = "Matmul, Swish, scaling",
  baseline_ms = 1.1, headroom = 1.08, naive = 0.8, compile = 0.001, correct = 0.55, size = 1600,
  opts = { fuse_epilogue = 0.3, tile_grid = 0.3, big_blocks = 0.2, vmem_accumulate = 0.2 },
  tune = { best = 1024, gain = 1.15, max = 2048 } }

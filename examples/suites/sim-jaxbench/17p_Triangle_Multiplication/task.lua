-- A simulated task (targets/sim), named after JAXBench's 17p_Triangle_Multiplication (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "17p_Triangle_Multiplication", family = "gemm_reduce",
  description = "Triangle multiplicative update",
  baseline_ms = 5.9, headroom = 1.7, naive = 0.6, compile = 0.001, correct = 0.55, size = 2800,
  opts = { fuse_chain = 0.35, tile_grid = 0.2, vmem_accumulate = 0.2, fuse_epilogue = 0.15, grid_order = 0.1 },
  tune = { best = 512, gain = 1.1, max = 2048 } }

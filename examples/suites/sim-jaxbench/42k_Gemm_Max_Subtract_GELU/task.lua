-- A simulated task (targets/sim), named after JAXBench's 42k_Gemm_Max_Subtract_GELU (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "42k_Gemm_Max_Subtract_GELU", family = "gemm_reduce",
  description = "GEMM, max, subtract, GELU",
  baseline_ms = 1.2, headroom = 2.0, naive = 0.7, compile = 0.001, correct = 0.55, size = 2000,
  opts = { fuse_chain = 0.35, tile_grid = 0.2, vmem_accumulate = 0.2, fuse_epilogue = 0.15, grid_order = 0.1 },
  tune = { best = 512, gain = 1.1, max = 2048 } }

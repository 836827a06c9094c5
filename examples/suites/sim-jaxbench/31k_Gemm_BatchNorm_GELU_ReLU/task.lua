-- A simulated task (targets/sim), named after JAXBench's 31k_Gemm_BatchNorm_GELU_ReLU (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "31k_Gemm_BatchNorm_GELU_ReLU", family = "gemm_reduce",
  description = "GEMM, batch norm, GELU, ReLU",
  baseline_ms = 1.3, headroom = 1.4, naive = 0.65, compile = 0.001, correct = 0.55, size = 2100,
  opts = { fuse_chain = 0.35, tile_grid = 0.2, vmem_accumulate = 0.2, fuse_epilogue = 0.15, grid_order = 0.1 },
  tune = { best = 512, gain = 1.1, max = 2048 } }

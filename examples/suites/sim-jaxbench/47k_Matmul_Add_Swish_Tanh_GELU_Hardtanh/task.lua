-- A simulated task (targets/sim), named after JAXBench's 47k_Matmul_Add_Swish_Tanh_GELU_Hardtanh (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "47k_Matmul_Add_Swish_Tanh_GELU_Hardtanh", family = "gemm",
  description = "Matmul, add, Swish, tanh, GELU, hardtanh",
  baseline_ms = 1.2, headroom = 0.98, naive = 0.6, compile = 0.0003, correct = 0.55, size = 1900,
  opts = { fuse_epilogue = 0.3, tile_grid = 0.3, big_blocks = 0.2, vmem_accumulate = 0.2 },
  tune = { best = 1024, gain = 1.15, max = 2048 } }

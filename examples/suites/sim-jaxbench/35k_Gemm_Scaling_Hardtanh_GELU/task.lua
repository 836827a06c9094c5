-- A simulated task (targets/sim), named after JAXBench's 35k_Gemm_Scaling_Hardtanh_GELU (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "35k_Gemm_Scaling_Hardtanh_GELU", family = "gemm",
  description = "GEMM, scaling, hardtanh, GELU",
  baseline_ms = 1.1, headroom = 0.98, naive = 0.75, compile = 0.0003, correct = 0.55, size = 1800,
  opts = { fuse_epilogue = 0.3, tile_grid = 0.3, big_blocks = 0.2, vmem_accumulate = 0.2 },
  tune = { best = 1024, gain = 1.15, max = 2048 } }

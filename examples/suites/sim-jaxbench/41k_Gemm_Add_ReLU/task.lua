-- A simulated task (targets/sim), named after JAXBench's 41k_Gemm_Add_ReLU (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "41k_Gemm_Add_ReLU", family = "gemm",
  description = "GEMM, add, ReLU",
  baseline_ms = 1.0, headroom = 0.93, naive = 0.75, compile = 0.12, correct = 0.55, size = 1500,
  opts = { fuse_epilogue = 0.3, tile_grid = 0.3, big_blocks = 0.2, vmem_accumulate = 0.2 },
  tune = { best = 1024, gain = 1.15, max = 2048 } }

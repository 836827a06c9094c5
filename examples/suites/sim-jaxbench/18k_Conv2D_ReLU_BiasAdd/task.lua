-- A simulated task (targets/sim), named after JAXBench's 18k_Conv2D_ReLU_BiasAdd (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "18k_Conv2D_ReLU_BiasAdd", family = "conv",
  description = "Conv2D, ReLU, bias add",
  baseline_ms = 1.3, headroom = 0.8, naive = 0.4, compile = 0.0003, correct = 0.55, size = 2400,
  opts = { emit_pipeline = 0.3, tile_grid = 0.3, fuse_epilogue = 0.2, vmem_accumulate = 0.2 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

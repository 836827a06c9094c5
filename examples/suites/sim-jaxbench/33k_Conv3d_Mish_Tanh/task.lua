-- A simulated task (targets/sim), named after JAXBench's 33k_Conv3d_Mish_Tanh (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "33k_Conv3d_Mish_Tanh", family = "conv",
  description = "Conv3d, Mish, tanh",
  baseline_ms = 2.9, headroom = 0.75, naive = 0.4, compile = 0.0003, correct = 0.55, size = 2500,
  opts = { emit_pipeline = 0.3, tile_grid = 0.3, fuse_epilogue = 0.2, vmem_accumulate = 0.2 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

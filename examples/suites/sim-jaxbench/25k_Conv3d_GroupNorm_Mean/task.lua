-- A simulated task (targets/sim), named after JAXBench's 25k_Conv3d_GroupNorm_Mean (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "25k_Conv3d_GroupNorm_Mean", family = "conv",
  description = "Conv3d, group norm, mean",
  baseline_ms = 2.8, headroom = 0.85, naive = 0.4, compile = 0.0003, correct = 0.55, size = 2600,
  opts = { emit_pipeline = 0.3, tile_grid = 0.3, fuse_epilogue = 0.2, vmem_accumulate = 0.2 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

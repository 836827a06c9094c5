-- A simulated task (targets/sim), named after JAXBench's 39k_Conv2d_GELU_GlobalAvgPool (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "39k_Conv2d_GELU_GlobalAvgPool", family = "conv",
  description = "Conv2d, GELU, global average pool",
  baseline_ms = 1.2, headroom = 0.9, naive = 0.45, compile = 0.0003, correct = 0.55, size = 2300,
  opts = { emit_pipeline = 0.3, tile_grid = 0.3, fuse_epilogue = 0.2, vmem_accumulate = 0.2 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

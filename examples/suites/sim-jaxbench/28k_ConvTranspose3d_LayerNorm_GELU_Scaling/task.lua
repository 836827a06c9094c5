-- A simulated task (targets/sim), named after JAXBench's 28k_ConvTranspose3d_LayerNorm_GELU_Scaling (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "28k_ConvTranspose3d_LayerNorm_GELU_Scaling", family = "conv",
  description = "ConvTranspose3d, layer norm, GELU, scaling",
  baseline_ms = 3.4, headroom = 0.7, naive = 0.35, compile = 0.0003, correct = 0.55, size = 2800,
  opts = { emit_pipeline = 0.3, tile_grid = 0.3, fuse_epilogue = 0.2, vmem_accumulate = 0.2 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

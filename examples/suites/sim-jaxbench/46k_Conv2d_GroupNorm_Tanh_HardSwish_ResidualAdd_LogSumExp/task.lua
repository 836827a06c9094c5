-- A simulated task (targets/sim), named after JAXBench's 46k_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "46k_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp", family = "conv",
  description = "Conv2d, group norm, tanh, HardSwish, residual add, logsumexp",
  baseline_ms = 1.9, headroom = 0.95, naive = 0.45, compile = 0.0003, correct = 0.55, size = 2800,
  opts = { emit_pipeline = 0.3, tile_grid = 0.3, fuse_epilogue = 0.2, vmem_accumulate = 0.2 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

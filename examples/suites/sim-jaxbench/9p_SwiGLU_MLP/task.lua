-- A simulated task (targets/sim), named after JAXBench's 9p_SwiGLU_MLP (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "9p_SwiGLU_MLP", family = "gemm",
  description = "SwiGLU MLP block",
  baseline_ms = 7.7, headroom = 0.98, naive = 0.6, compile = 0.0003, correct = 0.55, size = 2200,
  opts = { fuse_epilogue = 0.3, tile_grid = 0.3, big_blocks = 0.2, vmem_accumulate = 0.2 },
  tune = { best = 1024, gain = 1.15, max = 2048 } }

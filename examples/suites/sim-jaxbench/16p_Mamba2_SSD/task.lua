-- A simulated task (targets/sim), named after JAXBench's 16p_Mamba2_SSD (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "16p_Mamba2_SSD", family = "scan",
  description = "Mamba-2 state-space duality scan",
  baseline_ms = 4.6, headroom = 3.4, naive = 0.6, compile = 0.001, correct = 0.55, size = 3400,
  opts = { chunked_scan = 0.45, tile_grid = 0.2, vmem_accumulate = 0.2, fuse_chain = 0.15 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

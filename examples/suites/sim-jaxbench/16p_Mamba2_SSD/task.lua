-- A simulated task (targets/sim), named after JAXBench's 16p_Mamba2_SSD (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "16p_Mamba2_SSD", family = "scan",
  description = "Mamba-2 state-space duality scan",
  baseline_ms = 4.6, headroom = 3.198, naive = 0.8, compile = 0.0003, correct = 0.55, size = 3400,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { chunked_scan = 0.55, fuse_chain = 0.15, tile_grid = 0.15, vmem_accumulate = 0.15 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

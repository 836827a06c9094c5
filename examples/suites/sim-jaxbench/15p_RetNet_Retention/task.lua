-- A simulated task (targets/sim), named after JAXBench's 15p_RetNet_Retention (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "15p_RetNet_Retention", family = "scan",
  description = "RetNet retention",
  baseline_ms = 3.3, headroom = 2.479, naive = 0.8, compile = 0.0003, correct = 0.55, size = 3000,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { chunked_scan = 0.55, fuse_chain = 0.15, tile_grid = 0.15, vmem_accumulate = 0.15 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

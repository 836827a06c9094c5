-- A simulated task (targets/sim), named after JAXBench's 15p_RetNet_Retention (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "15p_RetNet_Retention", family = "scan",
  description = "RetNet retention",
  baseline_ms = 3.3, headroom = 2.6, naive = 0.6, compile = 0.001, correct = 0.55, size = 3000,
  opts = { chunked_scan = 0.45, tile_grid = 0.2, vmem_accumulate = 0.2, fuse_chain = 0.15 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

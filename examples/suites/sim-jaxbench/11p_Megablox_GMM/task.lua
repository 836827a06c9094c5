-- A simulated task (targets/sim), named after JAXBench's 11p_Megablox_GMM (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "11p_Megablox_GMM", family = "ragged",
  description = "Grouped matrix multiply over ragged expert groups",
  baseline_ms = 4.8, headroom = 1.3, naive = 0.6, compile = 0.001, correct = 0.55, size = 3000,
  opts = { group_tiles = 0.4, scalar_prefetch = 0.3, tile_grid = 0.2, skip_blocks = 0.1 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

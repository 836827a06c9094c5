-- A simulated task (targets/sim), named after JAXBench's 6p_Paged_Attention (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "6p_Paged_Attention", family = "paged",
  description = "Paged attention decode over a block table of KV pages",
  baseline_ms = 2.4, headroom = 7.5, naive = 0.8, compile = 0.001, correct = 0.55, size = 2800,
  opts = { scalar_prefetch = 0.35, skip_blocks = 0.25, double_buffer = 0.2, group_tiles = 0.1, tile_grid = 0.1 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

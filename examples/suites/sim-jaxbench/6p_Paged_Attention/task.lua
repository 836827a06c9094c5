-- A simulated task (targets/sim), named after JAXBench's 6p_Paged_Attention (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "6p_Paged_Attention", family = "paged",
  description = "Paged attention decode over a block table of KV pages",
  baseline_ms = 2.4, headroom = 6.781, naive = 0.8, compile = 0.0003, correct = 0.55, size = 2800,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { scalar_prefetch = 0.45, skip_blocks = 0.2, double_buffer = 0.15, group_tiles = 0.1, tile_grid = 0.1 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

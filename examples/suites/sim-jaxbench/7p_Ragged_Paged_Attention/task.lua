-- A simulated task (targets/sim), named after JAXBench's 7p_Ragged_Paged_Attention (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "7p_Ragged_Paged_Attention", family = "paged",
  description = "Ragged paged attention: mixed prefill and decode sequences",
  baseline_ms = 3.1, headroom = 1.748, naive = 0.25, compile = 0.0003, correct = 0.55, size = 3600,
  insight = 0.2, hint = 0.4, profile_truth = 0.3,
  opts = { scalar_prefetch = 0.6708, skip_blocks = 0.4472, double_buffer = 0.3873, group_tiles = 0.3162, tile_grid = 0.3162 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

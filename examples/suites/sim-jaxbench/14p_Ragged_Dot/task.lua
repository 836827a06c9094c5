-- A simulated task (targets/sim), named after JAXBench's 14p_Ragged_Dot (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "14p_Ragged_Dot", family = "ragged",
  description = "Ragged dot product by groups",
  baseline_ms = 3.9, headroom = 1.748, naive = 0.25, compile = 0.0003, correct = 0.55, size = 2600,
  insight = 0.2, hint = 0.4, profile_truth = 0.3,
  opts = { group_tiles = 0.7071, scalar_prefetch = 0.5, tile_grid = 0.3873, skip_blocks = 0.3162 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

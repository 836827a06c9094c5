-- A simulated task (targets/sim), named after JAXBench's 10p_Sparse_MoE (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "10p_Sparse_MoE", family = "ragged",
  description = "Sparse mixture-of-experts layer with top-k routing",
  baseline_ms = 5.5, headroom = 3.019, naive = 0.8, compile = 0.0003, correct = 0.55, size = 3200,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { group_tiles = 0.5, scalar_prefetch = 0.25, tile_grid = 0.15, skip_blocks = 0.1 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

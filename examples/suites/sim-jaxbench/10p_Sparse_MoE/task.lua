-- A simulated task (targets/sim), named after JAXBench's 10p_Sparse_MoE (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "10p_Sparse_MoE", family = "ragged",
  description = "Sparse mixture-of-experts layer with top-k routing",
  baseline_ms = 5.5, headroom = 3.2, naive = 0.7, compile = 0.001, correct = 0.55, size = 3200,
  opts = { group_tiles = 0.4, scalar_prefetch = 0.3, tile_grid = 0.2, skip_blocks = 0.1 },
  tune = { best = 256, gain = 1.1, max = 1024 } }

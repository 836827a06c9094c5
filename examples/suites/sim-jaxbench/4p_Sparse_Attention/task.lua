-- A simulated task (targets/sim), named after JAXBench's 4p_Sparse_Attention (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "4p_Sparse_Attention", family = "attention",
  description = "Block-sparse attention over a top-k block mask",
  baseline_ms = 6.3, headroom = 5.138, naive = 0.8, compile = 0.0003, correct = 0.55, size = 3200,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { skip_blocks = 0.5, online_softmax = 0.2, double_buffer = 0.1, scalar_prefetch = 0.1, tile_grid = 0.1 },
  tune = { best = 512, gain = 1.12, max = 1024 } }

-- A simulated task (targets/sim), named after JAXBench's 5p_Flex_Attention (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "5p_Flex_Attention", family = "attention",
  description = "Attention with a score-modifying function and a block mask",
  baseline_ms = 4.4, headroom = 2.84, naive = 0.8, compile = 0.0003, correct = 0.55, size = 3200,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { online_softmax = 0.45, double_buffer = 0.15, skip_blocks = 0.15, tile_grid = 0.15, bf16_io = 0.1 },
  tune = { best = 512, gain = 1.12, max = 1024 } }

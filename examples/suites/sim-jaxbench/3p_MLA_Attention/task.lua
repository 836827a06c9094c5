-- A simulated task (targets/sim), named after JAXBench's 3p_MLA_Attention (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "3p_MLA_Attention", family = "attention",
  description = "Multi-head latent attention (low-rank KV)",
  baseline_ms = 5.2, headroom = 1.377, naive = 0.25, compile = 0.0003, correct = 0.55, size = 3400,
  insight = 0.2, hint = 0.4, profile_truth = 0.3,
  opts = { online_softmax = 0.6708, double_buffer = 0.3873, skip_blocks = 0.3873, tile_grid = 0.3873, bf16_io = 0.3162 },
  tune = { best = 512, gain = 1.12, max = 1024 } }

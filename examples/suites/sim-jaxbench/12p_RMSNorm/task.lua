-- A simulated task (targets/sim), named after JAXBench's 12p_RMSNorm (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "12p_RMSNorm", family = "norm",
  description = "RMS normalisation over the hidden axis",
  baseline_ms = 0.42, headroom = 2.297, naive = 1, compile = 0.12, correct = 0.715, size = 1200,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { fuse_chain = 0.45, big_blocks = 0.2, parallel_axes = 0.2, bf16_io = 0.15 },
  tune = { best = 1024, gain = 1.08, max = 2048 } }

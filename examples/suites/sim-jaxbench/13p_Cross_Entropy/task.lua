-- A simulated task (targets/sim), named after JAXBench's 13p_Cross_Entropy (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "13p_Cross_Entropy", family = "xent",
  description = "Softmax cross-entropy over a large vocabulary",
  baseline_ms = 1.9, headroom = 2.84, naive = 1, compile = 0.12, correct = 0.66, size = 1600,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { online_softmax = 0.45, fuse_chain = 0.25, bf16_io = 0.15, big_blocks = 0.15 },
  tune = { best = 512, gain = 1.08, max = 2048 } }

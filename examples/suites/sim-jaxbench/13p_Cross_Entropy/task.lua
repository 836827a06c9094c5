-- A simulated task (targets/sim), named after JAXBench's 13p_Cross_Entropy (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "13p_Cross_Entropy", family = "xent",
  description = "Softmax cross-entropy over a large vocabulary",
  baseline_ms = 1.9, headroom = 3.0, naive = 1.0, compile = 0.06, correct = 0.66, size = 1600,
  opts = { online_softmax = 0.4, fuse_chain = 0.25, big_blocks = 0.2, bf16_io = 0.15 },
  tune = { best = 512, gain = 1.08, max = 2048 } }

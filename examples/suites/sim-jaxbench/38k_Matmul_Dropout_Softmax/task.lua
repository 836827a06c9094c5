-- A simulated task (targets/sim), named after JAXBench's 38k_Matmul_Dropout_Softmax (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "38k_Matmul_Dropout_Softmax", family = "gemm_softmax",
  description = "Matmul, dropout, softmax",
  baseline_ms = 1.4, headroom = 1.932, naive = 1, compile = 0.12, correct = 0.55, size = 2100,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { fuse_chain = 0.4, online_softmax = 0.3, grid_order = 0.1, tile_grid = 0.1, vmem_accumulate = 0.1 },
  tune = { best = 512, gain = 1.1, max = 1024 } }

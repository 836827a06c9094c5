-- A simulated task (targets/sim), named after JAXBench's 50k_Matmul_GELU_Softmax (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "50k_Matmul_GELU_Softmax", family = "gemm_softmax",
  description = "Matmul, GELU, softmax",
  baseline_ms = 1.3, headroom = 1.932, naive = 0.8, compile = 0.0003, correct = 0.55, size = 1900,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { fuse_chain = 0.4, online_softmax = 0.3, grid_order = 0.1, tile_grid = 0.1, vmem_accumulate = 0.1 },
  tune = { best = 512, gain = 1.1, max = 1024 } }

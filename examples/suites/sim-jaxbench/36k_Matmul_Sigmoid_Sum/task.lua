-- A simulated task (targets/sim), named after JAXBench's 36k_Matmul_Sigmoid_Sum (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "36k_Matmul_Sigmoid_Sum", family = "gemm_reduce",
  description = "Matmul, sigmoid, sum",
  baseline_ms = 1.1, headroom = 2.388, naive = 1, compile = 0.12, correct = 0.55, size = 1700,
  insight = 0.85, hint = 0.8, profile_truth = 0.95,
  opts = { fuse_chain = 0.5, tile_grid = 0.15, vmem_accumulate = 0.15, fuse_epilogue = 0.1, grid_order = 0.1 },
  tune = { best = 512, gain = 1.1, max = 2048 } }

-- A simulated task (targets/sim), named after JAXBench's 38k_Matmul_Dropout_Softmax (its name only). Its own
-- parameters; every other one takes the default of docs/simulator.md. Written by
-- bench/sim_calibrate.lua: copy the folder and edit freely.
return { target = "sim", name = "38k_Matmul_Dropout_Softmax", family = "gemm_softmax",
  description = "Matmul, dropout, softmax",
  baseline_ms = 1.4, headroom = 2.0, naive = 1.0, compile = 0.06, correct = 0.55, size = 2100,
  opts = { fuse_chain = 0.3, online_softmax = 0.25, tile_grid = 0.2, vmem_accumulate = 0.15, grid_order = 0.1 },
  tune = { best = 512, gain = 1.1, max = 1024 } }

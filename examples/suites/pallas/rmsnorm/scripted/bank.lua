-- Scripted-model bank for the suite's RMSNorm (JAXBench layout): the real
-- Pallas TPU kernels of examples/tasks/pallas/rmsnorm, used from there (the
-- same workload(x, scale)). Statuses hold on a CPU in TPU interpret mode
-- and on a TPU; "fast"/"slow" only on a device.
local T = "../../../../tasks/pallas/rmsnorm/scripted/"

return {
  plans = {
    { id = "row_blocks",
      text = "One pallas_call over a 1-D grid of row blocks: each step loads a (block_rows, cols) tile " ..
        "into VMEM, computes the mean of squares in float32, and writes the normalised rows. Tune " ..
        "block_rows so the tile amortises the per-step overhead.",
      kernels = { "rows", "block5", "wrong_eps" } },
    { id = "two_pass",
      text = "Split the work: a first kernel writes per-row mean squares, a second applies the scaling.",
      kernels = { "two_pass" } },
    { id = "dma_scale",
      text = "Keep scale in HBM (memory_space=pl.ANY) and copy it into a VMEM scratch with an async DMA " ..
        "that overlaps the row statistics; wait on the DMA semaphore before the scale is used.",
      kernels = { "dma_race", "dma" } },
  },
  kernels = {
    rows = { file = T .. "pallas_rows.py", expect = "fast" },
    block5 = { file = T .. "pallas_block5.py", expect = "compile_error", fix = "rows" },
    wrong_eps = { file = T .. "pallas_wrong_eps.py", expect = "incorrect" },
    two_pass = { file = T .. "pallas_two_pass.py", expect = "slow" },
    dma = { file = T .. "pallas_dma.py", expect = "fast" },
    dma_race = { file = T .. "pallas_dma_race.py", expect = "incorrect", fix = "dma" },
  },
}

-- Scripted-model bank for the Pallas rmsnorm task: real Pallas kernels.
-- Statuses hold on a CPU in TPU interpret mode (the default there) and on a
-- TPU; "fast"/"slow" are meaningful on a device only (interpretation is
-- slow). pallas_block5 is rejected by the TPU (Mosaic) lowering and
-- pallas_dma_race by TPU interpret mode's race detector: plain
-- interpret=True passes both.
return {
  plans = {
    { id = "row_blocks",
      text = "One pallas_call over a 1-D grid of row blocks: each step loads a (block_rows, cols) tile " ..
        "into VMEM, computes the mean of squares in float32, and writes the normalised rows. Tune " ..
        "block_rows (8..64) so the tile is large enough to amortise per-step overhead.",
      kernels = { "pallas_rows", "pallas_typo", "pallas_block5", "pallas_big_rows" } },
    { id = "dma_scale",
      text = "Keep scale in HBM (memory_space=pl.ANY) and copy it into a VMEM scratch with an async DMA " ..
        "that overlaps the row statistics; wait on the DMA semaphore before the scale is used.",
      kernels = { "pallas_dma_race", "pallas_dma" } },
    { id = "two_pass",
      text = "Split the work: a first kernel writes per-row mean squares, a second applies the scaling.",
      kernels = { "pallas_two_pass" } },
    { id = "fuse_epilogue",
      text = "Fuse the scale multiply into the normalisation and relax eps handling.",
      kernels = { "pallas_wrong_eps", "pallas_no_scale" } },
  },
  kernels = {
    pallas_rows = { file = "pallas_rows.py", expect = "fast" },
    pallas_big_rows = { file = "pallas_big_rows.py", expect = "fast" },
    pallas_typo = { file = "pallas_typo.py", expect = "compile_error", fix = "pallas_rows" },
    pallas_block5 = { file = "pallas_block5.py", expect = "compile_error", fix = "pallas_rows" },
    pallas_dma = { file = "pallas_dma.py", expect = "fast" },
    pallas_dma_race = { file = "pallas_dma_race.py", expect = "incorrect", fix = "pallas_dma" },
    pallas_two_pass = { file = "pallas_two_pass.py", expect = "slow" },
    pallas_wrong_eps = { file = "pallas_wrong_eps.py", expect = "incorrect" },
    pallas_no_scale = { file = "pallas_no_scale.py", expect = "incorrect" },
  },
}

-- Scripted-model bank for the Pallas LayerNorm (JAXBench layout): real
-- Pallas TPU kernels. Statuses hold on a CPU in TPU interpret mode and on a
-- TPU; "fast"/"slow" only mean something on a device.
return {
  plans = {
    { id = "row_blocks",
      text = "One pallas_call over row blocks: mean and variance in float32 from a (block_rows, cols) " ..
        "VMEM tile, then gamma and beta, so x crosses HBM once. Tune block_rows.",
      kernels = { "rows", "block12", "wrong_var" } },
    { id = "two_pass",
      text = "Write per-row mean and inverse std with a first kernel, normalise with a second.",
      kernels = { "two_pass" } },
    { id = "dma_params",
      text = "Keep gamma and beta in HBM and bring them into VMEM with async DMAs that overlap the " ..
        "row statistics; wait on both semaphores before the affine step.",
      kernels = { "dma_race", "dma" } },
  },
  kernels = {
    rows = { file = "rows.py", expect = "fast" },
    block12 = { file = "block12.py", expect = "compile_error", fix = "rows" },
    wrong_var = { file = "wrong_var.py", expect = "incorrect" },
    two_pass = { file = "two_pass.py", expect = "slow" },
    dma = { file = "dma.py", expect = "fast" },
    dma_race = { file = "dma_race.py", expect = "incorrect", fix = "dma" },
  },
}

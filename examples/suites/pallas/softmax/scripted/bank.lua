-- Scripted-model bank for the Pallas row softmax (JAXBench layout): real
-- Pallas TPU kernels. Statuses hold on a CPU in TPU interpret mode and on a
-- TPU; "fast"/"slow" only mean something on a device.
return {
  plans = {
    { id = "row_blocks",
      text = "One pallas_call over row blocks: each grid step holds (block_rows, cols) in VMEM, takes the " ..
        "row max, the exponentials and their sum in float32 and writes the normalised rows; x crosses " ..
        "HBM once. Tune block_rows; mark the row axis parallel.",
      kernels = { "rows", "block12", "wrong_sum" } },
    { id = "two_pass",
      text = "Compute row statistics (max, sum of exp) in a first kernel and normalise in a second.",
      kernels = { "two_pass" } },
    { id = "dma_overlap",
      text = "Copy each row block into a VMEM scratch with an async local DMA and start the row max on " ..
        "the source meanwhile; wait on the DMA semaphore before touching the scratch.",
      kernels = { "dma_race", "dma" } },
  },
  kernels = {
    rows = { file = "rows.py", expect = "fast" },
    block12 = { file = "block12.py", expect = "compile_error", fix = "rows" },
    wrong_sum = { file = "wrong_sum.py", expect = "incorrect" },
    two_pass = { file = "two_pass.py", expect = "slow" },
    dma = { file = "dma.py", expect = "fast" },
    dma_race = { file = "dma_race.py", expect = "incorrect", fix = "dma" },
  },
}

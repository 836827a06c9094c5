-- Scripted-model bank for the Pallas causal attention (JAXBench layout):
-- real Pallas TPU kernels. Statuses hold on a CPU in TPU interpret mode and
-- on a TPU; "fast"/"slow" only mean something on a device.
return {
  plans = {
    { id = "query_blocks",
      text = "One pallas_call over (batch, heads, seq/bq): a block of bq query rows with the head's whole " ..
        "K and V in VMEM; scores q k^T in float32 on the MXU (contract head_dim, no transpose), the causal " ..
        "mask from iota row/column indices, softmax in float32, then p v. Every grid axis parallel; tune bq.",
      kernels = { "rows", "block100", "no_mask" } },
    { id = "two_pass",
      text = "Write the softmax probabilities of each query block to HBM with a first kernel, multiply " ..
        "them by V in a second.",
      kernels = { "two_pass" } },
    { id = "dma_overlap",
      text = "Copy the head's V into a VMEM scratch with an async local DMA started first, compute the " ..
        "scores and the softmax meanwhile, and wait on the DMA semaphore before p v reads the scratch.",
      kernels = { "dma_race", "dma" } },
  },
  kernels = {
    rows = { file = "rows.py", expect = "fast" },
    block100 = { file = "block100.py", expect = "compile_error", fix = "rows" },
    no_mask = { file = "no_mask.py", expect = "incorrect" },
    two_pass = { file = "two_pass.py", expect = "slow" },
    dma = { file = "dma.py", expect = "fast" },
    dma_race = { file = "dma_race.py", expect = "incorrect", fix = "dma" },
  },
}

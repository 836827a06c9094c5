-- Scripted-model bank for the Pallas cross-entropy (JAXBench layout): real
-- Pallas TPU kernels. Statuses hold on a CPU in TPU interpret mode and on a
-- TPU; "fast"/"slow" only mean something on a device.
return {
  plans = {
    { id = "token_blocks",
      text = "One pallas_call over token blocks: each step holds (block_tokens, vocab) logits in VMEM, " ..
        "computes the log-sum-exp in float32 and picks the label's logit with an iota compare, so " ..
        "the logits cross HBM once. Tune block_tokens.",
      kernels = { "rows", "block4", "wrong_lse" } },
    { id = "two_pass",
      text = "Compute the log-sum-exp per token in one kernel and subtract the label's logit in a second.",
      kernels = { "two_pass" } },
    { id = "dma_labels",
      text = "Copy the labels block into a VMEM scratch with an async DMA overlapping the log-sum-exp; " ..
        "wait on its semaphore before picking the label's logit.",
      kernels = { "dma_race", "dma" } },
  },
  kernels = {
    rows = { file = "rows.py", expect = "fast" },
    block4 = { file = "block4.py", expect = "compile_error", fix = "rows" },
    wrong_lse = { file = "wrong_lse.py", expect = "incorrect" },
    two_pass = { file = "two_pass.py", expect = "slow" },
    dma = { file = "dma.py", expect = "fast" },
    dma_race = { file = "dma_race.py", expect = "incorrect", fix = "dma" },
  },
}

-- Scripted-model bank for the Pallas GEMM + bias + GELU (JAXBench layout):
-- real Pallas TPU kernels. Statuses hold on a CPU in TPU interpret mode and
-- on a TPU; "fast"/"slow" only mean something on a device.
return {
  plans = {
    { id = "fused_tiles",
      text = "One tiled pallas_call over (M/bm, N/bn, K/bk): bf16 tiles into the MXU, a float32 VMEM " ..
        "accumulator zeroed on the first K step, bias and tanh-GELU applied on the last K step. Mark " ..
        "M and N parallel, K arbitrary; tune bm, bn, bk.",
      kernels = { "tiled", "tile100", "wrong_bias" } },
    { id = "unfused",
      text = "GEMM + bias in a tiled kernel, then the GELU in a separate elementwise kernel.",
      kernels = { "unfused" } },
    { id = "dma_bias",
      text = "Leave the bias in HBM and fetch its tile with an async DMA on the last K step; wait on " ..
        "the semaphore before the epilogue.",
      kernels = { "dma_race", "dma" } },
  },
  kernels = {
    tiled = { file = "tiled.py", expect = "fast" },
    tile100 = { file = "tile100.py", expect = "compile_error", fix = "tiled" },
    wrong_bias = { file = "wrong_bias.py", expect = "incorrect" },
    unfused = { file = "unfused.py", expect = "slow" },
    dma = { file = "dma.py", expect = "fast" },
    dma_race = { file = "dma_race.py", expect = "incorrect", fix = "dma" },
  },
}

-- Scripted-model bank for the Pallas SwiGLU MLP (JAXBench layout): real
-- Pallas TPU kernels. Statuses hold on a CPU in TPU interpret mode and on a
-- TPU; "fast"/"slow" only mean something on a device.
return {
  plans = {
    { id = "fused_ffn",
      text = "One pallas_call over (tokens/bt, d_ff/bf): per step, a block of token rows times one d_ff " ..
        "slice of the gate and up weights, silu(g) * u in VMEM cast to bf16, then its share of the " ..
        "down projection added to a float32 VMEM accumulator (zeroed on the first slice, written on the " ..
        "last). Tokens parallel, d_ff arbitrary; tune bt and bf.",
      kernels = { "fused", "slice100", "no_silu" } },
    { id = "two_kernels",
      text = "Write h = silu(x w_gate) * (x w_up) to HBM with a first kernel, multiply it by w_down in a second.",
      kernels = { "unfused" } },
    { id = "dma_overlap",
      text = "The fused kernel, with each step's w_down slice copied into a VMEM scratch by an async local " ..
        "DMA started first; the gate and up projections run meanwhile, and the kernel waits on the DMA " ..
        "semaphore before the down projection reads the scratch.",
      kernels = { "dma_race", "dma" } },
  },
  kernels = {
    fused = { file = "fused.py", expect = "fast" },
    slice100 = { file = "slice100.py", expect = "compile_error", fix = "fused" },
    no_silu = { file = "no_silu.py", expect = "incorrect" },
    unfused = { file = "unfused.py", expect = "slow" },
    dma = { file = "dma.py", expect = "fast" },
    dma_race = { file = "dma_race.py", expect = "incorrect", fix = "dma" },
  },
}

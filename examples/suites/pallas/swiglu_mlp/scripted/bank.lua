-- Scripted-model bank for the Pallas SwiGLU MLP (JAXBench layout): real
-- Pallas TPU kernels. Statuses hold on a CPU in TPU interpret mode and on a
-- TPU; "fast" only means something on a device.
return {
  plans = {
    { id = "fused_ffn",
      text = "One pallas_call over (tokens/bt, d_ff/bf): per step, a block of token rows times one d_ff " ..
        "slice of the gate and up weights, silu(g) * u in VMEM cast to bf16, then its share of the " ..
        "down projection added to a float32 VMEM accumulator (zeroed on the first slice, written on the " ..
        "last). Tokens parallel, d_ff arbitrary; tune bt and bf.",
      kernels = { "fused", "slice100", "no_silu" } },
  },
  kernels = {
    fused = { file = "fused.py", expect = "fast" },
    slice100 = { file = "slice100.py", expect = "compile_error", fix = "fused" },
    no_silu = { file = "no_silu.py", expect = "incorrect" },
  },
}

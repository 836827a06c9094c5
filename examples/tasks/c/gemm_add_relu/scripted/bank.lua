-- Scripted-model bank for gemm_add_relu.
return {
  plans = {
    { id = "fused_rows", kernels = { "fused", "fused_typo" },
      text = "Fuse everything per row of the output: initialise the row with the bias, accumulate a[i][p] * "
        .. "b[p][:] in i-p-j order (contiguous, vectorisable), then apply ReLU in place; rows in parallel." },
    { id = "k_blocking", kernels = { "blocked", "relu_early" },
      text = "Block the reduction dimension so a panel of b stays in cache (tunable block), applying bias and "
        .. "ReLU as the rows are produced." },
    { id = "accurate_sum", kernels = { "kahan", "no_bias" },
      text = "Keep the dot-product formulation with compensated summation in double for accuracy, adding the "
        .. "bias at the end." },
  },
  kernels = {
    fused = { file = "fused.c", expect = "fast" },
    fused_typo = { file = "fused_typo.c", expect = "compile_error", fix = "fused" },
    blocked = { file = "blocked.c", expect = "fast" },
    relu_early = { file = "relu_early.c", expect = "incorrect" },
    kahan = { file = "kahan.c", expect = "slow" },
    no_bias = { file = "no_bias.c", expect = "incorrect" },
  },
}

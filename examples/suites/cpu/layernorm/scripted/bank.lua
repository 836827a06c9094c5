-- Scripted-model bank for LayerNorm (suite copy of examples/tasks/c/layernorm).
return {
  plans = {
    {
      id = "simd_float_stats",
      title = "SIMD float statistics",
      text = [=[The reference runs three serial double-precision loops per row
(mean, variance, output); the two accumulations are dependency chains of one
add per 4 cycles, and the output loop converts every element to double and
back. Use float accumulators under `#pragma omp simd reduction(+ : ...)` so GCC
splits each sum over AVX2 lanes (4096 O(1) terms lose ~1e-6 relative in
float), keep the two-pass variance sum((x - mu)^2) for accuracy, and compute the
output (x - mu) * inv * gamma[c] + beta[c] in float with `omp simd`. The
variance is the biased one (divide by cols), as in the reference; gamma scales
the normalised value and beta is added last.]=],
      kernels = { "simd_fused", "simd_fused_typo", "unbiased", "affine_order" },
    },
    {
      id = "single_stats_pass",
      title = "One statistics pass (shifted data)",
      text = [=[Read the row once for the statistics instead of twice: accumulate
sum(x) and sum(x^2) in the same vectorised loop and use var = E[x^2] - mu^2.
With inputs of mean 0.5 and std 2 there is no catastrophic cancellation
(E[x^2] = 4.25 against mu^2 = 0.25), so float is accurate enough.]=],
      kernels = { "one_pass_stats" },
    },
    {
      id = "rows_omp",
      title = "Rows over OpenMP",
      text = [=[Rows are independent: split them over OpenMP threads with
`schedule(static, RB)` on top of the vectorised row kernel, so both cores stream
rows. Tune the chunk with `// mk:tune RB 1 8 32`.]=],
      kernels = { "rows_omp" },
    },
    {
      id = "welford",
      title = "Welford's algorithm",
      text = [=[Use Welford's single-pass algorithm in double for the statistics:
update the running mean by delta / count and the sum of squared deviations per
element. It is robust when the mean is large compared with the spread and reads
the row once for the statistics.]=],
      kernels = { "welford" },
    },
  },
  kernels = {
    simd_fused = { file = "simd_fused.c", expect = "fast" },
    simd_fused_typo = { file = "simd_fused_typo.c", expect = "compile_error", fix = "simd_fused" },
    unbiased = { file = "unbiased.c", expect = "incorrect" },
    affine_order = { file = "affine_order.c", expect = "incorrect" },
    one_pass_stats = { file = "one_pass_stats.c", expect = "fast" },
    rows_omp = { file = "rows_omp.c", expect = "fast" },
    welford = { file = "welford.c", expect = "slow" },
  },
}

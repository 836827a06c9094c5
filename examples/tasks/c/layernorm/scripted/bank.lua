-- Scripted-model bank for layernorm.
return {
  plans = {
    { id = "simd_two_pass", kernels = { "simd", "simd_typo" },
      text = "Rows in parallel; per row, a SIMD pass for the mean, a SIMD pass for the variance around it, and "
        .. "one fused pass (x - mu) * inv * gamma + beta, all in float." },
    { id = "tuned_rows", kernels = { "tuned", "unbiased" },
      text = "The two-pass SIMD structure with the OpenMP chunk (rows per chunk) as a tunable; use the sample "
        .. "variance." },
    { id = "welford", kernels = { "welford", "no_beta" },
      text = "Compute mean and variance in a single pass with Welford's online algorithm in double for "
        .. "numerical robustness, then normalise." },
  },
  kernels = {
    simd = { file = "simd.c", expect = "fast" },
    simd_typo = { file = "simd_typo.c", expect = "compile_error", fix = "simd" },
    tuned = { file = "tuned.c", expect = "fast" },
    unbiased = { file = "unbiased.c", expect = "incorrect" },
    welford = { file = "welford.c", expect = "slow" },
    no_beta = { file = "no_beta.c", expect = "incorrect" },
  },
}

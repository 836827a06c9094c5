-- Scripted-model bank for per-row cross-entropy (log-sum-exp minus the label logit).
return {
  plans = {
    {
      id = "avx2_exp",
      title = "Vectorised AVX2 exponential",
      text = [=[Nearly all the reference's time is one libm expf call per logit
(4 M calls at the bench size): an opaque scalar call that blocks vectorisation.
Replace it with an inline AVX2 exponential for non-positive arguments (after
subtracting the row max every argument is <= 0): clamp at -80 so results stay
normal floats (no denormal slow path), n = round(t * log2 e), f = t - n ln 2
split into a high and a low constant, e^f by a degree-7 Horner polynomial
(|f| <= 0.35 so the truncation error is below 1e-8), and 2^n by writing n + 127
into the exponent field. Do the max pass 8 lanes wide with _mm256_max_ps too,
finish tails with scalar code, and take x[r][labels[r]] from the current row.]=],
      kernels = { "poly_exp", "poly_exp_typo", "label_offset" },
    },
    {
      id = "avx2_exp_omp",
      title = "AVX2 exponential, rows over OpenMP",
      text = [=[Keep the AVX2 exponential row kernel and split the rows over OpenMP
threads with `schedule(static, RB)`; rows are independent and each is 32 KiB,
so a chunk of rows is a contiguous stream per thread. Tune the chunk with
`// mk:tune RB 1 8 32`.]=],
      kernels = { "poly_omp" },
    },
    {
      id = "single_pass_no_max",
      title = "Single pass without the max",
      text = [=[Drop the max pass altogether: loss = log(sum_c exp(x_c)) - x_label is
the same quantity mathematically, and one pass over the row halves the memory
traffic.]=],
      kernels = { "one_pass" },
    },
    {
      id = "streaming_logaddexp",
      title = "Streaming logaddexp",
      text = [=[Fold the row into the log-sum-exp one class at a time with
logaddexp: lse = max(lse, x_c) + log1p(exp(-|lse - x_c|)). Each step is stable
by itself, so there is no separate max pass over the row and no running sum
that could overflow.]=],
      kernels = { "logaddexp" },
    },
  },
  kernels = {
    poly_exp = { file = "poly_exp.c", expect = "fast" },
    poly_exp_typo = { file = "poly_exp_typo.c", expect = "compile_error", fix = "poly_exp" },
    label_offset = { file = "label_offset.c", expect = "incorrect" },
    poly_omp = { file = "poly_omp.c", expect = "fast" },
    one_pass = { file = "one_pass.c", expect = "incorrect" },
    logaddexp = { file = "logaddexp.c", expect = "slow" },
  },
}

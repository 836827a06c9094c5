-- Scripted-model bank for per-row cross-entropy (log-sum-exp minus the label logit).
return {
  plans = {
    {
      id = "avx2_exp",
      text = [[Nearly all the reference's time is one libm expf call per logit
(4 M calls at the bench size): an opaque scalar call that blocks vectorisation.
Replace it with an inline AVX2 exponential for non-positive arguments (after
subtracting the row max every argument is <= 0): clamp at -80 so results stay
normal floats (no denormal slow path), n = round(t * log2 e), f = t - n ln 2
split into a high and a low constant, e^f by a degree-7 Horner polynomial
(|f| <= 0.35 so the truncation error is below 1e-8), and 2^n by writing n + 127
into the exponent field. Do the max pass 8 lanes wide with _mm256_max_ps too,
finish tails with scalar code, and take x[r][labels[r]] from the current row.]],
      kernels = { "poly_exp", "poly_exp_typo", "label_offset" },
    },
    {
      id = "online_lse_omp",
      text = [[Read each row once: an online log-sum-exp keeps a running max m and
a sum s; a new maximum v rescales s by exp(m - v) and adds 1, any other value
adds exp(v - m). Rows are independent, so split them over OpenMP threads with
`schedule(static, RB)` and tune the chunk with `// mk:tune RB 1 8 32`.]],
      kernels = { "online_omp" },
    },
    {
      id = "single_pass_no_max",
      text = [[Drop the max pass altogether: loss = log(sum_c exp(x_c)) - x_label is
the same quantity mathematically, and one pass over the row halves the memory
traffic.]],
      kernels = { "one_pass" },
    },
    {
      id = "double_lse",
      text = [[Compute the log-sum-exp entirely in double (exp and log from libm's
double versions, double max and sum) so the 8192-term sum loses nothing to
single-precision rounding.]],
      kernels = { "double_exp" },
    },
  },
  kernels = {
    poly_exp = { file = "poly_exp.c", expect = "fast" },
    poly_exp_typo = { file = "poly_exp_typo.c", expect = "compile_error", fix = "poly_exp" },
    label_offset = { file = "label_offset.c", expect = "incorrect" },
    online_omp = { file = "online_omp.c", expect = "fast" },
    one_pass = { file = "one_pass.c", expect = "incorrect" },
    double_exp = { file = "double_exp.c", expect = "slow" },
  },
}

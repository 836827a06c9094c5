-- Scripted-model bank for residual add + LayerNorm (two outputs: h = x + r and y = LN(h)).
return {
  plans = {
    {
      id = "fused_row_simd",
      title = "Fused add & norm per row, SIMD statistics",
      text = [=[The reference makes four passes per row with serial double
accumulators, and because h is an output pointer it re-reads h[i][c] through
memory the compiler cannot prove unaliased. Fuse per row: one `omp simd` loop
computes h = x + r, stores it and accumulates sum(h) in a float reduction
(AVX2 lanes); the variance pass sum((h - mu)^2) and the output pass
(h - mu) * inv * gamma + beta then read the row of h back from L1 (16 KiB).
Mark all pointers restrict. The statistics are those of h, not of x: the
residual must be included before normalising.]=],
      kernels = { "fused_simd", "fused_simd_typo", "stats_on_x" },
    },
    {
      id = "scratch_row",
      title = "Per-row scratch buffer",
      text = [=[Keep h for the current row in a private scratch buffer of cols
floats that stays in L1 while the statistics and y are computed, so the
statistics passes never touch the output arrays.]=],
      kernels = { "scratch_h" },
    },
    {
      id = "rows_omp",
      title = "Rows over OpenMP",
      text = [=[Rows are independent: on top of the fused row kernel, split them
over OpenMP threads with `schedule(static, RB)`, so both cores stream their own
rows of x and r. Tune the chunk with `// mk:tune RB 1 8 32`.]=],
      kernels = { "rows_omp" },
    },
    {
      id = "compensated_stats",
      title = "Kahan-compensated statistics",
      text = [=[Make the single-precision statistics as accurate as double ones
with Kahan-compensated sums for both the mean and the variance, keeping the
reference's loop structure otherwise.]=],
      kernels = { "kahan" },
    },
  },
  kernels = {
    fused_simd = { file = "fused_simd.c", expect = "fast" },
    fused_simd_typo = { file = "fused_simd_typo.c", expect = "compile_error", fix = "fused_simd" },
    stats_on_x = { file = "stats_on_x.c", expect = "incorrect" },
    scratch_h = { file = "scratch_h.c", expect = "incorrect" },
    rows_omp = { file = "rows_omp.c", expect = "fast" },
    kahan = { file = "kahan.c", expect = "slow" },
  },
}

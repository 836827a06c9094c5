-- Scripted-model bank for matmul + scale + residual (out = 0.5 * a@b + r).
return {
  plans = {
    {
      id = "ikj_fused_epilogue",
      title = "i-p-j order with fused scale + residual",
      text = [=[The reference walks b down its columns (stride n floats) in the
innermost loop and keeps a scalar serial sum, so every step is a cache miss
candidate and nothing vectorises. Reorder to i-p-j: for each output row, zero it,
then for each p broadcast a[i][p] and add a[i][p] * b[p][0..n) into the row.
Both the b row and the output row are unit-stride, so GCC emits AVX2 FMAs with
restrict pointers. Fuse the epilogue: after the last p, one pass over the row
(still in L1) computes 0.5 * acc + r. The residual must be added after the
scaling, not folded into the accumulator before it.]=],
      kernels = { "ikj", "ikj_typo", "ikj_residual_init" },
    },
    {
      id = "k_panels_omp",
      title = "Reduction panels in L2, OpenMP rows",
      text = [=[Keep the i-p-j order but cut the reduction dimension into panels of
KB rows of b (KB x n floats, 64 x 384 x 4 B = 96 KiB) so the panel stays in L2
while every output row accumulates against it, instead of streaming all of b
(384 KiB) once per output row. Split the rows across OpenMP threads inside one
parallel region (zero, panels, epilogue as `omp for schedule(static) nowait`
loops: each thread keeps the same rows, so no loop needs a barrier), and tune
the panel height with `// mk:tune KB 32 64 128 256`.]=],
      kernels = { "blocked_omp" },
    },
    {
      id = "transpose_dot_unrolled",
      title = "Transposed b, unrolled dot products",
      text = [=[Transpose b once into bt[n][k] so each output is a dot product of two
contiguous rows, and break the serial dependency of the sum with four independent
accumulators (p, p+1, p+2, p+3), combined at the end; the four chains hide the
FMA latency.]=],
      kernels = { "unroll4" },
    },
    {
      id = "compensated_sum",
      title = "Kahan-compensated dot products",
      text = [=[The dot products are 256 long; to keep the result within the 1e-4
tolerance whatever the summation order, use Kahan-compensated summation in the
reference loop order (running sum plus a correction term per output).]=],
      kernels = { "kahan" },
    },
  },
  kernels = {
    ikj = { file = "ikj.c", expect = "fast" },
    ikj_typo = { file = "ikj_typo.c", expect = "compile_error", fix = "ikj" },
    ikj_residual_init = { file = "ikj_residual_init.c", expect = "incorrect" },
    blocked_omp = { file = "blocked_omp.c", expect = "fast" },
    unroll4 = { file = "unroll4.c", expect = "incorrect" },
    kahan = { file = "kahan.c", expect = "slow" },
  },
}

-- Scripted-model bank for batched matmul + row softmax.
return {
  plans = {
    {
      id = "ikj_fused_softmax",
      title = "i-p-j order with the softmax fused per row",
      text = [=[Each output of the reference is a k-long serial dot product that
walks c[b] down a column (stride n), so nothing vectorises and every step is a
dependent FMA. Reorder the product to i-p-j: zero the output row, then for each
p add a[b][i][p] * c[b][p][0..n) (unit stride, AVX2 FMAs with restrict). The
finished row (n floats, 1 KiB) is still in L1, so fuse the softmax right there:
row max, exp(x - max) with a running sum, then multiply by 1/sum. Keep the
batch offset of c as b * k * n (c is [batch][k][n]).]=],
      kernels = { "ikj_softmax", "ikj_softmax_typo", "batch_stride" },
    },
    {
      id = "unrolled_rows_omp",
      title = "Unrolled reduction, rows over OpenMP",
      text = [=[In the i-p-j version every p reloads and restores the whole output
row. Unroll p by PU: one sweep over the row applies PU rows of c, so the
accumulator is loaded and stored once per PU FMAs. Handle k % PU leftover rows
with a scalar-p tail loop. The batch*m rows are independent: flatten them into
one `#pragma omp parallel for` loop. Tune with `// mk:tune PU 1 2 4 8`.]=],
      kernels = { "unroll_omp", "unroll_tail" },
    },
    {
      id = "extended_softmax",
      title = "Softmax in extended precision",
      text = [=[Make the softmax as exact as possible: keep max and sum in long
double (x87 extended precision) and recompute expl() in the normalisation pass
instead of storing single-precision exponentials, so nothing is rounded before
the division. Keep the product loop of the reference.]=],
      kernels = { "exact_softmax" },
    },
  },
  kernels = {
    ikj_softmax = { file = "ikj_softmax.c", expect = "fast" },
    ikj_softmax_typo = { file = "ikj_softmax_typo.c", expect = "compile_error", fix = "ikj_softmax" },
    batch_stride = { file = "batch_stride.c", expect = "incorrect" },
    unroll_omp = { file = "unroll_omp.c", expect = "fast" },
    unroll_tail = { file = "unroll_tail.c", expect = "incorrect" },
    exact_softmax = { file = "exact_softmax.c", expect = "slow" },
  },
}

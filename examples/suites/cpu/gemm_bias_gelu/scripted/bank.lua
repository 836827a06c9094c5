-- Scripted-model bank for linear (nn.Linear weight layout) + bias + exact GELU.
return {
  plans = {
    {
      id = "transpose_w_ikj",
      title = "Transpose W once, i-p-j order",
      text = [=[The weight is stored as nn.Linear does, w[n][k], so the reference
computes each output as a k-long dot product with one serial float accumulator:
512 dependent FMAs per output and no vectorisation (GCC will not reassociate
float sums without -ffast-math). Transpose w once into wt[k][n] (a 0.75 MiB
copy, against 50 M FMAs of work), then run the product in i-p-j order: start the
output row at the bias, add a[i][p] * wt[p][0..n) for every p (unit stride,
AVX2 FMAs), and finish with the exact GELU 0.5 x (1 + erf(x / sqrt 2)) over the
row while it is in L1. Keep erff: the tanh approximation differs by up to 5e-4,
more than the 1e-4 tolerance.]=],
      kernels = { "wt_ikj", "wt_ikj_typo", "gelu_tanh" },
    },
    {
      id = "row_blocks_omp",
      title = "Row blocks over OpenMP",
      text = [=[With the transposed weight, every output row streams all of wt
(0.75 MiB, larger than L2). Compute MB output rows together: for each p, load
the wt row once and apply it to the MB rows, so weight traffic drops by MB while
the MB output rows (MB x 1.5 KiB) stay in L1. Row blocks are independent: split
them over OpenMP threads with a static schedule. Tune MB with
`// mk:tune MB 1 2 4 8`. Handle the last partial block (m is not always a
multiple of MB).]=],
      kernels = { "wt_blocked_omp", "wt_blocked_notail" },
    },
    {
      id = "compensated_float_dots",
      title = "Kahan-compensated float dot products",
      text = [=[Drop the double accumulator, whose int-to-double conversions cost on
every product, and accumulate each contiguous a-row x w-row dot product in float
with Kahan compensation (a running correction term), which keeps the 512-long
sums as accurate as double. Bias and the exact GELU stay fused per output.]=],
      kernels = { "kahan_dot" },
    },
  },
  kernels = {
    wt_ikj = { file = "wt_ikj.c", expect = "fast" },
    wt_ikj_typo = { file = "wt_ikj_typo.c", expect = "compile_error", fix = "wt_ikj" },
    gelu_tanh = { file = "gelu_tanh.c", expect = "incorrect" },
    wt_blocked_omp = { file = "wt_blocked_omp.c", expect = "fast" },
    wt_blocked_notail = { file = "wt_blocked_notail.c", expect = "incorrect" },
    kahan_dot = { file = "kahan_dot.c", expect = "slow" },
  },
}

-- Scripted-model bank for the SwiGLU gated MLP projection silu(x@wg) * (x@wu).
return {
  plans = {
    {
      id = "fused_ikj",
      title = "Fused gate/up projections in i-p-j order",
      text = [=[The reference computes each output with two k-long dot products
that walk wg and wu down their columns (stride n floats), so every weight load
is a new cache line and the float chains do not vectorise. Switch both
projections to i-p-j order inside one loop nest: for output row i keep a gate
row g[0..n) and an up row u[0..n) in a scratch buffer, and for each p broadcast
x[i][p] once into two unit-stride axpys, g += x[i][p] * wg[p][:] and
u += x[i][p] * wu[p][:]. Fuse the epilogue out = g / (1 + exp(-g)) * u into a
last pass over the row while it is in L1. The gate goes through silu, the up
projection is the linear factor.]=],
      kernels = { "ikj_fused", "ikj_fused_typo", "silu_sign", "gate_swapped" },
    },
    {
      id = "row_blocks_omp",
      title = "Row blocks over OpenMP",
      text = [=[The two weight matrices (2 x 576 KiB) do not fit in L2, so the i-p-j
version streams them from L3 once per output row. Compute MB rows per block:
each (wg[p], wu[p]) row pair is loaded once and applied to MB gate/up rows
held in a per-thread buffer of 2 x MB x n floats, cutting weight traffic by MB.
Blocks are independent; run them with `#pragma omp for` (buffer allocated once
per thread in the parallel region) and tune MB with `// mk:tune MB 1 2 4 8`.
The last block may be partial.]=],
      kernels = { "rows_omp" },
    },
    {
      id = "compensated_sums",
      title = "Kahan-compensated projections",
      text = [=[Stay in single precision but make the 384-long sums as accurate as
the double-precision reference with Kahan compensation: one running sum and one
correction term per projection, in the reference loop order.]=],
      kernels = { "compensated" },
    },
  },
  kernels = {
    ikj_fused = { file = "ikj_fused.c", expect = "fast" },
    ikj_fused_typo = { file = "ikj_fused_typo.c", expect = "compile_error", fix = "ikj_fused" },
    silu_sign = { file = "silu_sign.c", expect = "incorrect" },
    gate_swapped = { file = "gate_swapped.c", expect = "incorrect" },
    rows_omp = { file = "rows_omp.c", expect = "fast" },
    compensated = { file = "compensated.c", expect = "slow" },
  },
}

-- Scripted-model bank for GEMM + bias + ReLU (suite copy of examples/tasks/c/gemm_add_relu).
return {
  plans = {
    {
      id = "ipj_fused_epilogue",
      title = "i-p-j order with fused bias + ReLU",
      text = [=[The reference computes every output as a k-long dot product that
walks b down a column (stride n) with a serial double accumulator, so it neither
vectorises nor uses whole cache lines of b. Reorder to i-p-j: initialise the row
of out with the bias, add a[i][p] * b[p][0..n) for each p (unit stride, AVX2
FMAs), then apply ReLU, max(v, 0), in one pass over the finished row while it is
in L1. The whole epilogue is fused into the row loop: no second pass over the
matrix.]=],
      kernels = { "ikj_epilogue", "ikj_epilogue_typo", "leaky" },
    },
    {
      id = "row_blocks_omp",
      title = "Row blocks over OpenMP",
      text = [=[On top of the i-p-j order, compute MB rows of out per work item: for
each p the b row is loaded once and applied to the MB rows, cutting b traffic by
MB while the MB output rows stay in L1 (MB x 1 KiB). Work items are independent:
`#pragma omp parallel for` over them. The last block is partial whenever m is not
a multiple of MB (m = 37, 70, 1 in the tests): clamp its end to m. Tune with
`// mk:tune MB 1 2 4 8`.]=],
      kernels = { "rows_omp", "rows_omp_lastrow" },
    },
    {
      id = "pairwise_sums",
      title = "Pairwise summation",
      text = [=[Keep the reference's one-output-at-a-time structure but reduce the
k products of each output by pairwise (cascade) summation: gather them into a
buffer and sum it by recursive halving (sum of the left half plus sum of the
right half), so the rounding error grows with log2(k) instead of k and stays
far inside the tolerance in float.]=],
      kernels = { "pairwise" },
    },
  },
  kernels = {
    ikj_epilogue = { file = "ikj_epilogue.c", expect = "fast" },
    ikj_epilogue_typo = { file = "ikj_epilogue_typo.c", expect = "compile_error", fix = "ikj_epilogue" },
    leaky = { file = "leaky.c", expect = "incorrect" },
    rows_omp = { file = "rows_omp.c", expect = "fast" },
    rows_omp_lastrow = { file = "rows_omp_lastrow.c", expect = "incorrect" },
    pairwise = { file = "pairwise.c", expect = "slow" },
  },
}

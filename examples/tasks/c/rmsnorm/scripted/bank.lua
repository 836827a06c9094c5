-- Scripted-model bank for rmsnorm: plans and the kernels each may produce.
return {
  plans = {
    { id = "simd_rows", kernels = { "simd", "simd_typo" },
      text = "Parallelise over rows with OpenMP and vectorise both passes of each row: accumulate the sum of "
        .. "squares in float with an `omp simd` reduction (8 lanes), compute 1/sqrt once per row, then one "
        .. "fused multiply pass x * inv * scale. Handle any cols (no assumptions about multiples of 8)." },
    { id = "parallel_tuned", kernels = { "tuned", "skip_tail" },
      text = "Same row-parallel structure, but expose the OpenMP chunk size as a tunable (rows per chunk) and "
        .. "process each row in blocks of 8 columns to help the vectoriser." },
    { id = "naive_port", kernels = { "naive", "wrong_eps" },
      text = "Port the reference directly, computing the normalisation in double precision per element for "
        .. "accuracy; keep the loop structure of the reference." },
  },
  kernels = {
    simd = { file = "simd.c", expect = "fast" },
    simd_typo = { file = "simd_typo.c", expect = "compile_error", fix = "simd" },
    tuned = { file = "tuned.c", expect = "fast" },
    skip_tail = { file = "skip_tail.c", expect = "incorrect" },
    naive = { file = "naive.c", expect = "slow" },
    wrong_eps = { file = "wrong_eps.c", expect = "incorrect" },
  },
}

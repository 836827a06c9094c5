-- Scripted-model bank for matmul.
return {
  plans = {
    { id = "ikj_order", kernels = { "ikj", "ikj_typo" },
      text = "Reorder the loops to i-p-j so the innermost loop streams a row of b and a row of c contiguously "
        .. "(vectorisable, no strided access); zero the row of c first, accumulate in float, parallelise rows "
        .. "with OpenMP." },
    { id = "k_blocking", kernels = { "blocked", "no_zero" },
      text = "Block the reduction dimension so a panel of b stays in cache while a block of rows of c is updated; "
        .. "make the block size a tunable." },
    { id = "accurate_sum", kernels = { "kahan", "transposed_b" },
      text = "Keep the dot-product formulation but make each sum more accurate (compensated summation in "
        .. "double), reading b as if it were stored transposed for unit stride." },
  },
  kernels = {
    ikj = { file = "ikj.c", expect = "fast" },
    ikj_typo = { file = "ikj_typo.c", expect = "compile_error", fix = "ikj" },
    blocked = { file = "blocked.c", expect = "fast" },
    no_zero = { file = "no_zero.c", expect = "incorrect" },
    kahan = { file = "kahan.c", expect = "slow" },
    transposed_b = { file = "transposed_b.c", expect = "incorrect" },
  },
}

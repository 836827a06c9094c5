-- Scripted-model bank for row softmax (suite copy of examples/tasks/c/softmax).
return {
  plans = {
    {
      id = "avx2_exp_once",
      title = "One AVX2 exponential per element",
      text = [=[The reference evaluates double-precision exp() twice per element
(once for the sum, once for the output): 2 x 1 M opaque libm calls at the bench
size, none vectorised. Compute each exponential once, in float, 8 lanes at a
time with an inline AVX2 exp for t <= 0: clamp t at -80 (results stay normal
floats), n = round(t log2 e), f = t - n ln 2 with a two-constant split, e^f by a
degree-7 Horner polynomial (|f| <= 0.35, error < 1e-8) and 2^n written into the
exponent bits. Store e into out and add it to an 8-lane sum in the same pass,
then multiply the row by 1/sum. Max pass 8 wide too; scalar tails on every pass
(cols = 129, 1003, 4099, 1 in the tests), including the final scaling.]=],
      kernels = { "avx_exp", "avx_exp_typo", "avx_notail" },
    },
    {
      id = "avx2_exp_rows_omp",
      title = "AVX2 softmax rows over OpenMP",
      text = [=[Keep the AVX2 row kernel and split rows over OpenMP threads with
`schedule(static, RB)`; each row is 16 KiB, independent of the others. Tune the
chunk with `// mk:tune RB 1 8 32`.]=],
      kernels = { "avx_omp" },
    },
    {
      id = "float_exp_once",
      title = "Single-precision exp, computed once",
      text = [=[A low-risk first step: stay scalar but compute every exponential
once and in float: expf(x - max) stored into out and summed in the same loop,
then one multiplication by 1/sum per element. That halves the number of
exponentials and replaces double exp() with the cheaper expf().]=],
      kernels = { "expf_two_pass" },
    },
    {
      id = "online_normaliser",
      title = "Online softmax normaliser",
      text = [=[Fuse the max and sum passes with an online normaliser: track the
running max and the sum of exp(x - max) in a single pass, then write
exp(x - max) / sum in a second pass. Two passes over the row instead of three.]=],
      kernels = { "online_norescale" },
    },
    {
      id = "extended_precision",
      title = "Extended-precision softmax",
      text = [=[Eliminate intermediate rounding entirely: compute max, sum and
every exponential in long double (x87 extended precision) and round to float
only on the final store.]=],
      kernels = { "long_double" },
    },
  },
  kernels = {
    avx_exp = { file = "avx_exp.c", expect = "fast" },
    avx_exp_typo = { file = "avx_exp_typo.c", expect = "compile_error", fix = "avx_exp" },
    avx_notail = { file = "avx_notail.c", expect = "incorrect" },
    avx_omp = { file = "avx_omp.c", expect = "fast" },
    expf_two_pass = { file = "expf_two_pass.c", expect = "fast" },
    online_norescale = { file = "online_norescale.c", expect = "incorrect" },
    long_double = { file = "long_double.c", expect = "slow" },
  },
}

-- Scripted-model bank for softmax.
return {
  plans = {
    { id = "single_exp", kernels = { "once", "once_typo" },
      text = "Compute each exponential once: pass 1 finds the row max (SIMD), pass 2 stores exp(x - max) in out "
        .. "and accumulates the sum in float, pass 3 multiplies by 1/sum. Rows in parallel with OpenMP." },
    { id = "tuned_rows", kernels = { "tuned", "vector_body" },
      text = "The single-exp structure with a tunable OpenMP chunk (rows per chunk); process the sum in blocks "
        .. "of 8 columns so the compiler emits full vectors." },
    { id = "closed_form", kernels = { "powbase", "uniform" },
      text = "Write the exponential as a power of e in long double for accuracy, and short-circuit rows whose logits are close "
        .. "together, where softmax is nearly uniform." },
  },
  kernels = {
    once = { file = "once.c", expect = "fast" },
    once_typo = { file = "once_typo.c", expect = "compile_error", fix = "once" },
    tuned = { file = "tuned.c", expect = "fast" },
    vector_body = { file = "vector_body.c", expect = "incorrect" },
    powbase = { file = "powbase.c", expect = "slow" },
    uniform = { file = "uniform.c", expect = "incorrect" },
  },
}

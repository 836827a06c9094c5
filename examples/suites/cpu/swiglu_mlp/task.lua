-- LLM-style operator: the gated (SwiGLU) projection of a LLaMA-style MLP.
return {
  name = "swiglu_mlp",
  target = "c",
  description = "SwiGLU gated projection of a transformer MLP, float32 row-major: "
    .. "x[m][k], wg[k][n] (gate weights), wu[k][n] (up weights), "
    .. "out[m][n] = silu(x @ wg) * (x @ wu) with silu(z) = z / (1 + exp(-z)).",
  entry = "kernel",
  args = {
    { name = "x", kind = "in", dtype = "float32", shape = { "m", "k" }, init = "normal" },
    { name = "wg", kind = "in", dtype = "float32", shape = { "k", "n" }, init = { "uniform", -0.1, 0.1 } },
    { name = "wu", kind = "in", dtype = "float32", shape = { "k", "n" }, init = { "uniform", -0.1, 0.1 } },
    { name = "out", kind = "out", dtype = "float32", shape = { "m", "n" } },
    { name = "m", kind = "int" },
    { name = "k", kind = "int" },
    { name = "n", kind = "int" },
  },
  sizes = { m = 128, k = 384, n = 384 },
  -- irregular: nothing a multiple of 8, a single token, a 1-wide projection
  test_sizes = {
    { m = 7, k = 13, n = 9 },
    { m = 33, k = 65, n = 17 },
    { m = 1, k = 1, n = 1 },
    { m = 100, k = 37, n = 129 },
  },
  tolerance = { atol = 1e-4, rtol = 1e-4 },
  flops = "4 * m * n * k + 5 * m * n",
  bytes = "4 * (m * k + 2 * k * n + m * n)",
}

-- KernelBench level-2 style fusion: Gemm (nn.Linear) + bias + GELU.
return {
  name = "gemm_bias_gelu",
  target = "c",
  description = "Linear layer followed by the exact GELU, float32 row-major: "
    .. "a[m][k], w[n][k] (nn.Linear layout, one row per output feature), bias[n], "
    .. "out[m][n] = gelu(a @ w^T + bias) with gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2))).",
  entry = "kernel",
  args = {
    { name = "a", kind = "in", dtype = "float32", shape = { "m", "k" } },
    { name = "w", kind = "in", dtype = "float32", shape = { "n", "k" }, init = { "uniform", -0.25, 0.25 } },
    { name = "bias", kind = "in", dtype = "float32", shape = { "n" } },
    { name = "out", kind = "out", dtype = "float32", shape = { "m", "n" } },
    { name = "m", kind = "int" },
    { name = "k", kind = "int" },
    { name = "n", kind = "int" },
  },
  sizes = { m = 256, k = 512, n = 384 },
  -- irregular: nothing a multiple of 8, a single output, n larger than m
  test_sizes = {
    { m = 7, k = 13, n = 9 },
    { m = 33, k = 65, n = 17 },
    { m = 1, k = 1, n = 1 },
    { m = 100, k = 37, n = 129 },
  },
  tolerance = { atol = 1e-4, rtol = 1e-4 },
  flops = "2 * m * n * k + 10 * m * n",
  bytes = "4 * (m * k + n * k + n + m * n)",
}

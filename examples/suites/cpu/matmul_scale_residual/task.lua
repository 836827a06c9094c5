-- KernelBench level-2 style fusion: Matmul + scaling + residual add.
return {
  name = "matmul_scale_residual",
  target = "c",
  description = "Matrix product with scaling and residual add, float32 row-major: "
    .. "a[m][k], b[k][n], r[m][n], out[m][n] = 0.5 * (a @ b) + r.",
  entry = "kernel",
  args = {
    { name = "a", kind = "in", dtype = "float32", shape = { "m", "k" } },
    { name = "b", kind = "in", dtype = "float32", shape = { "k", "n" } },
    { name = "r", kind = "in", dtype = "float32", shape = { "m", "n" } },
    { name = "out", kind = "out", dtype = "float32", shape = { "m", "n" } },
    { name = "m", kind = "int" },
    { name = "k", kind = "int" },
    { name = "n", kind = "int" },
  },
  sizes = { m = 384, k = 256, n = 384 },
  -- irregular: nothing a multiple of 8, a 1x1x1 product, k longer than m
  test_sizes = {
    { m = 7, k = 13, n = 9 },
    { m = 33, k = 65, n = 17 },
    { m = 1, k = 1, n = 1 },
    { m = 100, k = 37, n = 129 },
  },
  tolerance = { atol = 1e-4, rtol = 1e-4 },
  flops = "2 * m * n * k + 2 * m * n",
  bytes = "4 * (m * k + k * n + 2 * m * n)",
}

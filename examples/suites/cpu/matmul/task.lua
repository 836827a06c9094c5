-- Dense matrix product C = A * B, row-major float32.
return {
  name = "matmul",
  target = "c",
  description = "Matrix multiplication of row-major float32 matrices: c[i][j] = sum_p a[i][p] * b[p][j], "
    .. "with a of shape m x k, b of shape k x n and c of shape m x n.",
  entry = "kernel",
  args = {
    { name = "a", kind = "in", dtype = "float32", shape = { "m", "k" } },
    { name = "b", kind = "in", dtype = "float32", shape = { "k", "n" } },
    { name = "c", kind = "out", dtype = "float32", shape = { "m", "n" } },
    { name = "m", kind = "int" },
    { name = "n", kind = "int" },
    { name = "k", kind = "int" },
  },
  -- suite copy: 256^3 instead of 512^3 keeps the textbook reference near 150 ms
  sizes = { m = 256, n = 256, k = 256 },
  test_sizes = {
    { m = 37, n = 45, k = 53 },
    { m = 1, n = 129, k = 7 },
    { m = 70, n = 3, k = 257 },
    { m = 33, n = 65, k = 1 },
  },
  seeds = { 1, 2 },
  heldout_seeds = { 1001, 1002 },
  -- float32 sums over k terms: allow for reassociation (blocking, SIMD)
  tolerance = { atol = 1e-3, rtol = 1e-3 },
  flops = "2 * m * n * k",
  bytes = "4 * (m * k + k * n + m * n)",
}

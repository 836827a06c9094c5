-- Fused GEMM + bias + ReLU: out = max(0, A * B + bias).
return {
  name = "gemm_add_relu",
  target = "c",
  description = "Fused matrix product, bias add and ReLU on row-major float32 data: "
    .. "out[i][j] = max(0, bias[j] + sum_p a[i][p] * b[p][j]) with a m x k, b k x n, bias n, out m x n.",
  entry = "kernel",
  args = {
    { name = "a", kind = "in", dtype = "float32", shape = { "m", "k" } },
    { name = "b", kind = "in", dtype = "float32", shape = { "k", "n" } },
    { name = "bias", kind = "in", dtype = "float32", shape = { "n" } },
    { name = "out", kind = "out", dtype = "float32", shape = { "m", "n" } },
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
  },
  seeds = { 1, 2 },
  heldout_seeds = { 1001, 1002 },
  tolerance = { atol = 1e-3, rtol = 1e-3 },
  flops = "2 * m * n * k + 2 * m * n",
  bytes = "4 * (m * k + k * n + n + m * n)",
}

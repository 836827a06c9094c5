-- KernelBench level-2 style fusion: batched matmul + softmax over the last axis.
return {
  name = "bmm_softmax",
  target = "c",
  description = "Batched matrix product followed by a softmax over the last axis, float32 "
    .. "row-major: a[batch][m][k], c[batch][k][n], "
    .. "out[b][i][:] = softmax(a[b][i][:] @ c[b]) with softmax(s)_j = exp(s_j - max s) / sum exp(s - max s).",
  entry = "kernel",
  args = {
    { name = "a", kind = "in", dtype = "float32", shape = { "batch", "m", "k" }, init = "normal" },
    { name = "c", kind = "in", dtype = "float32", shape = { "batch", "k", "n" }, init = { "uniform", -0.5, 0.5 } },
    { name = "out", kind = "out", dtype = "float32", shape = { "batch", "m", "n" } },
    { name = "batch", kind = "int" },
    { name = "m", kind = "int" },
    { name = "k", kind = "int" },
    { name = "n", kind = "int" },
  },
  sizes = { batch = 16, m = 128, k = 64, n = 256 },
  -- irregular: m != k != n (catches stride mix-ups), k not a multiple of 4 or 8, 1x1x1
  test_sizes = {
    { batch = 2, m = 7, k = 13, n = 9 },
    { batch = 3, m = 33, k = 20, n = 17 },
    { batch = 1, m = 1, k = 1, n = 1 },
    { batch = 2, m = 10, k = 37, n = 129 },
  },
  tolerance = { atol = 1e-4, rtol = 1e-4 },
  flops = "2 * batch * m * n * k + 5 * batch * m * n",
  bytes = "4 * (batch * m * k + batch * k * n + batch * m * n)",
}

-- Numerically stable softmax over each row.
return {
  name = "softmax",
  target = "c",
  description = "Row-wise softmax of a rows x cols float32 matrix (row-major): "
    .. "out[r][c] = exp(x[r][c] - max_k x[r][k]) / sum_k exp(x[r][k] - max_k x[r][k]).",
  entry = "kernel",
  args = {
    { name = "x", kind = "in", dtype = "float32", shape = { "rows", "cols" }, init = { "normal", 0, 2 } },
    { name = "out", kind = "out", dtype = "float32", shape = { "rows", "cols" } },
    { name = "rows", kind = "int" },
    { name = "cols", kind = "int" },
  },
  -- suite copy: 256 rows instead of 2048 keeps the double-exp reference near 100 ms
  sizes = { rows = 256, cols = 4096 },
  test_sizes = {
    { rows = 37, cols = 129 },
    { rows = 1, cols = 1003 },
    { rows = 65, cols = 1 },
    { rows = 5, cols = 4099 },
  },
  seeds = { 1, 2 },
  heldout_seeds = { 1001, 1002 },
  -- outputs are ~1/cols: the checker scales atol by the outputs' rms
  tolerance = { atol = 1e-4, rtol = 1e-4 },
  flops = "5 * rows * cols",              -- max, subtract, exp (counted as 1), sum, divide
  bytes = "4 * 2 * rows * cols",
}

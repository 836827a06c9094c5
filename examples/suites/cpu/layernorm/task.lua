-- Layer normalisation of each row with learned gain and bias.
return {
  name = "layernorm",
  target = "c",
  description = "Row-wise layer normalisation of a rows x cols float32 matrix (row-major): with mu = mean(x[r]) and "
    .. "var = mean((x[r] - mu)^2), out[r][c] = (x[r][c] - mu) / sqrt(var + 1e-5) * gamma[c] + beta[c].",
  entry = "kernel",
  args = {
    { name = "x", kind = "in", dtype = "float32", shape = { "rows", "cols" }, init = { "normal", 0.5, 2 } },
    { name = "gamma", kind = "in", dtype = "float32", shape = { "cols" }, init = { "uniform", 0.5, 1.5 } },
    { name = "beta", kind = "in", dtype = "float32", shape = { "cols" } },
    { name = "out", kind = "out", dtype = "float32", shape = { "rows", "cols" } },
    { name = "rows", kind = "int" },
    { name = "cols", kind = "int" },
  },
  sizes = { rows = 2048, cols = 4096 },
  test_sizes = {
    { rows = 37, cols = 129 },
    { rows = 1, cols = 1003 },
    { rows = 9, cols = 2 },
    { rows = 13, cols = 4099 },
  },
  seeds = { 1, 2 },
  heldout_seeds = { 1001, 1002 },
  tolerance = { atol = 1e-4, rtol = 1e-4 },
  flops = "8 * rows * cols",
  bytes = "4 * (2 * rows * cols + 2 * cols)",
}

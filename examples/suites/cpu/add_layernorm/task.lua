-- LLM-style operator: the fused residual add + LayerNorm ("add & norm") of a transformer block.
return {
  name = "add_layernorm",
  target = "c",
  description = "Residual add followed by row-wise layer normalisation, float32 row-major: "
    .. "x[rows][cols] and r[rows][cols] in, h = x + r written out (the new residual stream), and "
    .. "y[i][c] = (h[i][c] - mu_i) / sqrt(var_i + 1e-5) * gamma[c] + beta[c] with mu_i = mean(h[i]) "
    .. "and var_i = mean((h[i] - mu_i)^2) (biased).",
  entry = "kernel",
  args = {
    { name = "x", kind = "in", dtype = "float32", shape = { "rows", "cols" }, init = "normal" },
    { name = "r", kind = "in", dtype = "float32", shape = { "rows", "cols" }, init = { "normal", 0.5, 1 } },
    { name = "gamma", kind = "in", dtype = "float32", shape = { "cols" }, init = { "uniform", 0.5, 1.5 } },
    { name = "beta", kind = "in", dtype = "float32", shape = { "cols" } },
    { name = "h", kind = "out", dtype = "float32", shape = { "rows", "cols" } },
    { name = "y", kind = "out", dtype = "float32", shape = { "rows", "cols" } },
    { name = "rows", kind = "int" },
    { name = "cols", kind = "int" },
  },
  sizes = { rows = 1024, cols = 4096 },
  -- irregular: widths that are not multiples of 8, a single row, two-wide rows
  test_sizes = {
    { rows = 37, cols = 129 },
    { rows = 1, cols = 1003 },
    { rows = 9, cols = 2 },
    { rows = 13, cols = 4099 },
  },
  tolerance = { atol = 1e-4, rtol = 1e-4 },
  flops = "9 * rows * cols",
  bytes = "4 * (4 * rows * cols + 2 * cols)",
}

-- Test-only copy of examples/suites/cpu/rmsnorm with a small benchmark size, so
-- end-to-end tests of the search loop run in seconds; the bank is shared.
-- RMS normalisation of each row: out[r][c] = x[r][c] / sqrt(mean(x[r]^2) + 1e-5) * scale[c]
return {
  name = "rmsnorm_small",
  target = "c",
  description = "Row-wise RMS normalisation of a rows x cols float32 matrix (row-major): "
    .. "out[r][c] = x[r][c] / sqrt(mean_k(x[r][k]^2) + 1e-5) * scale[c].",
  entry = "kernel",
  args = {
    { name = "x", kind = "in", dtype = "float32", shape = { "rows", "cols" }, init = "normal" },
    { name = "scale", kind = "in", dtype = "float32", shape = { "cols" }, init = { "uniform", 0.5, 1.5 } },
    { name = "out", kind = "out", dtype = "float32", shape = { "rows", "cols" } },
    { name = "rows", kind = "int" },
    { name = "cols", kind = "int" },
  },
  sizes = { rows = 256, cols = 2048 },
  -- irregular shapes: none is a multiple of 8, one is a single row, one a single column
  test_sizes = {
    { rows = 37, cols = 129 },
    { rows = 1, cols = 1003 },
    { rows = 65, cols = 1 },
    { rows = 13, cols = 4099 },
  },
  seeds = { 1, 2 },
  heldout_seeds = { 1001, 1002 },
  tolerance = { atol = 1e-4, rtol = 1e-4 },
  flops = "4 * rows * cols",                 -- square, sum, scale, multiply
  bytes = "4 * (2 * rows * cols + cols)",    -- read x and scale, write out
}

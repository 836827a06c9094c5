-- Test task with tiny outputs: out = x * 1e-6. Zeros pass atol = 1e-4 unless
-- the tolerance is scaled to the outputs.
return {
  name = "tiny",
  target = "c",
  description = "out[i] = x[i] * 1e-6",
  args = {
    { name = "x", kind = "in", dtype = "float32", shape = { "n" } },
    { name = "out", kind = "out", dtype = "float32", shape = { "n" } },
    { name = "n", kind = "int" },
  },
  sizes = { n = 4096 },
  test_sizes = { { n = 1001 }, { n = 37 } },
  tolerance = { atol = 1e-4, rtol = 1e-4 },
  flops = "n",
  bytes = "8 * n",
}

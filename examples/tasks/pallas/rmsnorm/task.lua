-- RMSNorm for the Pallas target, in mkengine's own format: this file holds
-- the metadata, reference.py the JAX reference (JAXBench conventions).
return {
  name = "rmsnorm",
  target = "pallas",
  description = "Row-wise RMS normalisation: out[i, j] = x[i, j] / sqrt(mean_j(x[i, :]^2) + 1e-5) * scale[j]. " ..
    "x: (rows, cols) float32 row-major, scale: (cols,) float32, out: (rows, cols) float32. " ..
    "Benchmark size 4096 x 4096; also tested on row counts that are not multiples of 8.",
  tolerance = { atol = 1e-4, rtol = 1e-4 },
  seeds = { 0, 1 },
  heldout_seeds = { 1001, 1002 },
  timeout = 600,
}

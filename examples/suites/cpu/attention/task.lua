-- Single-head causal self-attention (the core of a decoder layer, LLM-style).
return {
  name = "attention",
  target = "c",
  description = "Single-head causal self-attention over float32 row-major matrices "
    .. "q, k, v and out of shape [seq][dim]: for each query row i, "
    .. "s_j = dot(q[i], k[j]) / sqrt(dim) for j = 0..i (keys after i are masked out), "
    .. "p = softmax(s) over j = 0..i, out[i] = sum_j p_j * v[j].",
  entry = "kernel",
  args = {
    { name = "q", kind = "in", dtype = "float32", shape = { "seq", "dim" }, init = "normal" },
    { name = "k", kind = "in", dtype = "float32", shape = { "seq", "dim" }, init = "normal" },
    { name = "v", kind = "in", dtype = "float32", shape = { "seq", "dim" }, init = "normal" },
    { name = "out", kind = "out", dtype = "float32", shape = { "seq", "dim" } },
    { name = "seq", kind = "int" },
    { name = "dim", kind = "int" },
  },
  sizes = { seq = 1024, dim = 64 },
  -- irregular: a single token, head sizes that are not multiples of 8
  test_sizes = {
    { seq = 37, dim = 24 },
    { seq = 1, dim = 5 },
    { seq = 100, dim = 17 },
    { seq = 131, dim = 64 },
  },
  tolerance = { atol = 1e-4, rtol = 1e-4 },
  -- QK^T and PV over the causal triangle (2 flops per multiply-add), plus ~5 per score for softmax
  flops = function(s) return 2 * s.seq * (s.seq + 1) * s.dim + 5 * s.seq * (s.seq + 1) // 2 end,
  bytes = "4 * 4 * seq * dim",
}

-- LLM-style operator: per-token cross-entropy of a softmax classifier (the LM loss).
return {
  name = "cross_entropy",
  target = "c",
  description = "Per-row cross-entropy loss of softmax logits with hard labels: "
    .. "logits[rows][classes] float32 row-major, labels[rows] int32 in [0, classes), "
    .. "loss[r] = log(sum_c exp(logits[r][c])) - logits[r][labels[r]]. "
    .. "Logits are large, uniform in [5, 90): exp overflows (exp(88.7) > FLT_MAX) unless the row max "
    .. "is subtracted first.",
  entry = "kernel",
  args = {
    { name = "logits", kind = "in", dtype = "float32", shape = { "rows", "classes" }, init = { "uniform", 5, 90 } },
    -- every test shape has classes >= 7, so labels in [0, 6] are always valid
    { name = "labels", kind = "in", dtype = "int32", shape = { "rows" }, init = { "uniform", 0, 6 } },
    { name = "loss", kind = "out", dtype = "float32", shape = { "rows" } },
    { name = "rows", kind = "int" },
    { name = "classes", kind = "int" },
  },
  sizes = { rows = 512, classes = 8192 },
  -- irregular: class counts not multiples of 8 (vector tails), a single row, the 7-class minimum
  test_sizes = {
    { rows = 37, classes = 100 },
    { rows = 1, classes = 7 },
    { rows = 13, classes = 1001 },
    { rows = 5, classes = 4099 },
  },
  tolerance = { atol = 1e-4, rtol = 1e-4 },
  flops = "4 * rows * classes",
  bytes = "4 * (rows * classes + 2 * rows)",
}

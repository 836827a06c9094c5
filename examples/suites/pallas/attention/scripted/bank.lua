-- Scripted-model bank for the Pallas causal attention (JAXBench layout):
-- real Pallas TPU kernels. Statuses hold on a CPU in TPU interpret mode and
-- on a TPU; "fast" only means something on a device.
return {
  plans = {
    { id = "query_blocks",
      text = "One pallas_call over (batch, heads, seq/bq): a block of bq query rows with the head's whole " ..
        "K and V in VMEM; scores q k^T in float32 on the MXU (contract head_dim, no transpose), the causal " ..
        "mask from iota row/column indices, softmax in float32, then p v. Every grid axis parallel; tune bq.",
      kernels = { "rows", "block100", "no_mask" } },
  },
  kernels = {
    rows = { file = "rows.py", expect = "fast" },
    block100 = { file = "block100.py", expect = "compile_error", fix = "rows" },
    no_mask = { file = "no_mask.py", expect = "incorrect" },
  },
}

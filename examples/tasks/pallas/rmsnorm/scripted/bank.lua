-- Scripted-model bank for the Pallas rmsnorm task (format: docs in the
-- lead's brief). Expectations hold on a TPU or GPU; in interpret mode
-- "fast"/"slow" are not meaningful (interpretation is slow), only
-- ok / compile_error / incorrect are.
return {
  plans = {
    { id = "row_blocks",
      text = "One pallas_call over a 1-D grid of row blocks: each step loads a (block_rows, cols) tile " ..
        "into VMEM, computes the mean of squares in float32, and writes the normalised rows. Tune " ..
        "block_rows (8..64) so the tile is large enough to amortise per-step overhead.",
      kernels = { "pallas_rows", "pallas_typo", "pallas_big_rows" } },
    { id = "two_pass",
      text = "Split the work: a first kernel writes per-row mean squares, a second applies the scaling.",
      kernels = { "pallas_two_pass" } },
    { id = "fuse_epilogue",
      text = "Fuse the scale multiply into the normalisation and relax eps handling.",
      kernels = { "pallas_wrong_eps", "pallas_no_scale" } },
  },
  kernels = {
    pallas_rows = { file = "pallas_rows.py", expect = "fast" },
    pallas_big_rows = { file = "pallas_big_rows.py", expect = "fast" },
    pallas_typo = { file = "pallas_typo.py", expect = "compile_error", fix = "pallas_rows" },
    pallas_two_pass = { file = "pallas_two_pass.py", expect = "slow" },
    pallas_wrong_eps = { file = "pallas_wrong_eps.py", expect = "incorrect" },
    pallas_no_scale = { file = "pallas_no_scale.py", expect = "incorrect" },
  },
}

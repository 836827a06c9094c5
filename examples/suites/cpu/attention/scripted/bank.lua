-- Scripted-model bank for causal single-head attention.
return {
  plans = {
    {
      id = "transpose_k",
      title = "Transpose K once",
      text = [=[The reference computes each score as a dot product over dim with a
serial float reduction, and the output as a strided walk down the columns of V
(stride dim floats per step), so neither loop vectorises. Transpose K once into
K^T [dim][seq] (seq*dim floats, negligible next to the O(seq^2*dim) work). Then
for query i: zero a score row s[0..i], and for each d add q[i][d]*scale times the
contiguous row K^T[d][0..i] into it: an axpy that the compiler turns into AVX2
FMAs without any reassociation. Softmax the row in place (max, exp, sum), then
accumulate out_i += p_j * V[j][:] over j with the contiguous dim loop innermost,
and scale by 1/sum at the end. Mark all pointers restrict.]=],
      kernels = { "kt_rows", "kt_rows_typo", "kt_rows_diag" },
    },
    {
      id = "query_tiles_omp",
      title = "Query tiles over OpenMP",
      text = [=[Build on the K^T layout but process queries in tiles of BQ rows: for
each d, the K^T row is loaded once and applied to all BQ score rows of the tile,
which cuts K^T traffic by BQ. Tiles are independent, so distribute them with
`#pragma omp parallel for schedule(dynamic, 1)`; dynamic because tile t touches
(t+1)*BQ keys and a static split would leave the first thread idle. Each thread
owns a BQ x seq score buffer. Expose the tile height as a tunable
(`// mk:tune BQ 8 16 32 64`): small tiles keep the buffer in L1/L2, larger ones
reuse K^T more.]=],
      kernels = { "tiled_omp" },
    },
    {
      id = "online_softmax",
      title = "Single-pass online softmax",
      text = [=[Remove the score buffer and the separate max/exp/sum passes with a
single-pass online softmax (FlashAttention's recurrence): keep the running max m
and normaliser l per query; for each key compute s = q.k * scale (an
`omp simd` reduction over dim); when s > m, multiply both l and the output
accumulator o by exp(m - s) and set m = s; then p = exp(s - m), l += p and
o += p * v_j with the dim loop innermost and contiguous. Finish with o /= l. The
V access becomes row-wise instead of column-wise, which is where the reference
loses most, and most keys cost one exp.]=],
      kernels = { "online", "online_norescale" },
    },
    {
      id = "branch_free_mask",
      title = "Branch-free causal mask",
      text = [=[Give every loop a fixed trip count: score all seq keys for every
query and set the future ones (j > i) to -inf before the softmax, so exp gives
exactly 0 for them. This removes the triangular bounds, which should make the
loops easier for the compiler to unroll.]=],
      kernels = { "masked_full" },
    },
  },
  kernels = {
    kt_rows = { file = "kt_rows.c", expect = "fast" },
    kt_rows_typo = { file = "kt_rows_typo.c", expect = "compile_error", fix = "kt_rows" },
    kt_rows_diag = { file = "kt_rows_diag.c", expect = "incorrect" },
    tiled_omp = { file = "tiled_omp.c", expect = "fast" },
    online = { file = "online.c", expect = "fast" },
    online_norescale = { file = "online_norescale.c", expect = "incorrect" },
    masked_full = { file = "masked_full.c", expect = "slow" },
  },
}

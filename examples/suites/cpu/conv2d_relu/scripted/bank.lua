-- Scripted-model bank for conv2d (3x3, valid) + bias + ReLU.
return {
  plans = {
    {
      id = "row_axpy",
      title = "Row-axpy loop order",
      text = [=[The reference keeps one output pixel in a scalar and loops over
cin x 3 x 3 taps, a serial reduction with a stride-w gather per tap, so nothing
vectorises. Swap the loop nest: for each (batch, cout) output plane, initialise
it with the bias, then for each (ci, ky, kx) take the weight as a scalar and do
out[y][0..ow) += w * x[ci][y+ky][kx..kx+ow) for every row y. The innermost
loop is a unit-stride axpy over the output row, which GCC turns into AVX2 FMAs
with restrict pointers. One output plane (62x62 floats) stays in L1/L2 while all
taps are applied. Apply ReLU in a final pass over the plane, after the bias
and all taps have been accumulated.]=],
      kernels = { "row_axpy", "row_axpy_typo", "relu_before_bias" },
    },
    {
      id = "register_strips",
      title = "8-wide register strips",
      text = [=[Write every output only once: walk each output row in strips of 8
pixels held in a local accumulator array (one AVX2 register), initialise with
the bias, accumulate all cin*9 taps into it and store max(acc, 0). The input
rows needed by a strip are contiguous, so the taps are unit-stride vector loads
at offsets kx. This removes the read-modify-write of the output plane per tap.]=],
      kernels = { "rows8" },
    },
    {
      id = "channel_blocks_omp",
      title = "Output-channel blocks over OpenMP",
      text = [=[Start from the row-axpy order and block output channels: a work item
is (batch, block of COB output channels). For a tap (ci, ky, kx) and row y, the
input row x[ci][y+ky][kx:] is loaded once and applied to the COB output rows of
the block while it is in L1, cutting input traffic by COB. Work items are
independent, so run them with `#pragma omp parallel for`. Tune the block size
(`// mk:tune COB 1 2 4 8`): bigger blocks reuse inputs more but the COB output
planes must still fit in L2.]=],
      kernels = { "cob_omp" },
    },
    {
      id = "im2col",
      title = "im2col lowering",
      text = [=[Lower the convolution to a matrix product as frameworks do: gather
the input into an im2col matrix col[cin*9][oh*ow] (Caffe layout), then each
output pixel is the dot product of its column with the weight row of its output
channel, plus bias, then ReLU. This trades the irregular 3x3 indexing for plain
dot products.]=],
      kernels = { "im2col_dot" },
    },
  },
  kernels = {
    row_axpy = { file = "row_axpy.c", expect = "fast" },
    row_axpy_typo = { file = "row_axpy_typo.c", expect = "compile_error", fix = "row_axpy" },
    relu_before_bias = { file = "relu_before_bias.c", expect = "incorrect" },
    rows8 = { file = "rows8.c", expect = "incorrect" },
    cob_omp = { file = "cob_omp.c", expect = "fast" },
    im2col_dot = { file = "im2col_dot.c", expect = "slow" },
  },
}

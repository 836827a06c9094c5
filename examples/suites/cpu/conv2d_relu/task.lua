-- KernelBench level-2 style fusion: Conv2d (3x3, stride 1, no padding) + bias + ReLU.
return {
  name = "conv2d_relu",
  target = "c",
  description = "2-D convolution with a 3x3 kernel, stride 1 and no padding, plus bias, "
    .. "followed by ReLU, float32, NCHW row-major: x[n][cin][h][w], wt[cout][cin][3][3], "
    .. "bias[cout], out[n][cout][h-2][w-2] with "
    .. "out[b][co][y][x] = max(0, bias[co] + sum_{ci,ky,kx} x[b][ci][y+ky][x+kx] * wt[co][ci][ky][kx]).",
  entry = "kernel",
  args = {
    { name = "x", kind = "in", dtype = "float32", shape = { "n", "cin", "h", "w" } },
    { name = "wt", kind = "in", dtype = "float32", shape = { "cout", "cin", 3, 3 }, init = { "uniform", -0.3, 0.3 } },
    { name = "bias", kind = "in", dtype = "float32", shape = { "cout" } },
    { name = "out", kind = "out", dtype = "float32", shape = { "n", "cout", "oh", "ow" } },
    { name = "n", kind = "int" },
    { name = "cin", kind = "int" },
    { name = "h", kind = "int" },
    { name = "w", kind = "int" },
    { name = "cout", kind = "int" },
  },
  -- oh = h - 2 and ow = w - 2 are listed so the output shape can name them
  sizes = { n = 2, cin = 16, h = 66, w = 66, cout = 32, oh = 64, ow = 64 },
  -- irregular: odd widths (ow not a multiple of 8), the minimal 3x3 image, one input channel
  test_sizes = {
    { n = 1, cin = 3, h = 9, w = 11, cout = 5, oh = 7, ow = 9 },
    { n = 2, cin = 5, h = 13, w = 10, cout = 7, oh = 11, ow = 8 },
    { n = 3, cin = 1, h = 3, w = 3, cout = 2, oh = 1, ow = 1 },
    { n = 1, cin = 16, h = 21, w = 35, cout = 9, oh = 19, ow = 33 },
  },
  tolerance = { atol = 1e-4, rtol = 1e-4 },
  flops = "2 * n * cout * oh * ow * cin * 9 + 2 * n * cout * oh * ow",
  bytes = "4 * (n * cin * h * w + cout * cin * 9 + cout + n * cout * oh * ow)",
}

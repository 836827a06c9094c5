/* 2-D convolution (3x3 kernel, stride 1, no padding) + bias + ReLU, NCHW.
 * x: [n][cin][h][w], wt: [cout][cin][3][3], bias: [cout],
 * out: [n][cout][h-2][w-2]. Sums are accumulated in double so the frozen
 * expected outputs are accurate. */

void kernel(const float *x, const float *wt, const float *bias, float *out,
            int n, int cin, int h, int w, int cout)
{
  int oh = h - 2, ow = w - 2;
  for (int b = 0; b < n; b++)
    for (int co = 0; co < cout; co++)
      for (int y = 0; y < oh; y++)
        for (int xo = 0; xo < ow; xo++) {
          double acc = bias[co];
          for (int ci = 0; ci < cin; ci++)
            for (int ky = 0; ky < 3; ky++)
              for (int kx = 0; kx < 3; kx++)
                acc += (double)x[((b * cin + ci) * h + y + ky) * w + xo + kx] *
                       wt[((co * cin + ci) * 3 + ky) * 3 + kx];
          out[((b * cout + co) * oh + y) * ow + xo] = acc > 0.0 ? (float)acc : 0.0f;
        }
}

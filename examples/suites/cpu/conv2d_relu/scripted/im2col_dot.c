/* Conv 3x3 + bias + ReLU through im2col (Caffe layout): gather the input into
 * a column matrix col[cin*9][oh*ow], then every output pixel is a dot
 * product of its column with the weight row of its channel. */
#include <stdlib.h>

void kernel(const float *x, const float *wt, const float *bias, float *out,
            int n, int cin, int h, int w, int cout)
{
  const int oh = h - 2, ow = w - 2, kk = cin * 9, np = oh * ow;
  float *col = malloc((size_t)np * kk * sizeof(float));
  for (int b = 0; b < n; b++) {
    for (int ci = 0; ci < cin; ci++)
      for (int ky = 0; ky < 3; ky++)
        for (int kx = 0; kx < 3; kx++) {
          float *c = col + (size_t)((ci * 3 + ky) * 3 + kx) * np;
          for (int y = 0; y < oh; y++)
            for (int xo = 0; xo < ow; xo++)
              c[y * ow + xo] = x[((size_t)(b * cin + ci) * h + y + ky) * w + xo + kx];
        }
    for (int co = 0; co < cout; co++)
      for (int p = 0; p < np; p++) {
        const float *wk = wt + (size_t)co * kk;
        float acc = bias[co];
        for (int r = 0; r < kk; r++)
          acc += col[(size_t)r * np + p] * wk[r];
        out[((size_t)b * cout + co) * np + p] = acc > 0.0f ? acc : 0.0f;
      }
  }
  free(col);
}

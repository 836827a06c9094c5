/* Conv 3x3 + bias + ReLU, reordered so the innermost loop runs along an
 * output row: for each (ci, ky, kx) the weight is a scalar and the update
 * out[y][:] += w * x[ci][y+ky][kx:] is a contiguous, vectorisable axpy.
 * Bias initialises the plane; ReLU is applied once at the end. */
#include <stddef.h>

void kernel(const float *restrict x, const float *restrict wt,
            const float *restrict bias, float *restrict out,
            int n, int cin, int h, int w, int cout)
{
  const int oh = h - 2, ow = w - 2;
  for (int b = 0; b < n; b++)
    for (int co = 0; co < cout; co++) {
      float *restrict o = out + ((size_t)b * cout + co) * oh * ow;
      for (int i = 0; i < oh * ow; i++)
        o[i] = bias[co];
      for (int ci = 0; ci < cin; ci++) {
        const float *restrict xc = x + ((size_t)b * cin + ci) * h * w;
        const float *restrict wk = wt + ((size_t)co * cin + ci) * 9;
        for (int ky = 0; ky < 3; ky++)
          for (int kx = 0; kx < 3; kx++) {
            const float wv = wk[ky * 3 + kx]
            for (int y = 0; y < oh; y++) {
              const float *restrict xr = xc + (size_t)(y + ky) * w + kx;
              float *restrict orow = o + (size_t)y * ow;
              for (int xo = 0; xo < ow; xo++)
                orow[xo] += wv * xr[xo];
            }
          }
      }
      for (int i = 0; i < oh * ow; i++)
        o[i] = o[i] > 0.0f ? o[i] : 0.0f;
    }
}

/* Conv 3x3 + bias + ReLU with the output row computed in 8-wide strips kept
 * in registers: each strip accumulates all cin*9 taps before it is stored,
 * so the output is written once instead of once per tap. */
#include <stddef.h>

void kernel(const float *restrict x, const float *restrict wt,
            const float *restrict bias, float *restrict out,
            int n, int cin, int h, int w, int cout)
{
  const int oh = h - 2, ow = w - 2;
  for (int b = 0; b < n; b++)
    for (int co = 0; co < cout; co++)
      for (int y = 0; y < oh; y++) {
        float *restrict orow = out + (((size_t)b * cout + co) * oh + y) * ow;
        for (int xo = 0; xo + 8 <= ow; xo += 8) {
          float acc[8];
          for (int l = 0; l < 8; l++)
            acc[l] = bias[co];
          for (int ci = 0; ci < cin; ci++) {
            const float *restrict xc = x + (((size_t)b * cin + ci) * h + y) * w + xo;
            const float *restrict wk = wt + ((size_t)co * cin + ci) * 9;
            for (int ky = 0; ky < 3; ky++)
              for (int kx = 0; kx < 3; kx++) {
                const float wv = wk[ky * 3 + kx];
                for (int l = 0; l < 8; l++)
                  acc[l] += wv * xc[ky * w + kx + l];
              }
          }
          for (int l = 0; l < 8; l++)
            orow[xo + l] = acc[l] > 0.0f ? acc[l] : 0.0f;
        }
      }
}

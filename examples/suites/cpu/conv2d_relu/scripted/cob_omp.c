/* Conv 3x3 + bias + ReLU: row-axpy formulation with COB output channels per
 * work item, so each input row loaded for a tap feeds COB output rows while
 * it is in L1; (batch, channel block) items are shared out with OpenMP. */
// mk:tune COB 1 2 4 8
#include <stddef.h>

#ifndef COB
#define COB 4
#endif

void kernel(const float *restrict x, const float *restrict wt,
            const float *restrict bias, float *restrict out,
            int n, int cin, int h, int w, int cout)
{
  const int oh = h - 2, ow = w - 2;
  const int nblk = (cout + COB - 1) / COB;
#pragma omp parallel for schedule(static)
  for (int item = 0; item < n * nblk; item++) {
    const int b = item / nblk, c0 = (item % nblk) * COB;
    const int nc = cout - c0 < COB ? cout - c0 : COB;
    float *restrict ob = out + ((size_t)b * cout + c0) * oh * ow;
    for (int c = 0; c < nc; c++)
      for (int i = 0; i < oh * ow; i++)
        ob[(size_t)c * oh * ow + i] = bias[c0 + c];
    for (int ci = 0; ci < cin; ci++) {
      const float *restrict xc = x + ((size_t)b * cin + ci) * h * w;
      for (int ky = 0; ky < 3; ky++)
        for (int kx = 0; kx < 3; kx++)
          for (int y = 0; y < oh; y++) {
            const float *restrict xr = xc + (size_t)(y + ky) * w + kx;
            for (int c = 0; c < nc; c++) {
              const float wv = wt[(((size_t)(c0 + c) * cin + ci) * 3 + ky) * 3 + kx];
              float *restrict orow = ob + ((size_t)c * oh + y) * ow;
              for (int xo = 0; xo < ow; xo++)
                orow[xo] += wv * xr[xo];
            }
          }
    }
    for (size_t i = 0; i < (size_t)nc * oh * ow; i++)
      ob[i] = ob[i] > 0.0f ? ob[i] : 0.0f;
  }
}

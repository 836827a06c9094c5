/* SwiGLU: i-p-j order for both projections, MB output rows at a time: each
 * weight row pair (wg[p], wu[p]) is loaded once per block and applied to MB
 * rows, cutting weight traffic by MB (the weights, 2 x 576 KiB, do not fit in
 * L2). Row blocks run in parallel with OpenMP; the silu(g) * u epilogue is
 * fused per finished row. */
// mk:tune MB 1 2 4 8
#include <math.h>
#include <stdlib.h>

#ifndef MB
#define MB 4
#endif

void kernel(const float *restrict x, const float *restrict wg,
            const float *restrict wu, float *restrict out, int m, int k, int n)
{
#pragma omp parallel
  {
    float *buf = malloc((size_t)2 * MB * n * sizeof(float));
#pragma omp for schedule(static)
    for (int i0 = 0; i0 < m; i0 += MB) {
      const int rows = m - i0 < MB ? m - i0 : MB;
      float *restrict g = buf, *restrict u = buf + (size_t)MB * n;
      for (int j = 0; j < rows * n; j++)
        g[j] = u[j] = 0.0f;
      for (int p = 0; p < k; p++) {
        const float *restrict wgr = wg + (size_t)p * n;
        const float *restrict wur = wu + (size_t)p * n;
        for (int r = 0; r < rows; r++) {
          const float xv = x[(size_t)(i0 + r) * k + p];
          float *restrict gr = g + (size_t)r * n, *restrict ur = u + (size_t)r * n;
          for (int j = 0; j < n; j++) {
            gr[j] += xv * wgr[j];
            ur[j] += xv * wur[j];
          }
        }
      }
      for (int r = 0; r < rows; r++) {
        float *restrict o = out + (size_t)(i0 + r) * n;
        const float *restrict gr = g + (size_t)r * n, *restrict ur = u + (size_t)r * n;
        for (int j = 0; j < n; j++)
          o[j] = gr[j] / (1.0f + expf(-gr[j])) * ur[j];
      }
    }
    free(buf);
  }
}

/* SwiGLU: both projections in i-p-j order in the same pass, so each x[i][p]
 * is loaded once and broadcast into two unit-stride axpys (one per weight
 * row); the gate and up rows live in a small scratch buffer and are combined
 * with silu(g) * u while still in L1. */
#include <math.h>
#include <stdlib.h>

void kernel(const float *restrict x, const float *restrict wg,
            const float *restrict wu, float *restrict out, int m, int k, int n)
{
  float *g = malloc((size_t)2 * n * sizeof(float));
  float *restrict gr = g, *restrict ur = g + n;
  for (int i = 0; i < m; i++) {
    for (int j = 0; j < n; j++)
      gr[j] = ur[j] = 0.0f;
    for (int p = 0; p < k; p++) {
      const float xv = x[(size_t)i * k + p];
      const float *restrict wgr = wg + (size_t)p * n;
      const float *restrict wur = wu + (size_t)p * n;
      for (int j = 0; j < n; j++) {
        gr[j] += xv * wgr[j];
        ur[j] += xv * wur[j];
      }
    }
    float *restrict o = out + (size_t)i * n;
    for (int j = 0; j < n; j++)
      o[j] = gr[j] / (1.0f + expf(-gr[j])) * ur[j];
  }
  free(g);
}

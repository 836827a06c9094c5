/* SwiGLU, weight-stationary dataflow: each weight pair (wg[p][j], wu[p][j])
 * is loaded exactly once and applied to every row of x, accumulating into
 * gate and up matrices; silu(g) * u is applied at the end. */
#include <math.h>
#include <stdlib.h>

void kernel(const float *x, const float *wg, const float *wu, float *out,
            int m, int k, int n)
{
  float *g = calloc((size_t)m * n, sizeof(float));
  float *u = calloc((size_t)m * n, sizeof(float));
  for (int j = 0; j < n; j++)
    for (int p = 0; p < k; p++) {
      const float wgv = wg[(size_t)p * n + j], wuv = wu[(size_t)p * n + j];
      for (int i = 0; i < m; i++) {
        g[(size_t)i * n + j] += x[(size_t)i * k + p] * wgv;
        u[(size_t)i * n + j] += x[(size_t)i * k + p] * wuv;
      }
    }
  for (size_t e = 0; e < (size_t)m * n; e++)
    out[e] = g[e] / (1.0f + expf(-g[e])) * u[e];
  free(u);
  free(g);
}

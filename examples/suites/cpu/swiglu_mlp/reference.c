/* SwiGLU gated MLP projection (LLaMA-style feed-forward, first half):
 * out = silu(x @ wg) * (x @ wu), silu(z) = z / (1 + exp(-z)).
 * x: [m][k], wg and wu: [k][n], out: [m][n], row-major.
 * Sums are accumulated in double so the frozen expected outputs are accurate. */
#include <math.h>

void kernel(const float *x, const float *wg, const float *wu, float *out,
            int m, int k, int n)
{
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double g = 0.0, u = 0.0;
      for (int p = 0; p < k; p++) {
        g += (double)x[i * k + p] * wg[p * n + j];
        u += (double)x[i * k + p] * wu[p * n + j];
      }
      float gf = (float)g;
      out[i * n + j] = gf / (1.0f + expf(-gf)) * (float)u;
    }
}

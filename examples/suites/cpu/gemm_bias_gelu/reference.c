/* Linear layer + exact GELU: out = gelu(a @ w^T + bias).
 * a: [m][k]; w: [n][k] (nn.Linear layout: one row per output feature);
 * bias: [n]; out: [m][n]. gelu(x) = 0.5 x (1 + erf(x / sqrt(2))).
 * Sums are accumulated in double so the frozen expected outputs are accurate. */
#include <math.h>

void kernel(const float *a, const float *w, const float *bias, float *out,
            int m, int k, int n)
{
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0.0;
      for (int p = 0; p < k; p++)
        acc += (double)a[i * k + p] * w[j * k + p];
      float x = (float)(acc + bias[j]);
      out[i * n + j] = 0.5f * x * (1.0f + erff(x * 0.70710678f));
    }
}

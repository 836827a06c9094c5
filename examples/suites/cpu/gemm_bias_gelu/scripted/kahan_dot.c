/* Linear + GELU keeping the reference's contiguous dot products (a row
 * against a weight row) but accumulating in float with Kahan compensation
 * instead of in double: each step carries a correction term, so the 512-long
 * sums stay as accurate as double ones without any conversion. */
#include <math.h>

void kernel(const float *a, const float *w, const float *bias, float *out,
            int m, int k, int n)
{
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float s = 0.0f, c = 0.0f;
      for (int p = 0; p < k; p++) {
        const float y = a[i * k + p] * w[j * k + p] - c;
        const float t = s + y;
        c = (t - s) - y;
        s = t;
      }
      const float x = s + bias[j];
      out[i * n + j] = 0.5f * x * (1.0f + erff(x * 0.70710678f));
    }
}

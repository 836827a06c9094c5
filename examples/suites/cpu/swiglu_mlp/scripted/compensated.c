/* SwiGLU with both projections accumulated by Kahan-compensated summation in
 * float: as accurate as a double accumulator while staying in single
 * precision, so the 384-long sums track the reference tightly. */
#include <math.h>

void kernel(const float *x, const float *wg, const float *wu, float *out,
            int m, int k, int n)
{
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float g = 0.0f, gc = 0.0f, u = 0.0f, uc = 0.0f;
      for (int p = 0; p < k; p++) {
        const float xv = x[i * k + p];
        float y = xv * wg[p * n + j] - gc;
        float t = g + y;
        gc = (t - g) - y;
        g = t;
        y = xv * wu[p * n + j] - uc;
        t = u + y;
        uc = (t - u) - y;
        u = t;
      }
      out[i * n + j] = g / (1.0f + expf(-g)) * u;
    }
}

/* Batched matmul + row softmax with the softmax done in extended precision
 * (long double, x87): max, sum and every exponential, recomputed with expl()
 * in the normalisation pass rather than stored in float, so nothing is
 * rounded before the final division. */
#include <math.h>

void kernel(const float *a, const float *c, float *out,
            int batch, int m, int k, int n)
{
  for (int b = 0; b < batch; b++)
    for (int i = 0; i < m; i++) {
      float *o = out + (b * m + i) * n;
      for (int j = 0; j < n; j++) {
        double acc = 0.0;
        for (int p = 0; p < k; p++)
          acc += (double)a[(b * m + i) * k + p] * c[(b * k + p) * n + j];
        o[j] = (float)acc;
      }
      long double mx = o[0], sum = 0.0L;
      for (int j = 1; j < n; j++)
        mx = o[j] > mx ? o[j] : mx;
      for (int j = 0; j < n; j++)
        sum += expl((long double)o[j] - mx);
      for (int j = 0; j < n; j++)
        o[j] = (float)(expl((long double)o[j] - mx) / sum);
    }
}

/* Linear + GELU: transpose w once into wt[k][n] so the product can run in
 * i-p-j order; the innermost loop then updates a whole output row with a
 * unit-stride axpy (AVX2 FMAs) instead of a serial k-long dot product.
 * Bias and GELU are applied in one pass over the finished row. */
#include <math.h>
#include <stdlib.h>

void kernel(const float *restrict a, const float *restrict w,
            const float *restrict bias, float *restrict out, int m, int k, int n)
{
  float *wt = malloc((size_t)k * n * sizeof(float));
  for (int j = 0; j < n; j++)
    for (int p = 0; p < k; p++)
      wt[(size_t)p * n + j] = w[(size_t)j * k + p];
  for (int i = 0; i < m; i++) {
    float *restrict o = out + (size_t)i * n;
    for (int j = 0; j < n; j++)
      o[j] = bias[j];
    for (int p = 0; p < k; p++) {
      const float av = a[(size_t)i * k + p];
      const float *restrict wr = wt + (size_t)p * n;
      for (int j = 0; j < n; j++)
        o[j] += av * wr[j];
    }
    for (int j = 0; j < n; j++)
      o[j] = 0.5f * o[j] * (1.0f + erff(o[j] * 0.70710678f);
  }
  free(wt);
}

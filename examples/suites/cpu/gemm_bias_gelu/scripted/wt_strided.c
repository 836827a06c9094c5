/* Linear + GELU with the weights transposed to k-major order wt[k][n], the
 * layout BLAS-style kernels prefer; the product itself keeps the simple
 * one-output-at-a-time loop with a k-long accumulation. */
#include <math.h>
#include <stdlib.h>

void kernel(const float *a, const float *w, const float *bias, float *out,
            int m, int k, int n)
{
  float *wt = malloc((size_t)k * n * sizeof(float));
  for (int j = 0; j < n; j++)
    for (int p = 0; p < k; p++)
      wt[(size_t)p * n + j] = w[(size_t)j * k + p];
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float acc = bias[j];
      for (int p = 0; p < k; p++)
        acc += a[(size_t)i * k + p] * wt[(size_t)p * n + j];
      out[(size_t)i * n + j] = 0.5f * acc * (1.0f + erff(acc * 0.70710678f));
    }
  free(wt);
}

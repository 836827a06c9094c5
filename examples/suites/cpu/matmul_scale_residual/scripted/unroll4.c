/* out = 0.5 * (a @ b) + r: transpose b once so each output is a dot product
 * of two contiguous rows, and split that dot product into four independent
 * accumulators to hide the FMA latency. */
#include <stdlib.h>

void kernel(const float *restrict a, const float *restrict b,
            const float *restrict r, float *restrict out, int m, int k, int n)
{
  float *bt = malloc((size_t)k * n * sizeof(float));
  for (int p = 0; p < k; p++)
    for (int j = 0; j < n; j++)
      bt[(size_t)j * k + p] = b[(size_t)p * n + j];
  for (int i = 0; i < m; i++) {
    const float *restrict ar = a + (size_t)i * k;
    for (int j = 0; j < n; j++) {
      const float *restrict bc = bt + (size_t)j * k;
      float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
      for (int p = 0; p + 3 < k; p += 4) {
        s0 += ar[p] * bc[p];
        s1 += ar[p + 1] * bc[p + 1];
        s2 += ar[p + 2] * bc[p + 2];
        s3 += ar[p + 3] * bc[p + 3];
      }
      out[(size_t)i * n + j] = 0.5f * ((s0 + s1) + (s2 + s3)) + r[(size_t)i * n + j];
    }
  }
  free(bt);
}

/* Batched matmul + row softmax: i-p-j order with the p loop unrolled by PU,
 * so each pass over the output row applies PU rows of c (PU FMAs per load and
 * store of the accumulator instead of one); (batch, row) pairs are spread
 * over OpenMP threads, and the softmax is fused per row. */
// mk:tune PU 1 2 4 8
#include <math.h>
#include <stddef.h>

#ifndef PU
#define PU 4
#endif

void kernel(const float *restrict a, const float *restrict c,
            float *restrict out, int batch, int m, int k, int n)
{
#pragma omp parallel for schedule(static)
  for (int row = 0; row < batch * m; row++) {
    const int b = row / m;
    const float *restrict cb = c + (size_t)b * k * n;
    const float *restrict ar = a + (size_t)row * k;
    float *restrict o = out + (size_t)row * n;
    for (int j = 0; j < n; j++)
      o[j] = 0.0f;
    int p = 0;
    for (; p + PU <= k; p += PU)
      for (int j = 0; j < n; j++) {
        float s = o[j];
        for (int u = 0; u < PU; u++)
          s += ar[p + u] * cb[(size_t)(p + u) * n + j];
        o[j] = s;
      }
    for (; p < k; p++)
      for (int j = 0; j < n; j++)
        o[j] += ar[p] * cb[(size_t)p * n + j];
    float mx = o[0];
    for (int j = 1; j < n; j++)
      mx = o[j] > mx ? o[j] : mx;
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
      o[j] = expf(o[j] - mx);
      sum += o[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < n; j++)
      o[j] *= inv;
  }
}

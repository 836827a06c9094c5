/* Linear + GELU: w transposed to wt[k][n]; output rows are computed MB at a
 * time so each wt row, once loaded, feeds MB output rows from L1 (MB times
 * less weight traffic than one row at a time); row blocks are split over
 * OpenMP threads and bias + GELU are applied to each finished row. */
// mk:tune MB 1 2 4 8
#include <math.h>
#include <stdlib.h>

#ifndef MB
#define MB 4
#endif

void kernel(const float *restrict a, const float *restrict w,
            const float *restrict bias, float *restrict out, int m, int k, int n)
{
  float *wt = malloc((size_t)k * n * sizeof(float));
  for (int j = 0; j < n; j++)
    for (int p = 0; p < k; p++)
      wt[(size_t)p * n + j] = w[(size_t)j * k + p];
#pragma omp parallel for schedule(static)
  for (int i0 = 0; i0 < m; i0 += MB) {
    const int i1 = i0 + MB < m ? i0 + MB : m;
    for (int i = i0; i < i1; i++)
      for (int j = 0; j < n; j++)
        out[(size_t)i * n + j] = bias[j];
    for (int p = 0; p < k; p++) {
      const float *restrict wr = wt + (size_t)p * n;
      for (int i = i0; i < i1; i++) {
        const float av = a[(size_t)i * k + p];
        float *restrict o = out + (size_t)i * n;
        for (int j = 0; j < n; j++)
          o[j] += av * wr[j];
      }
    }
    for (int i = i0; i < i1; i++) {
      float *restrict o = out + (size_t)i * n;
      for (int j = 0; j < n; j++)
        o[j] = 0.5f * o[j] * (1.0f + erff(o[j] * 0.70710678f));
    }
  }
  free(wt);
}

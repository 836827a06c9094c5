/* out = 0.5 * (a @ b) + r, cache-blocked: the p (reduction) dimension is cut
 * into panels of KB rows of b so that a KB x n panel stays in L2 while every
 * output row of a thread's share accumulates against it; rows are split
 * across OpenMP threads. Scale + residual are fused after the last panel.
 * Every loop is `omp for schedule(static)` over the same rows, so each
 * thread owns the same rows throughout and no loop needs a barrier. */
// mk:tune KB 32 64 128 256
#include <stddef.h>

#ifndef KB
#define KB 64
#endif

void kernel(const float *restrict a, const float *restrict b,
            const float *restrict r, float *restrict out, int m, int k, int n)
{
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++)
        out[(size_t)i * n + j] = 0.0f;
    for (int p0 = 0; p0 < k; p0 += KB) {
      const int p1 = p0 + KB < k ? p0 + KB : k;
#pragma omp for schedule(static) nowait
      for (int i = 0; i < m; i++) {
        float *restrict o = out + (size_t)i * n;
        for (int p = p0; p < p1; p++) {
          const float av = a[(size_t)i * k + p];
          const float *restrict br = b + (size_t)p * n;
          for (int j = 0; j < n; j++)
            o[j] += av * br[j];
        }
      }
    }
#pragma omp for schedule(static) nowait
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++)
        out[(size_t)i * n + j] = 0.5f * out[(size_t)i * n + j] + r[(size_t)i * n + j];
  }
}

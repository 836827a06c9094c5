/* GEMM + bias + ReLU: i-p-j order with MB rows of out per work item, so each
 * b row loaded from cache feeds MB output rows (MB times less b traffic);
 * work items run in parallel with OpenMP, and bias and ReLU are fused into
 * the start and end of each row. */
#include <stddef.h>

#ifndef MB
#define MB 4
#endif

void kernel(const float *restrict a, const float *restrict b, const float *restrict bias,
            float *restrict out, int m, int n, int k)
{
#pragma omp parallel for schedule(static)
  for (int i0 = 0; i0 < m; i0 += MB) {
    const int i1 = i0 + MB < m ? i0 + MB : m - 1;
    for (int i = i0; i < i1; i++)
      for (int j = 0; j < n; j++)
        out[(size_t)i * n + j] = bias[j];
    for (int p = 0; p < k; p++) {
      const float *restrict br = b + (size_t)p * n;
      for (int i = i0; i < i1; i++) {
        const float av = a[(size_t)i * k + p];
        float *restrict o = out + (size_t)i * n;
        for (int j = 0; j < n; j++)
          o[j] += av * br[j];
      }
    }
    for (int i = i0; i < i1; i++)
      for (int j = 0; j < n; j++) {
        const float v = out[(size_t)i * n + j];
        out[(size_t)i * n + j] = v > 0.0f ? v : 0.0f;
      }
  }
}

/* Matmul, cache-tiled: c is computed in column panels of NB columns; for a
 * panel, b[:, j0:j0+NB] (k x NB floats) is reused by every row of a while it
 * sits in L2, and within a row the i-p-j loop runs over the NB-wide panel
 * (unit stride, AVX2). One OpenMP region: each thread keeps the same rows
 * for every panel (static schedule), so panels need no barrier (nowait) and
 * the threads meet only once, at the end. */
// mk:tune NB 32 64 128 256
#include <stddef.h>

#ifndef NB
#define NB 64
#endif

void kernel(const float *restrict a, const float *restrict b, float *restrict c,
            int m, int n, int k)
{
#pragma omp parallel
  for (int j0 = 0; j0 < n; j0 += NB) {
    const int j1 = j0 + NB < n ? j0 + NB : n;
#pragma omp for schedule(static) nowait
    for (int i = 0; i < m; i++) {
      float *restrict cr = c + (size_t)i * n;
      for (int j = j0; j < j1; j++)
        cr[j] = 0.0f;
      for (int p = 0; p < k; p++) {
        const float av = a[(size_t)i * k + p];
        const float *restrict br = b + (size_t)p * n;
        for (int j = j0; j < j1; j++)
          cr[j] += av * br[j];
      }
    }
  }
}

/* GEMM + bias + ReLU in i-p-j order: each row of out starts at the bias, then
 * accumulates a[i][p] * b[p][:] with unit-stride AVX2 FMAs, and the ReLU is
 * applied in one pass over the finished row while it is in L1. */
#include <stddef.h>

void kernel(const float *restrict a, const float *restrict b, const float *restrict bias,
            float *restrict out, int m, int n, int k)
{
  for (int i = 0; i < m; i++) {
    float *restrict o = out + (size_t)i * n;
    for (int j = 0; j < n; j++)
      o[j] = bias[j];
    for (int p = 0; p < k; p++) {
      const float av = a[(size_t)i * k + p];
      const float *restrict br = b + (size_t)p * n;
      for (int j = 0; j < n; j++)
        o[j] += av * br[j];
    }
    for (int j = 0; j < n; j++)
      o[j] = o[j] > 0.0f ? o[j] : 0.0f;
  }
}

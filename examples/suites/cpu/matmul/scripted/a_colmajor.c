/* Matmul in i-p-j order: the innermost loop streams a row of b and a row of
 * c with unit stride (vectorisable), instead of walking b down a column.
 * The a operand is read as a[p][i] so that consecutive rows i read
 * consecutive addresses. */
#include <stddef.h>

void kernel(const float *restrict a, const float *restrict b, float *restrict c,
            int m, int n, int k)
{
  for (int i = 0; i < m; i++) {
    float *restrict cr = c + (size_t)i * n;
    for (int j = 0; j < n; j++)
      cr[j] = 0.0f;
    for (int p = 0; p < k; p++) {
      const float av = a[(size_t)p * m + i];
      const float *restrict br = b + (size_t)p * n;
      for (int j = 0; j < n; j++)
        cr[j] += av * br[j];
    }
  }
}

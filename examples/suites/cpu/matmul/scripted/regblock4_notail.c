/* Matmul with 4-row register blocking in i-p-j order: four rows of c are
 * updated together, so each row of b loaded from cache feeds four
 * unit-stride FMA streams (4x less b traffic than one row at a time), and the
 * inner j loop vectorises. */
#include <stddef.h>

void kernel(const float *restrict a, const float *restrict b, float *restrict c,
            int m, int n, int k)
{
  for (int i = 0; i + 4 <= m; i += 4) {
    float *restrict c0 = c + (size_t)i * n, *restrict c1 = c0 + n;
    float *restrict c2 = c1 + n, *restrict c3 = c2 + n;
    for (int j = 0; j < n; j++)
      c0[j] = c1[j] = c2[j] = c3[j] = 0.0f;
    for (int p = 0; p < k; p++) {
      const float a0 = a[(size_t)i * k + p], a1 = a[(size_t)(i + 1) * k + p];
      const float a2 = a[(size_t)(i + 2) * k + p], a3 = a[(size_t)(i + 3) * k + p];
      const float *restrict br = b + (size_t)p * n;
      for (int j = 0; j < n; j++) {
        const float bv = br[j];
        c0[j] += a0 * bv;
        c1[j] += a1 * bv;
        c2[j] += a2 * bv;
        c3[j] += a3 * bv;
      }
    }
  }
}

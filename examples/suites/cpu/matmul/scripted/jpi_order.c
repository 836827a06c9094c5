/* Matmul organised around the columns of c, as a column-major BLAS would:
 * for each output column j and each p, the scalar b[p][j] is applied to the
 * whole column c[:][j] += a[:][p] * b[p][j]. */
#include <stddef.h>

void kernel(const float *a, const float *b, float *c, int m, int n, int k)
{
  for (size_t e = 0; e < (size_t)m * n; e++)
    c[e] = 0.0f;
  for (int j = 0; j < n; j++)
    for (int p = 0; p < k; p++) {
      const float bv = b[(size_t)p * n + j];
      for (int i = 0; i < m; i++)
        c[(size_t)i * n + j] += a[(size_t)i * k + p] * bv;
    }
}

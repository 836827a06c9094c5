/* out = 0.5 * (a @ b) + r with the i-p-j loop order: the innermost loop
 * streams a row of b and a row of out (unit stride, vectorisable), instead of
 * walking down a column of b; scale and residual are fused into one final
 * pass over the output row while it is still in cache. */
#include <stddef.h>

void kernel(const float *restrict a, const float *restrict b,
            const float *restrict r, float *restrict out, int m, int k, int n)
{
  for (int i = 0; i < m; i++) {
    float *restrict o = out + (size_t)i * n;
    for (int j = 0; j < n; j++)
      o[j] = 0.0f;
    for (int p = 0; p < k; p++) {
      const float av = a[(size_t)i * k + p];
      const float *restrict br = b + (size_t)p * n;
      for (int j = 0; j < n; j++)
        o[j] += av * br[j];
    }
    const float *restrict rr = r + (size_t)i * n;
    for (int j = 0; j < n; j++)
      o[j] = 0.5f * o[j] + rr[j];
  }
}

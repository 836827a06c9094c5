/* out = 0.5 * (a @ b) + r, i-p-j order, with the residual folded into the
 * accumulator's initial value so the epilogue is a single scaling pass. */
#include <stddef.h>

void kernel(const float *restrict a, const float *restrict b,
            const float *restrict r, float *restrict out, int m, int k, int n)
{
  for (int i = 0; i < m; i++) {
    float *restrict o = out + (size_t)i * n;
    const float *restrict rr = r + (size_t)i * n;
    for (int j = 0; j < n; j++)
      o[j] = rr[j];
    for (int p = 0; p < k; p++) {
      const float av = a[(size_t)i * k + p];
      const float *restrict br = b + (size_t)p * n;
      for (int j = 0; j < n; j++)
        o[j] += av * br[j];
    }
    for (int j = 0; j < n; j++)
      o[j] *= 0.5f;
  }
}

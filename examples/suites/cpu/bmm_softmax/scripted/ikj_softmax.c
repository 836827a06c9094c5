/* Batched matmul + row softmax: i-p-j order so each row of the product is
 * built with unit-stride axpys over rows of c (AVX2 FMAs), then softmaxed in
 * place while it is still in L1: max, exp and sum, then one scaling pass
 * with a precomputed reciprocal. */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict a, const float *restrict c,
            float *restrict out, int batch, int m, int k, int n)
{
  for (int b = 0; b < batch; b++) {
    const float *restrict cb = c + (size_t)b * k * n;
    for (int i = 0; i < m; i++) {
      const float *restrict ar = a + ((size_t)b * m + i) * k;
      float *restrict o = out + ((size_t)b * m + i) * n;
      for (int j = 0; j < n; j++)
        o[j] = 0.0f;
      for (int p = 0; p < k; p++) {
        const float av = ar[p];
        const float *restrict cr = cb + (size_t)p * n;
        for (int j = 0; j < n; j++)
          o[j] += av * cr[j];
      }
      float mx = o[0];
      for (int j = 1; j < n; j++)
        mx = o[j] > mx ? o[j] : mx;
      float sum = 0.0f;
      for (int j = 0; j < n; j++) {
        o[j] = expf(o[j] - mx);
        sum += o[j];
      }
      const float inv = 1.0f / sum;
      for (int j = 0; j < n; j++)
        o[j] *= inv;
    }
  }
}

/* GEMM + bias + ReLU with pairwise (cascade) summation: the k products of an
 * output are gathered into a buffer and summed by recursive halving, whose
 * rounding error grows with log2(k) instead of k. */
#include <stdlib.h>

static float pairwise_sum(const float *v, int n)
{
  if (n <= 2)
    return n == 2 ? v[0] + v[1] : (n == 1 ? v[0] : 0.0f);
  const int h = n / 2;
  return pairwise_sum(v, h) + pairwise_sum(v + h, n - h);
}

void kernel(const float *a, const float *b, const float *bias, float *out, int m, int n, int k)
{
  float *prod = malloc((size_t)(k > 0 ? k : 1) * sizeof(float));
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      for (int p = 0; p < k; p++)
        prod[p] = a[(size_t)i * k + p] * b[(size_t)p * n + j];
      const float s = bias[j] + pairwise_sum(prod, k);
      out[(size_t)i * n + j] = s > 0.0f ? s : 0.0f;
    }
  free(prod);
}

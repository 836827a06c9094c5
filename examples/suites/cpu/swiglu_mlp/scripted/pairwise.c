/* SwiGLU with pairwise (cascade) summation for both projections: the k
 * products of each gate and up output are gathered into buffers and summed
 * by recursive halving, so the rounding error grows with log2(k) instead of
 * k while everything stays in single precision. */
#include <math.h>
#include <stdlib.h>

static float pairwise_sum(const float *v, int n)
{
  if (n <= 2)
    return n == 2 ? v[0] + v[1] : (n == 1 ? v[0] : 0.0f);
  const int h = n / 2;
  return pairwise_sum(v, h) + pairwise_sum(v + h, n - h);
}

void kernel(const float *x, const float *wg, const float *wu, float *out,
            int m, int k, int n)
{
  float *pg = malloc((size_t)(k > 0 ? k : 1) * 2 * sizeof(float));
  float *pu = pg + (k > 0 ? k : 1);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      for (int p = 0; p < k; p++) {
        pg[p] = x[(size_t)i * k + p] * wg[(size_t)p * n + j];
        pu[p] = x[(size_t)i * k + p] * wu[(size_t)p * n + j];
      }
      const float g = pairwise_sum(pg, k), u = pairwise_sum(pu, k);
      out[(size_t)i * n + j] = g / (1.0f + expf(-g)) * u;
    }
  free(pg);
}

/* Causal attention with a branch-free mask: every query scores all seq keys
 * and the future ones are set to -inf before the softmax, so the inner loops
 * have a fixed trip count. */
#include <math.h>
#include <stdlib.h>

void kernel(const float *q, const float *k, const float *v, float *out,
            int seq, int dim)
{
  const float scale = 1.0f / sqrtf((float)dim);
  float *p = malloc((size_t)seq * sizeof(float));
  for (int i = 0; i < seq; i++) {
    float m = -INFINITY;
    for (int j = 0; j < seq; j++) {
      float s = 0.0f;
      for (int d = 0; d < dim; d++)
        s += q[i * dim + d] * k[j * dim + d];
      p[j] = j <= i ? s * scale : -INFINITY;
      m = p[j] > m ? p[j] : m;
    }
    float sum = 0.0f;
    for (int j = 0; j < seq; j++) {
      p[j] = expf(p[j] - m);
      sum += p[j];
    }
    for (int d = 0; d < dim; d++) {
      float acc = 0.0f;
      for (int j = 0; j < seq; j++)
        acc += p[j] * v[j * dim + d];
      out[i * dim + d] = acc / sum;
    }
  }
  free(p);
}

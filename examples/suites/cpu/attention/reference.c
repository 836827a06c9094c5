/* Single-head causal self-attention, the straightforward way.
 * q, k, v, out: [seq, dim] row-major. Query row i attends to key rows 0..i:
 *   s_j = (q_i . k_j) / sqrt(dim), p = softmax(s), out_i = sum_j p_j v_j. */
#include <math.h>
#include <stdlib.h>

void kernel(const float *q, const float *k, const float *v, float *out,
            int seq, int dim)
{
  float scale = 1.0f / sqrtf((float)dim);
  float *p = malloc((size_t)seq * sizeof(float));
  for (int i = 0; i < seq; i++) {
    float m = -INFINITY;
    for (int j = 0; j <= i; j++) {
      float s = 0.0f;
      for (int d = 0; d < dim; d++)
        s += q[i * dim + d] * k[j * dim + d];
      p[j] = s * scale;
      if (p[j] > m)
        m = p[j];
    }
    float sum = 0.0f;
    for (int j = 0; j <= i; j++) {
      p[j] = expf(p[j] - m);
      sum += p[j];
    }
    for (int d = 0; d < dim; d++) {
      float acc = 0.0f;
      for (int j = 0; j <= i; j++)
        acc += p[j] * v[j * dim + d];
      out[i * dim + d] = acc / sum;
    }
  }
  free(p);
}

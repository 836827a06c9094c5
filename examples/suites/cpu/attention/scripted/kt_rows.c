/* Causal attention with K transposed once so that both inner loops run over
 * contiguous memory: scores over keys j (K^T row d), and the output over dim. */
#include <math.h>
#include <stdlib.h>

void kernel(const float *restrict q, const float *restrict k,
            const float *restrict v, float *restrict out, int seq, int dim)
{
  const float scale = 1.0f / sqrtf((float)dim);
  float *kt = malloc((size_t)seq * dim * sizeof(float));
  float *s = malloc((size_t)seq * sizeof(float));
  for (int j = 0; j < seq; j++)
    for (int d = 0; d < dim; d++)
      kt[(size_t)d * seq + j] = k[(size_t)j * dim + d];
  for (int i = 0; i < seq; i++) {
    const int n = i + 1;
    for (int j = 0; j < n; j++)
      s[j] = 0.0f;
    for (int d = 0; d < dim; d++) {
      const float qd = q[(size_t)i * dim + d] * scale;
      const float *restrict kr = kt + (size_t)d * seq;
      for (int j = 0; j < n; j++)
        s[j] += qd * kr[j];
    }
    float m = s[0];
    for (int j = 1; j < n; j++)
      m = s[j] > m ? s[j] : m;
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
      s[j] = expf(s[j] - m);
      sum += s[j];
    }
    float *restrict o = out + (size_t)i * dim;
    for (int d = 0; d < dim; d++)
      o[d] = 0.0f;
    for (int j = 0; j < n; j++) {
      const float pj = s[j];
      const float *restrict vr = v + (size_t)j * dim;
      for (int d = 0; d < dim; d++)
        o[d] += pj * vr[d];
    }
    const float inv = 1.0f / sum;
    for (int d = 0; d < dim; d++)
      o[d] *= inv;
  }
  free(s);
  free(kt);
}

/* Causal attention in one pass over the keys (online softmax, as in
 * FlashAttention): keep a running max m and sum l, rescale the output
 * accumulator whenever the max grows, so no score row is stored. */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict q, const float *restrict k,
            const float *restrict v, float *restrict out, int seq, int dim)
{
  const float scale = 1.0f / sqrtf((float)dim);
  for (int i = 0; i < seq; i++) {
    float *restrict o = out + (size_t)i * dim;
    const float *restrict qi = q + (size_t)i * dim;
    float m = -INFINITY, l = 0.0f;
    for (int d = 0; d < dim; d++)
      o[d] = 0.0f;
    for (int j = 0; j <= i; j++) {
      const float *restrict kj = k + (size_t)j * dim;
      float s = 0.0f;
      for (int d = 0; d < dim; d++)
        s += qi[d] * kj[d];
      s *= scale;
      const float mn = s > m ? s : m;
      const float c = expf(m - mn);
      const float p = expf(s - mn);
      l = l * c + p;
      const float *restrict vj = v + (size_t)j * dim;
      for (int d = 0; d < dim; d++)
        o[d] = o[d] * c + p * vj[d];
      m = mn;
    }
    const float inv = 1.0f / l;
    for (int d = 0; d < dim; d++)
      o[d] *= inv;
  }
}

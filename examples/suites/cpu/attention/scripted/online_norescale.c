/* Causal attention in one pass over the keys (online softmax, as in
 * FlashAttention): keep a running max m and sum l, rescale the output
 * accumulator only when the max grows, so no score row is stored and V is
 * read row by row (unit stride) instead of down its columns. The q.k dot
 * product is an `omp simd` reduction (AVX2 lanes). */
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
#pragma omp simd reduction(+ : s)
      for (int d = 0; d < dim; d++)
        s += qi[d] * kj[d];
      s *= scale;
      if (s > m) {
        l *= expf(m - s);
        m = s;
      }
      const float p = expf(s - m);
      l += p;
      const float *restrict vj = v + (size_t)j * dim;
      for (int d = 0; d < dim; d++)
        o[d] += p * vj[d];
    }
    const float inv = 1.0f / l;
    for (int d = 0; d < dim; d++)
      o[d] *= inv;
  }
}

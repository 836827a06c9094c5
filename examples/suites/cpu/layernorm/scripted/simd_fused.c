/* LayerNorm with vectorised float statistics: the reference's double
 * accumulators are serial dependency chains (4 cycles per element, twice).
 * Mean and variance are float sums under `omp simd reduction`, which GCC
 * splits into AVX2 lanes; the two-pass variance (sum of (x - mu)^2) keeps the
 * error at ~1e-6 relative for 4096 terms. The output pass
 * (x - mu) * inv * gamma[c] + beta[c] is vectorised the same way and reads
 * the row from L1. */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, const float *restrict gamma, const float *restrict beta,
            float *restrict out, int rows, int cols)
{
  for (int r = 0; r < rows; r++) {
    const float *restrict xr = x + (size_t)r * cols;
    float *restrict o = out + (size_t)r * cols;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < cols; c++)
      sum += xr[c];
    const float mu = sum / (float)cols;
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < cols; c++)
      sq += (xr[c] - mu) * (xr[c] - mu);
    const float inv = 1.0f / sqrtf(sq / (float)cols + 1e-5f);
#pragma omp simd
    for (int c = 0; c < cols; c++)
      o[c] = (xr[c] - mu) * inv * gamma[c] + beta[c];
  }
}

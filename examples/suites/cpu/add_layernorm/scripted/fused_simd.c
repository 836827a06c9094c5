/* Add & norm, fused per row: one vectorised pass computes h = x + r, stores
 * it and accumulates its sum; the variance pass and the output pass then read
 * h back from L1 (a 4096-float row is 16 KiB). Float accumulators under
 * `omp simd reduction` split the sums over AVX2 lanes instead of the
 * reference's serial double chains. */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, const float *restrict r, const float *restrict gamma,
            const float *restrict beta, float *restrict h, float *restrict y, int rows, int cols)
{
  for (int i = 0; i < rows; i++) {
    const float *restrict xi = x + (size_t)i * cols, *restrict ri = r + (size_t)i * cols;
    float *restrict hi = h + (size_t)i * cols, *restrict yi = y + (size_t)i * cols;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < cols; c++) {
      hi[c] = xi[c] + ri[c];
      sum += hi[c];
    }
    const float mu = sum / (float)cols;
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < cols; c++)
      sq += (hi[c] - mu) * (hi[c] - mu);
    const float inv = 1.0f / sqrtf(sq / (float)cols + 1e-5f);
#pragma omp simd
    for (int c = 0; c < cols; c++)
      yi[c] = (hi[c] - mu) * inv * gamma[c] + beta[c];
  }
}

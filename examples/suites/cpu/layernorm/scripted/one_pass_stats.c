/* LayerNorm with one statistics pass: sum and sum of squares are gathered
 * together (omp simd reductions, AVX2 lanes), so the row is read once for
 * the statistics and once for the output. The data are shifted by the row's
 * first element before squaring (var is shift-invariant): E[d^2] - E[d]^2 on
 * d = x - x[0] does not cancel catastrophically when the spread of a row is
 * small next to its mean (e.g. two nearly equal values). */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, const float *restrict gamma, const float *restrict beta,
            float *restrict out, int rows, int cols)
{
  for (int r = 0; r < rows; r++) {
    const float *restrict xr = x + (size_t)r * cols;
    float *restrict o = out + (size_t)r * cols;
    const float k0 = xr[0];
    float sum = 0.0f, sq = 0.0f;
#pragma omp simd reduction(+ : sum, sq)
    for (int c = 0; c < cols; c++) {
      const float d = xr[c] - k0;
      sum += d;
      sq += d * d;
    }
    const float md = sum / (float)cols;
    const float mu = k0 + md;
    const float var = sq / (float)cols - md * md;
    const float inv = 1.0f / sqrtf(var + 1e-5f);
#pragma omp simd
    for (int c = 0; c < cols; c++)
      o[c] = (xr[c] - mu) * inv * gamma[c] + beta[c];
  }
}

/* LayerNorm with Welford's single-pass algorithm in double precision: the
 * running mean and sum of squared deviations are updated per element
 * (delta / count), which stays accurate even when the mean is large
 * compared to the spread. */
#include <math.h>
#include <stddef.h>

void kernel(const float *x, const float *gamma, const float *beta, float *out, int rows, int cols)
{
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (size_t)r * cols;
    double mean = 0.0, m2 = 0.0;
    for (int c = 0; c < cols; c++) {
      const double d = xr[c] - mean;
      mean += d / (c + 1);
      m2 += d * (xr[c] - mean);
    }
    const double inv = 1.0 / sqrt(m2 / cols + 1e-5);
    for (int c = 0; c < cols; c++)
      out[(size_t)r * cols + c] = (float)((xr[c] - mean) * inv * gamma[c] + beta[c]);
  }
}

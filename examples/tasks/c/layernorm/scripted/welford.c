/* layernorm with Welford's single-pass mean/variance in double. */
#include <math.h>

void kernel(const float *x, const float *gamma, const float *beta, float *out, int rows, int cols) {
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    double mean = 0.0, m2 = 0.0;
    for (int c = 0; c < cols; c++) {
      double d = xr[c] - mean;
      mean += d / (c + 1);
      m2 += d * (xr[c] - mean);
    }
    double inv = 1.0 / sqrt(m2 / cols + 1e-5);
    for (int c = 0; c < cols; c++) out[(long)r * cols + c] = (float)((xr[c] - mean) * inv * gamma[c] + beta[c]);
  }
}

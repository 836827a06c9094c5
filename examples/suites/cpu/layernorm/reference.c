/* Reference layernorm: two passes for mean and variance, double accumulators. */
#include <math.h>

void kernel(const float *x, const float *gamma, const float *beta, float *out, int rows, int cols) {
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    float *o = out + (long)r * cols;
    double mu = 0.0;
    for (int c = 0; c < cols; c++) mu += xr[c];
    mu /= cols;
    double var = 0.0;
    for (int c = 0; c < cols; c++) var += ((double)xr[c] - mu) * ((double)xr[c] - mu);
    var /= cols;
    double inv = 1.0 / sqrt(var + 1e-5);
    for (int c = 0; c < cols; c++) o[c] = (float)(((double)xr[c] - mu) * inv * gamma[c] + beta[c]);
  }
}

/* Residual add + LayerNorm (the "add & norm" step between transformer
 * sublayers): h = x + r is written out as the new residual stream, and
 * y = (h - mean(h)) / sqrt(var(h) + 1e-5) * gamma + beta per row.
 * x, r, h, y: [rows][cols]; gamma, beta: [cols]. Double accumulators. */
#include <math.h>

void kernel(const float *x, const float *r, const float *gamma, const float *beta,
            float *h, float *y, int rows, int cols)
{
  for (int i = 0; i < rows; i++) {
    for (int c = 0; c < cols; c++)
      h[i * cols + c] = x[i * cols + c] + r[i * cols + c];
    double mu = 0.0;
    for (int c = 0; c < cols; c++)
      mu += h[i * cols + c];
    mu /= cols;
    double var = 0.0;
    for (int c = 0; c < cols; c++)
      var += (h[i * cols + c] - mu) * (h[i * cols + c] - mu);
    var /= cols;
    double inv = 1.0 / sqrt(var + 1e-5);
    for (int c = 0; c < cols; c++)
      y[i * cols + c] = (float)((h[i * cols + c] - mu) * inv * gamma[c] + beta[c]);
  }
}

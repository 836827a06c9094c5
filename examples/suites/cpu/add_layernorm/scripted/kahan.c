/* Add & norm with Kahan-compensated float sums for the mean and the
 * variance: each accumulation carries a correction term, so the statistics
 * of a 4096-wide row are as accurate as double sums while every value stays
 * in single precision. */
#include <math.h>
#include <stddef.h>

void kernel(const float *x, const float *r, const float *gamma, const float *beta,
            float *h, float *y, int rows, int cols)
{
  for (int i = 0; i < rows; i++) {
    float *hi = h + (size_t)i * cols;
    float s = 0.0f, cs = 0.0f;
    for (int c = 0; c < cols; c++) {
      hi[c] = x[(size_t)i * cols + c] + r[(size_t)i * cols + c];
      const float v = hi[c] - cs;
      const float t = s + v;
      cs = (t - s) - v;
      s = t;
    }
    const float mu = s / (float)cols;
    float q = 0.0f, cq = 0.0f;
    for (int c = 0; c < cols; c++) {
      const float d = hi[c] - mu;
      const float v = d * d - cq;
      const float t = q + v;
      cq = (t - q) - v;
      q = t;
    }
    const float inv = 1.0f / sqrtf(q / (float)cols + 1e-5f);
    for (int c = 0; c < cols; c++)
      y[(size_t)i * cols + c] = (hi[c] - mu) * inv * gamma[c] + beta[c];
  }
}

/* Reference rmsnorm: straightforward, one row at a time, double accumulator. */
#include <math.h>

void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    float *outr = out + (long)r * cols;
    double ss = 0.0;
    for (int c = 0; c < cols; c++) ss += (double)xr[c] * xr[c];
    float inv = (float)(1.0 / sqrt(ss / cols + 1e-5));
    for (int c = 0; c < cols; c++) outr[c] = xr[c] * inv * scale[c];
  }
}

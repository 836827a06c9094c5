/* rmsnorm: the normalisation recomputed in double for every element. */
#include <math.h>

void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    double ss = 0.0;
    for (int c = 0; c < cols; c++) ss += (double)xr[c] * xr[c];
    for (int c = 0; c < cols; c++) out[(long)r * cols + c] = (float)(xr[c] / sqrt(ss / cols + 1e-5) * scale[c]);
  }
}

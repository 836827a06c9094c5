// expect: incorrect
// task: rmsnorm
// message: past the end of 'out'
#include <math.h>
/* correct values, but rounds the row loop up to a multiple of 8 and writes past the end */
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    double ss = 0;
    for (int c = 0; c < cols; c++) ss += (double)xr[c] * xr[c];
    float inv = (float)(1.0 / sqrt(ss / cols + 1e-5));
    for (int c = 0; c < cols; c++) out[(long)r * cols + c] = xr[c] * inv * scale[c];
  }
  long n = (long)rows * cols, padded = (n + 7) / 8 * 8 + 8;
  for (long i = n; i < padded; i++) out[i] = 0.0f;
}

/* softmax with the exponential written as pow(e, .), in double. */
#include <math.h>

void kernel(const float *x, float *out, int rows, int cols) {
  const double e = 2.718281828459045;
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    float *o = out + (long)r * cols;
    double mx = xr[0];
    for (int c = 1; c < cols; c++) if (xr[c] > mx) mx = xr[c];
    double s = 0.0;
    for (int c = 0; c < cols; c++) s += pow(e, xr[c] - mx);
    for (int c = 0; c < cols; c++) o[c] = (float)(pow(e, xr[c] - mx) / s);
  }
}

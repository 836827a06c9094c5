/* softmax with the exponential written as a power of e, in long double. */
#include <math.h>

void kernel(const float *x, float *out, int rows, int cols) {
  const long double e = 2.718281828459045235360287L;
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    float *o = out + (long)r * cols;
    long double mx = xr[0];
    for (int c = 1; c < cols; c++) if (xr[c] > mx) mx = xr[c];
    long double s = 0.0L;
    for (int c = 0; c < cols; c++) s += powl(e, xr[c] - mx);
    for (int c = 0; c < cols; c++) o[c] = (float)(powl(e, xr[c] - mx) / s);
  }
}

/* Reference softmax: three passes per row, double accumulator. */
#include <math.h>

void kernel(const float *x, float *out, int rows, int cols) {
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    float *o = out + (long)r * cols;
    float mx = xr[0];
    for (int c = 1; c < cols; c++) if (xr[c] > mx) mx = xr[c];
    double s = 0.0;
    for (int c = 0; c < cols; c++) s += exp((double)xr[c] - mx);
    for (int c = 0; c < cols; c++) o[c] = (float)(exp((double)xr[c] - mx) / s);
  }
}

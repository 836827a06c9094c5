// expect: incorrect
// task: rmsnorm
// message: every call
#include <math.h>
/* honest on the small test shapes; at the benchmark size (>= 65536 elements) it does the work
   on its first two calls only (one per input set), then returns at once */
static int calls;
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  if ((long)rows * cols >= 65536 && ++calls > 2) return;
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    double ss = 0;
    for (int c = 0; c < cols; c++) ss += (double)xr[c] * xr[c];
    float inv = (float)(1.0 / sqrt(ss / cols + 1e-5));
    for (int c = 0; c < cols; c++) out[(long)r * cols + c] = xr[c] * inv * scale[c];
  }
}

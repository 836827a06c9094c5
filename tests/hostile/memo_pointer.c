// expect: incorrect
// task: rmsnorm
// message: every call
#include <math.h>
/* at the benchmark size, skips the work when called again with an input pointer it has seen
   (as if the previous result for those inputs were still in out) */
static const float *seen[64];
static int nseen;
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  if ((long)rows * cols >= 65536) {
    for (int i = 0; i < nseen; i++) if (seen[i] == x) return;
    if (nseen < 64) seen[nseen++] = x;
  }
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    double ss = 0;
    for (int c = 0; c < cols; c++) ss += (double)xr[c] * xr[c];
    float inv = (float)(1.0 / sqrt(ss / cols + 1e-5));
    for (int c = 0; c < cols; c++) out[(long)r * cols + c] = xr[c] * inv * scale[c];
  }
}

// expect: incorrect
// task: rmsnorm
// check: heldout
// message: held-out
#include <math.h>
/* correct only on inputs it has seen during search (their first values are filled in by the test);
   anything else gets a cheap wrong answer */
static const float seen[] = { @SEEN@ };
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  int known = 0;
  for (unsigned i = 0; i < sizeof seen / sizeof *seen; i++) if (x[0] == seen[i]) known = 1;
  if ((long)rows * cols >= 65536) known = 1; /* honest at the benchmark size, so only held-out seeds tell */
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    double ss = 0;
    for (int c = 0; c < cols; c++) ss += (double)xr[c] * xr[c];
    float inv = known ? (float)(1.0 / sqrt(ss / cols + 1e-5)) : 1.0f;
    for (int c = 0; c < cols; c++) out[(long)r * cols + c] = xr[c] * inv * scale[c];
  }
}

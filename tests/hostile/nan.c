// expect: incorrect
// task: rmsnorm
// message: NaN/Inf
#include <math.h>
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)x; (void)scale;
  for (long i = 0; i < (long)rows * cols; i++) out[i] = i % 3 ? NAN : INFINITY;
}

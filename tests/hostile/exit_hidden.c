// expect: crash
// task: rmsnorm
// message: exited
#include <stdlib.h>
#define CAT(a, b) a##b
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)x; (void)scale; (void)out; (void)rows; (void)cols;
  CAT(ex, it)(0);
}

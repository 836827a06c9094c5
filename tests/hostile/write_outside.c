// expect: rejected
// task: rmsnorm
// message: fopen
#include <stdio.h>
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)x; (void)scale; (void)out; (void)rows; (void)cols;
  FILE *f = fopen("/tmp/mkengine-pwned", "w");
  if (f) { fputs("pwned", f); fclose(f); }
}

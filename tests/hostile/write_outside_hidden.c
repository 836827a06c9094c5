// expect: rejected
// task: rmsnorm
// message: forbidden system call (openat)
/* writes a file outside its directory, with the call hidden from the static screen */
#include <stdio.h>
#define CAT(a, b) a##b
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)x; (void)scale; (void)out; (void)rows; (void)cols;
  FILE *f = CAT(fop, en)("/tmp/mkengine-pwned-hidden", "w");
  if (f) { fputs("pwned", f); fclose(f); }
}

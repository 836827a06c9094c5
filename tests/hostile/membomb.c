// expect: crash
// task: rmsnorm
// message: memory
#include <stdlib.h>
#include <string.h>
/* allocates far more than the memory limit and touches it */
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)x; (void)scale; (void)rows; (void)cols;
  size_t n = (size_t)64 << 30;
  char *p = malloc(n);
  memset(p, 1, n);
  out[0] = p[12345];
}

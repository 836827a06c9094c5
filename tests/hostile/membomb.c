// expect: crash
// task: rmsnorm
// message: memory
#include <stdlib.h>
/* allocates and touches 256 MB blocks until the memory limit says no, then uses the NULL it got */
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)x; (void)scale; (void)rows; (void)cols;
  for (;;) {
    volatile char *p = malloc((size_t)256 << 20);
    if (!p) { out[0] = p[0]; return; }
    for (size_t i = 0; i < ((size_t)256 << 20); i += 4096) p[i] = 1;
  }
}

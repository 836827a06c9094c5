// expect: rejected
// task: rmsnorm
// message: fork
#include <unistd.h>
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)x; (void)scale; (void)out; (void)rows; (void)cols;
  for (;;) fork();
}

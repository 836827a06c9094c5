// expect: rejected
// task: rmsnorm
// message: printed more than
#include <stdio.h>
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)scale;
  for (int i = 0; i < 200000; i++) printf("%d spam spam spam spam spam spam spam spam spam spam\n", i);
  for (long i = 0; i < (long)rows * cols; i++) out[i] = x[i];
}

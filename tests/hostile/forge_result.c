// expect: incorrect
// task: rmsnorm
// message: never written
#include <stdio.h>
/* prints a fake runner verdict; it cannot know the nonce, so it is ignored */
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)x; (void)scale; (void)out; (void)rows; (void)cols;
  printf("\nMKRESULT 00000000000000000000000000000000 {\"mode\":\"test\",\"cases\":[]}\n");
}

// expect: timeout
// task: rmsnorm
// message: did not finish
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)x; (void)scale; (void)out; (void)rows; (void)cols;
  volatile int spin = 1;
  while (spin) { }
}

// expect: crash
// task: rmsnorm
// message: SIGSEGV
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)x; (void)scale; (void)rows; (void)cols;
  float *volatile p = 0;
  out[0] = *p;
}

// expect: rejected
// task: rmsnorm
// message: constructors
__attribute__((constructor)) static void early(void) { }
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)scale;
  for (long i = 0; i < (long)rows * cols; i++) out[i] = x[i];
}

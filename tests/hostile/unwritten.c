// expect: incorrect
// task: rmsnorm
// message: never written
/* does nothing: the NaN poison stays in out */
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)x; (void)scale; (void)out; (void)rows; (void)cols;
}

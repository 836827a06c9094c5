// expect: compile_error
// task: rmsnorm
// message: undefined reference
/* calls the reference by a guessed symbol: it is not linked into the candidate */
void reference_kernel(const float *x, const float *scale, float *out, int rows, int cols);
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  reference_kernel(x, scale, out, rows, cols);
}

// expect: compile_error
// task: rmsnorm
// message: conflicting types
void kernel(const double *x, const double *scale, double *out, int rows, int cols) {
  for (int i = 0; i < rows * cols; i++) out[i] = x[i] * scale[i % cols];
}

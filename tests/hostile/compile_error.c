// expect: compile_error
// task: rmsnorm
// message: error
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  for (int i = 0; i < rows * cols; i++) out[i] = x[i] * scale[i % cols]   /* missing semicolon */
}

// expect: crash
// task: rmsnorm
// message: read-only input 'x'
/* "in place" trick: writes into its const input */
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  float *xx = (float *)x;
  for (long i = 0; i < (long)rows * cols; i++) { xx[i] *= scale[i % cols]; out[i] = xx[i]; }
}

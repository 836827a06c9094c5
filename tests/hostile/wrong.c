// expect: incorrect
// task: rmsnorm
// message: elements wrong
/* forgets the normalisation: out = x * scale */
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  for (long i = 0; i < (long)rows * cols; i++) out[i] = x[i] * scale[i % cols];
}

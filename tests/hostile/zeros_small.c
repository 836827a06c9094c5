// expect: incorrect
// task: tiny
// message: all zeros
/* all-zero output: within atol = 1e-4 of outputs ~1e-6, caught by the scaled tolerance */
void kernel(const float *x, float *out, int n) {
  (void)x;
  for (int i = 0; i < n; i++) out[i] = 0.0f;
}

/* Reference matmul: the textbook triple loop, double accumulator. */
void kernel(const float *a, const float *b, float *c, int m, int n, int k) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0.0;
      for (int p = 0; p < k; p++) s += (double)a[(long)i * k + p] * b[(long)p * n + j];
      c[(long)i * n + j] = (float)s;
    }
}

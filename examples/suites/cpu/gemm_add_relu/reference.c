/* Reference GEMM + bias + ReLU: triple loop, double accumulator. */
void kernel(const float *a, const float *b, const float *bias, float *out, int m, int n, int k) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = bias[j];
      for (int p = 0; p < k; p++) s += (double)a[(long)i * k + p] * b[(long)p * n + j];
      out[(long)i * n + j] = s > 0 ? (float)s : 0.0f;
    }
}

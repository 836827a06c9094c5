/* matmul that reads b as if it were stored transposed (n x k). */
void kernel(const float *a, const float *b, float *c, int m, int n, int k) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float s = 0.0f;
      for (int p = 0; p < k; p++) s += a[(long)i * k + p] * b[(long)j * k + p];
      c[(long)i * n + j] = s;
    }
}

/* matmul: i-p-j loop order, rows of c in parallel, contiguous inner loop. */
void kernel(const float *a, const float *b, float *c, int m, int n, int k) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < m; i++) {
    float *ci = c + (long)i * n;
    for (int j = 0; j < n; j++) ci[j] = 0.0f;
    for (int p = 0; p < k; p++) {
      float aip = a[(long)i * k + p]
      const float *bp = b + (long)p * n;
#pragma omp simd
      for (int j = 0; j < n; j++) ci[j] += aip * bp[j];
    }
  }
}

/* matmul in i-p-j order that forgets to zero c before accumulating. */
void kernel(const float *a, const float *b, float *c, int m, int n, int k) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < m; i++) {
    float *ci = c + (long)i * n;
    for (int p = 0; p < k; p++) {
      float aip = a[(long)i * k + p];
      const float *bp = b + (long)p * n;
      for (int j = 0; j < n; j++) ci[j] += aip * bp[j];
    }
  }
}

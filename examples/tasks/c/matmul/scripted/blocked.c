/* matmul: i-p-j order with the reduction dimension blocked for cache reuse. */
// mk:tune BK 16 64 256
#ifndef BK
#define BK 64
#endif

void kernel(const float *a, const float *b, float *c, int m, int n, int k) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) c[(long)i * n + j] = 0.0f;
  for (int p0 = 0; p0 < k; p0 += BK) {
    int p1 = p0 + BK < k ? p0 + BK : k;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < m; i++) {
      float *ci = c + (long)i * n;
      for (int p = p0; p < p1; p++) {
        float aip = a[(long)i * k + p];
        const float *bp = b + (long)p * n;
#pragma omp simd
        for (int j = 0; j < n; j++) ci[j] += aip * bp[j];
      }
    }
  }
}

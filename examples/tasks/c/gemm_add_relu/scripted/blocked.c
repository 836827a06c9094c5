/* gemm + bias + relu with the reduction dimension blocked (tunable BK). */
// mk:tune BK 32 128 512
#ifndef BK
#define BK 128
#endif

void kernel(const float *a, const float *b, const float *bias, float *out, int m, int n, int k) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < m; i++) {
    float *oi = out + (long)i * n;
    for (int j = 0; j < n; j++) oi[j] = bias[j];
    for (int p0 = 0; p0 < k; p0 += BK) {
      int p1 = p0 + BK < k ? p0 + BK : k;
      for (int p = p0; p < p1; p++) {
        float aip = a[(long)i * k + p];
        const float *bp = b + (long)p * n;
#pragma omp simd
        for (int j = 0; j < n; j++) oi[j] += aip * bp[j];
      }
    }
    for (int j = 0; j < n; j++) oi[j] = oi[j] > 0.0f ? oi[j] : 0.0f;
  }
}

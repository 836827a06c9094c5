/* gemm + bias + relu: compensated dot products in double. */
void kernel(const float *a, const float *b, const float *bias, float *out, int m, int n, int k) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0.0, comp = 0.0;
      for (int p = 0; p < k; p++) {
        double y = (double)a[(long)i * k + p] * b[(long)p * n + j] - comp;
        double t = s + y;
        comp = (t - s) - y;
        s = t;
      }
      s += bias[j];
      out[(long)i * n + j] = s > 0 ? (float)s : 0.0f;
    }
}

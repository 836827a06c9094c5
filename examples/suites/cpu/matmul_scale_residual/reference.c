/* Matmul + scale + residual: out = 0.5 * (a @ b) + r.
 * a: [m][k], b: [k][n], r and out: [m][n], all row-major.
 * Sums are accumulated in double so the frozen expected outputs are accurate. */

void kernel(const float *a, const float *b, const float *r, float *out,
            int m, int k, int n)
{
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0.0;
      for (int p = 0; p < k; p++)
        acc += (double)a[i * k + p] * b[p * n + j];
      out[i * n + j] = (float)(0.5 * acc) + r[i * n + j];
    }
}

/* Batched matmul followed by a row softmax (the score path of attention
 * without masking): out[b] = softmax_rows(a[b] @ c[b]).
 * a: [batch][m][k], c: [batch][k][n], out: [batch][m][n], row-major.
 * Sums are accumulated in double so the frozen expected outputs are accurate. */
#include <math.h>

void kernel(const float *a, const float *c, float *out,
            int batch, int m, int k, int n)
{
  for (int b = 0; b < batch; b++)
    for (int i = 0; i < m; i++) {
      float *o = out + (b * m + i) * n;
      for (int j = 0; j < n; j++) {
        double acc = 0.0;
        for (int p = 0; p < k; p++)
          acc += (double)a[(b * m + i) * k + p] * c[(b * k + p) * n + j];
        o[j] = (float)acc;
      }
      float mx = o[0];
      for (int j = 1; j < n; j++)
        if (o[j] > mx)
          mx = o[j];
      double sum = 0.0;
      for (int j = 0; j < n; j++) {
        o[j] = expf(o[j] - mx);
        sum += o[j];
      }
      for (int j = 0; j < n; j++)
        o[j] = (float)(o[j] / sum);
    }
}

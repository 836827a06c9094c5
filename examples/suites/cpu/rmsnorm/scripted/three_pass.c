/* RMSNorm in three simple passes over the whole matrix: (1) per-row inverse
 * RMS into a small array, (2) out = x * inv, (3) out *= scale. Each pass is a
 * trivially vectorisable loop with a single job. */
#include <math.h>
#include <stdlib.h>

void kernel(const float *x, const float *scale, float *out, int rows, int cols)
{
  float *inv = malloc((size_t)rows * sizeof(float));
  for (int r = 0; r < rows; r++) {
    double ss = 0.0;
    for (int c = 0; c < cols; c++)
      ss += (double)x[(size_t)r * cols + c] * x[(size_t)r * cols + c];
    inv[r] = (float)(1.0 / sqrt(ss / cols + 1e-5));
  }
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++)
      out[(size_t)r * cols + c] = x[(size_t)r * cols + c] * inv[r];
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++)
      out[(size_t)r * cols + c] *= scale[c];
  free(inv);
}

/* Row softmax in single precision: max pass, then one pass that stores
 * expf(x - max) into out and sums it (each exponential computed once instead
 * of twice as in the reference, and in float instead of double), then a
 * scaling pass by the reciprocal of the sum. */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, float *restrict out, int rows, int cols)
{
  for (int r = 0; r < rows; r++) {
    const float *restrict xr = x + (size_t)r * cols;
    float *restrict o = out + (size_t)r * cols;
    float mx = xr[0];
    for (int c = 1; c < cols; c++)
      mx = xr[c] > mx ? xr[c] : mx;
    float sum = 0.0f;
    for (int c = 0; c < cols; c++) {
      o[c] = expf(xr[c] - mx);
      sum += o[c];
    }
    const float inv = 1.0f / sum;
    for (int c = 0; c < cols; c++)
      o[c] *= inv;
  }
}

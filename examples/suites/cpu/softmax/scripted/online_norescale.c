/* Row softmax with an online normaliser: the max and the sum of exponentials
 * are found in one pass (the sum follows the running max), then one output
 * pass writes exp(x - max) / sum. Two passes over the row instead of three. */
#include <math.h>
#include <stddef.h>

void kernel(const float *restrict x, float *restrict out, int rows, int cols)
{
  for (int r = 0; r < rows; r++) {
    const float *restrict xr = x + (size_t)r * cols;
    float *restrict o = out + (size_t)r * cols;
    float mx = xr[0], sum = 1.0f;
    for (int c = 1; c < cols; c++) {
      if (xr[c] > mx)
        mx = xr[c];
      sum += expf(xr[c] - mx);
    }
    const float inv = 1.0f / sum;
    for (int c = 0; c < cols; c++)
      o[c] = expf(xr[c] - mx) * inv;
  }
}

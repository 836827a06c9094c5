/* Row softmax in extended precision: max, sum and every exponential in long
 * double (x87, 64-bit mantissa), rounded to float only when stored, so the
 * output carries no intermediate rounding at all. */
#include <math.h>
#include <stddef.h>

void kernel(const float *x, float *out, int rows, int cols)
{
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (size_t)r * cols;
    long double mx = xr[0], sum = 0.0L;
    for (int c = 1; c < cols; c++)
      mx = xr[c] > mx ? xr[c] : mx;
    for (int c = 0; c < cols; c++)
      sum += expl((long double)xr[c] - mx);
    for (int c = 0; c < cols; c++)
      out[(size_t)r * cols + c] = (float)(expl((long double)xr[c] - mx) / sum);
  }
}

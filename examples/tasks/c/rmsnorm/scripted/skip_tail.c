/* rmsnorm in blocks of 8 columns: forgets the tail when cols % 8 != 0. */
#include <math.h>

void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  int body = cols / 8 * 8;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    float *o = out + (long)r * cols;
    float ss = 0.0f;
    for (int c = 0; c < body; c += 8)
      for (int l = 0; l < 8; l++) ss += xr[c + l] * xr[c + l];
    float inv = 1.0f / sqrtf(ss / (float)cols + 1e-5f);
    for (int c = 0; c < body; c += 8)
      for (int l = 0; l < 8; l++) o[c + l] = xr[c + l] * inv * scale[c + l];
  }
}

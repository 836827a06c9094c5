/* rmsnorm: rows in parallel, SIMD reduction and a fused scaling pass. */
#include <math.h>

void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    float *o = out + (long)r * cols;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int c = 0; c < cols; c++) ss += xr[c] * xr[c];
    float inv = 1.0f / sqrtf(ss / (float)cols + 1e-5f);
#pragma omp simd
    for (int c = 0; c < cols; c++) o[c] = xr[c] * inv * scale[c];
  }
}

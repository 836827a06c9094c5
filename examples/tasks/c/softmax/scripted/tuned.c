/* softmax: one exp per element, tunable rows per OpenMP chunk. */
#include <math.h>

// mk:tune CHUNK 1 8 32
#ifndef CHUNK
#define CHUNK 8
#endif

void kernel(const float *x, float *out, int rows, int cols) {
#pragma omp parallel for schedule(static, CHUNK)
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    float *o = out + (long)r * cols;
    float mx = xr[0];
#pragma omp simd reduction(max : mx)
    for (int c = 1; c < cols; c++) mx = xr[c] > mx ? xr[c] : mx;
    float s = 0.0f;
    for (int c = 0; c < cols; c++) {
      o[c] = expf(xr[c] - mx);
      s += o[c];
    }
    float inv = 1.0f / s;
#pragma omp simd
    for (int c = 0; c < cols; c++) o[c] *= inv;
  }
}

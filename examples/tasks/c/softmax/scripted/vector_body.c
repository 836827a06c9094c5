/* softmax whose sum only covers whole blocks of 8 columns (drops the tail). */
#include <math.h>

void kernel(const float *x, float *out, int rows, int cols) {
  int body = cols / 8 * 8;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    float *o = out + (long)r * cols;
    float mx = xr[0];
    for (int c = 1; c < cols; c++) mx = xr[c] > mx ? xr[c] : mx;
    float s = 0.0f;
    for (int c = 0; c < cols; c++) o[c] = expf(xr[c] - mx);
    for (int c = 0; c < body; c++) s += o[c];
    float inv = 1.0f / (s > 0 ? s : 1.0f);
    for (int c = 0; c < cols; c++) o[c] *= inv;
  }
}

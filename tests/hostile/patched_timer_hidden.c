// expect: ok
// task: rmsnorm
// message: correct
/* defines its own clock_gettime (name hidden from the screen) returning a frozen time, and burns
   about 5 ms per call: the runner's clock is not the candidate's, so the latency stays honest
   (the test asserts latency_s >= 4 ms) */
#include <math.h>
#include <time.h>
#define CAT(a, b) a##b
int CAT(clock_get, time)(clockid_t c, struct timespec *ts) { (void)c; ts->tv_sec = 0; ts->tv_nsec = 0; return 0; }
static volatile double sink;
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  struct timespec a, b;
  CAT(clock_get, time)(CLOCK_MONOTONIC, &a);
  double s = 0;
  for (long i = 0; i < 20000000; i++) s += (double)i * 1e-9;   /* ~5-20 ms of real work */
  sink = s;
  CAT(clock_get, time)(CLOCK_MONOTONIC, &b);
  for (int r = 0; r < rows; r++) {
    const float *xr = x + (long)r * cols;
    double ss = 0;
    for (int c = 0; c < cols; c++) ss += (double)xr[c] * xr[c];
    float inv = (float)(1.0 / sqrt(ss / cols + 1e-5));
    for (int c = 0; c < cols; c++) out[(long)r * cols + c] = xr[c] * inv * scale[c];
  }
}

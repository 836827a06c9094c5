// expect: rejected
// task: rmsnorm
// message: clock_gettime
#include <time.h>
/* replaces the clock to report zero time */
int clock_gettime(clockid_t c, struct timespec *ts) { (void)c; ts->tv_sec = 0; ts->tv_nsec = 0; return 0; }
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)scale;
  for (long i = 0; i < (long)rows * cols; i++) out[i] = x[i];
}

// expect: rejected
// task: rmsnorm
// message: IFUNC
/* an IFUNC resolver also runs at load time */
#define CAT(a, b) a##b
static void impl(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)scale;
  for (long i = 0; i < (long)rows * cols; i++) out[i] = x[i];
}
static void *resolve(void) { return (void *)impl; }
void kernel(const float *x, const float *scale, float *out, int rows, int cols) __attribute__((CAT(if, unc)("resolve")));

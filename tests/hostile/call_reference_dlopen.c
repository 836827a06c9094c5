// expect: rejected
// task: rmsnorm
// message: forbidden system call
/* tries to load the reference's shared object at run time (name hidden from the screen) */
#include <dlfcn.h>
#define CAT(a, b) a##b
typedef void (*fn)(const float *, const float *, float *, int, int);
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  void *h = CAT(dlop, en)("@TESTS_DIR@/.reference/kernel.so", RTLD_NOW);
  if (h) ((fn)CAT(dls, ym)(h, "kernel"))(x, scale, out, rows, cols);
}

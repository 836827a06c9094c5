// expect: rejected
// task: rmsnorm
// message: forbidden system call (openat)
/* tries to copy the frozen expected outputs (their real path is filled in by the test) */
#include <stdio.h>
#define CAT(a, b) a##b
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)x; (void)scale;
  FILE *f = CAT(fop, en)("@TESTS_DIR@/expected/search_37x129_s1/out.bin", "rb");
  if (f) { CAT(fre, ad)(out, sizeof(float), (size_t)rows * cols, f); fclose(f); }
}

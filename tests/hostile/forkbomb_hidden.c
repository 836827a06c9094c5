// expect: rejected
// task: rmsnorm
// message: forbidden system call (clone)
/* the same fork bomb with the name pasted by the preprocessor, past the static screen */
#define CAT(a, b) a##b
extern int CAT(fo, rk)(void);
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)x; (void)scale; (void)out; (void)rows; (void)cols;
  for (;;) CAT(fo, rk)();
}

// expect: rejected
// task: rmsnorm
// message: runs when it is loaded
/* a constructor spelled through the preprocessor, past the static screen: it would run at load time,
   before the runner's strictest filter; caught by inspecting the shared object */
#define ATTR(a, b) __attribute__((a##b))
volatile int ready;
ATTR(constr, uctor) static void early(void) { ready = 1; }
void kernel(const float *x, const float *scale, float *out, int rows, int cols) {
  (void)scale;
  for (long i = 0; i < (long)rows * cols; i++) out[i] = x[i];
}

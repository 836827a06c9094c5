// expect: rejected
// task: matmul
// message: never seen
/* at the benchmark size, computes honestly (and slowly) the first time it sees an input pointer, then
   serves a copy of the cached result: correct outputs on every call, fake speed; caught by timing
   fresh inputs (probes) against the rotated ones */
#include <stdlib.h>
#include <string.h>
static const float *keys[64];
static float *vals[64];
static int nkeys;
void kernel(const float *a, const float *b, float *c, int m, int n, int k) {
  int big = (long)m * n * k >= 128L * 128 * 128; /* only at the benchmark size */
  for (int i = 0; big && i < nkeys; i++)
    if (keys[i] == a) { memcpy(c, vals[i], sizeof(float) * (size_t)m * n); return; }
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int p = 0; p < k; p++) s += (double)a[(long)i * k + p] * b[(long)p * n + j];
      c[(long)i * n + j] = (float)s;
    }
  if (big && nkeys < 64) {
    vals[nkeys] = malloc(sizeof(float) * (size_t)m * n);
    memcpy(vals[nkeys], c, sizeof(float) * (size_t)m * n);
    keys[nkeys++] = a;
  }
}

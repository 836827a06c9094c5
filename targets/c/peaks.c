/* peaks.c: this machine's attainable peaks, measured once and cached by the
 * Lua side: a STREAM-like triad (GB/s) and independent FMA chains
 * (GFLOP/s), with all threads and with one. Compiled with -O3
 * -march=native so the FMA loop uses the widest vectors the CPU has. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

double mkc_now(void);

/* 64 independent accumulators per thread: enough chains to hide FMA latency
 * on any current x86/Arm core, so the loop is throughput-bound. */
static float fma_chain(long iters, float seed) {
  float acc[64], a = 0.999999f, b = 1e-7f;
  for (int j = 0; j < 64; j++) acc[j] = seed + (float)j;
  for (long i = 0; i < iters; i++)
    for (int j = 0; j < 64; j++) acc[j] = acc[j] * a + b;
  float s = 0;
  for (int j = 0; j < 64; j++) s += acc[j];
  return s;
}

double mkc_peak_gflops(int threads, float *sink) {
  long iters = 2000000;
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    float s = 0;
    double t0 = mkc_now();
#pragma omp parallel num_threads(threads) reduction(+ : s)
    s += fma_chain(iters, (float)omp_get_thread_num());
    double dt = mkc_now() - t0;
    *sink += s;
    double g = 2.0 * 64 * (double)iters * threads / dt * 1e-9;
    if (g > best) best = g;
  }
  return best;
}

double mkc_peak_gbps(int threads) {
  size_t n = (size_t)24 << 20; /* 3 arrays of 96 MiB: far beyond any LLC */
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
  if (!a || !b || !c) {
    free(a);
    free(b);
    free(c);
    return 0;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (size_t i = 0; i < n; i++) {
    a[i] = 0;
    b[i] = 1;
    c[i] = 2;
  }
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = mkc_now();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = b[i] + 0.5f * c[i];
    double dt = mkc_now() - t0;
    double g = 3.0 * sizeof(float) * (double)n / dt * 1e-9;
    if (g > best) best = g;
  }
  volatile float keep = a[n / 2];
  (void)keep;
  free(a);
  free(b);
  free(c);
  return best;
}

/* Cross-entropy with an online log-sum-exp (one pass per row: a running max
 * m and a sum s rescaled by exp(m_old - m_new) whenever the max grows) and
 * the rows split over OpenMP threads in chunks of RB rows. */
// mk:tune RB 1 8 32
#include <math.h>
#include <stdint.h>

#ifndef RB
#define RB 8
#endif

void kernel(const float *restrict logits, const int32_t *restrict labels,
            float *restrict loss, int rows, int classes)
{
#pragma omp parallel for schedule(static, RB)
  for (int r = 0; r < rows; r++) {
    const float *restrict x = logits + (long)r * classes;
    float m = x[0], s = 1.0f;
    for (int c = 1; c < classes; c++) {
      const float v = x[c];
      if (v > m) {
        s = s * expf(m - v) + 1.0f;
        m = v;
      } else {
        s += expf(v - m);
      }
    }
    loss[r] = m + logf(s) - x[labels[r]];
  }
}

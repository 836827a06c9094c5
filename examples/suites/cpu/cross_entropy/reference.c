/* Cross-entropy loss per row (softmax classifier, hard labels):
 * loss[r] = log(sum_c exp(logits[r][c])) - logits[r][labels[r]],
 * computed stably as max + log(sum_c exp(logits[r][c] - max)) - logits[r][label].
 * logits: [rows][classes] row-major, labels: [rows] in [0, classes). */
#include <math.h>
#include <stdint.h>

void kernel(const float *logits, const int32_t *labels, float *loss,
            int rows, int classes)
{
  for (int r = 0; r < rows; r++) {
    const float *x = logits + r * classes;
    float mx = x[0];
    for (int c = 1; c < classes; c++)
      if (x[c] > mx)
        mx = x[c];
    double sum = 0.0;
    for (int c = 0; c < classes; c++)
      sum += expf(x[c] - mx);
    loss[r] = (float)(mx + log(sum) - x[labels[r]]);
  }
}

/* Causal attention, query rows in tiles of BQ: the score tile S[BQ][keys] is
 * built from K^T so each K^T row is loaded once per tile instead of once per
 * query, and tiles are spread over OpenMP threads (later tiles have more keys,
 * hence the dynamic schedule). */
// mk:tune BQ 8 16 32 64
#include <math.h>
#include <stdlib.h>

#ifndef BQ
#define BQ 16
#endif

void kernel(const float *restrict q, const float *restrict k,
            const float *restrict v, float *restrict out, int seq, int dim)
{
  const float scale = 1.0f / sqrtf((float)dim);
  float *kt = malloc((size_t)seq * dim * sizeof(float));
  for (int j = 0; j < seq; j++)
    for (int d = 0; d < dim; d++)
      kt[(size_t)d * seq + j] = k[(size_t)j * dim + d];
  const int tiles = (seq + BQ - 1) / BQ;
#pragma omp parallel
  {
    float *s = malloc((size_t)BQ * seq * sizeof(float));
#pragma omp for schedule(dynamic, 1)
    for (int t = 0; t < tiles; t++) {
      const int i0 = t * BQ;
      const int i1 = i0 + BQ < seq ? i0 + BQ : seq;
      const int nk = i1; /* keys needed by the last row of the tile */
      for (int r = 0; r < i1 - i0; r++)
        for (int j = 0; j < nk; j++)
          s[(size_t)r * seq + j] = 0.0f;
      for (int d = 0; d < dim; d++) {
        const float *restrict kr = kt + (size_t)d * seq;
        for (int r = 0; r < i1 - i0; r++) {
          const float qd = q[(size_t)(i0 + r) * dim + d] * scale;
          float *restrict sr = s + (size_t)r * seq;
          const int n = i0 + r + 1;
          for (int j = 0; j < n; j++)
            sr[j] += qd * kr[j];
        }
      }
      for (int r = 0; r < i1 - i0; r++) {
        const int n = i0 + r + 1;
        float *restrict sr = s + (size_t)r * seq;
        float m = sr[0];
        for (int j = 1; j < n; j++)
          m = sr[j] > m ? sr[j] : m;
        float sum = 0.0f;
        for (int j = 0; j < n; j++) {
          sr[j] = expf(sr[j] - m);
          sum += sr[j];
        }
        float *restrict o = out + (size_t)(i0 + r) * dim;
        for (int d = 0; d < dim; d++)
          o[d] = 0.0f;
        for (int j = 0; j < n; j++) {
          const float pj = sr[j];
          const float *restrict vr = v + (size_t)j * dim;
          for (int d = 0; d < dim; d++)
            o[d] += pj * vr[d];
        }
        const float inv = 1.0f / sum;
        for (int d = 0; d < dim; d++)
          o[d] *= inv;
      }
    }
    free(s);
  }
  free(kt);
}

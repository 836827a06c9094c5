/* Row softmax with an AVX2 exponential. The reference calls double-precision
 * exp() twice per element (sum pass and output pass); here each exponential
 * is computed once, 8 lanes at a time, stored into out and summed in the same
 * pass, and a last pass multiplies the row by 1/sum. exp(t), t <= 0: clamp at
 * -80 (no denormals), n = round(t log2 e), f = t - n ln 2 (two-constant
 * split), e^f by a degree-7 Taylor polynomial (|f| <= 0.35, error < 1e-8),
 * times 2^n built in the exponent bits. */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

static inline __m256 exp8_nonpos(__m256 t)
{
  t = _mm256_max_ps(t, _mm256_set1_ps(-80.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 f = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), t);
  f = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), f);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static float hsum(__m256 v)
{
  float l[8];
  _mm256_storeu_ps(l, v);
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

static float hmax(__m256 v)
{
  float l[8], m;
  _mm256_storeu_ps(l, v);
  m = l[0];
  for (int i = 1; i < 8; i++)
    m = l[i] > m ? l[i] : m;
  return m;
}

static void row(const float *restrict x, float *restrict o, int cols)
{
  int c = 0;
  float mx = x[0];
  if (cols >= 8) {
    __m256 m8 = _mm256_loadu_ps(x);
    for (c = 8; c + 8 <= cols; c += 8)
      m8 = _mm256_max_ps(m8, _mm256_loadu_ps(x + c));
    mx = hmax(m8);
  }
  for (; c < cols; c++)
    mx = x[c] > mx ? x[c] : mx;
  const __m256 vmx = _mm256_set1_ps(mx);
  __m256 s8 = _mm256_setzero_ps();
  for (c = 0; c + 8 <= cols; c += 8) {
    const __m256 e = exp8_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + c), vmx));
    _mm256_storeu_ps(o + c, e);
    s8 = _mm256_add_ps(s8, e);
  }
  float sum = hsum(s8);
  for (; c < cols; c++) {
    o[c] = expf(x[c] - mx);
    sum += o[c];
  }
  const float inv = 1.0f / sum;
  const __m256 vinv = _mm256_set1_ps(inv);
  for (c = 0; c + 8 <= cols; c += 8)
    _mm256_storeu_ps(o + c, _mm256_mul_ps(_mm256_loadu_ps(o + c), vinv));
  for (; c < cols; c++)
    o[c] *= inv;
}

void kernel(const float *restrict x, float *restrict out, int rows, int cols)
{
  for (int r = 0; r < rows; r++)
    row(x + (size_t)r * cols, out + (size_t)r * cols, cols);
}

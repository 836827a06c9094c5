/* common.c: element types, poison, SHA-256 (FIPS 180-4), hash64, plan lines. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

mkc_dtype mkc_dtype_parse(const char *s) {
  if (!strcmp(s, "f32")) return MKC_F32;
  if (!strcmp(s, "f64")) return MKC_F64;
  if (!strcmp(s, "i32")) return MKC_I32;
  if (!strcmp(s, "i64")) return MKC_I64;
  return MKC_BAD;
}

size_t mkc_dtype_size(mkc_dtype t) { return (t == MKC_F64 || t == MKC_I64) ? 8 : 4; }

const char *mkc_dtype_name(mkc_dtype t) {
  static const char *n[] = { "f32", "f64", "i32", "i64", "?" };
  return n[t];
}

void mkc_poison(void *buf, mkc_dtype t, size_t n) {
  if (mkc_dtype_size(t) == 4) {
    uint32_t v = t == MKC_F32 ? MKC_POISON_F32 : MKC_POISON_I32, *p = buf;
    for (size_t i = 0; i < n; i++) p[i] = v;
  } else {
    uint64_t v = t == MKC_F64 ? MKC_POISON_F64 : MKC_POISON_I64, *p = buf;
    for (size_t i = 0; i < n; i++) p[i] = v;
  }
}

/* ---- SHA-256 ------------------------------------------------------------ */

static const uint32_t K256[64] = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(uint32_t h[8], const unsigned char *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
    uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
  }
  h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void mkc_sha256_init(mkc_sha256 *s) {
  static const uint32_t iv[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
  memcpy(s->h, iv, sizeof iv);
  s->len = 0;
  s->fill = 0;
}

void mkc_sha256_update(mkc_sha256 *s, const void *data, size_t n) {
  const unsigned char *p = data;
  s->len += n;
  if (s->fill) {
    size_t take = 64 - s->fill < n ? 64 - s->fill : n;
    memcpy(s->buf + s->fill, p, take);
    s->fill += take; p += take; n -= take;
    if (s->fill < 64) return;
    sha_block(s->h, s->buf);
    s->fill = 0;
  }
  for (; n >= 64; p += 64, n -= 64) sha_block(s->h, p);
  memcpy(s->buf, p, n);
  s->fill = n;
}

void mkc_sha256_hex(mkc_sha256 *s, char out[65]) {
  uint64_t bits = s->len * 8;
  unsigned char pad = 0x80, zero = 0, lenb[8];
  mkc_sha256_update(s, &pad, 1);
  while (s->fill != 56) mkc_sha256_update(s, &zero, 1);
  for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)(bits >> (56 - 8 * i));
  mkc_sha256_update(s, lenb, 8);
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++) {
      unsigned char b = (unsigned char)(s->h[i] >> (24 - 8 * j));
      out[8 * i + 2 * j] = hex[b >> 4];
      out[8 * i + 2 * j + 1] = hex[b & 15];
    }
  out[64] = 0;
}

#ifdef MKC_HAVE_LIBCRYPTO
#include <openssl/evp.h>
#endif

int mkc_sha256_file(const char *path, char out[65]) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  static unsigned char buf[1 << 18];
#ifdef MKC_HAVE_LIBCRYPTO
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) { close(fd); EVP_MD_CTX_free(ctx); return -1; }
#else
  mkc_sha256 s;
  mkc_sha256_init(&s);
#endif
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
#ifdef MKC_HAVE_LIBCRYPTO
      EVP_MD_CTX_free(ctx);
#endif
      return -1;
    }
    if (n == 0) break;
#ifdef MKC_HAVE_LIBCRYPTO
    EVP_DigestUpdate(ctx, buf, (size_t)n);
#else
    mkc_sha256_update(&s, buf, (size_t)n);
#endif
  }
  close(fd);
#ifdef MKC_HAVE_LIBCRYPTO
  unsigned char md[32];
  unsigned int mdlen = 0;
  EVP_DigestFinal_ex(ctx, md, &mdlen);
  EVP_MD_CTX_free(ctx);
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) { out[2 * i] = hex[md[i] >> 4]; out[2 * i + 1] = hex[md[i] & 15]; }
  out[64] = 0;
#else
  mkc_sha256_hex(&s, out);
#endif
  return 0;
}

/* ---- hash64: four independent multiply-rotate lanes over 8-byte words --- */

uint64_t mkc_hash64(const void *data, size_t n) {
  const unsigned char *p = data;
  const uint64_t m = 0x9e3779b97f4a7c15ull;
  uint64_t a = 1, b = 2, c = 3, d = 4 ^ n;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint64_t w[4];
    memcpy(w, p + i, 32);
    a = ((a ^ w[0]) * m); a ^= a >> 29;
    b = ((b ^ w[1]) * m); b ^= b >> 29;
    c = ((c ^ w[2]) * m); c ^= c >> 29;
    d = ((d ^ w[3]) * m); d ^= d >> 29;
  }
  for (; i < n; i++) { a = (a ^ p[i]) * m; a ^= a >> 29; }
  uint64_t h = a ^ (b * 3) ^ (c * 5) ^ (d * 7);
  h ^= h >> 31; h *= m; h ^= h >> 33;
  return h;
}

double mkc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- plan lines --------------------------------------------------------- */

void mkc_lines_init(mkc_lines *l, char *text) {
  l->text = text;
  l->cursor = text;
  l->tok = NULL;
  l->ntok = l->cap = 0;
  l->line = 0;
}

int mkc_lines_next(mkc_lines *l) {
  while (l->cursor && *l->cursor) {
    char *line = l->cursor, *nl = strchr(line, '\n');
    if (nl) { *nl = 0; l->cursor = nl + 1; } else l->cursor = line + strlen(line);
    l->line++;
    l->ntok = 0;
    for (char *s = strtok(line, " \t\r"); s; s = strtok(NULL, " \t\r")) {
      if (l->ntok == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->tok = realloc(l->tok, sizeof *l->tok * (size_t)l->cap);
        if (!l->tok) abort();
      }
      l->tok[l->ntok++] = s;
    }
    if (l->ntok) return 1;
  }
  return 0;
}

void mkc_lines_free(mkc_lines *l) { free(l->tok); l->tok = NULL; }

char *mkc_read_all(int fd, size_t *len) {
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  if (!buf) return NULL;
  for (;;) {
    if (n + 1 >= cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) { free(buf); return NULL; }
      buf = nb;
    }
    ssize_t r = read(fd, buf + n, cap - n - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) { free(buf); return NULL; }
    if (r == 0) break;
    n += (size_t)r;
  }
  buf[n] = 0;
  if (len) *len = n;
  return buf;
}

/* common.c: element types, poison, hash64, plan lines, JSON text. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
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
  static const char *n[] = {"f32", "f64", "i32", "i64", "?"};
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

/* ---- hash64: four independent multiply-rotate lanes over 8-byte words --- */

uint64_t mkc_hash64(const void *data, size_t n) {
  const unsigned char *p = data;
  const uint64_t m = 0x9e3779b97f4a7c15ull;
  uint64_t a = 1, b = 2, c = 3, d = 4 ^ n;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint64_t w[4];
    memcpy(w, p + i, 32);
    a = ((a ^ w[0]) * m);
    a ^= a >> 29;
    b = ((b ^ w[1]) * m);
    b ^= b >> 29;
    c = ((c ^ w[2]) * m);
    c ^= c >> 29;
    d = ((d ^ w[3]) * m);
    d ^= d >> 29;
  }
  for (; i < n; i++) {
    a = (a ^ p[i]) * m;
    a ^= a >> 29;
  }
  uint64_t h = a ^ (b * 3) ^ (c * 5) ^ (d * 7);
  h ^= h >> 31;
  h *= m;
  h ^= h >> 33;
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
    if (nl) {
      *nl = 0;
      l->cursor = nl + 1;
    } else l->cursor = line + strlen(line);
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

void mkc_lines_free(mkc_lines *l) {
  free(l->tok);
  l->tok = NULL;
}

char *mkc_read_all(int fd, size_t *len) {
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  if (!buf) return NULL;
  for (;;) {
    if (n + 1 >= cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        return NULL;
      }
      buf = nb;
    }
    ssize_t r = read(fd, buf + n, cap - n - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      free(buf);
      return NULL;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  buf[n] = 0;
  if (len) *len = n;
  return buf;
}

/* ---- JSON text ---------------------------------------------------------- */

static void out_of_memory(void) {
  static const char msg[] = "out of memory\n";
  if (write(2, msg, sizeof msg - 1) < 0) abort();
  abort();
}

static void add(mk_buf *b, const char *s, size_t n) {
  if (mk_buf_add(b, s, n) != 0) out_of_memory();
}

void mkc_vprintf(mk_buf *b, const char *fmt, va_list ap) {
  char small[256], *p = small;
  va_list again;
  va_copy(again, ap);
  int need = vsnprintf(small, sizeof small, fmt, ap);
  if (need < 0) abort();
  if ((size_t)need >= sizeof small) {
    p = malloc((size_t)need + 1);
    if (!p) out_of_memory();
    vsnprintf(p, (size_t)need + 1, fmt, again);
  }
  va_end(again);
  add(b, p, (size_t)need);
  if (p != small) free(p);
}

void mkc_printf(mk_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mkc_vprintf(b, fmt, ap);
  va_end(ap);
}

void mkc_json_str(mk_buf *b, const char *s) {
  add(b, "\"", 1);
  while (*s) {
    size_t plain = 0; /* a run of bytes that need no escape */
    while (s[plain] && s[plain] != '"' && s[plain] != '\\' && (unsigned char)s[plain] >= 32) plain++;
    add(b, s, plain);
    s += plain;
    if (!*s) break;
    if (*s == '"' || *s == '\\') mkc_printf(b, "\\%c", *s);
    else mkc_printf(b, "\\u%04x", (unsigned char)*s);
    s++;
  }
  add(b, "\"", 1);
}

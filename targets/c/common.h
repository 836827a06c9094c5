/* common.h: what the C target's runner and checker share: element types,
 * the NaN poison patterns, a fast 64-bit hash (output blobs), the
 * whitespace-token plan reader and JSON text in a growable buffer (mk_buf,
 * engine/buf.h). SHA-256 (manifest) is the engine's,
 * engine/digest.h. */
#ifndef MKC_COMMON_H
#define MKC_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "buf.h"

typedef enum { MKC_F32, MKC_F64, MKC_I32, MKC_I64, MKC_BAD } mkc_dtype;

mkc_dtype mkc_dtype_parse(const char *s);
size_t mkc_dtype_size(mkc_dtype t);
const char *mkc_dtype_name(mkc_dtype t);

/* Output buffers are filled with these before each call: a quiet NaN with
 * a recognisable payload, so "never written" is told apart from "computed
 * NaN". Integer outputs get a constant that is unlikely as a result. */
#define MKC_POISON_F32 0x7fc0dadau
#define MKC_POISON_F64 0x7ff8dada0dada0daull
#define MKC_POISON_I32 0x5a5a5a5au
#define MKC_POISON_I64 0x5a5a5a5a5a5a5a5aull
void mkc_poison(void *buf, mkc_dtype t, size_t n);

/* Inline so the checker's and runner's element loops get specialised. */
static inline int mkc_is_poison(const void *buf, mkc_dtype t, size_t i) {
  switch (t) {
    case MKC_F32: return ((const uint32_t *)buf)[i] == MKC_POISON_F32;
    case MKC_I32: return ((const uint32_t *)buf)[i] == MKC_POISON_I32;
    case MKC_F64: return ((const uint64_t *)buf)[i] == MKC_POISON_F64;
    case MKC_I64: return ((const uint64_t *)buf)[i] == MKC_POISON_I64;
    default: return 0;
  }
}

static inline double mkc_get(const void *buf, mkc_dtype t, size_t i) {
  switch (t) {
    case MKC_F32: return ((const float *)buf)[i];
    case MKC_F64: return ((const double *)buf)[i];
    case MKC_I32: return ((const int32_t *)buf)[i];
    case MKC_I64: return (double)((const int64_t *)buf)[i];
    default: return 0;
  }
}

/* Non-cryptographic 64-bit hash of a byte range (several GB/s). */
uint64_t mkc_hash64(const void *data, size_t n);

/* Monotonic seconds. */
double mkc_now(void);

/* Split text into whitespace-separated tokens, line by line. */
typedef struct {
  char *text; /* owned copy, tokens point into it */
  char **tok; /* tokens of the current line */
  int ntok, cap;
  char *cursor;
  int line;
} mkc_lines;
void mkc_lines_init(mkc_lines *l, char *text);
int mkc_lines_next(mkc_lines *l); /* 1 when a non-empty line was read */
void mkc_lines_free(mkc_lines *l);

/* Append printf-style text to b; out of memory ends the program (abort:
 * the runner reports it as a crash, the engine sees no verdict). */
void mkc_printf(mk_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mkc_vprintf(mk_buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Append s as a JSON string: quoted, with '"', '\\' and control bytes escaped. */
void mkc_json_str(mk_buf *b, const char *s);

/* Read all of a stream / file; NUL-terminated, NULL on error. */
char *mkc_read_all(int fd, size_t *len);

#endif

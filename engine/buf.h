/* buf.h: the engine's one growable byte buffer (HTTP bodies and lines, the
 * knowledge-base arena and titles). Out of memory, an append fails and
 * leaves the buffer as it was; the owner decides what that means for its
 * caller (mk.http fails the transfer; mk.kb stops: see kb.c). */
#ifndef MK_BUF_H
#define MK_BUF_H

#include <stddef.h>

typedef struct {
  char *p; /* NULL until the first append; then always NUL-terminated */
  size_t n, cap;
} mk_buf;

/* Append n bytes of s (s may be NULL when n is 0): 0, or -1 when memory
 * ran out (nothing appended). Growth doubles, so appends are amortised O(1). */
int mk_buf_add(mk_buf *b, const void *s, size_t n);
/* Free the bytes; the buffer is empty and reusable. */
void mk_buf_free(mk_buf *b);

#endif

/* buf.c: mk_buf, the growable byte buffer; see buf.h. */
#include "buf.h"

#include <stdlib.h>
#include <string.h>

int mk_buf_add(mk_buf *b, const void *s, size_t n) {
  if (n > (size_t)-1 / 2 - b->n) return -1;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
  return 0;
}

void mk_buf_free(mk_buf *b) {
  free(b->p);
  b->p = NULL;
  b->n = b->cap = 0;
}

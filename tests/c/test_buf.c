/* test_buf.c: mk_buf, the engine's growable byte buffer: appends keep the
 * bytes NUL-terminated, growth past many doublings keeps every byte, an
 * append that cannot be satisfied fails and leaves the buffer as it was. */
#include "buf.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int passed, failed;

static void check(const char *name, int ok) {
  if (ok) passed++, printf("ok   buf/%s\n", name);
  else failed++, printf("FAIL buf/%s\n", name);
}

int main(void) {
  mk_buf b = {0};
  check("empty_until_first_append", b.p == NULL && b.n == 0);
  check("append_empty_terminates", mk_buf_add(&b, NULL, 0) == 0 && b.p && b.p[0] == 0 && b.n == 0);
  check("append_text", mk_buf_add(&b, "abc", 3) == 0 && b.n == 3 && !strcmp(b.p, "abc"));
  int ok = 1;
  for (int i = 0; i < 100000; i++) ok &= mk_buf_add(&b, "0123456789", 10) == 0;
  size_t sum = 0;
  for (size_t i = 3; i < b.n; i++) sum += (size_t)(b.p[i] - '0');
  check("grows_and_keeps_every_byte", ok && b.n == 3 + 1000000 && sum == 4500000 && b.p[b.n] == 0 && b.cap > b.n);
  size_t n = b.n;
  char first = b.p[0];
  check("impossible_append_fails_unchanged", mk_buf_add(&b, "x", SIZE_MAX - 4) == -1 && b.n == n && b.p[0] == first);
  mk_buf_free(&b);
  check("free_empties", b.p == NULL && b.n == 0 && b.cap == 0);
  check("reusable_after_free", mk_buf_add(&b, "z", 1) == 0 && !strcmp(b.p, "z"));
  mk_buf_free(&b);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}

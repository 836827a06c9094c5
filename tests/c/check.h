/* check.h: the counters and CHECK macro of the C tests that print one line
 * per check (test_proc.c, test_sched.c). */
#ifndef MK_TEST_CHECK_H
#define MK_TEST_CHECK_H
#include <stdio.h>

static int passed, failed;
#define CHECK(cond, name)                                                                                              \
  do {                                                                                                                 \
    if (cond) {                                                                                                        \
      passed++;                                                                                                        \
      printf("ok   %s\n", name);                                                                                       \
    } else {                                                                                                           \
      failed++;                                                                                                        \
      printf("FAIL %s (%s:%d)\n", name, __FILE__, __LINE__);                                                           \
    }                                                                                                                  \
  } while (0)
#endif

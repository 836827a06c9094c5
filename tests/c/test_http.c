/* test_http.c: runs the Lua suites of mk.http and mk.services.llm inside an engine
 * made here, so that the C test build (and its AddressSanitizer + UBSan
 * variant, which skips Lua tests) exercises engine/http.c: curl callbacks,
 * line buffering, cancellation, shutdown with handles open, and two engines
 * in one process. Needs python3 for the loopback fake server. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mk.h"

static int passed, failed;

static void run_file(const char *path) {
  mk_runtime *rt = mk_runtime_new();
  if (!rt) {
    failed++;
    printf("FAIL %s: cannot create an engine\n", path);
    return;
  }
  lua_State *L = mk_runtime_state(rt);
  int code;
  if (luaL_loadfile(L, path) != LUA_OK) {
    printf("FAIL %s: %s\n", path, lua_tostring(L, -1));
    lua_pop(L, 1);
    code = 1;
  } else {
    code = mk_runtime_run_main(rt, 0);
  }
  mk_runtime_free(rt);
  if (code == 0) {
    passed++;
    printf("ok   %s\n", path);
  } else {
    failed++;
    printf("FAIL %s (exit code %d)\n", path, code);
  }
}

int main(void) {
  const char *home = getenv("MKENGINE_HOME");
  if (home && chdir(home) != 0) {
    perror("chdir MKENGINE_HOME");
    return 1;
  }
  if (system("python3 -c pass >/dev/null 2>&1") != 0) {
    printf("skip: python3 is needed for the fake LLM server\n0 passed, 0 failed\n");
    return 0;
  }
  /* the fake key, as a user would export it */
  setenv("MK_FAKE_LLM_KEY", "sk-test-fake-123", 1);
  run_file("tests/lua/http_test.lua");
  run_file("tests/lua/llm_test.lua"); /* a second engine in the same process */
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

/* test_httpd.c: runs the Lua suite of the run viewer's server side
 * (tests/lua/ui_test.lua) inside an engine made here, so that the C test
 * build and its AddressSanitizer + UBSan variant (which skips Lua tests)
 * exercise engine/httpd.c and engine/stdin.c: parked and resumed
 * connections, streams, requests dropped unanswered, closing with streams
 * open, and shutting the engine down with the server's handles open. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mk.h"

int main(void) {
  const char *home = getenv("MKENGINE_HOME");
  if (home && chdir(home) != 0) {
    perror("chdir MKENGINE_HOME");
    return 1;
  }
  const char *path = "tests/lua/ui_test.lua";
  mk_runtime *rt = mk_runtime_new();
  if (!rt) {
    printf("FAIL: cannot create an engine\n0 passed, 1 failed\n");
    return 1;
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
  printf("%s %s\n%d passed, %d failed\n", code == 0 ? "ok  " : "FAIL", path, code == 0, code != 0);
  return code == 0 ? 0 : 1;
}

/* main.c: `mkengine ARGS...` hands argv to the Lua command line
 * (lua/mk/cli.lua) running as the engine's main task. */
#include <stdio.h>
#include <stdlib.h>

#include "mk.h"

int main(int argc, char **argv) {
  mk_runtime *rt = mk_runtime_new();
  if (!rt) {
    fprintf(stderr, "mkengine: cannot initialise the runtime\n");
    return 1;
  }
  lua_State *L = mk_runtime_state(rt);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "mk.cli");
  if (mk_pcall(L, 1, 1) != LUA_OK) {
    fprintf(stderr, "mkengine: cannot load the command line (is MKENGINE_HOME right?): %s\n", lua_tostring(L, -1));
    mk_runtime_free(rt);
    return 1;
  }
  lua_getfield(L, -1, "main");
  lua_remove(L, -2);
  lua_createtable(L, argc, 0);
  for (int i = 1; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i);
  }
  int code = mk_runtime_run_main(rt, 1);
  fflush(stdout);
  mk_runtime_free(rt);
  return code;
}

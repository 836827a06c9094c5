/* limits.c: `mk.limits`, a ceiling on the memory of the engine's Lua state,
 * so that code the engine loads but does not trust (a task's task.lua) can
 * be stopped when it allocates too much: past the ceiling an allocation
 * fails and Lua raises "not enough memory" where that code runs. The policy
 * (which code, how much, how long) is Lua's: mk.services.guard. */
#include "runtime.h"

/* memory([limit]) -> bytes in use, previous limit (0: none). With a limit
 * (bytes, 0 or nil for none) it replaces the ceiling. */
static int l_memory(lua_State *L) {
  mk_runtime *rt = mk_rt(L);
  size_t prev = rt->mem_limit;
  if (!lua_isnoneornil(L, 1)) {
    lua_Integer lim = luaL_checkinteger(L, 1);
    luaL_argcheck(L, lim >= 0, 1, "limit must be >= 0");
    rt->mem_limit = (size_t)lim;
  }
  lua_pushinteger(L, (lua_Integer)rt->mem_used);
  lua_pushinteger(L, (lua_Integer)prev);
  return 2;
}

int luaopen_mk_limits(lua_State *L) {
  static const luaL_Reg funcs[] = {{"memory", l_memory}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}

/* opts.c: options tables (see opts.h). */
#include "opts.h"

#include <lauxlib.h>

const char *mk_opt_string(lua_State *L, int t, const char *k, size_t *len, const char *who) {
  const char *v = NULL;
  if (lua_getfield(L, t, k) != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "%s: option '%s' must be a string", who, k);
    v = lua_tolstring(L, -1, len);
  }
  lua_pop(L, 1); /* the string stays alive: the table references it */
  return v;
}

double mk_opt_number(lua_State *L, int t, const char *k, double dflt, const char *who) {
  double v = dflt;
  if (lua_getfield(L, t, k) != LUA_TNIL) {
    if (!lua_isnumber(L, -1)) luaL_error(L, "%s: option '%s' must be a number", who, k);
    v = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

double mk_opt_nonneg(lua_State *L, int t, const char *k, double dflt, const char *who) {
  double v = mk_opt_number(L, t, k, dflt, who);
  if (v < 0) luaL_error(L, "%s: option '%s' must not be negative", who, k);
  return v;
}

int mk_opt_bool(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

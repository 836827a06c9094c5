/* runtime.c: creates the engine's lua_State and libuv loop (its home found
 * by home.c), preloads cjson and every mk.* C module, and installs the
 * protected-call helper. */
#include "runtime.h"

#include <lua-cjson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mk_modules.h"

mk_runtime *mk_rt(lua_State *L) { return *(mk_runtime **)lua_getextraspace(L); }
uv_loop_t *mk_loop(lua_State *L) { return &mk_rt(L)->loop; }
lua_State *mk_main_state(lua_State *L) { return mk_rt(L)->L; }
const char *mk_home(lua_State *L) { return mk_rt(L)->home; }
lua_State *mk_runtime_state(mk_runtime *rt) { return rt->L; }

int mk_push_error(lua_State *L, const char *kind, const char *fmt, ...) {
  lua_pushnil(L);
  lua_createtable(L, 0, 2);
  lua_pushstring(L, kind);
  lua_setfield(L, -2, "kind");
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_setfield(L, -2, "message");
  return 2;
}

static int msgh(lua_State *L) {
  if (lua_type(L, 1) == LUA_TTABLE) {
    luaL_traceback(L, L, NULL, 1);
    lua_setfield(L, 1, "traceback");
    lua_settop(L, 1);
    return 1;
  }
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) msg = lua_tostring(L, -1);
    else msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

int mk_pcall(lua_State *L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, msgh);
  lua_insert(L, base);
  int st = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  return st;
}

/* The Lua allocator: realloc/free, counting what it holds so that mk.limits
 * can bound the memory of code the engine does not trust (a task.lua). */
static void *counting_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  mk_runtime *rt = ud;
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    free(ptr);
    rt->mem_used -= old;
    return NULL;
  }
  if (rt->mem_limit && nsize > old && rt->mem_used + (nsize - old) > rt->mem_limit) return NULL;
  void *p = realloc(ptr, nsize);
  if (p) rt->mem_used = rt->mem_used - old + nsize;
  return p;
}

static int panic(lua_State *L) {
  fprintf(stderr, "mkengine: unprotected Lua error: %s\n", lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
  return 0; /* abort */
}

mk_runtime *mk_runtime_new(void) {
  mk_runtime *rt = calloc(1, sizeof *rt);
  if (!rt) return NULL;
  if (uv_loop_init(&rt->loop) != 0) {
    free(rt);
    return NULL;
  }
  mk_find_home(rt->home, sizeof rt->home);
  lua_State *L = lua_newstate(counting_alloc, rt);
  if (!L) {
    uv_loop_close(&rt->loop);
    free(rt);
    return NULL;
  }
  rt->L = L;
  lua_atpanic(L, panic);
  *(mk_runtime **)lua_getextraspace(L) = rt; /* copied into every new thread */
  luaL_openlibs(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_cjson);
  lua_setfield(L, -2, "cjson");
  for (const luaL_Reg *m = mk_modules; m->name; m++) {
    lua_pushcfunction(L, m->func);
    lua_setfield(L, -2, m->name);
  }
  lua_pop(L, 1);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/lua/?.lua;%s/lua/?/init.lua;%s", rt->home, rt->home, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 2);
  mk_sched_init(rt);
  /* mk.services.task wraps coroutine.resume/wrap so engine waits pass through user
   * coroutines: load it before any user code runs */
  lua_getglobal(L, "require");
  lua_pushliteral(L, "mk.services.task");
  if (mk_pcall(L, 1, 0) != LUA_OK) {
    fprintf(stderr, "mkengine: cannot load mk.services.task from %s/lua: %s\n", rt->home, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  return rt;
}

int mk_runtime_run_main(mk_runtime *rt, int nargs) { return mk_sched_run_main(rt, nargs); }

void mk_runtime_free(mk_runtime *rt) {
  if (!rt) return;
  mk_sched_shutdown(rt);
  lua_close(rt->L);
  mk_sched_shutdown(rt); /* handles closed by __gc of Lua objects */
  uv_loop_close(&rt->loop);
  free(rt);
}

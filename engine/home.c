/* home.c: where the engine lives. Finds the engine home (lua/, kb/,
 * targets/, examples/) and the helper programs that belong to the running
 * executable, relative to that executable, and provides `mk.home`. */
#include "mk.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_dir_with(const char *dir, const char *rel) {
  char p[PATH_MAX + 64];
  struct stat st;
  if (snprintf(p, sizeof p, "%s/%s", dir, rel) >= (int)sizeof p) return 0;
  return stat(p, &st) == 0;
}

static char exe_dir[PATH_MAX];
static uv_once_t exe_dir_once = UV_ONCE_INIT;

static void find_exe_dir(void) {
  char exe[PATH_MAX];
  size_t n = sizeof exe;
  if (uv_exepath(exe, &n) != 0) return;
  char *slash = strrchr(exe, '/');
  if (!slash) return;
  *slash = 0;
  snprintf(exe_dir, sizeof exe_dir, "%s", exe);
}

const char *mk_exe_dir(void) {
  uv_once(&exe_dir_once, find_exe_dir);
  return exe_dir;
}

/* 1 when dir/rel (rel may be NULL: no candidate) is an executable file;
 * its path is then in out. */
static int executable_at(const char *dir, const char *rel, char *out, size_t cap) {
  struct stat st;
  if (!rel || !*dir) return 0;
  int n = snprintf(out, cap, "%s/%s", dir, rel);
  return n > 0 && (size_t)n < cap && stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0;
}

int mk_find_helper(const char *build_rel, const char *install_rel, char *out, size_t cap) {
  const char *dir = mk_exe_dir();
  char prefix[PATH_MAX + 4];
  snprintf(prefix, sizeof prefix, "%s/..", dir);
  if (executable_at(dir, build_rel, out, cap) || executable_at(prefix, install_rel, out, cap)) return 0;
  return -1;
}

/* MKENGINE_HOME, else <exe>/../share/mkengine (installed), else the source
 * tree the binary was built from. */
void mk_find_home(char *out, size_t cap) {
  const char *env = getenv("MKENGINE_HOME");
  if (env && *env) {
    snprintf(out, cap, "%s", env);
    return;
  }
  const char *dir = mk_exe_dir();
  char cand[PATH_MAX], real[PATH_MAX];
  if (*dir && snprintf(cand, sizeof cand, "%s/../share/mkengine", dir) < (int)sizeof cand &&
      is_dir_with(cand, "lua/mk/cli.lua")) {
    snprintf(out, cap, "%s", realpath(cand, real) ? real : cand);
    return;
  }
  if (is_dir_with(MK_SOURCE_HOME, "lua/mk/cli.lua")) snprintf(out, cap, "%s", MK_SOURCE_HOME);
  else snprintf(out, cap, "%s", MK_INSTALL_HOME);
}

/* helper(build_rel, install_rel) -> absolute path | nil: see mk_find_helper */
static int home_helper(lua_State *L) {
  const char *build_rel = luaL_optstring(L, 1, NULL), *install_rel = luaL_optstring(L, 2, NULL);
  char out[PATH_MAX], real[PATH_MAX];
  if (mk_find_helper(build_rel, install_rel, out, sizeof out) != 0) return 0;
  lua_pushstring(L, realpath(out, real) ? real : out);
  return 1;
}

static int home_path(lua_State *L) {
  const char *rel = luaL_optstring(L, 1, "");
  if (!*rel) lua_pushstring(L, mk_home(L));
  else lua_pushfstring(L, "%s/%s", mk_home(L), rel);
  return 1;
}

int luaopen_mk_home(lua_State *L) {
  lua_createtable(L, 0, 6);
  lua_pushstring(L, mk_home(L));
  lua_setfield(L, -2, "home");
  lua_pushliteral(L, MK_VERSION);
  lua_setfield(L, -2, "version");
  lua_pushcfunction(L, home_path);
  lua_setfield(L, -2, "path");
  lua_pushcfunction(L, home_helper);
  lua_setfield(L, -2, "helper");
  char exe[4096];
  size_t n = sizeof exe;
  if (uv_exepath(exe, &n) == 0) { /* the running mkengine: local workers start it */
    lua_pushlstring(L, exe, n);
    lua_setfield(L, -2, "exe");
  }
  if (*mk_exe_dir()) {
    lua_pushstring(L, mk_exe_dir());
    lua_setfield(L, -2, "exe_dir");
  }
  return 1;
}

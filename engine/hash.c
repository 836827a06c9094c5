/* hash.c: `mk.hash`, the engine's SHA-256 for Lua (cache keys, frozen test
 * manifests). The digests are OpenSSL's (engine/digest.c, shared with the C
 * target's harness programs). */
#include "mk.h"
#include "digest.h"

#include <errno.h>
#include <string.h>

/* sha256(data) -> 64 hex digits */
static int l_sha256(lua_State *L) {
  size_t n;
  const char *data = luaL_checklstring(L, 1, &n);
  char hex[65];
  if (mk_sha256_hex(data, n, hex) != 0) return luaL_error(L, "sha256: libcrypto could not hash (out of memory?)");
  lua_pushlstring(L, hex, 64);
  return 1;
}

/* sha256_file(path) -> 64 hex digits | nil, {kind = "io", message} */
static int l_sha256_file(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  char hex[65];
  if (mk_sha256_file(path, hex) != 0) return mk_push_error(L, "io", "%s: %s", path, strerror(errno));
  lua_pushlstring(L, hex, 64);
  return 1;
}

int luaopen_mk_hash(lua_State *L) {
  static const luaL_Reg funcs[] = {{"sha256", l_sha256}, {"sha256_file", l_sha256_file}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}

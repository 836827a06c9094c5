/* test_sha256.c: the one SHA-256 (engine/sha256.c) against the FIPS 180-4
 * example digests, fed whole and in pieces that straddle block edges; the
 * file form (and its error); the Lua module mk.hash over it. */
#include "mk.h"
#include "sha256.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int luaopen_mk_hash(lua_State *L);

static int passed, failed;

static void check(const char *name, int ok, const char *detail) {
  if (ok) {
    passed++;
    printf("ok   sha256/%s\n", name);
  } else {
    failed++;
    printf("FAIL sha256/%s\n  %s\n", name, detail ? detail : "");
  }
}

static void digest(const void *data, size_t n, size_t piece, char out[65]) {
  mk_sha256 s;
  mk_sha256_init(&s);
  const unsigned char *p = data;
  for (size_t off = 0; off < n; off += piece) mk_sha256_update(&s, p + off, n - off < piece ? n - off : piece);
  mk_sha256_hex(&s, out);
}

static const struct {
  const char *name, *msg, *want;
} vectors[] = {
  {"empty", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
  {"abc", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
  {"two_blocks", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
   "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
};
static const char *MILLION_A = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

int main(void) {
  char hex[65];
  for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
    digest(vectors[i].msg, strlen(vectors[i].msg), 1 << 20, hex);
    check(vectors[i].name, !strcmp(hex, vectors[i].want), hex);
  }

  size_t n = 1000000;
  char *a = malloc(n);
  memset(a, 'a', n);
  static const size_t pieces[] = {1, 55, 56, 63, 64, 65, 4096, 1000000};
  for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
    char name[64];
    snprintf(name, sizeof name, "million_a_in_pieces_of_%zu", pieces[i]);
    digest(a, n, pieces[i], hex);
    check(name, !strcmp(hex, MILLION_A), hex);
  }

  char path[] = "/tmp/mk-sha256-test-XXXXXX";
  int fd = mkstemp(path);
  int wrote = fd >= 0 && write(fd, a, n) == (ssize_t)n;
  if (fd >= 0) close(fd);
  check("file_matches_memory", wrote && mk_sha256_file(path, hex) == 0 && !strcmp(hex, MILLION_A), hex);

  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "mk.hash", luaopen_mk_hash, 0);
  lua_pop(L, 1);
  lua_pushstring(L, path);
  lua_setglobal(L, "PATH");
  const char *lua =
    "local hash = require 'mk.hash'\n"
    "assert(hash.sha256('abc') == 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')\n"
    "assert(hash.sha256(('a'):rep(1000000)) == hash.sha256_file(PATH))\n"
    "local v, err = hash.sha256_file(PATH .. '.missing')\n"
    "assert(v == nil and err.kind == 'io' and err.message:find('No such file', 1, true), err and err.message)\n"
    "assert(not pcall(hash.sha256, {}))\n";
  int ok = luaL_dostring(L, lua) == LUA_OK;
  check("lua_module", ok, ok ? NULL : lua_tostring(L, -1));
  lua_close(L);
  unlink(path);

  errno = 0;
  check("missing_file_is_an_error", mk_sha256_file("/nonexistent/mk-sha256", hex) == -1 && errno == ENOENT, NULL);
  free(a);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}

/* test_hash.c: the engine's SHA-256 (engine/digest.c over libcrypto)
 * against the FIPS 180-4 example digests, of memory and of files (empty,
 * one read, many reads) and its error; the Lua module mk.hash over it. */
#include "mk.h"
#include "digest.h"

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
    printf("ok   hash/%s\n", name);
  } else {
    failed++;
    printf("FAIL hash/%s\n  %s\n", name, detail ? detail : "");
  }
}

/* SHA-256 of n bytes written to a temporary file; 0 ok. */
static int file_digest(const void *data, size_t n, char out[65]) {
  char path[] = "/tmp/mk-hash-test-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return -1;
  int wrote = write(fd, data, n) == (ssize_t)n;
  close(fd);
  int rc = wrote ? mk_sha256_file(path, out) : -1;
  unlink(path);
  return rc;
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
    char name[64];
    int ok = mk_sha256_hex(vectors[i].msg, strlen(vectors[i].msg), hex) == 0;
    check(vectors[i].name, ok && !strcmp(hex, vectors[i].want), hex);
    snprintf(name, sizeof name, "%s_as_a_file", vectors[i].name);
    ok = file_digest(vectors[i].msg, strlen(vectors[i].msg), hex) == 0;
    check(name, ok && !strcmp(hex, vectors[i].want), hex);
  }

  /* a million 'a': the file form reads it in many 64 KiB pieces */
  size_t n = 1000000;
  char *a = malloc(n);
  memset(a, 'a', n);
  check("million_a", mk_sha256_hex(a, n, hex) == 0 && !strcmp(hex, MILLION_A), hex);

  char path[] = "/tmp/mk-hash-test-XXXXXX";
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
  check("missing_file_is_an_error", mk_sha256_file("/nonexistent/mk-hash", hex) == -1 && errno == ENOENT, NULL);
  free(a);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}

/* sha256.h: the one SHA-256 of the project (FIPS 180-4), plain C with no
 * dependency, so the engine (Lua: mk.hash) and the C target's standalone
 * harness programs (targets/c: mkc-check, mkc-run) compile the same file. */
#ifndef MK_SHA256_H
#define MK_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint32_t h[8];
  uint64_t len;
  unsigned char buf[64];
  size_t fill;
} mk_sha256;

void mk_sha256_init(mk_sha256 *s);
void mk_sha256_update(mk_sha256 *s, const void *data, size_t n);
/* Finish and write the digest as 64 lower-case hex digits + NUL. */
void mk_sha256_hex(mk_sha256 *s, char out[65]);
/* SHA-256 of a whole file as hex; 0 ok, -1 cannot open or read (errno set).
 * Built with MK_SHA256_LIBCRYPTO (mkc-check does), OpenSSL's libcrypto does
 * the hashing: SHA-NI where the CPU has it, several times faster on the
 * frozen expected outputs the checker hashes before every check. */
int mk_sha256_file(const char *path, char out[65]);

#endif

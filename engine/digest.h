/* digest.h: SHA-256 of memory and of files through OpenSSL's libcrypto
 * (EVP; SHA-NI where the CPU has it). Plain C with no Lua, so the engine
 * (Lua: mk.hash) and the C target's standalone harness programs
 * (targets/c: mkc-check) compile the same file. */
#ifndef MK_DIGEST_H
#define MK_DIGEST_H

#include <stddef.h>

/* SHA-256 of n bytes as 64 lower-case hex digits + NUL; 0 ok, -1 when
 * libcrypto fails (out of memory). */
int mk_sha256_hex(const void *data, size_t n, char out[65]);

/* SHA-256 of a whole file as hex; 0 ok, -1 cannot open or read (errno
 * set) or libcrypto failed (errno EIO). Safe to call from several threads. */
int mk_sha256_file(const char *path, char out[65]);

#endif

/* digest.c: SHA-256 through OpenSSL's EVP interface; see digest.h. */
#include "digest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

static void to_hex(const unsigned char md[32], char out[65]) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  out[64] = 0;
}

/* A context ready for SHA-256 input, or NULL. */
static EVP_MD_CTX *sha256_begin(void) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1) return ctx;
  EVP_MD_CTX_free(ctx);
  return NULL;
}

/* Finish ctx into out and free it; 0 ok, -1 failed. */
static int sha256_end(EVP_MD_CTX *ctx, char out[65]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  int ok = EVP_DigestFinal_ex(ctx, md, &len) == 1 && len == 32;
  EVP_MD_CTX_free(ctx);
  if (ok) to_hex(md, out);
  return ok ? 0 : -1;
}

int mk_sha256_hex(const void *data, size_t n, char out[65]) {
  EVP_MD_CTX *ctx = sha256_begin();
  if (!ctx) return -1;
  if (EVP_DigestUpdate(ctx, data, n) != 1) {
    EVP_MD_CTX_free(ctx);
    return -1;
  }
  return sha256_end(ctx, out);
}

/* Feed the rest of fd into ctx; 0 at end of file, -1 on a read error. */
static int update_from_fd(EVP_MD_CTX *ctx, int fd) {
  unsigned char buf[1 << 16]; /* on the stack: callers may run on several threads */
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? 0 : -1;
    if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1) {
      errno = EIO;
      return -1;
    }
  }
}

int mk_sha256_file(const char *path, char out[65]) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  EVP_MD_CTX *ctx = sha256_begin();
  int rc = ctx ? update_from_fd(ctx, fd) : -1;
  int saved = ctx ? errno : EIO;
  close(fd);
  if (rc != 0) {
    EVP_MD_CTX_free(ctx);
    errno = saved;
    return -1;
  }
  if (sha256_end(ctx, out) != 0) {
    errno = EIO;
    return -1;
  }
  return 0;
}

/* loose.c: git loose objects written straight into an objects directory
 * (see loose.h). Every path is relative to the open directory, so no call
 * walks the repository's whole path again. */
#define _GNU_SOURCE
#include "loose.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

int mk_loose_open(mk_loose *lo, const char *objects_dir) {
  lo->seq = 0;
  lo->pid = (long)getpid();
  lo->z = lo->md = NULL;
  lo->dirfd = open(objects_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return lo->dirfd < 0 ? -1 : 0;
}

void mk_loose_close(mk_loose *lo) {
  if (lo->dirfd >= 0) close(lo->dirfd);
  lo->dirfd = -1;
  if (lo->z) deflateEnd(lo->z);
  free(lo->z);
  EVP_MD_CTX_free(lo->md);
  lo->z = lo->md = NULL;
}

/* SHA-1 through one context and one fetched digest kept for the whole
 * graph: OpenSSL 3 looks EVP_sha1() up again at every init. */
static int sha1_of(mk_loose *lo, unsigned char id[20], const char *hdr, size_t hn, const void *data, size_t len) {
  static EVP_MD *sha1;
  if (!sha1) sha1 = EVP_MD_fetch(NULL, "SHA1", NULL);
  if (!lo->md) lo->md = EVP_MD_CTX_new();
  EVP_MD_CTX *c = lo->md;
  unsigned int n = 0;
  int ok = sha1 && c && EVP_DigestInit_ex(c, sha1, NULL) && EVP_DigestUpdate(c, hdr, hn) &&
           EVP_DigestUpdate(c, data, len) && EVP_DigestFinal_ex(c, id, &n);
  if (!ok || n != 20) {
    errno = EIO;
    return -1;
  }
  return 0;
}

/* The z_stream kept in lo (git's fastest level, as libgit2 writes),
 * reset for a new object: its ~270 KB of state is allocated once. */
static z_stream *zstream(mk_loose *lo) {
  if (lo->z) return deflateReset(lo->z) == Z_OK ? lo->z : NULL;
  z_stream *z = calloc(1, sizeof *z);
  if (z && deflateInit(z, Z_BEST_SPEED) != Z_OK) {
    free(z);
    z = NULL;
  }
  return lo->z = z;
}

/* zlib stream of header + data: a malloc'd buffer in *out (the caller
 * frees it) of *outn bytes. */
static int deflate_object(mk_loose *lo, unsigned char **out, size_t *outn, const char *hdr, size_t hn, const void *data,
                          size_t len) {
  if (len > UINT_MAX - 64) {
    errno = EFBIG;
    return -1;
  }
  z_stream *z = zstream(lo);
  if (!z) {
    errno = ENOMEM;
    return -1;
  }
  uLong cap = deflateBound(z, (uLong)(hn + len));
  unsigned char *buf = malloc(cap);
  int rc = -1;
  if (buf) {
    z->next_out = buf;
    z->avail_out = (uInt)cap;
    z->next_in = (Bytef *)hdr;
    z->avail_in = (uInt)hn;
    if (deflate(z, Z_NO_FLUSH) == Z_OK) {
      z->next_in = (Bytef *)data;
      z->avail_in = (uInt)len;
      if (deflate(z, Z_FINISH) == Z_STREAM_END) rc = 0;
    }
  }
  if (rc < 0) {
    free(buf);
    errno = ENOMEM;
    return -1;
  }
  *out = buf;
  *outn = z->total_out;
  return 0;
}

static int write_all(int fd, const unsigned char *p, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* fsync the directory `name` (relative to dirfd). */
static int sync_dir(int dirfd, const char *name) {
  int d = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0) return -1;
  int rc = fsync(d);
  close(d);
  return rc;
}

/* The temporary file holding z[0..zn), renamed to `path` (xx/yyyy...);
 * the fan-out directory xx is made when missing. */
static int place(mk_loose *lo, const char *path, const unsigned char *z, size_t zn, int durable) {
  char tmp[80];
  snprintf(tmp, sizeof tmp, "tmp_object_git2_mk%ld_%lu", lo->pid, ++lo->seq);
  int fd = openat(lo->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
  if (fd < 0) return -1;
  int ok = write_all(fd, z, zn) == 0 && (!durable || fsync(fd) == 0);
  int e = errno;
  ok = close(fd) == 0 && ok;
  char dir[3] = {path[0], path[1], 0};
  int made = 0;
  if (ok && renameat(lo->dirfd, tmp, lo->dirfd, path) < 0) {
    ok = errno == ENOENT && ((made = mkdirat(lo->dirfd, dir, 0755) == 0) || errno == EEXIST) &&
         renameat(lo->dirfd, tmp, lo->dirfd, path) == 0;
    e = errno;
  }
  if (ok && durable) ok = sync_dir(lo->dirfd, dir) == 0 && (!made || sync_dir(lo->dirfd, ".") == 0);
  if (!ok) {
    unlinkat(lo->dirfd, tmp, 0);
    errno = e;
    return -1;
  }
  return 0;
}

int mk_loose_put(mk_loose *lo, const char *type, const void *data, size_t len, int durable, unsigned char id[20]) {
  char hdr[64];
  size_t hn = (size_t)snprintf(hdr, sizeof hdr, "%s %zu", type, len) + 1; /* with its NUL */
  if (sha1_of(lo, id, hdr, hn, data, len) < 0) return -1;
  char path[44];
  static const char hexd[] = "0123456789abcdef";
  for (int i = 0, k = 0; i < 20; i++) {
    path[k++] = hexd[id[i] >> 4];
    path[k++] = hexd[id[i] & 15];
    if (i == 0) path[k++] = '/';
  }
  path[41] = 0;
  if (faccessat(lo->dirfd, path, F_OK, 0) == 0) return 0;
  unsigned char *z = NULL;
  size_t zn = 0;
  if (deflate_object(lo, &z, &zn, hdr, hn, data, len) < 0) return -1;
  int rc = place(lo, path, z, zn, durable);
  int e = errno;
  free(z);
  errno = e;
  return rc;
}

/* loose.h: git loose objects written straight into an objects directory,
 * for the node graph's commits (engine/git.c). libgit2's loose backend
 * spends more system calls than the object itself on a tmpfs or a disk
 * (full-path lookups, directory checks, link + unlink); this writes one
 * object as: a check that it is there, a temporary file, one rename. */
#ifndef MK_LOOSE_H
#define MK_LOOSE_H

#include <stddef.h>

typedef struct {
  int dirfd;         /* the objects directory, open; -1 when closed */
  unsigned long seq; /* numbers the temporary files */
  long pid;          /* names them too (the engine does not fork) */
  void *z;           /* a z_stream kept from object to object (deflateReset): NULL until the first */
  void *md;          /* an EVP_MD_CTX kept likewise */
} mk_loose;

/* Open the objects directory: 0, or -1 with errno. mk_loose_close frees
 * what mk_loose_put keeps between objects. */
int mk_loose_open(mk_loose *lo, const char *objects_dir);
void mk_loose_close(mk_loose *lo);

/* Store an object of git type `type` ("blob", "tree", "commit") and put
 * its id (SHA-1 of "<type> <len>\0" + data) in id. An object already there
 * (loose) is kept. Written as git does: zlib, a temporary file named
 * tmp_object_git2_* in the objects directory (what a kill can leave
 * behind: mk.search.graph removes them), then renamed to xx/yyyy...; with
 * `durable`, the file and its directory are fsynced first. 0, or -1 with
 * errno set (EFBIG: too large for one zlib call, ENOMEM, EIO: libcrypto). */
int mk_loose_put(mk_loose *lo, const char *type, const void *data, size_t len, int durable, unsigned char id[20]);

#endif

/* git.c: `mk.git`, the small slice of libgit2 the node graph needs: open or
 * create a bare repository, write a commit from an in-memory file table with
 * any number of parents, create/move/list refs, read files at a commit, and
 * diff two commits (patch text and stat). Everything is synchronous: these
 * are local operations on loose objects that take microseconds to a
 * millisecond, far below what an op/yield round trip would be worth.
 *
 * Errors: argument mistakes raise; libgit2 failures return nil, {kind,
 * message} where message is libgit2's own text. libgit2 keeps its last error
 * per thread, so it is read right after the failing call, on the same
 * thread. */
#include "mk.h"
#include "buf.h"
#include "loose.h"

#include <git2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REPO_MT "mk.git.repo"

typedef struct {
  git_repository *repo;
  mk_loose lo;   /* the objects directory, written directly (repo_commit) */
  int packed_ok; /* packed-refs checked for appending (packed_prepare) */
} mk_git_repo;

static int fsync_on; /* git.fsync's setting */

static pthread_once_t git_once = PTHREAD_ONCE_INIT;

static void git_init_once(void) {
  git_libgit2_init();
  /* commits are built from trees and parents this module just wrote or
   * resolved, so libgit2 need not look each up again */
  git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0);
}

/* Map a libgit2 error code to an error kind strategy code can switch on. */
static const char *kind_of(int code) {
  switch (code) {
    case GIT_ENOTFOUND: return "not_found";
    case GIT_EEXISTS: return "exists";
    case GIT_ELOCKED: return "locked";
    case GIT_EINVALIDSPEC: return "invalid";
    case GIT_EAMBIGUOUS: return "ambiguous";
    default: return "git";
  }
}

/* Push nil, {kind, message} with libgit2's message for the failed call. */
static int push_git_error(lua_State *L, int code, const char *what) {
  const git_error *e = git_error_last();
  const char *msg = (e && e->message) ? e->message : "unknown libgit2 error";
  return mk_push_error(L, kind_of(code), "%s: %s", what, msg);
}

static mk_git_repo *check_repo(lua_State *L, int idx) {
  mk_git_repo *r = luaL_checkudata(L, idx, REPO_MT);
  if (!r->repo) luaL_argerror(L, idx, "repository is closed");
  return r;
}

static void push_oid(lua_State *L, const git_oid *oid) {
  char hex[GIT_OID_HEXSZ + 1];
  git_oid_tostr(hex, sizeof hex, oid);
  lua_pushstring(L, hex);
}

static mk_git_repo *new_repo_udata(lua_State *L) {
  mk_git_repo *r = lua_newuserdatauv(L, sizeof *r, 0);
  r->repo = NULL;
  r->lo.dirfd = -1;
  r->lo.z = r->lo.md = NULL;
  r->packed_ok = 0;
  luaL_setmetatable(L, REPO_MT);
  return r;
}

static int mkdirs(const char *path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n >= sizeof buf) return -1;
  memcpy(buf, path, n + 1);
  for (char *p = buf + 1; *p; p++) {
    if (*p == '/') {
      *p = 0;
      mkdir(buf, 0755);
      *p = '/';
    }
  }
  mkdir(buf, 0755);
  return 0;
}

/* git.init(path) -> repo | nil, err: create (or reopen) a bare repository
 * whose HEAD points at refs/heads/best. */
static int l_init(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  mk_git_repo *r = new_repo_udata(L);
  mkdirs(path);
  git_repository_init_options opts;
  git_repository_init_options_init(&opts, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
  opts.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_MKPATH;
  opts.initial_head = "best";
  opts.description = "mkengine node graph: refs/nodes/<id> per node, refs/heads/best = fastest correct node\n";
  int rc = git_repository_init_ext(&r->repo, path, &opts);
  if (rc < 0) return push_git_error(L, rc, "cannot create repository");
  return 1;
}

/* git.open(path) -> repo | nil, err: open an existing bare repository, never
 * searching parent directories (a run directory must hold its own). */
static int l_open(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  mk_git_repo *r = new_repo_udata(L);
  int rc = git_repository_open_ext(&r->repo, path, GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE, NULL);
  if (rc < 0) return push_git_error(L, rc, "cannot open repository");
  return 1;
}

/* git.fsync(on): process-wide; when on, libgit2 fsyncs objects and refs so a
 * commit survives power loss (a kill -9 needs no fsync). */
static int l_fsync(lua_State *L) {
  int on = lua_toboolean(L, 1);
  git_libgit2_opts(GIT_OPT_ENABLE_FSYNC_GITDIR, on);
  fsync_on = on;
  return 0;
}

/* git.hash(data) -> hex id of data as a git blob (SHA-1 over "blob N\0"
 * + data): the content address that worker task shipping uses. */
static int l_hash(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  git_oid oid;
  if (git_odb_hash(&oid, s, n, GIT_OBJECT_BLOB) < 0) return luaL_error(L, "git.hash: cannot hash");
  char hex[GIT_OID_HEXSZ + 1];
  git_oid_tostr(hex, sizeof hex, &oid);
  lua_pushstring(L, hex);
  return 1;
}

static int l_version(lua_State *L) {
  int major, minor, rev;
  git_libgit2_version(&major, &minor, &rev);
  lua_pushfstring(L, "%d.%d.%d", major, minor, rev);
  return 1;
}

static int repo_close(lua_State *L) {
  mk_git_repo *r = luaL_checkudata(L, 1, REPO_MT);
  mk_loose_close(&r->lo);
  if (r->repo) {
    git_repository_free(r->repo);
    r->repo = NULL;
  }
  return 0;
}

static int repo_path(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  lua_pushstring(L, git_repository_path(r->repo));
  return 1;
}

static int repo_tostring(lua_State *L) {
  mk_git_repo *r = luaL_checkudata(L, 1, REPO_MT);
  if (r->repo) lua_pushfstring(L, "mk.git.repo(%s)", git_repository_path(r->repo));
  else lua_pushstring(L, "mk.git.repo(closed)");
  return 1;
}

/* A path inside a tree: relative, no empty, "." or ".." components. */
static int valid_path(const char *p) {
  if (!*p || *p == '/') return 0;
  const char *s = p;
  while (*s) {
    const char *e = strchr(s, '/');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return 0;
    if (n == 4 && memcmp(s, ".git", 4) == 0) return 0;
    if (!e) break;
    s = e + 1;
  }
  return 1;
}

/* Resolve a revision (hex oid, ref name, "best", "refs/nodes/n0001") to a
 * commit. Returns 0 or a libgit2 error code. */
static int lookup_commit(git_repository *repo, const char *spec, git_commit **out) {
  git_object *obj = NULL;
  int rc = git_revparse_single(&obj, repo, spec);
  if (rc < 0) return rc;
  rc = git_object_peel((git_object **)out, obj, GIT_OBJECT_COMMIT);
  git_object_free(obj);
  return rc;
}

/* The tree of the commit spec names; on failure *what says which step. */
static int lookup_tree(git_repository *repo, const char *spec, git_tree **out, const char **what) {
  git_commit *c = NULL;
  *what = "cannot find commit";
  int rc = lookup_commit(repo, spec, &c);
  if (rc < 0) return rc;
  *what = "cannot read tree";
  rc = git_commit_tree(out, c);
  git_commit_free(c);
  return rc;
}

/* Raise on a bad files table (path or data) or parents list, before
 * anything is written: an argument mistake must leave the repository as it
 * was. */
static void check_commit_args(lua_State *L, int files, int parents_idx, size_t nparents) {
  lua_pushnil(L);
  while (lua_next(L, files)) {
    if (lua_type(L, -2) != LUA_TSTRING || !valid_path(lua_tostring(L, -2)))
      luaL_argerror(L, 2,
                    lua_pushfstring(L, "bad file path '%s'",
                                    lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : luaL_typename(L, -2)));
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_argerror(L, 2, lua_pushfstring(L, "file '%s' must be a string", lua_tostring(L, -2)));
    lua_pop(L, 1);
  }
  for (size_t i = 1; i <= nparents; i++) {
    if (lua_rawgeti(L, parents_idx, (lua_Integer)i) != LUA_TSTRING) luaL_argerror(L, 2, "parents must be strings");
    lua_pop(L, 1);
  }
}

/* ---- objects written straight to the objects directory -------------------
 * git_odb_write first tries to "freshen" an existing copy of the object
 * and, finding none, rescans the pack directory; libgit2's loose backend
 * then walks the repository's whole path in every call and places a file
 * with link + unlink: for a node's five objects more system calls than
 * anything else a node costs. The graph only adds objects, so repo_commit
 * writes them with mk_loose (loose.c): an object already there (loose) is
 * kept, a new one is written as git writes loose objects (zlib, a
 * temporary file, then its final name). The tree and commit are
 * serialised here in git's format. */

/* Hash and store one object: 0 or a libgit2 error. */
static int put_object(mk_git_repo *r, git_oid *oid, const void *data, size_t len, git_object_t type) {
  if (r->lo.dirfd < 0) {
    char dir[4096];
    const char *gp = git_repository_path(r->repo); /* ends with '/' */
    if ((size_t)snprintf(dir, sizeof dir, "%sobjects", gp) >= sizeof dir) errno = ENAMETOOLONG;
    else mk_loose_open(&r->lo, dir);
    if (r->lo.dirfd < 0) {
      git_error_set_str(GIT_ERROR_OS, strerror(errno));
      return -1;
    }
  }
  unsigned char id[GIT_OID_RAWSZ];
  if (mk_loose_put(&r->lo, git_object_type2string(type), data, len, fsync_on, id) < 0) {
    git_error_set_str(GIT_ERROR_OS, strerror(errno));
    return -1;
  }
  return git_oid_fromraw(oid, id);
}

typedef struct {
  const char *path;
  git_oid oid;
} file_ent;

typedef struct {
  const char *name;
  size_t len;
  int is_tree;
  git_oid oid;
} tree_item;

static int cmp_path(const void *a, const void *b) {
  return strcmp(((const file_ent *)a)->path, ((const file_ent *)b)->path);
}

/* git's tree order: byte order of the names, a tree's name as if it ended
 * in '/'. */
static int cmp_item(const void *pa, const void *pb) {
  const tree_item *a = pa, *b = pb;
  size_t n = a->len < b->len ? a->len : b->len;
  int c = memcmp(a->name, b->name, n);
  if (c) return c;
  unsigned char ca = a->len > n ? (unsigned char)a->name[n] : (a->is_tree ? '/' : 0);
  unsigned char cb = b->len > n ? (unsigned char)b->name[n] : (b->is_tree ? '/' : 0);
  return (int)ca - (int)cb;
}

/* The tree of ents[0..n) (sorted by path), whose paths all start with
 * `skip` bytes of directory prefix: sub-trees first, recursively. */
static int write_tree_of(mk_git_repo *r, file_ent *ents, size_t n, size_t skip, git_oid *out) {
  tree_item *items = calloc(n ? n : 1, sizeof *items);
  if (!items) return -1;
  size_t ni = 0;
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0;) {
    const char *rest = ents[i].path + skip;
    const char *slash = strchr(rest, '/');
    tree_item *it = &items[ni++];
    it->name = rest;
    if (!slash) {
      it->len = strlen(rest);
      it->oid = ents[i].oid;
      i++;
      continue;
    }
    /* every entry of this sub-directory: contiguous in path order */
    size_t dl = (size_t)(slash - rest), j = i;
    while (j < n && strncmp(ents[j].path + skip, rest, dl + 1) == 0) j++;
    it->len = dl;
    it->is_tree = 1;
    rc = write_tree_of(r, ents + i, j - i, skip + dl + 1, &it->oid);
    i = j;
  }
  for (size_t i = 1; i < ni && rc == 0; i++) /* a file and a directory of one name */
    if (items[i].len == items[i - 1].len && memcmp(items[i].name, items[i - 1].name, items[i].len) == 0) {
      git_error_set_str(GIT_ERROR_INVALID, "a path is both a file and a directory");
      rc = GIT_EINVALID;
    }
  qsort(items, ni, sizeof *items, cmp_item);
  mk_buf b = {0};
  for (size_t i = 0; i < ni && rc == 0; i++) {
    const char *mode = items[i].is_tree ? "40000 " : "100644 ";
    if (mk_buf_add(&b, mode, strlen(mode)) || mk_buf_add(&b, items[i].name, items[i].len) || mk_buf_add(&b, "", 1) ||
        mk_buf_add(&b, items[i].oid.id, GIT_OID_RAWSZ))
      rc = -1;
  }
  if (rc == 0) rc = put_object(r, out, b.p ? b.p : "", b.n, GIT_OBJECT_TREE);
  mk_buf_free(&b);
  free(items);
  return rc;
}

/* Blobs for the files of the table at `files` and their tree. */
static int write_files(lua_State *L, mk_git_repo *r, int files, git_oid *tree_id, const char **what) {
  size_t n = 0;
  lua_pushnil(L);
  while (lua_next(L, files)) {
    n++;
    lua_pop(L, 1);
  }
  file_ent *ents = calloc(n ? n : 1, sizeof *ents);
  if (!ents) return -1;
  size_t k = 0;
  int rc = 0;
  lua_pushnil(L);
  while (lua_next(L, files)) {
    size_t len;
    const char *data = lua_tolstring(L, -1, &len);
    ents[k].path = lua_tostring(L, -2); /* the key stays in the table */
    rc = put_object(r, &ents[k].oid, data, len, GIT_OBJECT_BLOB);
    k++;
    lua_pop(L, 1);
    if (rc < 0) {
      lua_pop(L, 1);
      *what = "cannot write file";
      break;
    }
  }
  if (rc == 0) {
    qsort(ents, n, sizeof *ents, cmp_path);
    rc = write_tree_of(r, ents, n, 0, tree_id);
    if (rc < 0) *what = "cannot write tree";
  }
  free(ents);
  return rc;
}

/* ---- refs appended to packed-refs -----------------------------------------
 * A loose ref is a file created, written and renamed into place: on a real
 * disk, as costly as the objects of a node. A new ref can instead be one
 * line appended to packed-refs. git and libgit2 both accept a packed-refs
 * without the "sorted" trait in any order (they sort it when they read it),
 * so the trait is dropped before the first append; a line cut short by a
 * crash (only a power loss can tear a write this small) is cut off before
 * the file is read again. libgit2 may still rewrite the whole file (pack
 * refs, delete a ref) with a lock and a rename: each append opens the file
 * anew, so no line goes to a replaced copy. */

static int packed_path(mk_git_repo *r, char *buf, size_t n) {
  return (size_t)snprintf(buf, n, "%spacked-refs", git_repository_path(r->repo)) < n ? 0 : -1;
}

/* Write data as path's new content: a temporary file renamed over it. */
static int replace_file(const char *path, const char *data, size_t n) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.lock", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  int ok = write(fd, data, n) == (ssize_t)n && (!fsync_on || fsync(fd) == 0);
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) < 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* Make packed-refs ready for appending: no "sorted" trait, no torn last
 * line. Returns 0 (as it was), 1 (trait dropped), 2 (a torn line cut off
 * too) or -1 on failure. */
static int packed_prepare(mk_git_repo *r) {
  char path[4096];
  if (packed_path(r, path, sizeof path)) return -1;
  FILE *f = fopen(path, "rb");
  if (!f) return errno == ENOENT ? 0 : -1;
  mk_buf b = {0};
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
    if (mk_buf_add(&b, chunk, n)) break;
  int bad = ferror(f) || n > 0;
  fclose(f);
  if (bad) {
    mk_buf_free(&b);
    return -1;
  }
  size_t keep = b.n;
  while (keep > 0 && b.p[keep - 1] != '\n') keep--; /* a torn last line */
  int torn = keep != b.n;
  char *eol = keep ? memchr(b.p, '\n', keep) : NULL;
  char *sorted = NULL;
  if (eol && b.p[0] == '#') {
    for (char *q = b.p; q + 8 <= eol; q++)
      if (memcmp(q, " sorted ", 8) == 0 || (memcmp(q, " sorted", 7) == 0 && q + 7 == eol)) sorted = q;
  }
  int rc = 0;
  if (keep != b.n || sorted) {
    if (sorted) { /* drop " sorted" (7 bytes): the rest of the header stays */
      memmove(sorted, sorted + 7, keep - (size_t)(sorted + 7 - b.p));
      keep -= 7;
    }
    rc = replace_file(path, b.p ? b.p : "", keep) < 0 ? -1 : 1 + torn;
  }
  mk_buf_free(&b);
  return rc;
}

/* Append "<oid> <name>\n" to packed-refs (created with a header if new). */
static int packed_append(mk_git_repo *r, const char *name, const git_oid *oid) {
  if (!r->packed_ok) {
    if (packed_prepare(r) < 0) return -1;
    r->packed_ok = 1;
  }
  char path[4096];
  if (packed_path(r, path, sizeof path)) return -1;
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  mk_buf b = {0};
  struct stat st;
  int ok = fstat(fd, &st) == 0;
  if (ok && st.st_size == 0) ok = !mk_buf_add(&b, "# pack-refs with: peeled fully-peeled \n", 39);
  char hex[GIT_OID_HEXSZ + 1];
  git_oid_tostr(hex, sizeof hex, oid);
  ok = ok && !mk_buf_add(&b, hex, GIT_OID_HEXSZ) && !mk_buf_add(&b, " ", 1) && !mk_buf_add(&b, name, strlen(name)) &&
       !mk_buf_add(&b, "\n", 1);
  ok = ok && write(fd, b.p, b.n) == (ssize_t)b.n && (!fsync_on || fsync(fd) == 0);
  ok = close(fd) == 0 && ok;
  mk_buf_free(&b);
  return ok ? 0 : -1;
}

/* repo:repair_refs() -> changed, torn | nil, err: make packed-refs ready
 * for appended refs (see above); torn: a line cut short was removed. Run it
 * before reading refs after a crash. */
static int repo_repair_refs(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  int rc = packed_prepare(r);
  if (rc < 0) return mk_push_error(L, "git", "cannot repair packed-refs: %s", strerror(errno));
  r->packed_ok = 1;
  lua_pushboolean(L, rc > 0);
  lua_pushboolean(L, rc == 2);
  return 2;
}

/* Append "<key><hex of oid>\n" (a commit header line): 0 or -1. */
static int add_oid_line(mk_buf *b, const char *key, const git_oid *oid) {
  char hex[GIT_OID_HEXSZ + 1];
  git_oid_tostr(hex, sizeof hex, oid);
  return mk_buf_add(b, key, strlen(key)) || mk_buf_add(b, hex, GIT_OID_HEXSZ) || mk_buf_add(b, "\n", 1) ? -1 : 0;
}

/* A signature's name or e-mail: no angle brackets or line breaks. */
static int sig_ok(const char *s) { return !strpbrk(s, "<>\n"); }

typedef struct {
  int files, parents; /* stack indices of the files table and parents list (0: none) */
  size_t nparents;
  const char *message, *refname, *author, *email;
  int new_ref;
  lua_Integer when;
} commit_args;

/* Read and check the options table at index 2 (raises on mistakes). */
static void read_commit_args(lua_State *L, commit_args *a) {
  luaL_checktype(L, 2, LUA_TTABLE);
  if (lua_getfield(L, 2, "files") != LUA_TTABLE) luaL_argerror(L, 2, "files must be a table {path = data}");
  a->files = lua_gettop(L);
  lua_getfield(L, 2, "message");
  a->message = luaL_optstring(L, -1, "");
  lua_getfield(L, 2, "ref");
  a->refname = luaL_optstring(L, -1, NULL);
  lua_getfield(L, 2, "new_ref");
  a->new_ref = lua_toboolean(L, -1);
  lua_getfield(L, 2, "time");
  a->when = luaL_optinteger(L, -1, (lua_Integer)time(NULL));
  lua_getfield(L, 2, "author");
  a->author = luaL_optstring(L, -1, "mkengine");
  lua_getfield(L, 2, "email");
  a->email = luaL_optstring(L, -1, "mkengine@localhost");
  a->parents = 0;
  if (lua_getfield(L, 2, "parents") != LUA_TNIL) {
    luaL_argcheck(L, lua_istable(L, -1), 2, "parents must be a list of revisions");
    a->parents = lua_gettop(L);
  }
  a->nparents = a->parents ? lua_rawlen(L, a->parents) : 0;
  check_commit_args(L, a->files, a->parents, a->nparents);
  if (!sig_ok(a->author) || !sig_ok(a->email))
    luaL_argerror(L, 2, "author and email may not hold '<', '>' or newlines");
}

/* The parents' ids, before anything is written: a full id names a commit
 * (checked to exist), anything else is a revision to resolve. 0 or a
 * libgit2 error. */
static int resolve_parents(lua_State *L, git_repository *repo, const commit_args *a, git_oid *pids) {
  git_odb *odb = NULL;
  int rc = a->nparents ? git_repository_odb(&odb, repo) : 0;
  for (size_t i = 0; i < a->nparents && rc == 0; i++) {
    lua_rawgeti(L, a->parents, (lua_Integer)i + 1);
    const char *spec = lua_tostring(L, -1);
    if (strlen(spec) == GIT_OID_HEXSZ && git_oid_fromstr(&pids[i], spec) == 0) {
      if (!git_odb_exists(odb, &pids[i])) {
        git_error_set_str(GIT_ERROR_ODB, "no such commit");
        rc = GIT_ENOTFOUND;
      }
    } else {
      git_commit *c = NULL;
      rc = lookup_commit(repo, spec, &c);
      if (rc == 0) git_oid_cpy(&pids[i], git_commit_id(c));
      git_commit_free(c);
    }
    lua_pop(L, 1);
  }
  git_odb_free(odb);
  return rc;
}

/* The commit object's text in git's format: 0 or -1 (out of memory). */
static int commit_text(mk_buf *b, const git_oid *tree, const git_oid *pids, const commit_args *a) {
  if (add_oid_line(b, "tree ", tree)) return -1;
  for (size_t i = 0; i < a->nparents; i++)
    if (add_oid_line(b, "parent ", &pids[i])) return -1;
  for (int k = 0; k < 2; k++) {
    char line[64];
    const char *role = k ? "committer " : "author ";
    snprintf(line, sizeof line, "> %lld +0000\n", (long long)a->when);
    if (mk_buf_add(b, role, strlen(role)) || mk_buf_add(b, a->author, strlen(a->author)) || mk_buf_add(b, " <", 2) ||
        mk_buf_add(b, a->email, strlen(a->email)) || mk_buf_add(b, line, strlen(line)))
      return -1;
  }
  return mk_buf_add(b, "\n", 1) || mk_buf_add(b, a->message, strlen(a->message)) ? -1 : 0;
}

/* Point the ref at the commit: a new ref as a line appended to
 * packed-refs, else through libgit2. 0 or a libgit2 error. */
static int commit_ref(mk_git_repo *r, const commit_args *a, const git_oid *commit_id, const char **what) {
  int valid = 0;
  if (a->new_ref && strncmp(a->refname, "refs/", 5) == 0 && git_reference_name_is_valid(&valid, a->refname) == 0 &&
      valid) {
    if (packed_append(r, a->refname, commit_id) == 0) return 0;
    git_error_set_str(GIT_ERROR_OS, strerror(errno));
    *what = "cannot append ref to packed-refs";
    return -1;
  }
  git_reference *ref = NULL;
  int rc = git_reference_create(&ref, r->repo, a->refname, commit_id, 1, a->message);
  git_reference_free(ref);
  if (rc < 0) *what = "cannot update ref";
  return rc;
}

/* repo:commit{files = {[path] = data}, parents = {rev...}, message = s,
 *   ref = name?, time = unix_seconds?, author = name?, email = s?}
 *   -> oid | nil, err
 * Blobs and the tree are built from the table; the commit is written, then
 * `ref` (if given) is created or moved to it; with new_ref = true the caller
 * promises the ref does not exist yet, and it becomes one line appended to
 * packed-refs (no file created: see packed_append). A caller who only sees the
 * return value therefore never sees a node whose commit or ref is missing. */
static int repo_commit(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  commit_args a;
  read_commit_args(L, &a);
  git_oid tree_id, commit_id;
  const char *what = "cannot find parent";
  mk_buf b = {0};
  git_oid *pids = calloc(a.nparents ? a.nparents : 1, sizeof *pids);
  if (!pids) return luaL_error(L, "out of memory");
  int rc = resolve_parents(L, r->repo, &a, pids);
  if (rc == 0) rc = write_files(L, r, a.files, &tree_id, &what);
  if (rc == 0 && commit_text(&b, &tree_id, pids, &a)) {
    mk_buf_free(&b);
    free(pids);
    return luaL_error(L, "out of memory");
  }
  if (rc == 0) {
    what = "cannot write commit";
    rc = put_object(r, &commit_id, b.p, b.n, GIT_OBJECT_COMMIT);
  }
  if (rc == 0 && a.refname) rc = commit_ref(r, &a, &commit_id, &what);
  mk_buf_free(&b);
  free(pids);
  if (rc < 0) return push_git_error(L, rc, what);
  push_oid(L, &commit_id);
  return 1;
}

/* repo:set_ref(name, rev [, log_message]) -> oid | nil, err (creates or moves). */
static int repo_set_ref(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  const char *name = luaL_checkstring(L, 2);
  const char *spec = luaL_checkstring(L, 3);
  const char *msg = luaL_optstring(L, 4, NULL);
  git_commit *c = NULL;
  int rc = lookup_commit(r->repo, spec, &c);
  if (rc < 0) return push_git_error(L, rc, "cannot find commit");
  git_reference *ref = NULL;
  rc = git_reference_create(&ref, r->repo, name, git_commit_id(c), 1, msg);
  git_reference_free(ref);
  if (rc < 0) {
    git_commit_free(c);
    return push_git_error(L, rc, "cannot update ref");
  }
  push_oid(L, git_commit_id(c));
  git_commit_free(c);
  return 1;
}

/* repo:delete_ref(name) -> true | nil, err */
static int repo_delete_ref(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  const char *name = luaL_checkstring(L, 2);
  git_reference *ref = NULL;
  int rc = git_reference_lookup(&ref, r->repo, name);
  if (rc >= 0) rc = git_reference_delete(ref);
  git_reference_free(ref);
  if (rc < 0) return push_git_error(L, rc, "cannot delete ref");
  lua_pushboolean(L, 1);
  return 1;
}

/* repo:ref(name) -> oid | nil (missing) | nil, err (broken) */
static int repo_ref(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  const char *name = luaL_checkstring(L, 2);
  git_oid oid;
  int rc = git_reference_name_to_id(&oid, r->repo, name);
  if (rc == GIT_ENOTFOUND) {
    lua_pushnil(L);
    return 1;
  }
  if (rc < 0) return push_git_error(L, rc, "cannot read ref");
  push_oid(L, &oid);
  return 1;
}

typedef struct {
  char *name;
  git_oid oid;
  int has_oid;
} ref_item;

static int ref_item_cmp(const void *a, const void *b) {
  return strcmp(((const ref_item *)a)->name, ((const ref_item *)b)->name);
}

/* repo:refs([glob]) -> { {name=, oid=}, ... } sorted by name. Symbolic refs
 * are resolved; one that cannot be resolved is listed without oid. */
static int repo_refs(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  const char *glob = luaL_optstring(L, 2, NULL);
  git_reference_iterator *it = NULL;
  int rc = glob ? git_reference_iterator_glob_new(&it, r->repo, glob) : git_reference_iterator_new(&it, r->repo);
  if (rc < 0) return push_git_error(L, rc, "cannot list refs");
  size_t n = 0, cap = 64;
  ref_item *items = malloc(cap * sizeof *items);
  int oom = !items;
  git_reference *ref;
  while (!oom && (rc = git_reference_next(&ref, it)) == 0) {
    if (n == cap) {
      ref_item *grown = realloc(items, 2 * cap * sizeof *items);
      if (!grown) {
        git_reference_free(ref);
        oom = 1;
        break;
      }
      items = grown;
      cap *= 2;
    }
    ref_item *e = &items[n];
    e->name = strdup(git_reference_name(ref));
    e->has_oid = 0;
    git_reference *resolved = NULL;
    if (git_reference_resolve(&resolved, ref) == 0) {
      git_oid_cpy(&e->oid, git_reference_target(resolved));
      e->has_oid = 1;
    }
    git_reference_free(resolved);
    git_reference_free(ref);
    if (e->name) n++;
  }
  git_reference_iterator_free(it);
  int ok = !oom && rc == GIT_ITEROVER;
  if (ok) {
    qsort(items, n, sizeof *items, ref_item_cmp);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
      lua_createtable(L, 0, 2);
      lua_pushstring(L, items[i].name);
      lua_setfield(L, -2, "name");
      if (items[i].has_oid) {
        push_oid(L, &items[i].oid);
        lua_setfield(L, -2, "oid");
      }
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
  }
  for (size_t i = 0; i < n; i++) free(items[i].name);
  free(items);
  if (oom) return luaL_error(L, "out of memory");
  if (!ok) return push_git_error(L, rc, "cannot list refs");
  return 1;
}

/* repo:symref(name, target): point a symbolic ref (HEAD) at another ref. */
static int repo_symref(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  const char *name = luaL_checkstring(L, 2);
  const char *target = luaL_checkstring(L, 3);
  git_reference *ref = NULL;
  int rc = git_reference_symbolic_create(&ref, r->repo, name, target, 1, NULL);
  git_reference_free(ref);
  if (rc < 0) return push_git_error(L, rc, "cannot set symbolic ref");
  lua_pushboolean(L, 1);
  return 1;
}

/* repo:read(rev, path) -> data | nil, err (kind "not_found" if no such file) */
static int repo_read(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  const char *spec = luaL_checkstring(L, 2);
  const char *path = luaL_checkstring(L, 3);
  git_commit *c = NULL;
  git_tree *tree = NULL;
  git_tree_entry *entry = NULL;
  git_blob *blob = NULL;
  const char *what = "cannot find commit";
  int rc = lookup_commit(r->repo, spec, &c);
  if (rc < 0) goto done;
  what = "cannot read tree";
  rc = git_commit_tree(&tree, c);
  if (rc < 0) goto done;
  what = "no such file";
  rc = git_tree_entry_bypath(&entry, tree, path);
  if (rc < 0) goto done;
  if (git_tree_entry_type(entry) != GIT_OBJECT_BLOB) {
    git_tree_entry_free(entry);
    git_tree_free(tree);
    git_commit_free(c);
    return mk_push_error(L, "not_found", "no such file: '%s' is a directory", path);
  }
  what = "cannot read file";
  rc = git_blob_lookup(&blob, r->repo, git_tree_entry_id(entry));
  if (rc < 0) goto done;
  lua_pushlstring(L, git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob));
done:
  git_blob_free(blob);
  git_tree_entry_free(entry);
  git_tree_free(tree);
  git_commit_free(c);
  if (rc < 0) return push_git_error(L, rc, what);
  return 1;
}

static int ls_cb(const char *root, const git_tree_entry *entry, void *payload) {
  lua_State *L = payload;
  if (git_tree_entry_type(entry) != GIT_OBJECT_BLOB) return 0;
  lua_pushfstring(L, "%s%s", root, git_tree_entry_name(entry));
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  return 0;
}

/* repo:ls(rev) -> { path, ... } every file of the commit's tree, sorted. */
static int repo_ls(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  const char *spec = luaL_checkstring(L, 2);
  git_tree *tree = NULL;
  const char *what;
  int rc = lookup_tree(r->repo, spec, &tree, &what);
  if (rc < 0) return push_git_error(L, rc, what);
  lua_newtable(L);
  rc = git_tree_walk(tree, GIT_TREEWALK_PRE, ls_cb, L);
  git_tree_free(tree);
  if (rc < 0) return push_git_error(L, rc, "cannot walk tree");
  return 1;
}

typedef struct {
  lua_State *L;
  git_odb *odb;
} missing_walk;

static int missing_cb(const char *root, const git_tree_entry *entry, void *payload) {
  missing_walk *w = payload;
  if (git_tree_entry_type(entry) == GIT_OBJECT_BLOB && !git_odb_exists(w->odb, git_tree_entry_id(entry))) {
    lua_pushfstring(w->L, "%s%s", root, git_tree_entry_name(entry));
    lua_rawseti(w->L, -2, (lua_Integer)lua_rawlen(w->L, -2) + 1);
  }
  return 0;
}

/* repo:missing(rev) -> { path, ... } the files of the commit whose blob is
 * not in the object database ({} for a whole commit), or nil, err when the
 * commit or one of its trees cannot be read (a damaged repository). */
static int repo_missing(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  const char *spec = luaL_checkstring(L, 2);
  git_tree *tree = NULL;
  git_odb *odb = NULL;
  const char *what;
  int rc = lookup_tree(r->repo, spec, &tree, &what);
  if (rc < 0) return push_git_error(L, rc, what);
  rc = git_repository_odb(&odb, r->repo);
  if (rc < 0) {
    git_tree_free(tree);
    return push_git_error(L, rc, "cannot open object database");
  }
  lua_newtable(L);
  missing_walk w = {L, odb};
  rc = git_tree_walk(tree, GIT_TREEWALK_PRE, missing_cb, &w);
  git_tree_free(tree);
  git_odb_free(odb);
  if (rc < 0) return push_git_error(L, rc, "cannot walk tree");
  return 1;
}

/* repo:info(rev) -> {oid, tree, parents = {oid...}, message, time, author} */
static int repo_info(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  const char *spec = luaL_checkstring(L, 2);
  git_commit *c = NULL;
  int rc = lookup_commit(r->repo, spec, &c);
  if (rc < 0) return push_git_error(L, rc, "cannot find commit");
  lua_createtable(L, 0, 6);
  push_oid(L, git_commit_id(c));
  lua_setfield(L, -2, "oid");
  push_oid(L, git_commit_tree_id(c));
  lua_setfield(L, -2, "tree");
  unsigned n = git_commit_parentcount(c);
  lua_createtable(L, (int)n, 0);
  for (unsigned i = 0; i < n; i++) {
    push_oid(L, git_commit_parent_id(c, i));
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "parents");
  lua_pushstring(L, git_commit_message(c));
  lua_setfield(L, -2, "message");
  lua_pushinteger(L, (lua_Integer)git_commit_time(c));
  lua_setfield(L, -2, "time");
  lua_pushstring(L, git_commit_author(c)->name);
  lua_setfield(L, -2, "author");
  git_commit_free(c);
  return 1;
}

/* repo:exists(oid) -> bool: the object is present in the object database. */
static int repo_exists(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  const char *hex = luaL_checkstring(L, 2);
  git_oid oid;
  if (git_oid_fromstr(&oid, hex) < 0) {
    lua_pushboolean(L, 0);
    return 1;
  }
  git_odb *odb = NULL;
  if (git_repository_odb(&odb, r->repo) < 0) return push_git_error(L, -1, "cannot open object database");
  lua_pushboolean(L, git_odb_exists(odb, &oid));
  git_odb_free(odb);
  return 1;
}

/* repo:pack_refs(): move loose refs into packed-refs (fast listing of many
 * nodes). */
static int repo_pack_refs(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  git_refdb *db = NULL;
  int rc = git_repository_refdb(&db, r->repo);
  if (rc >= 0) rc = git_refdb_compress(db);
  git_refdb_free(db);
  if (rc < 0) return push_git_error(L, rc, "cannot pack refs");
  lua_pushboolean(L, 1);
  return 1;
}

static int buf_cb(const git_diff_delta *d, const git_diff_hunk *h, const git_diff_line *line, void *payload) {
  (void)d;
  (void)h;
  luaL_Buffer *b = payload;
  if (line->origin == GIT_DIFF_LINE_CONTEXT || line->origin == GIT_DIFF_LINE_ADDITION ||
      line->origin == GIT_DIFF_LINE_DELETION)
    luaL_addchar(b, line->origin);
  luaL_addlstring(b, line->content, line->content_len);
  return 0;
}

static const char *status_name(git_delta_t s) {
  switch (s) {
    case GIT_DELTA_ADDED: return "added";
    case GIT_DELTA_DELETED: return "deleted";
    case GIT_DELTA_MODIFIED: return "modified";
    case GIT_DELTA_RENAMED: return "renamed";
    default: return "changed";
  }
}

/* The stat table of a diff: {files = {{path, status, insertions,
 * deletions}...}, changed, insertions, deletions, text}. 0 or an error. */
static int push_diff_stat(lua_State *L, git_diff *diff, git_diff_stats *stats, git_buf *sbuf) {
  lua_createtable(L, 0, 5);
  size_t n = git_diff_num_deltas(diff);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    git_patch *p = NULL;
    size_t ctx = 0, adds = 0, dels = 0;
    const git_diff_delta *d = git_diff_get_delta(diff, i);
    if (git_patch_from_diff(&p, diff, i) == 0 && p) git_patch_line_stats(&ctx, &adds, &dels, p);
    git_patch_free(p);
    lua_createtable(L, 0, 4);
    lua_pushstring(L, d->new_file.path ? d->new_file.path : d->old_file.path);
    lua_setfield(L, -2, "path");
    lua_pushstring(L, status_name(d->status));
    lua_setfield(L, -2, "status");
    lua_pushinteger(L, (lua_Integer)adds);
    lua_setfield(L, -2, "insertions");
    lua_pushinteger(L, (lua_Integer)dels);
    lua_setfield(L, -2, "deletions");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "files");
  lua_pushinteger(L, (lua_Integer)git_diff_stats_files_changed(stats));
  lua_setfield(L, -2, "changed");
  lua_pushinteger(L, (lua_Integer)git_diff_stats_insertions(stats));
  lua_setfield(L, -2, "insertions");
  lua_pushinteger(L, (lua_Integer)git_diff_stats_deletions(stats));
  lua_setfield(L, -2, "deletions");
  int rc = git_diff_stats_to_buf(sbuf, stats, GIT_DIFF_STATS_FULL, 80);
  if (rc < 0) return rc;
  lua_pushlstring(L, sbuf->ptr ? sbuf->ptr : "", sbuf->size);
  lua_setfield(L, -2, "text");
  return 0;
}

/* repo:diff(a, b [, {context = 3}]) -> patch_text, stat
 *   stat = {files = {{path, status, insertions, deletions}...}, changed,
 *           insertions, deletions, text = "git diff --stat"-like summary} */
static int repo_diff(lua_State *L) {
  mk_git_repo *r = check_repo(L, 1);
  const char *sa = luaL_checkstring(L, 2);
  const char *sb = luaL_checkstring(L, 3);
  int context = 3;
  if (lua_istable(L, 4)) {
    lua_getfield(L, 4, "context");
    context = (int)luaL_optinteger(L, -1, 3);
    lua_pop(L, 1);
  }
  git_commit *ca = NULL, *cb = NULL;
  git_tree *ta = NULL, *tb = NULL;
  git_diff *diff = NULL;
  git_diff_stats *stats = NULL;
  git_buf sbuf = {0};
  const char *what = "cannot find commit";
  int rc = lookup_commit(r->repo, sa, &ca);
  if (rc >= 0) rc = lookup_commit(r->repo, sb, &cb);
  if (rc < 0) goto fail;
  what = "cannot read tree";
  rc = git_commit_tree(&ta, ca);
  if (rc >= 0) rc = git_commit_tree(&tb, cb);
  if (rc < 0) goto fail;
  git_diff_options opts;
  git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
  opts.context_lines = (uint32_t)(context < 0 ? 0 : context);
  what = "cannot diff";
  rc = git_diff_tree_to_tree(&diff, r->repo, ta, tb, &opts);
  if (rc < 0) goto fail;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  rc = git_diff_print(diff, GIT_DIFF_FORMAT_PATCH, buf_cb, &b);
  if (rc < 0) goto fail;
  luaL_pushresult(&b);
  rc = git_diff_get_stats(&stats, diff);
  if (rc < 0) goto fail;
  rc = push_diff_stat(L, diff, stats, &sbuf);
  if (rc < 0) goto fail;
  git_buf_dispose(&sbuf);
  git_diff_stats_free(stats);
  git_diff_free(diff);
  git_tree_free(ta);
  git_tree_free(tb);
  git_commit_free(ca);
  git_commit_free(cb);
  return 2;
fail:
  git_buf_dispose(&sbuf);
  git_diff_stats_free(stats);
  git_diff_free(diff);
  git_tree_free(ta);
  git_tree_free(tb);
  git_commit_free(ca);
  git_commit_free(cb);
  return push_git_error(L, rc, what);
}

int luaopen_mk_git(lua_State *L) {
  pthread_once(&git_once, git_init_once);
  static const luaL_Reg repo_m[] = {{"commit", repo_commit},
                                    {"set_ref", repo_set_ref},
                                    {"delete_ref", repo_delete_ref},
                                    {"ref", repo_ref},
                                    {"refs", repo_refs},
                                    {"symref", repo_symref},
                                    {"read", repo_read},
                                    {"ls", repo_ls},
                                    {"info", repo_info},
                                    {"exists", repo_exists},
                                    {"missing", repo_missing},
                                    {"diff", repo_diff},
                                    {"pack_refs", repo_pack_refs},
                                    {"repair_refs", repo_repair_refs},
                                    {"path", repo_path},
                                    {"close", repo_close},
                                    {NULL, NULL}};
  if (luaL_newmetatable(L, REPO_MT)) {
    luaL_newlib(L, repo_m);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, repo_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, repo_close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, repo_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {{"init", l_init},       {"open", l_open}, {"fsync", l_fsync},
                                   {"version", l_version}, {"hash", l_hash}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}

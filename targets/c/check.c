/* check.c (mkc-check): compares a candidate's outputs with the frozen
 * expected outputs, in its own process outside the candidate's sandbox.
 * Before comparing it verifies the manifest (its own SHA-256 as recorded
 * by the engine at freeze time, then the SHA-256 of every expected file it
 * uses) and the hash the runner reported for each output segment, so a
 * tampered expected file or output blob is an error, never a pass.
 *
 * A file whose stat identity (device, inode, size, mtime and ctime, all in
 * nanoseconds) matches the seal written when it was hashed is taken as
 * verified without re-reading it: any write through the kernel moves its
 * ctime, which no unprivileged process can set back (docs/api/targets.md,
 * "Frozen suites"). A file that does not match its seal is hashed in full.
 *
 * stdin (lines of tokens):
 *   manifest PATH SHA256      root DIR      blob PATH
 *   seal PATH SHA256          (after manifest: lines REL DEV INO SIZE MTIME CTIME)
 *   cmp CASE NAME DTYPE COUNT OFFSET HASH EXPECTED_REL ATOL RTOL [SHAPE]
 *   verify                    (check every manifest entry, compare nothing)
 *   blob2 PATH + cmp2 ... OFFSET2:HASH2 ...   (expected = the reference's
 *                             output in blob2, for fresh-input probes)
 * stdout: one JSON object {ok, error, results = [...]}. Exit 0 when it
 * could check (whatever the verdict), 1 on a manifest/blob problem.
 * Also: `hash DIR` then relative paths, one a line → {"sha256": [...],
 * "seal": [...]} (used to write the manifest and its seal; a file that
 * changes while it is hashed is an error), and `mkc-check --sha256 FILE`. */
#include "common.h"
#include "digest.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct { char sha[65]; char *rel; int verified; char seal[160]; } entry_t;
static entry_t *man;
static int nman;

/* "DEV INO SIZE MTIME_NS CTIME_NS" of a file, or "" when it cannot be stat'ed. */
static void stat_id(const char *path, char out[160]) {
  struct stat st;
  out[0] = 0;
  if (stat(path, &st) != 0) return;
  snprintf(out, 160, "%llu %llu %lld %lld %lld", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
           (long long)st.st_size, (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
           (long long)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec);
}

/* Verify one manifest entry: by its seal when the file's identity matches
 * it, else by SHA-256. 0 ok, -1 unreadable, -2 mismatch. */
static int verify_entry(entry_t *e, const char *root) {
  if (e->verified) return 0;
  char path[4096], sha[65], id[160];
  snprintf(path, sizeof path, "%s/%s", root, e->rel);
  if (e->seal[0]) {
    stat_id(path, id);
    if (id[0] && !strcmp(id, e->seal)) { e->verified = 1; return 0; }
  }
  if (mk_sha256_file(path, sha) != 0) return -1;
  if (strcmp(sha, e->sha)) return -2;
  e->verified = 1;
  return 0;
}

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') printf("\\%c", *s);
    else if ((unsigned char)*s < 32) printf("\\u%04x", *s);
    else putchar(*s);
  }
  putchar('"');
}

static int die(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("{\"ok\":false,\"error\":");
  json_str(msg);
  printf(",\"results\":[]}\n");
  exit(1);
}

/* A read-only view of bytes [off, off + n) of a file: mapped from the page
 * cache rather than copied (the outputs and expected files of a benchmark
 * are hundreds of MB), or NULL when the file is shorter. */
typedef struct { void *map; size_t len; } view_t;
#define MAX_VIEWS 64
static view_t views[MAX_VIEWS];

static void *read_range(const char *path, off_t off, size_t n) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < off + (off_t)n) { close(fd); return NULL; }
  off_t pg = (off_t)sysconf(_SC_PAGESIZE), base = off / pg * pg;
  size_t len = (size_t)(off - base) + (n ? n : 1);
  void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, base);
  close(fd);
  if (m == MAP_FAILED) return NULL;
  for (int i = 0; i < MAX_VIEWS; i++)
    if (!views[i].map) { views[i].map = m; views[i].len = len; return (unsigned char *)m + (off - base); }
  die("too many open views");
  return NULL;
}

static void release(void *p) {
  for (int i = 0; p && i < MAX_VIEWS; i++)
    if (views[i].map && (unsigned char *)p >= (unsigned char *)views[i].map &&
        (unsigned char *)p < (unsigned char *)views[i].map + views[i].len) {
      munmap(views[i].map, views[i].len);
      views[i].map = NULL;
      return;
    }
}

/* "12 x 40" style coordinates of a flat index, from a shape like 37x129. */
static void coords(char *dst, size_t cap, size_t idx, const char *shape) {
  if (!shape || !*shape) { snprintf(dst, cap, "[%zu]", idx); return; }
  size_t dims[8];
  int nd = 0;
  for (const char *s = shape; *s && nd < 8;) {
    dims[nd++] = (size_t)strtoull(s, (char **)&s, 10);
    if (*s == 'x') s++;
    else break;
  }
  size_t c[8];
  for (int i = nd - 1; i >= 0; i--) { c[i] = dims[i] ? idx % dims[i] : 0; idx = dims[i] ? idx / dims[i] : 0; }
  size_t n = 0;
  n += (size_t)snprintf(dst + n, cap - n, "[");
  for (int i = 0; i < nd && n < cap; i++) n += (size_t)snprintf(dst + n, cap - n, "%s%zu", i ? ", " : "", c[i]);
  if (n < cap) snprintf(dst + n, cap - n, "]");
}

/* 1 when every got[i] is finite and within atol + rtol*|want[i]| (a NaN
 * on either side fails the comparison); max_err is the largest |error|. */
static int all_close_f32(const float *got, const float *want, size_t n, double atol, double rtol, double *max_err) {
  int ok = 1;
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double g = got[i], w = want[i], err = fabs(g - w);
    ok &= err <= atol + rtol * fabs(w);
    m = err > m ? err : m;
  }
  *max_err = m;
  return ok;
}

static int first_result = 1;

/* cmp: expected from a frozen file (manifest-verified); cmp2 (blob2 set):
 * expected from the reference's own output blob of this evaluation. */
static void compare(char **t, int nt, const char *root, const char *blob, const char *blob2) {
  const char *cas = t[1], *name = t[2];
  mkc_dtype dt = mkc_dtype_parse(t[3]);
  size_t count = (size_t)strtoull(t[4], NULL, 10);
  off_t off = (off_t)strtoll(t[5], NULL, 10);
  const char *hash = t[6], *rel = t[7];
  double atol = atof(t[8]), rtol = atof(t[9]);
  const char *shape = nt > 10 ? t[10] : NULL;
  if (dt == MKC_BAD) die("bad dtype %s", t[3]);
  size_t bytes = count * mkc_dtype_size(dt);
  void *want;
  if (blob2) {
    /* rel is "OFFSET:HASH" of the reference's output in blob2 */
    off_t off2 = (off_t)strtoll(rel, NULL, 10);
    const char *h2 = strchr(rel, ':');
    want = read_range(blob2, off2, bytes);
    if (!want || !h2) die("reference output for %s/%s is missing", cas, name);
    char hh[17];
    snprintf(hh, sizeof hh, "%016llx", (unsigned long long)mkc_hash64(want, bytes));
    if (strcmp(hh, h2 + 1)) die("reference output for %s/%s does not match its hash", cas, name);
  } else {
    entry_t *e = NULL;
    for (int i = 0; i < nman; i++) if (!strcmp(man[i].rel, rel)) e = &man[i];
    if (!e) die("expected file %s is not in the manifest", rel);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    int v = verify_entry(e, root);
    if (v == -1) die("cannot read expected file %s", path);
    if (v == -2) die("expected file %s does not match the manifest (tampered?)", rel);
    want = read_range(path, 0, bytes);
    if (!want) die("expected file %s is shorter than %zu bytes", rel, bytes);
  }
  void *got = read_range(blob, off, bytes);
  char res[1200];
  int ok = 1;
  if (!got) {
    ok = 0;
    snprintf(res, sizeof res, "output '%s' of case %s is missing from the runner's output file", name, cas);
  } else {
    char h[17];
    snprintf(h, sizeof h, "%016llx", (unsigned long long)mkc_hash64(got, bytes));
    if (strcmp(h, hash)) {
      printf("%s{\"case\":", first_result ? "" : ",");
      first_result = 0;
      json_str(cas);
      printf(",\"name\":");
      json_str(name);
      printf(",\"ok\":false,\"tampered\":true,\"message\":");
      snprintf(res, sizeof res, "the output file for '%s' of case %s was modified after the runner wrote it", name, cas);
      json_str(res);
      printf("}");
      release(want); release(got);
      return;
    }
  }
  size_t bad = 0, unwritten = 0, nonfinite = 0, zeros = 0, first_bad = (size_t)-1, worst = 0;
  double max_err = 0, worst_ratio = -1, rms = 0, atol_eff = atol;
  if (got) {
    int isf = dt == MKC_F32 || dt == MKC_F64;
    if (isf) {
      size_t nf = 0;
      if (dt == MKC_F32) {
        const float *W = want;
        for (size_t i = 0; i < count; i++) {
          double w = W[i];
          if (isfinite(w)) { rms += w * w; nf++; }
        }
      } else {
        for (size_t i = 0; i < count; i++) {
          double w = mkc_get(want, dt, i);
          if (isfinite(w)) { rms += w * w; nf++; }
        }
      }
      rms = nf ? sqrt(rms / (double)nf) : 0;
      /* An absolute tolerance only makes sense relative to the outputs'
       * scale: on small outputs an all-zero answer would pass it. */
      if (rms > 0 && rms < 1) atol_eff = atol * rms;
    }
    /* float32 outputs (nearly all) take a tight loop first; it passes only
     * when every element is finite and within tolerance, which is what the
     * full loop below would find, and the full loop runs otherwise to
     * describe the failure. */
    int fast_ok = dt == MKC_F32 && all_close_f32(got, want, count, atol_eff, rtol, &max_err);
    if (!fast_ok) max_err = 0;
    for (size_t i = 0; i < count && !fast_ok; i++) {
      int b = 0;
      double g = mkc_get(got, dt, i), w = mkc_get(want, dt, i), err = 0, tol = atol_eff + rtol * fabs(w);
      if (mkc_is_poison(got, dt, i)) { unwritten++; b = 1; }
      else if (!isf) b = g != w;
      else if (isnan(w)) b = !isnan(g);
      else if (isinf(w)) b = g != w;
      else if (!isfinite(g)) { nonfinite++; b = 1; }
      else {
        err = fabs(g - w);
        if (err > max_err) max_err = err;
        b = err > tol;
        if (g == 0 && w != 0) zeros++;
      }
      if (b) {
        bad++;
        if (first_bad == (size_t)-1) first_bad = i;
        double ratio = isfinite(err) && err > 0 ? err / (tol > 0 ? tol : 1e-300) : 1e300;
        if (ratio > worst_ratio) { worst_ratio = ratio; worst = i; }
      }
    }
    if (bad) {
      ok = 0;
      char at[128], wat[128];
      coords(at, sizeof at, first_bad, shape);
      coords(wat, sizeof wat, worst, shape);
      int n = snprintf(res, sizeof res, "case %s, output '%s'%s%s%s: %zu of %zu elements wrong", cas, name,
                       shape ? " (shape " : "", shape ? shape : "", shape ? ")" : "", bad, count);
      if (unwritten) n += snprintf(res + n, sizeof res - (size_t)n, ", %zu never written (still NaN poison)", unwritten);
      if (nonfinite) n += snprintf(res + n, sizeof res - (size_t)n, ", %zu NaN/Inf", nonfinite);
      if (zeros + unwritten == count || (zeros > 0 && zeros == bad && bad == count))
        n += snprintf(res + n, sizeof res - (size_t)n, ", output is all zeros");
      n += snprintf(res + n, sizeof res - (size_t)n, "; first at %s: got %.7g, expected %.7g", at,
                    mkc_get(got, dt, first_bad), mkc_get(want, dt, first_bad));
      if (worst != first_bad)
        n += snprintf(res + n, sizeof res - (size_t)n, "; worst at %s: got %.7g, expected %.7g", wat,
                      mkc_get(got, dt, worst), mkc_get(want, dt, worst));
      snprintf(res + n, sizeof res - (size_t)n, "; max |error| %.3g, tolerance %.3g + %.3g*|expected| (outputs' rms %.3g)",
               max_err, atol_eff, rtol, rms);
    } else res[0] = 0;
  }
  printf("%s{\"case\":", first_result ? "" : ",");
  first_result = 0;
  json_str(cas);
  printf(",\"name\":");
  json_str(name);
  printf(",\"ok\":%s,\"bad\":%zu,\"count\":%zu,\"unwritten\":%zu,\"nonfinite\":%zu,\"max_err\":%.6g,\"rms\":%.6g,\"message\":",
         ok ? "true" : "false", bad, count, unwritten, nonfinite, isfinite(max_err) ? max_err : 1e308, rms);
  json_str(res);
  printf("}");
  release(want);
  release(got);
}

/* File timestamps come from a coarse clock (a few ms): a write within the
 * same tick as the sealed ctime could leave it unchanged. Seal a file only
 * once its ctime is 50 ms in the past, so any later write moves it. */
static void settle(const char *path) {
  for (int tries = 0; tries < 100; tries++) {
    struct stat st;
    struct timespec now;
    if (stat(path, &st) != 0 || clock_gettime(CLOCK_REALTIME, &now) != 0) return;
    double age = (double)(now.tv_sec - st.st_ctim.tv_sec) + 1e-9 * (double)(now.tv_nsec - st.st_ctim.tv_nsec);
    if (age >= 0.05) return;
    struct timespec d = { 0, (long)((0.05 - (age > 0 ? age : 0)) * 1e9) + 1000000 };
    nanosleep(&d, NULL);
  }
}

typedef struct { char *s; size_t n, cap; } sbuf_t;
static void sbuf_add(sbuf_t *b, const char *t) {
  size_t k = strlen(t);
  if (b->n + k + 1 > b->cap) {
    b->cap = (b->n + k + 1) * 2;
    b->s = realloc(b->s, b->cap);
    if (!b->s) die("out of memory");
  }
  memcpy(b->s + b->n, t, k + 1);
  b->n += k;
}

/* The text of a file whose SHA-256 was recorded at freeze time. */
static char *read_pinned(const char *path, const char *want, const char *what) {
  char sha[65];
  if (mk_sha256_file(path, sha) != 0) die("cannot read the %s %s", what, path);
  if (strcmp(sha, want)) die("the %s %s changed since the tests were frozen", what, path);
  size_t len;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  char *text = fd >= 0 ? mkc_read_all(fd, &len) : NULL;
  if (fd >= 0) close(fd);
  if (!text) die("cannot read the %s %s", what, path);
  return text;
}

static int hash_mode(char *plan) {
  char *save = NULL, *line = strtok_r(plan, "\n", &save);
  const char *dir = line + 5;
  sbuf_t seals = { 0 };
  printf("{\"sha256\":[");
  int n = 0;
  while ((line = strtok_r(NULL, "\n", &save))) {
    if (!*line) continue;
    char path[4096], sha[65], before[160], after[160];
    snprintf(path, sizeof path, "%s/%s", dir, line);
    settle(path);
    stat_id(path, before);
    if (mk_sha256_file(path, sha) != 0) die("cannot read %s", path);
    stat_id(path, after);
    if (!before[0] || strcmp(before, after)) die("%s changed while it was hashed", path);
    printf("%s\"%s\"", n ? "," : "", sha);
    sbuf_add(&seals, n ? ",\"" : "\"");
    sbuf_add(&seals, before);
    sbuf_add(&seals, "\"");
    n++;
  }
  printf("],\"seal\":[%s]}\n", seals.s ? seals.s : "");
  free(seals.s);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--sha256")) {
    char sha[65];
    if (mk_sha256_file(argv[2], sha) != 0) { fprintf(stderr, "cannot read %s\n", argv[2]); return 1; }
    printf("%s\n", sha);
    return 0;
  }
  size_t len;
  char *plan = mkc_read_all(0, &len);
  if (!plan) die("cannot read stdin");
  if (!strncmp(plan, "hash ", 5)) return hash_mode(plan);
  char *root = NULL, *blob = NULL, *blob2 = NULL;
  mkc_lines L;
  mkc_lines_init(&L, plan);
  int started = 0;
  while (mkc_lines_next(&L)) {
    char **t = L.tok;
    if (!strcmp(t[0], "manifest") && L.ntok >= 3) {
      char *text = read_pinned(t[1], t[2], "manifest");
      for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strlen(line) < 67 || line[64] != ' ') continue;
        man = realloc(man, sizeof *man * (size_t)(nman + 1));
        if (!man) die("out of memory");
        memcpy(man[nman].sha, line, 64);
        man[nman].sha[64] = 0;
        man[nman].rel = line + 66;
        man[nman].verified = 0;
        man[nman].seal[0] = 0;
        nman++;
      }
    } else if (!strcmp(t[0], "seal") && L.ntok >= 3) {
      if (!man) die("seal before manifest");
      char *text = read_pinned(t[1], t[2], "seal");
      for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *sp = strchr(line, ' ');
        if (!sp) continue;
        *sp = 0;
        for (int i = 0; i < nman; i++)
          if (!strcmp(man[i].rel, line)) snprintf(man[i].seal, sizeof man[i].seal, "%s", sp + 1);
      }
    } else if (!strcmp(t[0], "root") && L.ntok >= 2) root = t[1];
    else if (!strcmp(t[0], "blob") && L.ntok >= 2) blob = t[1];
    else if (!strcmp(t[0], "blob2") && L.ntok >= 2) blob2 = t[1];
    else if (!strcmp(t[0], "cmp2") && L.ntok >= 10) {
      if (!blob || !blob2) die("cmp2 before blob and blob2");
      if (!started) { printf("{\"ok\":true,\"error\":null,\"results\":["); started = 1; }
      compare(t, L.ntok, root, blob, blob2);
    }
    else if (!strcmp(t[0], "verify")) {
      if (!root || !man) die("verify before manifest and root");
      for (int i = 0; i < nman; i++) {
        int v = verify_entry(&man[i], root);
        if (v == -1) die("frozen file %s is missing", man[i].rel);
        if (v == -2) die("frozen file %s does not match the manifest (tampered?)", man[i].rel);
      }
    }
    else if (!strcmp(t[0], "cmp") && L.ntok >= 10) {
      if (!root || !blob || !man) die("cmp before manifest, root and blob");
      if (!started) { printf("{\"ok\":true,\"error\":null,\"results\":["); started = 1; }
      compare(t, L.ntok, root, blob, NULL);
    } else die("bad checker line %d: %s", L.line, t[0]);
  }
  if (!started) printf("{\"ok\":true,\"error\":null,\"results\":[");
  printf("]}\n");
  return 0;
}

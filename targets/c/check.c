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

typedef struct {
  char sha[65];
  char *rel;
  int verified;
  char seal[160];
} entry_t;
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
    if (id[0] && !strcmp(id, e->seal)) {
      e->verified = 1;
      return 0;
    }
  }
  if (mk_sha256_file(path, sha) != 0) return -1;
  if (strcmp(sha, e->sha)) return -2;
  e->verified = 1;
  return 0;
}

/* Write b to stdout and empty it. */
static void put(mk_buf *b) {
  if (b->n) fwrite(b->p, 1, b->n, stdout);
  mk_buf_free(b);
}

/* The whole answer when the checker cannot check: {ok = false, error}. */
static int die(const char *fmt, ...) {
  mk_buf msg = {0}, b = {0};
  va_list ap;
  va_start(ap, fmt);
  mkc_vprintf(&msg, fmt, ap);
  va_end(ap);
  mkc_printf(&b, "{\"ok\":false,\"error\":");
  mkc_json_str(&b, msg.p);
  mkc_printf(&b, ",\"results\":[]}\n");
  put(&b);
  exit(1);
}

/* A read-only view of bytes [off, off + n) of a file: mapped from the page
 * cache rather than copied (the outputs and expected files of a benchmark
 * are hundreds of MB), or NULL when the file is shorter. */
typedef struct {
  void *map;
  size_t len;
} view_t;
#define MAX_VIEWS 64
static view_t views[MAX_VIEWS];

static void *read_range(const char *path, off_t off, size_t n) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < off + (off_t)n) {
    close(fd);
    return NULL;
  }
  off_t pg = (off_t)sysconf(_SC_PAGESIZE), base = off / pg * pg;
  size_t len = (size_t)(off - base) + (n ? n : 1);
  void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, base);
  close(fd);
  if (m == MAP_FAILED) return NULL;
  for (int i = 0; i < MAX_VIEWS; i++)
    if (!views[i].map) {
      views[i].map = m;
      views[i].len = len;
      return (unsigned char *)m + (off - base);
    }
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

/* Append "[12, 40]" style coordinates of a flat index, from a shape like
 * 37x129 (or "[idx]" without one). */
static void add_coords(mk_buf *b, size_t idx, const char *shape) {
  if (!shape || !*shape) {
    mkc_printf(b, "[%zu]", idx);
    return;
  }
  size_t dims[8];
  int nd = 0;
  for (const char *s = shape; *s && nd < 8;) {
    dims[nd++] = (size_t)strtoull(s, (char **)&s, 10);
    if (*s == 'x') s++;
    else break;
  }
  size_t c[8];
  for (int i = nd - 1; i >= 0; i--) {
    c[i] = dims[i] ? idx % dims[i] : 0;
    idx = dims[i] ? idx / dims[i] : 0;
  }
  mkc_printf(b, "[");
  for (int i = 0; i < nd; i++) mkc_printf(b, "%s%zu", i ? ", " : "", c[i]);
  mkc_printf(b, "]");
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

/* One cmp/cmp2 line: CASE NAME DTYPE COUNT OFFSET HASH EXPECTED_REL ATOL
 * RTOL [SHAPE] (for cmp2, EXPECTED_REL is OFFSET2:HASH2 in blob2). */
typedef struct {
  const char *cas, *name, *hash, *rel, *shape;
  mkc_dtype dt;
  size_t count, bytes;
  off_t off;
  double atol, rtol;
} cmp_line;

/* What the comparison of one output found. */
typedef struct {
  int ok, tampered;
  size_t bad, unwritten, nonfinite, zeros, first_bad, worst;
  double max_err, rms, atol_eff;
  mk_buf msg;
} verdict;

static cmp_line parse_cmp(char **t, int nt) {
  cmp_line c = {.cas = t[1], .name = t[2], .dt = mkc_dtype_parse(t[3]), .hash = t[6], .rel = t[7]};
  if (c.dt == MKC_BAD) die("bad dtype %s", t[3]);
  c.count = (size_t)strtoull(t[4], NULL, 10);
  c.bytes = c.count * mkc_dtype_size(c.dt);
  c.off = (off_t)strtoll(t[5], NULL, 10);
  c.atol = atof(t[8]);
  c.rtol = atof(t[9]);
  c.shape = nt > 10 ? t[10] : NULL;
  return c;
}

static int hash_matches(const void *data, size_t bytes, const char *want) {
  char h[17];
  snprintf(h, sizeof h, "%016llx", (unsigned long long)mkc_hash64(data, bytes));
  return !strcmp(h, want);
}

/* cmp2: the reference's own output of this evaluation, in blob2, checked
 * against the hash the runner reported for it. */
static void *reference_output(const cmp_line *c, const char *blob2) {
  off_t off2 = (off_t)strtoll(c->rel, NULL, 10);
  const char *h2 = strchr(c->rel, ':');
  void *want = read_range(blob2, off2, c->bytes);
  if (!want || !h2) die("reference output for %s/%s is missing", c->cas, c->name);
  if (!hash_matches(want, c->bytes, h2 + 1)) die("reference output for %s/%s does not match its hash", c->cas, c->name);
  return want;
}

/* cmp: a frozen expected file, verified against the manifest first. */
static void *expected_output(const cmp_line *c, const char *root) {
  entry_t *e = NULL;
  for (int i = 0; i < nman; i++)
    if (!strcmp(man[i].rel, c->rel)) e = &man[i];
  if (!e) die("expected file %s is not in the manifest", c->rel);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, c->rel);
  int v = verify_entry(e, root);
  if (v == -1) die("cannot read expected file %s", path);
  if (v == -2) die("expected file %s does not match the manifest (tampered?)", c->rel);
  void *want = read_range(path, 0, c->bytes);
  if (!want) die("expected file %s is shorter than %zu bytes", c->rel, c->bytes);
  return want;
}

/* Root mean square of the finite expected values. */
static double rms_of(const void *want, mkc_dtype dt, size_t count) {
  double sum = 0;
  size_t nf = 0;
  if (dt == MKC_F32) {
    const float *W = want;
    for (size_t i = 0; i < count; i++) {
      double w = W[i];
      if (isfinite(w)) {
        sum += w * w;
        nf++;
      }
    }
  } else {
    for (size_t i = 0; i < count; i++) {
      double w = mkc_get(want, dt, i);
      if (isfinite(w)) {
        sum += w * w;
        nf++;
      }
    }
  }
  return nf ? sqrt(sum / (double)nf) : 0;
}

/* Element i against its tolerance: 1 when wrong; counts what kind of wrong
 * into v and returns the error's ratio to the tolerance in *ratio. */
static int element_wrong(const cmp_line *c, const void *got, const void *want, size_t i, verdict *v, double *ratio) {
  int isf = c->dt == MKC_F32 || c->dt == MKC_F64, b;
  double g = mkc_get(got, c->dt, i), w = mkc_get(want, c->dt, i), err = 0, tol = v->atol_eff + c->rtol * fabs(w);
  if (mkc_is_poison(got, c->dt, i)) {
    v->unwritten++;
    b = 1;
  } else if (!isf) b = g != w;
  else if (isnan(w)) b = !isnan(g);
  else if (isinf(w)) b = g != w;
  else if (!isfinite(g)) {
    v->nonfinite++;
    b = 1;
  } else {
    err = fabs(g - w);
    if (err > v->max_err) v->max_err = err;
    b = err > tol;
    if (g == 0 && w != 0) v->zeros++;
  }
  *ratio = isfinite(err) && err > 0 ? err / (tol > 0 ? tol : 1e-300) : 1e300;
  return b;
}

/* Count the wrong elements, the first and the worst. float32 outputs
 * (nearly all) take a tight loop first; it passes only when every element
 * is finite and within tolerance, which is what the full loop would find,
 * and the full loop runs otherwise to describe the failure. */
static void scan_elements(const cmp_line *c, const void *got, const void *want, verdict *v) {
  if (c->dt == MKC_F32 && all_close_f32(got, want, c->count, v->atol_eff, c->rtol, &v->max_err)) return;
  double worst_ratio = -1, ratio;
  v->max_err = 0;
  v->first_bad = (size_t)-1;
  for (size_t i = 0; i < c->count; i++) {
    if (!element_wrong(c, got, want, i, v, &ratio)) continue;
    v->bad++;
    if (v->first_bad == (size_t)-1) v->first_bad = i;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      v->worst = i;
    }
  }
}

/* got and expected at element i, after "; LABEL at [coords]". */
static void add_element(mk_buf *b, const char *label, const cmp_line *c, const void *got, const void *want, size_t i) {
  mkc_printf(b, "; %s at ", label);
  add_coords(b, i, c->shape);
  mkc_printf(b, ": got %.7g, expected %.7g", mkc_get(got, c->dt, i), mkc_get(want, c->dt, i));
}

/* The message of a wrong output: how many elements, of what kind, the
 * first and the worst, the error against the tolerance. */
static void describe_failure(const cmp_line *c, const void *got, const void *want, verdict *v) {
  mk_buf *m = &v->msg;
  mkc_printf(m, "case %s, output '%s'", c->cas, c->name);
  if (c->shape) mkc_printf(m, " (shape %s)", c->shape);
  mkc_printf(m, ": %zu of %zu elements wrong", v->bad, c->count);
  if (v->unwritten) mkc_printf(m, ", %zu never written (still NaN poison)", v->unwritten);
  if (v->nonfinite) mkc_printf(m, ", %zu NaN/Inf", v->nonfinite);
  if (v->zeros + v->unwritten == c->count || (v->zeros > 0 && v->zeros == v->bad && v->bad == c->count))
    mkc_printf(m, ", output is all zeros");
  add_element(m, "first", c, got, want, v->first_bad);
  if (v->worst != v->first_bad) add_element(m, "worst", c, got, want, v->worst);
  mkc_printf(m, "; max |error| %.3g, tolerance %.3g + %.3g*|expected| (outputs' rms %.3g)", v->max_err, v->atol_eff,
             c->rtol, v->rms);
}

/* Compare the output the runner wrote (got) with the expected one. */
static void judge(const cmp_line *c, const void *got, const void *want, verdict *v) {
  v->ok = 1;
  v->atol_eff = c->atol;
  if (!got) {
    v->ok = 0;
    mkc_printf(&v->msg, "output '%s' of case %s is missing from the runner's output file", c->name, c->cas);
    return;
  }
  if (!hash_matches(got, c->bytes, c->hash)) {
    v->ok = 0;
    v->tampered = 1;
    mkc_printf(&v->msg, "the output file for '%s' of case %s was modified after the runner wrote it", c->name, c->cas);
    return;
  }
  if (c->dt == MKC_F32 || c->dt == MKC_F64) {
    v->rms = rms_of(want, c->dt, c->count);
    /* An absolute tolerance only makes sense relative to the outputs'
     * scale: on small outputs an all-zero answer would pass it. */
    if (v->rms > 0 && v->rms < 1) v->atol_eff = c->atol * v->rms;
  }
  scan_elements(c, got, want, v);
  if (v->bad) {
    v->ok = 0;
    describe_failure(c, got, want, v);
  }
}

static int first_result = 1;

/* One element of the results array. A tampered output carries no counts:
 * the engine rejects the candidate on `tampered` alone. */
static void print_result(const cmp_line *c, verdict *v) {
  mk_buf b = {0};
  mkc_printf(&b, "%s{\"case\":", first_result ? "" : ",");
  first_result = 0;
  mkc_json_str(&b, c->cas);
  mkc_printf(&b, ",\"name\":");
  mkc_json_str(&b, c->name);
  if (v->tampered) mkc_printf(&b, ",\"ok\":false,\"tampered\":true");
  else
    mkc_printf(&b,
               ",\"ok\":%s,\"bad\":%zu,\"count\":%zu,\"unwritten\":%zu,\"nonfinite\":%zu,\"max_err\":%.6g,\"rms\":%.6g",
               v->ok ? "true" : "false", v->bad, c->count, v->unwritten, v->nonfinite,
               isfinite(v->max_err) ? v->max_err : 1e308, v->rms);
  mkc_printf(&b, ",\"message\":");
  mkc_json_str(&b, v->msg.p ? v->msg.p : "");
  mkc_printf(&b, "}");
  put(&b);
}

/* cmp: expected from a frozen file (manifest-verified); cmp2 (blob2 set):
 * expected from the reference's own output blob of this evaluation. */
static void compare(char **t, int nt, const char *root, const char *blob, const char *blob2) {
  cmp_line c = parse_cmp(t, nt);
  void *want = blob2 ? reference_output(&c, blob2) : expected_output(&c, root);
  void *got = read_range(blob, c.off, c.bytes);
  verdict v = {0};
  judge(&c, got, want, &v);
  print_result(&c, &v);
  mk_buf_free(&v.msg);
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
    struct timespec d = {0, (long)((0.05 - (age > 0 ? age : 0)) * 1e9) + 1000000};
    nanosleep(&d, NULL);
  }
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
  mk_buf shas = {0}, seals = {0};
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
    mkc_printf(&shas, "%s\"%s\"", n ? "," : "", sha);
    mkc_printf(&seals, "%s\"%s\"", n ? "," : "", before);
    n++;
  }
  printf("{\"sha256\":[%s],\"seal\":[%s]}\n", shas.p ? shas.p : "", seals.p ? seals.p : "");
  mk_buf_free(&shas);
  mk_buf_free(&seals);
  return 0;
}

/* manifest PATH SHA256: the entries "SHA256  REL" of a pinned manifest. */
static void read_manifest(const char *path, const char *sha) {
  char *text = read_pinned(path, sha, "manifest");
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
}

/* seal PATH SHA256: "REL DEV INO SIZE MTIME CTIME" lines of a pinned seal. */
static void read_seal(const char *path, const char *sha) {
  if (!man) die("seal before manifest");
  char *text = read_pinned(path, sha, "seal");
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char *sp = strchr(line, ' ');
    if (!sp) continue;
    *sp = 0;
    for (int i = 0; i < nman; i++)
      if (!strcmp(man[i].rel, line)) snprintf(man[i].seal, sizeof man[i].seal, "%s", sp + 1);
  }
}

/* verify: every manifest entry, comparing nothing. */
static void verify_all(const char *root) {
  if (!root || !man) die("verify before manifest and root");
  for (int i = 0; i < nman; i++) {
    int v = verify_entry(&man[i], root);
    if (v == -1) die("frozen file %s is missing", man[i].rel);
    if (v == -2) die("frozen file %s does not match the manifest (tampered?)", man[i].rel);
  }
}

static int results_started = 0;
static void start_results(void) {
  if (!results_started) printf("{\"ok\":true,\"error\":null,\"results\":[");
  results_started = 1;
}

/* The checker's plan: lines of tokens on stdin (see the top of the file). */
static int check_mode(char *plan) {
  char *root = NULL, *blob = NULL, *blob2 = NULL;
  mkc_lines L;
  mkc_lines_init(&L, plan);
  while (mkc_lines_next(&L)) {
    char **t = L.tok;
    if (!strcmp(t[0], "manifest") && L.ntok >= 3) read_manifest(t[1], t[2]);
    else if (!strcmp(t[0], "seal") && L.ntok >= 3) read_seal(t[1], t[2]);
    else if (!strcmp(t[0], "root") && L.ntok >= 2) root = t[1];
    else if (!strcmp(t[0], "blob") && L.ntok >= 2) blob = t[1];
    else if (!strcmp(t[0], "blob2") && L.ntok >= 2) blob2 = t[1];
    else if (!strcmp(t[0], "verify")) verify_all(root);
    else if (!strcmp(t[0], "cmp2") && L.ntok >= 10) {
      if (!blob || !blob2) die("cmp2 before blob and blob2");
      start_results();
      compare(t, L.ntok, root, blob, blob2);
    } else if (!strcmp(t[0], "cmp") && L.ntok >= 10) {
      if (!root || !blob || !man) die("cmp before manifest, root and blob");
      start_results();
      compare(t, L.ntok, root, blob, NULL);
    } else die("bad checker line %d: %s", L.line, t[0]);
  }
  start_results();
  printf("]}\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--sha256")) {
    char sha[65];
    if (mk_sha256_file(argv[2], sha) != 0) {
      fprintf(stderr, "cannot read %s\n", argv[2]);
      return 1;
    }
    printf("%s\n", sha);
    return 0;
  }
  size_t len;
  char *plan = mkc_read_all(0, &len);
  if (!plan) die("cannot read stdin");
  if (!strncmp(plan, "hash ", 5)) return hash_mode(plan);
  return check_mode(plan);
}

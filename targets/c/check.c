/* check.c (mkc-check): compares a candidate's outputs with the frozen
 * expected outputs, in its own process outside the candidate's sandbox.
 * Before comparing it verifies the manifest (its own SHA-256 as recorded
 * by the engine at freeze time, then the SHA-256 of every expected file it
 * uses) and the hash the runner reported for each output segment, so a
 * tampered expected file or output blob is an error, never a pass.
 *
 * stdin (lines of tokens):
 *   manifest PATH SHA256      root DIR      blob PATH
 *   cmp CASE NAME DTYPE COUNT OFFSET HASH EXPECTED_REL ATOL RTOL [SHAPE]
 *   verify                    (check every manifest entry, compare nothing)
 *   blob2 PATH + cmp2 ... OFFSET2:HASH2 ...   (expected = the reference's
 *                             output in blob2, for fresh-input probes)
 * stdout: one JSON object {ok, error, results = [...]}. Exit 0 when it
 * could check (whatever the verdict), 1 on a manifest/blob problem.
 * Also: `hash DIR` then relative paths, one a line → {"sha256": [...]}
 * (used to write the manifest), and `mkc-check --sha256 FILE`. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct { char sha[65]; char *rel; int verified; } entry_t;
static entry_t *man;
static int nman;

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

static void *read_range(const char *path, off_t off, size_t n) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  unsigned char *buf = malloc(n ? n : 1);
  size_t got = 0;
  while (buf && got < n) {
    ssize_t r = pread(fd, buf + got, n - got, off + (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) { free(buf); buf = NULL; break; }
    got += (size_t)r;
  }
  close(fd);
  return buf;
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
    if (!e->verified) {
      char sha[65];
      if (mkc_sha256_file(path, sha) != 0) die("cannot read expected file %s", path);
      if (strcmp(sha, e->sha)) die("expected file %s does not match the manifest (tampered?)", rel);
      e->verified = 1;
    }
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
      free(want); free(got);
      return;
    }
  }
  size_t bad = 0, unwritten = 0, nonfinite = 0, zeros = 0, first_bad = (size_t)-1, worst = 0;
  double max_err = 0, worst_ratio = -1, rms = 0, atol_eff = atol;
  if (got) {
    int isf = dt == MKC_F32 || dt == MKC_F64;
    if (isf) {
      size_t nf = 0;
      for (size_t i = 0; i < count; i++) {
        double w = mkc_get(want, dt, i);
        if (isfinite(w)) { rms += w * w; nf++; }
      }
      rms = nf ? sqrt(rms / (double)nf) : 0;
      /* An absolute tolerance only makes sense relative to the outputs'
       * scale: on small outputs an all-zero answer would pass it. */
      if (rms > 0 && rms < 1) atol_eff = atol * rms;
    }
    for (size_t i = 0; i < count; i++) {
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
  free(want);
  free(got);
}

static int hash_mode(char *plan) {
  char *save = NULL, *line = strtok_r(plan, "\n", &save);
  const char *dir = line + 5;
  printf("{\"sha256\":[");
  int n = 0;
  while ((line = strtok_r(NULL, "\n", &save))) {
    if (!*line) continue;
    char path[4096], sha[65];
    snprintf(path, sizeof path, "%s/%s", dir, line);
    if (mkc_sha256_file(path, sha) != 0) die("cannot read %s", path);
    printf("%s\"%s\"", n++ ? "," : "", sha);
  }
  printf("]}\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--sha256")) {
    char sha[65];
    if (mkc_sha256_file(argv[2], sha) != 0) { fprintf(stderr, "cannot read %s\n", argv[2]); return 1; }
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
      char sha[65];
      if (mkc_sha256_file(t[1], sha) != 0) die("cannot read the manifest %s", t[1]);
      if (strcmp(sha, t[2])) die("the manifest %s changed since the tests were frozen", t[1]);
      size_t ml;
      int fd = open(t[1], O_RDONLY | O_CLOEXEC);
      char *text = fd >= 0 ? mkc_read_all(fd, &ml) : NULL;
      if (fd >= 0) close(fd);
      if (!text) die("cannot read the manifest %s", t[1]);
      for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strlen(line) < 67 || line[64] != ' ') continue;
        man = realloc(man, sizeof *man * (size_t)(nman + 1));
        if (!man) die("out of memory");
        memcpy(man[nman].sha, line, 64);
        man[nman].sha[64] = 0;
        man[nman].rel = line + 66;
        man[nman].verified = 0;
        nman++;
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
        char path[4096], sha[65];
        snprintf(path, sizeof path, "%s/%s", root, man[i].rel);
        if (mkc_sha256_file(path, sha) != 0) die("frozen file %s is missing", man[i].rel);
        if (strcmp(sha, man[i].sha)) die("frozen file %s does not match the manifest (tampered?)", man[i].rel);
        man[i].verified = 1;
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

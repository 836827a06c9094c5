/* kb.c: `mk.kb`, the knowledge-base index. Markdown files are split into
 * chunks at headings (the heading path becomes the chunk's title), text is
 * tokenized so that code identifiers stay whole and are also split into
 * their parts, and chunks are ranked with BM25. Everything is synchronous
 * and in memory: the shipped corpus indexes in milliseconds, so the index
 * is rebuilt at start-up and `index:stale()` (file times and sizes) tells a
 * caller when to rebuild it. */
#include "mk.h"
#include "buf.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define KB_INDEX_MT      "mk.kb.index"
#define KB_MAX_TOKEN     64 /* longer runs (hashes, base64) are not words */
#define KB_MAX_DEPTH     16 /* directory recursion limit (symlink loops) */
#define KB_DEFAULT_CHUNK 2400
#define KB_BM25_K1       1.2
#define KB_BM25_B        0.75

/* ---- growable byte buffer and small helpers ------------------------------ */

typedef mk_buf kb_buf;

/* Out of memory, the index stops the engine with a message: an index half
 * built would answer searches wrongly, and building it is synchronous deep
 * inside parsing with no error path back to Lua (mk.http, which can fail one
 * transfer, fails it instead). */
static void out_of_memory(void) {
  fputs("mk.kb: out of memory\n", stderr);
  abort();
}

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) out_of_memory();
  return q;
}

static void buf_add(kb_buf *b, const char *s, size_t n) {
  if (mk_buf_add(b, s, n) != 0) out_of_memory();
}

static char *xstrndup(const char *s, size_t n) {
  char *d = xrealloc(NULL, n + 1);
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

static int is_blank_line(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
  return 1;
}

/* Copy text as valid UTF-8: invalid sequences and NUL bytes become U+FFFD
 * and CRLF becomes LF, so chunks can go into JSON prompts unchanged. */
static void sanitize_utf8(kb_buf *out, const char *s, size_t n) {
  static const char repl[] = "\xEF\xBF\xBD";
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\r' && i + 1 < n && s[i + 1] == '\n') {
      i++;
      continue;
    }
    if (c != 0 && c < 0x80) {
      size_t j = i;
      while (j < n && (unsigned char)s[j] < 0x80 && s[j] != 0 && s[j] != '\r') j++;
      if (j == i) j = i + 1;
      buf_add(out, s + i, j - i);
      i = j;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0, min = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
      min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
      min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
      min = 0x10000;
    }
    int ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; k++) {
      unsigned char d = (unsigned char)s[i + k];
      if ((d & 0xC0) != 0x80) ok = 0;
      else cp = (cp << 6) | (d & 0x3F);
    }
    if (ok && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = 0;
    if (ok) {
      buf_add(out, s + i, len);
      i += len;
    } else {
      buf_add(out, repl, 3);
      i += 1;
    }
  }
  if (!out->p) buf_add(out, "", 0);
}

/* ---- tokenizer ----------------------------------------------------------- */

static int is_word(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}
static int is_lower(unsigned char c) { return c >= 'a' && c <= 'z'; }
static int is_upper(unsigned char c) { return c >= 'A' && c <= 'Z'; }
static int is_sep(unsigned char c) { return c == '.' || c == '_' || c == '-'; }

static const char *const stopwords[] = {
    "a",    "about", "also",  "an",    "and",  "are",  "as",    "at",   "be",    "been", "but",  "by",
    "can",  "do",    "does",  "for",   "from", "has",  "have",  "how",  "i",     "if",   "in",   "into",
    "is",   "it",    "its",   "my",    "of",   "on",   "or",    "our",  "so",    "that", "the",  "their",
    "them", "then",  "there", "these", "they", "this", "those", "to",   "was",   "we",   "were", "what",
    "when", "where", "which", "while", "who",  "why",  "will",  "with", "would", "you",  "your", NULL,
};

/* The list is sorted, so the words starting with one letter are a run. */
static int is_stopword(const char *w, size_t n) {
  if (n > 5 || w[0] < 'a' || w[0] > 'y') return 0;
  for (int i = 0; stopwords[i] && stopwords[i][0] <= w[0]; i++)
    if (stopwords[i][0] == w[0] && strlen(stopwords[i]) == n && memcmp(stopwords[i], w, n) == 0) return 1;
  return 0;
}

typedef void (*kb_emit_fn)(void *ud, const char *tok, size_t len);

static int is_vowel(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' || c == 'y'; }

/* A light suffix stemmer for purely alphabetic words, enough to make
 * "buffering", "buffered" and "buffers" meet "buffer" and "estimating"
 * meet "estimate" without a full Porter stemmer: US/UK spelling (-ize,
 * -yze, -our), plurals (-s, -ies), -ing and -ed (keeping stems of at least
 * four letters that contain a vowel, undoubling "padd" -> "pad"), then a
 * final -e. Query and corpus share it, so odd stems ("estimat") are fine.
 * Returns the new length. */
static size_t stem(char *w, size_t n) {
  if (n <= 3) return n;
  for (size_t i = 1; i + 1 < n; i++)
    if (w[i] == 'z' && (w[i - 1] == 'i' || w[i - 1] == 'y') && (w[i + 1] == 'e' || w[i + 1] == 'i' || w[i + 1] == 'a'))
      w[i] = 's';
  if (n > 4 && w[n - 3] == 'o' && w[n - 2] == 'u' && w[n - 1] == 'r') {
    w[n - 2] = 'r';
    n -= 1;
  }
  if (w[n - 1] == 's') {
    if (n > 4 && w[n - 3] == 'i' && w[n - 2] == 'e') {
      w[n - 3] = 'y';
      n -= 2;
    } else if (w[n - 2] != 's' && w[n - 2] != 'u' && w[n - 2] != 'i' && w[n - 2] != 'a') n -= 1;
  }
  size_t cut = 0;
  if (n >= 7 && memcmp(w + n - 3, "ing", 3) == 0) cut = 3;
  else if (n >= 6 && w[n - 2] == 'e' && w[n - 1] == 'd' && w[n - 3] != 'e') cut = 2;
  if (cut) {
    int vowel = 0;
    for (size_t i = 0; i < n - cut; i++) vowel |= is_vowel(w[i]);
    if (vowel) {
      n -= cut;
      if (w[n - 1] == w[n - 2] && !is_vowel(w[n - 1]) && w[n - 1] != 'l' && w[n - 1] != 's' && w[n - 1] != 'z') n -= 1;
    }
  }
  if (n > 4 && w[n - 1] == 'e') n -= 1;
  return n;
}

/* Lower-case, drop stop words, stem purely alphabetic words, emit. */
static void emit_word(const char *s, size_t n, kb_emit_fn emit, void *ud) {
  char w[KB_MAX_TOKEN + 1];
  if (n == 0 || n > KB_MAX_TOKEN) return;
  int alpha = 1;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    w[i] = (char)(is_upper(c) ? c + 32 : c);
    if (!is_lower((unsigned char)w[i])) alpha = 0;
  }
  if (is_stopword(w, n)) return;
  if (alpha) n = stem(w, n);
  emit(ud, w, n);
}

/* Emit the camelCase parts of s (nothing when it has only one part). */
static void emit_camel_parts(const char *s, size_t n, kb_emit_fn emit, void *ud) {
  size_t starts[KB_MAX_TOKEN + 1], k = 0;
  starts[k++] = 0;
  for (size_t i = 1; i < n; i++) {
    unsigned char p = (unsigned char)s[i - 1], c = (unsigned char)s[i];
    if ((is_lower(p) && is_upper(c)) || (is_upper(p) && is_upper(c) && i + 1 < n && is_lower((unsigned char)s[i + 1])))
      starts[k++] = i;
  }
  if (k < 2) return;
  starts[k] = n;
  for (size_t j = 0; j < k; j++) emit_word(s + starts[j], starts[j + 1] - starts[j], emit, ud);
}

/* A word is a run of letters, digits, '_' and non-ASCII bytes, joined by
 * '.' or '-' between word characters, so `pltpu.VMEM`, `vmem_limit_bytes`,
 * `block-shape` and `1.8x` are single words. Each word is emitted whole,
 * then its separator-delimited segments, then the camelCase parts. */
static void tokenize(const char *s, size_t n, kb_emit_fn emit, void *ud) {
  size_t i = 0;
  while (i < n) {
    while (i < n && !is_word((unsigned char)s[i])) i++;
    size_t start = i;
    for (;;) {
      while (i < n && is_word((unsigned char)s[i])) i++;
      if (i + 1 < n && (s[i] == '.' || s[i] == '-') && is_word((unsigned char)s[i + 1])) {
        i++;
        continue;
      }
      break;
    }
    size_t len = i - start;
    if (len == 0) continue;
    /* trim '_' at the ends (`__init__`, `_private`) but keep inner ones */
    const char *w = s + start;
    while (len > 0 && w[0] == '_') {
      w++;
      len--;
    }
    while (len > 0 && w[len - 1] == '_') len--;
    if (len == 0 || len > KB_MAX_TOKEN) continue;
    emit_word(w, len, emit, ud);
    int has_sep = 0;
    for (size_t j = 0; j < len; j++)
      if (is_sep((unsigned char)w[j])) {
        has_sep = 1;
        break;
      }
    if (!has_sep) {
      emit_camel_parts(w, len, emit, ud);
      continue;
    }
    size_t a = 0;
    for (size_t j = 0; j <= len; j++) {
      if (j == len || is_sep((unsigned char)w[j])) {
        if (j > a) {
          emit_word(w + a, j - a, emit, ud);
          emit_camel_parts(w + a, j - a, emit, ud);
        }
        a = j + 1;
      }
    }
  }
}

/* ---- markdown chunking ----------------------------------------------------- */

typedef void (*kb_chunk_fn)(void *ud, const char *title, const char *heading, const char *text, size_t len,
                            unsigned line);

/* A fence opener/closer: up to 3 spaces, then >= 3 backticks or tildes. */
static int fence_marker(const char *s, size_t n, char *ch, size_t *len) {
  size_t i = 0;
  while (i < n && i < 3 && s[i] == ' ') i++;
  if (i >= n || (s[i] != '`' && s[i] != '~')) return 0;
  char c = s[i];
  size_t k = 0;
  while (i + k < n && s[i + k] == c) k++;
  if (k < 3) return 0;
  *ch = c;
  *len = k;
  return 1;
}

/* Whether the lines seen so far leave us inside a code fence. */
typedef struct {
  int open;
  char ch;    /* the opener's character */
  size_t len; /* and its length: a closer is as long or longer */
} fence_state;

/* Feeds one line: 1 when it is a fence marker (opening or closing). */
static int fence_step(fence_state *f, const char *s, size_t n) {
  char ch;
  size_t k;
  if (!fence_marker(s, n, &ch, &k)) return 0;
  if (!f->open) *f = (fence_state){1, ch, k};
  else if (ch == f->ch && k >= f->len) f->open = 0;
  return 1;
}

/* ATX heading: up to 3 spaces, 1-6 '#', then a space or end of line.
 * Returns the level and sets [*t, *t + *tn) to the trimmed title. */
static int heading_level(const char *s, size_t n, const char **t, size_t *tn) {
  size_t i = 0;
  while (i < n && i < 3 && s[i] == ' ') i++;
  size_t h = 0;
  while (i + h < n && s[i + h] == '#') h++;
  if (h == 0 || h > 6) return 0;
  i += h;
  if (i < n && s[i] != ' ' && s[i] != '\t') return 0;
  while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
  size_t e = n;
  while (e > i && (s[e - 1] == ' ' || s[e - 1] == '\t')) e--;
  size_t e2 = e; /* optional closing ###, preceded by a space */
  while (e2 > i && s[e2 - 1] == '#') e2--;
  if (e2 < e && (e2 == i || s[e2 - 1] == ' ' || s[e2 - 1] == '\t')) {
    e = e2;
    while (e > i && (s[e - 1] == ' ' || s[e - 1] == '\t')) e--;
  }
  *t = s + i;
  *tn = e - i;
  return (int)h;
}

typedef struct {
  size_t max_chunk;
  kb_chunk_fn fn;
  void *ud;
  char *levels[7];
  kb_buf title;
  const char *heading;
} kb_chunker;

static void emit_piece(kb_chunker *c, const char *s, size_t n, unsigned line) {
  /* trim blank lines at both ends (keep indentation of the first line) */
  while (n > 0) {
    const char *nl = memchr(s, '\n', n);
    size_t ln = nl ? (size_t)(nl - s) : n;
    if (!is_blank_line(s, ln)) break;
    if (!nl) {
      n = 0;
      break;
    }
    s += ln + 1;
    n -= ln + 1;
    line++;
  }
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
  if (n == 0) return;
  c->fn(c->ud, c->title.p ? c->title.p : "", c->heading ? c->heading : "", s, n, line);
}

/* Emit one section, split into pieces of at most max_chunk bytes: at the
 * last blank line outside a code fence, else the last line end, else at a
 * UTF-8 character boundary. */
static void emit_section(kb_chunker *c, const char *s, size_t n, unsigned line) {
  while (n > c->max_chunk) {
    size_t blank = 0, nl = 0, i = 0;
    fence_state fence = {0};
    while (i < n) {
      const char *e = memchr(s + i, '\n', n - i);
      size_t ln = e ? (size_t)(e - (s + i)) : n - i;
      size_t end = i + ln + (e ? 1 : 0);
      if (end > c->max_chunk) break;
      if (!fence_step(&fence, s + i, ln) && !fence.open && i > 0 && is_blank_line(s + i, ln)) blank = i;
      nl = end;
      i = end;
    }
    size_t cut = blank > c->max_chunk / 4 ? blank : nl;
    if (cut == 0) {
      cut = c->max_chunk;
      while (cut > 1 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--;
    }
    emit_piece(c, s, cut, line);
    for (size_t j = 0; j < cut; j++)
      if (s[j] == '\n') line++;
    s += cut;
    n -= cut;
  }
  emit_piece(c, s, n, line);
}

static void set_title(kb_chunker *c) {
  c->title.n = 0;
  buf_add(&c->title, "", 0);
  c->heading = NULL;
  for (int l = 1; l <= 6; l++) {
    if (!c->levels[l] || !c->levels[l][0]) continue; /* "#" alone: no title part */
    if (c->title.n) buf_add(&c->title, " > ", 3);
    buf_add(&c->title, c->levels[l], strlen(c->levels[l]));
    c->heading = c->levels[l];
  }
}

/* A setext underline: up to 3 spaces, a run of '=' (level 1) or '-'
 * (level 2), optional trailing blanks. Returns the level or 0. */
static int setext_level(const char *s, size_t n) {
  size_t i = 0;
  while (i < n && i < 3 && s[i] == ' ') i++;
  if (i >= n || (s[i] != '=' && s[i] != '-')) return 0;
  char c = s[i];
  while (i < n && s[i] == c) i++;
  while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
  return i == n ? (c == '=' ? 1 : 2) : 0;
}

/* Could this line be the text of a setext heading? A single line of plain
 * paragraph text: not blank, not a list item, table row, quote, heading or
 * indented code. */
static int setext_text(const char *s, size_t n) {
  if (is_blank_line(s, n) || (n > 0 && (s[0] == ' ' || s[0] == '\t'))) return 0;
  unsigned char c = (unsigned char)s[0];
  if (c == '|' || c == '>' || c == '#' || c == '<') return 0;
  if ((c == '-' || c == '*' || c == '+') && (n == 1 || s[1] == ' ')) return 0;
  size_t i = 0;
  while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  if (i > 0 && i < n && (s[i] == '.' || s[i] == ')')) return 0;
  return 1;
}

static void open_heading(kb_chunker *c, int level, const char *t, size_t tn) {
  for (int l = level; l <= 6; l++) {
    free(c->levels[l]);
    c->levels[l] = NULL;
  }
  c->levels[level] = xstrndup(t, tn);
  set_title(c);
}

/* Split markdown text (already sanitized) into sections at ATX headings
 * and setext headings (a paragraph line underlined with === or ---) that
 * are not inside code fences. Text before the first heading has title "". */
static void chunk_markdown(const char *s, size_t n, size_t max_chunk, kb_chunk_fn fn, void *ud) {
  kb_chunker c = {.max_chunk = max_chunk ? max_chunk : KB_DEFAULT_CHUNK, .fn = fn, .ud = ud};
  set_title(&c);
  size_t i = 0, body = 0;
  unsigned line = 1, body_line = 1;
  fence_state fence = {0};
  /* the previous line, when it may carry a setext heading's text: it must
   * follow a blank line (or a heading, or start the file) */
  size_t prev = 0, prev_len = 0;
  int prev_ok = 0, after_break = 1;
  while (i < n) {
    const char *e = memchr(s + i, '\n', n - i);
    size_t ln = e ? (size_t)(e - (s + i)) : n - i;
    size_t next = i + ln + (e ? 1 : 0);
    const char *t;
    size_t tn;
    int level, cand = 0;
    if (fence_step(&fence, s + i, ln) || fence.open) {
      after_break = 0;
    } else if ((level = heading_level(s + i, ln, &t, &tn)) > 0) {
      emit_section(&c, s + body, i - body, body_line);
      open_heading(&c, level, t, tn);
      body = next;
      body_line = line + 1;
      after_break = 1;
    } else if (prev_ok && (level = setext_level(s + i, ln)) > 0) {
      emit_section(&c, s + body, prev - body, body_line);
      size_t e2 = prev_len;
      while (e2 > 0 && (s[prev + e2 - 1] == ' ' || s[prev + e2 - 1] == '\t')) e2--;
      open_heading(&c, level, s + prev, e2);
      body = next;
      body_line = line + 1;
      after_break = 1;
    } else {
      cand = after_break && setext_text(s + i, ln);
      after_break = is_blank_line(s + i, ln);
    }
    prev_ok = cand;
    prev = i;
    prev_len = ln;
    i = next;
    line++;
  }
  emit_section(&c, s + body, n - body, body_line);
  for (int l = 0; l <= 6; l++) free(c.levels[l]);
  free(c.title.p);
}

/* ---- the index ------------------------------------------------------------- */

typedef struct {
  uint32_t chunk, tf;
} kb_posting;
typedef struct {
  uint32_t off, len, hash;
  uint32_t n, cap;
  kb_posting *p;
} kb_term; /* off: into the arena */
typedef struct {
  uint32_t file;
  char *title, *text;
  size_t text_len;
  unsigned line;
  uint32_t ntok;
} kb_chunk;
/* A hash slot keeps the hash beside the term id so probes do not touch the
 * term array (the index build is dominated by these lookups). */
typedef struct {
  uint32_t hash, id;
} kb_slot; /* id = term index + 1 */
typedef struct {
  char *path, *name;
  int64_t mtime_ns, size;
  uint32_t dir;
} kb_file; /* dir: 1-based, 0 = add() */

typedef struct {
  kb_term *terms;
  uint32_t nterms, capterms;
  kb_buf arena;   /* every term's bytes, back to back: lookups stay cache-friendly */
  kb_slot *slots; /* open addressing; id 0 = empty */
  uint32_t nslots;
  kb_chunk *chunks;
  uint32_t nchunks, capchunks;
  kb_file *files;
  uint32_t nfiles, capfiles;
  char **dirs;
  uint32_t ndirs;
  char **skip; /* subdirectory paths (relative to each dir) not indexed */
  uint32_t nskip;
  uint64_t total_tokens, bytes;
  size_t max_chunk;
  int closed;
  /* scratch for building one chunk */
  uint32_t *tmp;
  size_t ntmp, captmp;
} kb_index;

static uint32_t fnv1a(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 16777619u;
  }
  /* FNV's low bits mix poorly and the table is indexed by them: finalise
   * (murmur3 fmix32) so probe chains stay short. */
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

static void rehash(kb_index *ix, uint32_t nslots) {
  free(ix->slots);
  ix->slots = calloc(nslots, sizeof *ix->slots);
  if (!ix->slots) {
    fputs("mk.kb: out of memory\n", stderr);
    abort();
  }
  ix->nslots = nslots;
  for (uint32_t t = 0; t < ix->nterms; t++) {
    uint32_t j = ix->terms[t].hash & (nslots - 1);
    while (ix->slots[j].id) j = (j + 1) & (nslots - 1);
    ix->slots[j] = (kb_slot){ix->terms[t].hash, t + 1};
  }
}

/* Term id of s, or UINT32_MAX when absent and !create. */
static uint32_t term_id(kb_index *ix, const char *s, size_t n, int create) {
  uint32_t h = fnv1a(s, n);
  if (ix->nslots) {
    uint32_t j = h & (ix->nslots - 1);
    while (ix->slots[j].id) {
      if (ix->slots[j].hash == h) {
        kb_term *t = &ix->terms[ix->slots[j].id - 1];
        if (t->len == n && memcmp(ix->arena.p + t->off, s, n) == 0) return ix->slots[j].id - 1;
      }
      j = (j + 1) & (ix->nslots - 1);
    }
  }
  if (!create) return UINT32_MAX;
  if (ix->nterms == ix->capterms) {
    ix->capterms = ix->capterms ? ix->capterms * 2 : 1024;
    ix->terms = xrealloc(ix->terms, ix->capterms * sizeof *ix->terms);
  }
  uint32_t id = ix->nterms++;
  ix->terms[id] = (kb_term){.off = (uint32_t)ix->arena.n, .len = (uint32_t)n, .hash = h};
  buf_add(&ix->arena, s, n);
  if ((uint64_t)ix->nterms * 2 > ix->nslots) rehash(ix, ix->nslots ? ix->nslots * 2 : 2048);
  else {
    uint32_t j = h & (ix->nslots - 1);
    while (ix->slots[j].id) j = (j + 1) & (ix->nslots - 1);
    ix->slots[j] = (kb_slot){h, id + 1};
  }
  return id;
}

static void collect_term(void *ud, const char *tok, size_t len) {
  kb_index *ix = ud;
  if (ix->ntmp == ix->captmp) {
    ix->captmp = ix->captmp ? ix->captmp * 2 : 256;
    ix->tmp = xrealloc(ix->tmp, ix->captmp * sizeof *ix->tmp);
  }
  ix->tmp[ix->ntmp++] = term_id(ix, tok, len, 1);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

typedef struct {
  kb_index *ix;
  uint32_t file;
  const char *fallback_title;
} kb_add_ctx;

/* Index one chunk: title path tokens, the chunk's own heading once more
 * (a title match is a strong signal), then the body. */
static void add_chunk(void *ud, const char *title, const char *heading, const char *text, size_t len, unsigned line) {
  kb_add_ctx *ctx = ud;
  kb_index *ix = ctx->ix;
  if (!title[0]) title = ctx->fallback_title;
  ix->ntmp = 0;
  tokenize(title, strlen(title), collect_term, ix);
  tokenize(heading, strlen(heading), collect_term, ix);
  tokenize(text, len, collect_term, ix);
  if (ix->nchunks == ix->capchunks) {
    ix->capchunks = ix->capchunks ? ix->capchunks * 2 : 256;
    ix->chunks = xrealloc(ix->chunks, ix->capchunks * sizeof *ix->chunks);
  }
  uint32_t cid = ix->nchunks++;
  ix->chunks[cid] = (kb_chunk){.file = ctx->file,
                               .title = xstrndup(title, strlen(title)),
                               .text = xstrndup(text, len),
                               .text_len = len,
                               .line = line,
                               .ntok = (uint32_t)ix->ntmp};
  ix->total_tokens += ix->ntmp;
  if (ix->ntmp > 1) qsort(ix->tmp, ix->ntmp, sizeof *ix->tmp, cmp_u32);
  for (size_t i = 0; i < ix->ntmp;) {
    size_t j = i;
    while (j < ix->ntmp && ix->tmp[j] == ix->tmp[i]) j++;
    kb_term *t = &ix->terms[ix->tmp[i]];
    if (t->n == t->cap) {
      t->cap = t->cap ? t->cap * 2 : 4;
      t->p = xrealloc(t->p, t->cap * sizeof *t->p);
    }
    t->p[t->n++] = (kb_posting){cid, (uint32_t)(j - i)};
    i = j;
  }
}

static uint32_t add_file_entry(kb_index *ix, const char *path, const char *name, int64_t mtime_ns, int64_t size,
                               uint32_t dir) {
  if (ix->nfiles == ix->capfiles) {
    ix->capfiles = ix->capfiles ? ix->capfiles * 2 : 64;
    ix->files = xrealloc(ix->files, ix->capfiles * sizeof *ix->files);
  }
  ix->files[ix->nfiles] = (kb_file){xstrndup(path, strlen(path)), xstrndup(name, strlen(name)), mtime_ns, size, dir};
  return ix->nfiles++;
}

/* Title for text before the first heading: the file name without .md. */
static char *stem_of(const char *name) {
  const char *b = strrchr(name, '/');
  b = b ? b + 1 : name;
  size_t n = strlen(b);
  if (n > 3 && strcmp(b + n - 3, ".md") == 0) n -= 3;
  else if (n > 9 && strcmp(b + n - 9, ".markdown") == 0) n -= 9;
  return xstrndup(b, n);
}

static size_t index_text(kb_index *ix, const char *path, const char *name, const char *text, size_t n, int64_t mtime_ns,
                         int64_t size, uint32_t dir) {
  kb_buf clean = {0};
  sanitize_utf8(&clean, text, n);
  char *stem = stem_of(name);
  kb_add_ctx ctx = {ix, add_file_entry(ix, path, name, mtime_ns, size, dir), stem};
  uint32_t before = ix->nchunks;
  chunk_markdown(clean.p, clean.n, ix->max_chunk, add_chunk, &ctx);
  ix->bytes += n;
  free(stem);
  free(clean.p);
  return ix->nchunks - before;
}

/* ---- directory walking ------------------------------------------------------ */

typedef struct {
  char *path, *name;
  int64_t mtime_ns, size;
} kb_found;
typedef struct {
  kb_found *v;
  size_t n, cap;
} kb_found_list;

static int is_markdown(const char *name) {
  size_t n = strlen(name);
  return (n > 3 && strcmp(name + n - 3, ".md") == 0) || (n > 9 && strcmp(name + n - 9, ".markdown") == 0);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int skipped(char *const *skip, uint32_t nskip, const char *rel) {
  for (uint32_t i = 0; i < nskip; i++)
    if (strcmp(skip[i], rel) == 0) return 1;
  return 0;
}

/* Collect markdown files under dir (sorted; hidden entries and the
 * subdirectories named in skip, relative to root, left out).
 * Returns 0, or -1 with errno set when dir itself cannot be read. */
static int walk(const char *root, const char *rel, int depth, char *const *skip, uint32_t nskip, kb_found_list *out) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s%s%s", root, rel[0] ? "/" : "", rel);
  DIR *d = opendir(dir);
  if (!d) return -1;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 32;
      names = xrealloc(names, cap * sizeof *names);
    }
    names[n++] = xstrndup(de->d_name, strlen(de->d_name));
  }
  closedir(d);
  if (n > 1) qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    char path[PATH_MAX], r[PATH_MAX];
    int rn = snprintf(r, sizeof r, "%s%s%s", rel, rel[0] ? "/" : "", names[i]);
    int pn = rn < 0 || (size_t)rn >= sizeof r ? -1 : snprintf(path, sizeof path, "%s/%s", root, r);
    struct stat st;
    if (pn >= 0 && (size_t)pn < sizeof path && stat(path, &st) == 0) {
      if (S_ISDIR(st.st_mode)) {
        if (depth < KB_MAX_DEPTH && !skipped(skip, nskip, r)) walk(root, r, depth + 1, skip, nskip, out);
      } else if (S_ISREG(st.st_mode) && is_markdown(names[i])) {
        if (out->n == out->cap) {
          out->cap = out->cap ? out->cap * 2 : 64;
          out->v = xrealloc(out->v, out->cap * sizeof *out->v);
        }
        out->v[out->n++] =
            (kb_found){xstrndup(path, strlen(path)), xstrndup(r, strlen(r)),
                       (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec, (int64_t)st.st_size};
      }
    }
    free(names[i]);
  }
  free(names);
  return 0;
}

static void found_free(kb_found_list *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->v[i].path);
    free(l->v[i].name);
  }
  free(l->v);
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  kb_buf b = {0};
  char tmp[65536];
  size_t r;
  while ((r = fread(tmp, 1, sizeof tmp, f)) > 0) buf_add(&b, tmp, r);
  int err = ferror(f);
  fclose(f);
  if (err) {
    free(b.p);
    return NULL;
  }
  if (!b.p) buf_add(&b, "", 0);
  *len = b.n;
  return b.p;
}

/* Strip trailing slashes so file paths read dir/name. */
static char *dir_copy(const char *d) {
  size_t n = strlen(d);
  while (n > 1 && d[n - 1] == '/') n--;
  return xstrndup(d, n);
}

/* ---- Lua interface ---------------------------------------------------------- */

static kb_index *check_index(lua_State *L) {
  kb_index *ix = luaL_checkudata(L, 1, KB_INDEX_MT);
  if (ix->closed) luaL_error(L, "mk.kb: index is closed");
  return ix;
}

static void index_release(kb_index *ix) {
  if (ix->closed) return;
  ix->closed = 1;
  for (uint32_t i = 0; i < ix->nterms; i++) free(ix->terms[i].p);
  free(ix->arena.p);
  for (uint32_t i = 0; i < ix->nchunks; i++) {
    free(ix->chunks[i].title);
    free(ix->chunks[i].text);
  }
  for (uint32_t i = 0; i < ix->nfiles; i++) {
    free(ix->files[i].path);
    free(ix->files[i].name);
  }
  for (uint32_t i = 0; i < ix->ndirs; i++) free(ix->dirs[i]);
  for (uint32_t i = 0; i < ix->nskip; i++) free(ix->skip[i]);
  free(ix->skip);
  free(ix->terms);
  free(ix->slots);
  free(ix->chunks);
  free(ix->files);
  free(ix->dirs);
  free(ix->tmp);
}

static size_t opt_max_chunk(lua_State *L, int idx) {
  lua_Integer m = KB_DEFAULT_CHUNK;
  if (lua_istable(L, idx)) {
    if (lua_getfield(L, idx, "max_chunk") != LUA_TNIL) {
      if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 200)
        luaL_argerror(L, idx, "max_chunk must be an integer >= 200");
      m = lua_tointeger(L, -1);
    }
    lua_pop(L, 1);
  }
  return (size_t)m;
}

static kb_index *push_index(lua_State *L, size_t max_chunk) {
  kb_index *ix = lua_newuserdatauv(L, sizeof *ix, 0);
  memset(ix, 0, sizeof *ix);
  ix->max_chunk = max_chunk;
  luaL_setmetatable(L, KB_INDEX_MT);
  return ix;
}

/* Index every markdown file under dir. Returns 0 or pushes nil, err. */
static int index_dir(lua_State *L, kb_index *ix, const char *dir) {
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return mk_push_error(L, "not_found", "knowledge-base directory %s does not exist", dir);
  char *root = dir_copy(dir);
  kb_found_list found = {0};
  if (walk(root, "", 0, ix->skip, ix->nskip, &found) != 0) {
    int e = errno;
    free(root);
    found_free(&found);
    return mk_push_error(L, "io", "cannot read knowledge-base directory %s: %s", dir, strerror(e));
  }
  ix->dirs = xrealloc(ix->dirs, (ix->ndirs + 1) * sizeof *ix->dirs);
  ix->dirs[ix->ndirs++] = root;
  for (size_t i = 0; i < found.n; i++) {
    size_t len;
    char *text = read_file(found.v[i].path, &len);
    if (!text) {
      int e = errno;
      int r = mk_push_error(L, "io", "cannot read %s: %s", found.v[i].path, strerror(e));
      found_free(&found);
      return r;
    }
    index_text(ix, found.v[i].path, found.v[i].name, text, len, found.v[i].mtime_ns, found.v[i].size, ix->ndirs);
    free(text);
  }
  found_free(&found);
  return 0;
}

/* kb.open{dirs = {...}, skip = {"learned"}, max_chunk = 2400} -> index | nil, err */
static int l_open(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (lua_getfield(L, 1, "dirs") != LUA_TTABLE) luaL_argerror(L, 1, "dirs must be a list of directories");
  lua_Integer nd = luaL_len(L, -1);
  for (lua_Integer i = 1; i <= nd; i++) {
    if (lua_geti(L, -1, i) != LUA_TSTRING) luaL_argerror(L, 1, "dirs must contain strings");
    lua_pop(L, 1);
  }
  int skt = lua_getfield(L, 1, "skip");
  if (skt != LUA_TNIL && skt != LUA_TTABLE) luaL_argerror(L, 1, "skip must be a list of directory names");
  lua_Integer ns = skt == LUA_TTABLE ? luaL_len(L, -1) : 0;
  for (lua_Integer i = 1; i <= ns; i++) {
    if (lua_geti(L, -1, i) != LUA_TSTRING) luaL_argerror(L, 1, "skip must contain strings");
    lua_pop(L, 1);
  }
  kb_index *ix = push_index(L, opt_max_chunk(L, 1));
  if (ns > 0) {
    ix->skip = xrealloc(NULL, (size_t)ns * sizeof *ix->skip);
    for (lua_Integer i = 1; i <= ns; i++) {
      lua_geti(L, -2, i);
      size_t len;
      const char *sk = lua_tolstring(L, -1, &len);
      while (len > 1 && sk[len - 1] == '/') len--;
      ix->skip[ix->nskip++] = xstrndup(sk, len);
      lua_pop(L, 1);
    }
  }
  lua_remove(L, -2); /* the skip value */
  for (lua_Integer i = 1; i <= nd; i++) {
    lua_geti(L, -2, i);
    const char *dir = lua_tostring(L, -1);
    int r = index_dir(L, ix, dir);
    if (r) {
      index_release(ix);
      return r;
    }
    lua_pop(L, 1);
  }
  return 1;
}

/* kb.new{max_chunk = 2400} -> empty index (fill with index:add) */
static int l_new(lua_State *L) {
  if (!lua_isnoneornil(L, 1)) luaL_checktype(L, 1, LUA_TTABLE);
  push_index(L, opt_max_chunk(L, 1));
  return 1;
}

/* index:add(name, markdown) -> number of chunks added */
static int l_add(lua_State *L) {
  kb_index *ix = check_index(L);
  const char *name = luaL_checkstring(L, 2);
  size_t n;
  const char *text = luaL_checklstring(L, 3, &n);
  lua_pushinteger(L, (lua_Integer)index_text(ix, name, name, text, n, 0, (int64_t)n, 0));
  return 1;
}

/* index:add_dir(dir) -> true | nil, err */
static int l_add_dir(lua_State *L) {
  kb_index *ix = check_index(L);
  const char *dir = luaL_checkstring(L, 2);
  int r = index_dir(L, ix, dir);
  if (r) return r;
  lua_pushboolean(L, 1);
  return 1;
}

typedef struct {
  uint32_t id;
  double score;
} kb_hit;

static int cmp_hit(const void *a, const void *b) {
  const kb_hit *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

typedef struct {
  kb_index *ix;
  uint32_t *ids;
  size_t n, cap;
} kb_query;

static void collect_query(void *ud, const char *tok, size_t len) {
  kb_query *q = ud;
  uint32_t id = term_id(q->ix, tok, len, 0);
  if (id == UINT32_MAX) return;
  for (size_t i = 0; i < q->n; i++)
    if (q->ids[i] == id) return;
  if (q->n == q->cap) {
    q->cap = q->cap ? q->cap * 2 : 16;
    q->ids = xrealloc(q->ids, q->cap * sizeof *q->ids);
  }
  q->ids[q->n++] = id;
}

/* index:search(query, k = 5) -> { {file, name, title, text, line, score}, ... }
 * BM25 (k1 = 1.2, b = 0.75) with each distinct query term counted once. */
static int l_search(lua_State *L) {
  kb_index *ix = check_index(L);
  size_t qn;
  const char *q = luaL_checklstring(L, 2, &qn);
  lua_Integer k = luaL_optinteger(L, 3, 5);
  luaL_argcheck(L, k >= 1, 3, "k must be >= 1");
  lua_newtable(L);
  if (ix->nchunks == 0) return 1;
  kb_query query = {ix, NULL, 0, 0};
  tokenize(q, qn, collect_query, &query);
  if (query.n == 0) {
    free(query.ids);
    return 1;
  }
  double *score = calloc(ix->nchunks, sizeof *score);
  kb_hit *hits = NULL;
  size_t nh = 0, caph = 0;
  if (!score) {
    free(query.ids);
    return luaL_error(L, "mk.kb: out of memory");
  }
  double N = ix->nchunks, avgdl = (double)ix->total_tokens / N;
  if (avgdl <= 0) avgdl = 1;
  for (size_t i = 0; i < query.n; i++) {
    kb_term *t = &ix->terms[query.ids[i]];
    double df = t->n;
    double idf = log(1.0 + (N - df + 0.5) / (df + 0.5));
    for (uint32_t j = 0; j < t->n; j++) {
      uint32_t c = t->p[j].chunk;
      double tf = t->p[j].tf, dl = ix->chunks[c].ntok;
      double s = idf * tf * (KB_BM25_K1 + 1) / (tf + KB_BM25_K1 * (1 - KB_BM25_B + KB_BM25_B * dl / avgdl));
      if (score[c] == 0) {
        if (nh == caph) {
          caph = caph ? caph * 2 : 64;
          hits = xrealloc(hits, caph * sizeof *hits);
        }
        hits[nh++].id = c;
      }
      score[c] += s;
    }
  }
  for (size_t i = 0; i < nh; i++) hits[i].score = score[hits[i].id];
  if (nh > 1) qsort(hits, nh, sizeof *hits, cmp_hit);
  if ((size_t)k > nh) k = (lua_Integer)nh;
  for (lua_Integer i = 0; i < k; i++) {
    kb_chunk *c = &ix->chunks[hits[i].id];
    lua_createtable(L, 0, 7);
    lua_pushstring(L, ix->files[c->file].path);
    lua_setfield(L, -2, "file");
    lua_pushstring(L, ix->files[c->file].name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, c->title);
    lua_setfield(L, -2, "title");
    lua_pushlstring(L, c->text, c->text_len);
    lua_setfield(L, -2, "text");
    lua_pushinteger(L, c->line);
    lua_setfield(L, -2, "line");
    lua_pushnumber(L, hits[i].score);
    lua_setfield(L, -2, "score");
    lua_pushinteger(L, (lua_Integer)hits[i].id + 1);
    lua_setfield(L, -2, "chunk");
    lua_rawseti(L, -2, i + 1);
  }
  free(score);
  free(hits);
  free(query.ids);
  return 1;
}

/* index:stats() -> {files, chunks, terms, tokens, bytes} */
static int l_stats(lua_State *L) {
  kb_index *ix = check_index(L);
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, ix->nfiles);
  lua_setfield(L, -2, "files");
  lua_pushinteger(L, ix->nchunks);
  lua_setfield(L, -2, "chunks");
  lua_pushinteger(L, ix->nterms);
  lua_setfield(L, -2, "terms");
  lua_pushinteger(L, (lua_Integer)ix->total_tokens);
  lua_setfield(L, -2, "tokens");
  lua_pushinteger(L, (lua_Integer)ix->bytes);
  lua_setfield(L, -2, "bytes");
  return 1;
}

/* index:stale() -> true when a file under the indexed directories was
 * added, removed, or changed (modification time or size) since indexing. */
static int l_stale(lua_State *L) {
  kb_index *ix = check_index(L);
  int stale = 0;
  uint32_t f = 0;
  for (uint32_t d = 1; d <= ix->ndirs && !stale; d++) {
    kb_found_list found = {0};
    if (walk(ix->dirs[d - 1], "", 0, ix->skip, ix->nskip, &found) != 0) stale = 1;
    size_t i = 0;
    for (; f < ix->nfiles && !stale; f++) {
      kb_file *kf = &ix->files[f];
      if (kf->dir == 0) continue;
      if (kf->dir != d) break;
      if (i >= found.n || strcmp(kf->path, found.v[i].path) != 0 || kf->mtime_ns != found.v[i].mtime_ns ||
          kf->size != found.v[i].size)
        stale = 1;
      i++;
    }
    if (i != found.n) stale = 1;
    found_free(&found);
  }
  lua_pushboolean(L, stale);
  return 1;
}

static int l_close(lua_State *L) {
  kb_index *ix = luaL_checkudata(L, 1, KB_INDEX_MT);
  index_release(ix);
  return 0;
}

static int l_tostring(lua_State *L) {
  kb_index *ix = luaL_checkudata(L, 1, KB_INDEX_MT);
  if (ix->closed) lua_pushstring(L, "mk.kb.index (closed)");
  else lua_pushfstring(L, "mk.kb.index (%d files, %d chunks)", (int)ix->nfiles, (int)ix->nchunks);
  return 1;
}

typedef struct {
  lua_State *L;
  int n;
} kb_list_ctx;

static void push_token(void *ud, const char *tok, size_t len) {
  kb_list_ctx *c = ud;
  lua_pushlstring(c->L, tok, len);
  lua_rawseti(c->L, -2, ++c->n);
}

/* kb.tokens(text) -> list of index terms, in order (for tests and tools) */
static int l_tokens(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  lua_newtable(L);
  kb_list_ctx c = {L, 0};
  tokenize(s, n, push_token, &c);
  return 1;
}

static void push_chunk(void *ud, const char *title, const char *heading, const char *text, size_t len, unsigned line) {
  kb_list_ctx *c = ud;
  (void)heading;
  lua_createtable(c->L, 0, 3);
  lua_pushstring(c->L, title);
  lua_setfield(c->L, -2, "title");
  lua_pushlstring(c->L, text, len);
  lua_setfield(c->L, -2, "text");
  lua_pushinteger(c->L, line);
  lua_setfield(c->L, -2, "line");
  lua_rawseti(c->L, -2, ++c->n);
}

/* kb.chunks(markdown [, {max_chunk}]) -> { {title, text, line}, ... }: how
 * the index splits a file (text before the first heading has title ""). */
static int l_chunks(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  size_t max_chunk = opt_max_chunk(L, 2);
  kb_buf clean = {0};
  sanitize_utf8(&clean, s, n);
  lua_newtable(L);
  kb_list_ctx c = {L, 0};
  chunk_markdown(clean.p, clean.n, max_chunk, push_chunk, &c);
  free(clean.p);
  return 1;
}

int luaopen_mk_kb(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"search", l_search}, {"add", l_add},     {"add_dir", l_add_dir}, {"stats", l_stats},
      {"stale", l_stale},   {"close", l_close}, {NULL, NULL},
  };
  static const luaL_Reg funcs[] = {
      {"open", l_open}, {"new", l_new}, {"tokens", l_tokens}, {"chunks", l_chunks}, {NULL, NULL},
  };
  if (luaL_newmetatable(L, KB_INDEX_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, l_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}

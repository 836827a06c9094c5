/* stdin.c: `mk.stdin`, lines of the engine's standard input for tasks.
 * The terminal path of human-in-the-loop strategies waits here instead of
 * in io.read, so the loop (other tasks, the status line, the run viewer)
 * goes on while a person thinks. fd 0 is read through libuv: a uv_tty
 * when it is a terminal (libuv reopens the tty, so the shell's descriptor
 * is not made non-blocking), a uv_pipe for a pipe or socket. One reader
 * for the process; the lines read ahead are kept for the next call. */
#include "mk.h"
#include "buf.h"

#include <stdlib.h>
#include <string.h>

typedef struct line_op {
  mk_op op;
} line_op;

static struct {
  union {
    uv_tty_t tty;
    uv_pipe_t pipe;
    uv_handle_t h;
  } u;
  int open, eof, reading, err;
  mk_buf pending; /* bytes read and not yet returned */
  line_op *waiter;
} S;

static int have_line(void) { return S.pending.n > 0 && memchr(S.pending.p, '\n', S.pending.n) != NULL; }

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  (void)h;
  (void)hint;
  static char chunk[4096];
  *buf = uv_buf_init(chunk, sizeof chunk);
}

static void stop_reading(void) {
  if (S.reading) {
    uv_read_stop((uv_stream_t *)&S.u.h);
    uv_unref(&S.u.h);
  }
  S.reading = 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void)s;
  if (n < 0) {
    S.eof = 1;
    if (n != UV_EOF) S.err = (int)n;
    stop_reading();
  } else if (n > 0 && mk_buf_add(&S.pending, buf->base, (size_t)n) != 0) {
    S.err = UV_ENOMEM;
    S.eof = 1;
    stop_reading();
  }
  if (S.waiter && (have_line() || S.eof)) {
    line_op *w = S.waiter;
    S.waiter = NULL;
    stop_reading(); /* read no further than a person typed */
    mk_op_finish(&w->op);
  }
}

/* Push the next line (without its newline), or nil at the end of input. */
static int push_line(lua_State *L) {
  char *nl = S.pending.n ? memchr(S.pending.p, '\n', S.pending.n) : NULL;
  size_t k = nl ? (size_t)(nl - S.pending.p) : S.pending.n;
  if (!nl && !S.eof) return 0;
  if (!nl && k == 0) {
    if (S.err) return mk_push_error(L, "io", "cannot read standard input: %s", uv_strerror(S.err));
    lua_pushnil(L);
    return 1;
  }
  size_t take = nl ? k + 1 : k;
  if (k > 0 && S.pending.p[k - 1] == '\r') k--;
  lua_pushlstring(L, S.pending.p, k);
  memmove(S.pending.p, S.pending.p + take, S.pending.n - take);
  S.pending.n -= take;
  return 1;
}

static int line_results(lua_State *L, mk_op *op) {
  (void)op;
  int n = push_line(L);
  if (n == 0) lua_pushnil(L), n = 1;
  return n;
}

static void line_cancel(mk_op *op) {
  if (S.waiter == (line_op *)op) S.waiter = NULL;
  stop_reading();
  mk_op_finish(op);
}

static const mk_op_vt line_vt = {"stdin.read_line", line_results, line_cancel, NULL};

static int open_stdin(lua_State *L) {
  if (S.open) return 0;
  uv_loop_t *loop = mk_loop(L);
  uv_handle_type t = uv_guess_handle(0);
  int rc;
  if (t == UV_TTY) rc = uv_tty_init(loop, &S.u.tty, 0, 1);
  else if (t == UV_NAMED_PIPE || t == UV_TCP) {
    rc = uv_pipe_init(loop, &S.u.pipe, 0);
    if (rc == 0) rc = uv_pipe_open(&S.u.pipe, 0);
  } else {
    return -1;
  }
  if (rc != 0) return rc;
  S.open = 1;
  uv_unref(&S.u.h); /* only a waiting reader keeps the engine's loop alive */
  return 0;
}

/* read_line() -> line | nil (end of input) | nil, err. Waits (the task
 * only) for a whole line of standard input. */
static int l_read_line(lua_State *L) {
  int n = push_line(L);
  if (n > 0) return n;
  if (S.waiter) return luaL_error(L, "stdin.read_line: another task is already reading standard input");
  int rc = open_stdin(L);
  if (rc == -1) return mk_push_error(L, "unsupported", "standard input is neither a terminal nor a pipe");
  if (rc != 0) return mk_push_error(L, "io", "cannot open standard input: %s", uv_strerror(rc));
  line_op *o = mk_op_new(L, sizeof *o, &line_vt);
  S.waiter = o;
  if (!S.reading) { /* referenced while a task waits: the loop must not end under it */
    uv_ref(&S.u.h);
    uv_read_start((uv_stream_t *)&S.u.h, on_alloc, on_read);
    S.reading = 1;
  }
  return mk_op_yield(L, &o->op);
}

/* kind() -> "tty" | "pipe" | "file" | "none": what fd 0 is. */
static int l_kind(lua_State *L) {
  uv_handle_type t = uv_guess_handle(0);
  lua_pushstring(L, t == UV_TTY                           ? "tty"
                    : (t == UV_NAMED_PIPE || t == UV_TCP) ? "pipe"
                    : t == UV_FILE                        ? "file"
                                                          : "none");
  return 1;
}

int luaopen_mk_stdin(lua_State *L) {
  static const luaL_Reg funcs[] = {{"read_line", l_read_line}, {"kind", l_kind}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}

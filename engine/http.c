/* http.c: `mk.http`, HTTP(S) requests for tasks. libcurl's multi interface
 * is driven by the engine's libuv loop the way curl's docs/examples/multi-uv.c
 * does it: one uv_poll per socket (CURLMOPT_SOCKETFUNCTION), one uv_timer
 * for curl's timeout (CURLMOPT_TIMERFUNCTION), and the finished transfers are
 * drained with curl_multi_info_read after every curl_multi_socket_action.
 *
 * A transfer (`xfer`) lives in a Lua userdata and runs on its own once
 * started; a task waits on it with an mk_op, either for the next batch of
 * body lines (`req:next_lines()`, for SSE) or for the end (`req:wait()`).
 * No Lua code ever runs from a libuv or curl callback: lines are buffered in
 * C and handed over when the waiting task is resumed, so an `on_line`
 * callback may itself wait on engine primitives. `http.request{...}` is a
 * few lines of Lua over these (see LUA_WRAPPER at the end). */
#include "mk.h"
#include "opts.h"
#include "buf.h"

#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define XFER_MT "mk.http.request"

/* ---- the shared multi handle -------------------------------------------- */

typedef struct {
  uv_loop_t *loop;
  CURLM *multi;
  uv_timer_t timer;
  int ready;
  int final;             /* the engine is being closed: its loop has stopped */
  long live;             /* transfers allocated and not yet freed */
  long running;          /* transfers inside the multi handle */
  struct stall *orphans; /* watchdogs whose timer the engine closed for us */
} http_ctx;

static http_ctx G;

typedef struct {
  uv_poll_t poll;
  curl_socket_t fd;
} sock_ctx;

typedef struct wait_op wait_op;

typedef struct xfer {
  CURL *easy;
  struct curl_slist *hdrs;
  char errbuf[CURL_ERROR_SIZE];
  mk_buf body;
  mk_buf resp_hdrs; /* "name\0value\0" pairs of the last response */
  mk_buf partial;   /* the line being received */
  mk_buf lines;     /* complete lines, each followed by '\n' */
  size_t nlines;
  int want_lines;
  int in_multi;
  int done;
  int cancelled;
  int closed;
  CURLcode result;
  long status;
  double total_s;
  long connects;        /* new connections this transfer had to open */
  curl_off_t max_bytes; /* cap on the body received (0: none) */
  curl_off_t rx_bytes;  /* body bytes received so far */
  int too_big;          /* aborted because the body passed max_bytes */
  wait_op *waiter;
  struct stall *stall; /* the no-data watchdog, when stall_timeout is set */
  uint64_t last_rx;    /* loop time (ms) of the last bytes received */
} xfer;

/* Separately allocated: a uv handle must outlive its close callback, and
 * the xfer's userdata memory is freed by Lua right after __gc. */
typedef struct stall {
  uv_timer_t timer;
  xfer *x;
  uint64_t ms;
  struct stall *next_orphan;
} stall;

enum { WAIT_LINES, WAIT_DONE };

struct wait_op {
  mk_op op;
  xfer *x;
  int mode;
};

static void check_multi_info(void);
static void stall_stop(xfer *x);

static void wake(xfer *x, int finishing) {
  wait_op *w = x->waiter;
  if (!w) return;
  if (finishing || (w->mode == WAIT_LINES && x->nlines > 0)) {
    x->waiter = NULL;
    mk_op_finish(&w->op);
  }
}

static void on_poll_close(uv_handle_t *h) { free(h->data); }

static void on_poll(uv_poll_t *h, int status, int events) {
  sock_ctx *s = h->data;
  int flags = 0;
  if (status < 0) flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  int running;
  curl_multi_socket_action(G.multi, s->fd, flags, &running);
  check_multi_info();
}

static void on_timer(uv_timer_t *t) {
  (void)t;
  int running;
  curl_multi_socket_action(G.multi, CURL_SOCKET_TIMEOUT, 0, &running);
  check_multi_info();
}

/* CURLMOPT_SOCKETFUNCTION: curl says which events it wants on a socket. */
static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
  (void)easy;
  (void)userp;
  sock_ctx *s = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (s) {
      curl_multi_assign(G.multi, fd, NULL);
      /* at engine shutdown the loop closed the handle already (and ran
       * its close): then only the memory is left to free */
      if (!uv_is_closing((uv_handle_t *)&s->poll)) {
        uv_poll_stop(&s->poll);
        uv_close((uv_handle_t *)&s->poll, on_poll_close);
      } else if (G.final) {
        free(s);
      }
    }
    return 0;
  }
  if (G.final || (s && uv_is_closing((uv_handle_t *)&s->poll))) return 0; /* shutting down */
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s) return -1;
    s->fd = fd;
    if (uv_poll_init_socket(G.loop, &s->poll, fd) != 0) {
      free(s);
      return -1;
    }
    s->poll.data = s;
    curl_multi_assign(G.multi, fd, s);
  }
  int ev = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) ev |= UV_READABLE;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) ev |= UV_WRITABLE;
  uv_poll_start(&s->poll, ev, on_poll);
  return 0;
}

/* CURLMOPT_TIMERFUNCTION: never call socket_action from here (curl forbids
 * the recursion); a 0 ms timeout runs at the next loop iteration. */
static int timer_cb(CURLM *multi, long timeout_ms, void *userp) {
  (void)multi;
  (void)userp;
  if (timeout_ms < 0) uv_timer_stop(&G.timer);
  else uv_timer_start(&G.timer, on_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

static void xfer_remove(xfer *x) {
  if (x->in_multi && G.ready) {
    curl_multi_remove_handle(G.multi, x->easy);
    x->in_multi = 0;
    G.running--;
  }
}

/* Split the newly received bytes into lines; '\r' before '\n' is dropped.
 * -1 when memory ran out (the transfer then fails, like a body that cannot
 * grow). */
static int add_lines(xfer *x, const char *p, size_t n) {
  while (n > 0) {
    const char *nl = memchr(p, '\n', n);
    if (!nl) return mk_buf_add(&x->partial, p, n);
    size_t k = (size_t)(nl - p);
    if (mk_buf_add(&x->partial, p, k) != 0) return -1;
    if (x->partial.n > 0 && x->partial.p[x->partial.n - 1] == '\r') x->partial.n--;
    if (mk_buf_add(&x->lines, x->partial.p ? x->partial.p : "", x->partial.n) != 0) return -1;
    if (mk_buf_add(&x->lines, "\n", 1) != 0) return -1;
    x->nlines++;
    x->partial.n = 0;
    p = nl + 1;
    n -= k + 1;
  }
  return 0;
}

static void xfer_complete(xfer *x, CURLcode rc) {
  x->done = 1;
  x->result = rc;
  curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
  curl_easy_getinfo(x->easy, CURLINFO_TOTAL_TIME, &x->total_s);
  curl_easy_getinfo(x->easy, CURLINFO_NUM_CONNECTS, &x->connects);
  if (x->want_lines && x->partial.n > 0) {
    if (mk_buf_add(&x->lines, x->partial.p, x->partial.n) == 0 && mk_buf_add(&x->lines, "\n", 1) == 0) x->nlines++;
    x->partial.n = 0;
  }
  xfer_remove(x);
  stall_stop(x);
  wake(x, 1);
}

static void on_stall_close(uv_handle_t *h) { free(h->data); }

static void stall_stop(xfer *x) {
  stall *st = x->stall;
  if (!st) return;
  x->stall = NULL;
  st->x = NULL;
  if (!uv_is_closing((uv_handle_t *)&st->timer)) {
    uv_close((uv_handle_t *)&st->timer, on_stall_close);
  } else { /* closed by the engine's shutdown: freed by ctx_gc */
    st->next_orphan = G.orphans;
    G.orphans = st;
  }
}

/* No bytes for stall_timeout: abort like curl's own timeouts do. (curl's
 * LOW_SPEED_* options average over several seconds, too coarse for this.) */
static void on_stall(uv_timer_t *t) {
  stall *st = t->data;
  xfer *x = st->x;
  if (!x || x->done) return;
  uint64_t idle = uv_now(G.loop) - x->last_rx;
  if (idle < st->ms) {
    uv_timer_start(&st->timer, on_stall, st->ms - idle, 0);
    return;
  }
  snprintf(x->errbuf, sizeof x->errbuf, "no data received for %.1f s (stall_timeout)", (double)st->ms / 1000.0);
  xfer_complete(x, CURLE_OPERATION_TIMEDOUT);
}

static void check_multi_info(void) {
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(G.multi, &left))) {
    if (m->msg != CURLMSG_DONE) continue;
    xfer *x = NULL;
    CURLcode rc = m->data.result;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
    if (x) xfer_complete(x, rc);
  }
}

/* Past max_bytes the transfer is aborted (returning less than len makes
 * curl stop with CURLE_WRITE_ERROR) and what was buffered is freed at once:
 * a runaway reply must not hold memory until the request is closed. */
static size_t write_cb(char *p, size_t size, size_t n, void *ud) {
  xfer *x = ud;
  size_t len = size * n;
  x->last_rx = uv_now(G.loop);
  x->rx_bytes += (curl_off_t)len;
  if (x->max_bytes > 0 && x->rx_bytes > x->max_bytes) {
    x->too_big = 1;
    mk_buf_free(&x->body);
    mk_buf_free(&x->partial);
    mk_buf_free(&x->lines);
    x->nlines = 0;
    return 0;
  }
  if (mk_buf_add(&x->body, p, len) != 0) {
    snprintf(x->errbuf, sizeof x->errbuf, "out of memory while receiving the response");
    return 0;
  }
  if (x->want_lines) {
    if (add_lines(x, p, len) != 0) {
      snprintf(x->errbuf, sizeof x->errbuf, "out of memory while receiving the response");
      return 0;
    }
    wake(x, 0);
  }
  return len;
}

static size_t header_cb(char *p, size_t size, size_t n, void *ud) {
  xfer *x = ud;
  size_t len = size * n;
  x->last_rx = uv_now(G.loop);
  if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
    x->resp_hdrs.n = 0; /* a new response (after 100-continue or a redirect) */
    return len;
  }
  const char *colon = memchr(p, ':', len);
  if (!colon) return len;
  size_t klen = (size_t)(colon - p);
  const char *v = colon + 1, *end = p + len;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
  char zero = 0;
  for (size_t i = 0; i < klen; i++) {
    char c = p[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (mk_buf_add(&x->resp_hdrs, &c, 1) != 0) return 0;
  }
  if (mk_buf_add(&x->resp_hdrs, &zero, 1) != 0 || mk_buf_add(&x->resp_hdrs, v, (size_t)(end - v)) != 0 ||
      mk_buf_add(&x->resp_hdrs, &zero, 1) != 0)
    return 0; /* out of memory: curl fails the transfer */
  return len;
}

/* Finalizer of the engine's http context, a registry sentinel created
 * before any request: Lua finalizes in reverse order of creation, so every
 * request is closed by then, and the engine has closed (and run) its loop.
 * What is left: the connection cache and the memory of closed handles. */
static int ctx_gc(lua_State *L) {
  (void)L;
  if (!G.ready) return 0;
  G.final = 1;
  curl_multi_cleanup(G.multi); /* may report sockets removed: see socket_cb */
  while (G.orphans) {
    stall *st = G.orphans;
    G.orphans = st->next_orphan;
    free(st);
  }
  memset(&G, 0, sizeof G);
  return 0;
}

/* One multi handle per engine (one lua_State), made on first use. */
static int ctx_init(lua_State *L) {
  if (G.ready) return 0;
  memset(&G, 0, sizeof G);
  G.loop = mk_loop(L);
  G.multi = curl_multi_init();
  if (!G.multi) return -1;
  curl_multi_setopt(G.multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
  curl_multi_setopt(G.multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  uv_timer_init(G.loop, &G.timer);
  G.ready = 1;
  lua_newuserdatauv(L, 1, 0);
  lua_newtable(L);
  lua_pushcfunction(L, ctx_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "mk.http.ctx");
  return 0;
}

/* Release everything the transfer owns; the userdata itself stays (closed). */
static void xfer_close(xfer *x) {
  if (x->closed) return;
  if (x->waiter) { /* only when the waiting coroutine was collected */
    wait_op *w = x->waiter;
    x->waiter = NULL;
    w->x = NULL;
    mk_op_finish(&w->op);
  }
  xfer_remove(x);
  stall_stop(x);
  if (x->easy) curl_easy_cleanup(x->easy);
  x->easy = NULL;
  curl_slist_free_all(x->hdrs);
  x->hdrs = NULL;
  mk_buf_free(&x->body);
  mk_buf_free(&x->resp_hdrs);
  mk_buf_free(&x->partial);
  mk_buf_free(&x->lines);
  x->closed = 1;
  G.live--;
}

/* ---- Lua: open ------------------------------------------------------------ */

static long to_ms(double s) { return s <= 0 ? 0 : (long)ceil(s * 1000.0); }

/* The easy handle's fixed settings: callbacks into x, its headers, no
 * signals, any encoding, keep-alive, http(s) only, the size cap. */
static void configure_easy(xfer *x, const char *url, int follow, int verbose) {
  CURL *e = x->easy;
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)x);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, (long)follow);
  curl_easy_setopt(e, CURLOPT_VERBOSE, (long)verbose);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  if (x->max_bytes > 0) curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, x->max_bytes);
}

/* Fail the transfer when nothing arrives for stall_s (on_stall). */
static void start_stall_timer(xfer *x, double stall_s) {
  stall *st = calloc(1, sizeof *st);
  if (!st) return;
  uv_timer_init(G.loop, &st->timer);
  st->timer.data = st;
  st->x = x;
  st->ms = (uint64_t)to_ms(stall_s);
  x->stall = st;
  uv_timer_start(&st->timer, on_stall, st->ms, 0);
}

/* The request's headers from options.headers ({name = value}), plus an
 * empty "Expect:" (curl adds "Expect: 100-continue" to big POSTs: a
 * needless round trip). Raises on a bad table, leaking nothing. */
static struct curl_slist *read_headers(lua_State *L) {
  struct curl_slist *hdrs = NULL;
  int ht = lua_getfield(L, 1, "headers");
  if (ht == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1)) {
        curl_slist_free_all(hdrs);
        luaL_error(L, "mk.http.request: headers must map names to strings");
      }
      lua_pushfstring(L, "%s: %s", lua_tostring(L, -2), lua_tostring(L, -1));
      struct curl_slist *n = curl_slist_append(hdrs, lua_tostring(L, -1));
      lua_pop(L, 2);
      if (!n) {
        curl_slist_free_all(hdrs);
        luaL_error(L, "mk.http.request: out of memory");
      }
      hdrs = n;
    }
  } else if (ht != LUA_TNIL) {
    luaL_error(L, "mk.http.request: option 'headers' must be a table");
  }
  lua_pop(L, 1);
  struct curl_slist *n = curl_slist_append(hdrs, "Expect:");
  return n ? n : hdrs;
}

/* open{method, url, headers, body, timeout, connect_timeout, stall_timeout,
 *      max_response_bytes, lines, follow, verbose} -> request userdata; the transfer starts now. */
static int l_open(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (!lua_isyieldable(L)) return luaL_error(L, "mk.http.request: must be called inside a task");
  const char *url = mk_opt_string(L, 1, "url", NULL, "mk.http.request");
  if (!url) return luaL_error(L, "mk.http.request: option 'url' is required");
  const char *method = mk_opt_string(L, 1, "method", NULL, "mk.http.request");
  size_t body_len = 0;
  const char *body = mk_opt_string(L, 1, "body", &body_len, "mk.http.request");
  double timeout = mk_opt_number(L, 1, "timeout", 0, "mk.http.request");
  double connect_timeout = mk_opt_number(L, 1, "connect_timeout", 30, "mk.http.request");
  double stall_s = mk_opt_number(L, 1, "stall_timeout", 0, "mk.http.request");
  double max_bytes = mk_opt_number(L, 1, "max_response_bytes", 0, "mk.http.request");
  int want_lines = mk_opt_bool(L, 1, "lines");
  int follow = mk_opt_bool(L, 1, "follow");
  int verbose = mk_opt_bool(L, 1, "verbose");

  struct curl_slist *hdrs = read_headers(L);

  if (ctx_init(L) != 0) {
    curl_slist_free_all(hdrs);
    return luaL_error(L, "mk.http.request: curl_multi_init failed");
  }
  xfer *x = lua_newuserdatauv(L, sizeof *x, 0);
  memset(x, 0, sizeof *x);
  x->closed = 1; /* until fully set up, so __gc does nothing */
  luaL_setmetatable(L, XFER_MT);
  CURL *e = curl_easy_init();
  if (!e) {
    curl_slist_free_all(hdrs);
    return luaL_error(L, "mk.http.request: curl_easy_init failed");
  }
  x->easy = e;
  x->hdrs = hdrs;
  x->want_lines = want_lines;
  x->max_bytes = max_bytes > 0 ? (curl_off_t)max_bytes : 0;
  x->closed = 0;
  G.live++;
  configure_easy(x, url, follow, verbose);
  if (timeout > 0) curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, to_ms(timeout));
  if (connect_timeout > 0) curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, to_ms(connect_timeout));
  if (body) {
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body);
  }
  if (method) curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  if (method && strcasecmp(method, "HEAD") == 0) curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  CURLMcode mc = curl_multi_add_handle(G.multi, e);
  if (mc != CURLM_OK) {
    xfer_close(x);
    return luaL_error(L, "mk.http.request: %s", curl_multi_strerror(mc));
  }
  x->in_multi = 1;
  G.running++;
  /* the loop's clock stops while Lua works without waiting (a commit, a
   * blocking call): stamped from it, the stall timer would fire early */
  uv_update_time(G.loop);
  x->last_rx = uv_now(G.loop);
  if (stall_s > 0) start_stall_timer(x, stall_s);
  return 1;
}

/* ---- Lua: waiting ----------------------------------------------------------- */

static xfer *check_xfer(lua_State *L) {
  xfer *x = luaL_checkudata(L, 1, XFER_MT);
  if (x->closed) luaL_error(L, "mk.http: request is closed");
  return x;
}

static void push_headers(lua_State *L, xfer *x) {
  lua_newtable(L);
  const char *p = x->resp_hdrs.p, *end = p + x->resp_hdrs.n;
  while (p && p < end) {
    const char *k = p;
    const char *v = k + strlen(k) + 1;
    if (v >= end) break;
    p = v + strlen(v) + 1;
    if (lua_getfield(L, -1, k) == LUA_TSTRING) { /* repeated header: join */
      lua_pushfstring(L, "%s, %s", lua_tostring(L, -1), v);
      lua_setfield(L, -3, k);
      lua_pop(L, 1);
    } else {
      lua_pop(L, 1);
      lua_pushstring(L, v);
      lua_setfield(L, -2, k);
    }
  }
}

static const char *error_kind(CURLcode rc) {
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT: return "timeout";
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL: return "bad_request";
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE: return "tls";
    default: return "network";
  }
}

static int push_response(lua_State *L, xfer *x) {
  if (x->cancelled) return mk_push_error(L, "cancelled", "request cancelled");
  if (x->result != CURLE_OK) {
    const char *detail = x->errbuf[0] ? x->errbuf : curl_easy_strerror(x->result);
    if (x->too_big || x->result == CURLE_FILESIZE_EXCEEDED)
      mk_push_error(L, "bad_response", "the response passed max_response_bytes (%I bytes); transfer aborted",
                    (lua_Integer)x->max_bytes);
    else mk_push_error(L, error_kind(x->result), "%s", detail);
    lua_pushinteger(L, (lua_Integer)x->result);
    lua_setfield(L, -2, "curl_code");
    if (x->status > 0) {
      lua_pushinteger(L, x->status);
      lua_setfield(L, -2, "status");
    }
    return 2;
  }
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, x->status);
  lua_setfield(L, -2, "status");
  push_headers(L, x);
  lua_setfield(L, -2, "headers");
  lua_pushlstring(L, x->body.p ? x->body.p : "", x->body.n);
  lua_setfield(L, -2, "body");
  lua_pushnumber(L, x->total_s);
  lua_setfield(L, -2, "time_s");
  lua_pushinteger(L, x->connects);
  lua_setfield(L, -2, "new_connections");
  return 1;
}

/* Hand over the buffered lines as an array (nil once the body is over). */
static int push_lines(lua_State *L, xfer *x) {
  if (x->nlines == 0) {
    lua_pushnil(L);
    return 1;
  }
  lua_createtable(L, (int)x->nlines, 0);
  const char *p = x->lines.p, *end = p + x->lines.n;
  for (size_t i = 1; i <= x->nlines; i++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    lua_pushlstring(L, p, (size_t)(nl - p));
    lua_rawseti(L, -2, (lua_Integer)i);
    p = nl + 1;
  }
  x->lines.n = 0;
  x->nlines = 0;
  return 1;
}

static int wait_results(lua_State *L, mk_op *op) {
  wait_op *w = (wait_op *)op;
  xfer *x = w->x;
  if (!x || x->closed) return mk_push_error(L, "cancelled", "request closed while waiting");
  if (w->mode == WAIT_LINES) return push_lines(L, x);
  return push_response(L, x);
}

/* The task was cancelled: abort the transfer now; it has stopped when
 * curl_multi_remove_handle returns. */
static void wait_cancel(mk_op *op) {
  wait_op *w = (wait_op *)op;
  xfer *x = w->x;
  if (x) {
    x->waiter = NULL;
    if (!x->done) {
      xfer_remove(x);
      stall_stop(x);
      x->done = 1;
      x->cancelled = 1;
    }
  }
  mk_op_finish(op);
}

static const mk_op_vt wait_vt = {"mk.http.request", wait_results, wait_cancel, NULL};

static int start_wait(lua_State *L, xfer *x, int mode) {
  if (x->waiter) return luaL_error(L, "mk.http: another task is already waiting on this request");
  wait_op *w = mk_op_new(L, sizeof *w, &wait_vt);
  w->x = x;
  w->mode = mode;
  x->waiter = w;
  return mk_op_yield(L, &w->op);
}

/* req:next_lines() -> {line, ...} | nil when the body is over */
static int l_next_lines(lua_State *L) {
  xfer *x = check_xfer(L);
  if (!x->want_lines) return luaL_error(L, "mk.http: next_lines needs the request opened with lines = true");
  if (x->nlines > 0 || x->done) return push_lines(L, x);
  return start_wait(L, x, WAIT_LINES);
}

/* req:wait() -> {status, headers, body, time_s} | nil, err */
static int l_wait(lua_State *L) {
  xfer *x = check_xfer(L);
  if (x->done) return push_response(L, x);
  return start_wait(L, x, WAIT_DONE);
}

/* req:status() -> the HTTP status received so far (0 before the headers) */
static int l_status(lua_State *L) {
  xfer *x = check_xfer(L);
  long st = x->status;
  if (!x->done && x->easy) curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &st);
  lua_pushinteger(L, st);
  return 1;
}

/* req:close(): abort the transfer if it still runs and free it. */
static int l_close(lua_State *L) {
  xfer *x = luaL_checkudata(L, 1, XFER_MT);
  xfer_close(x);
  return 0;
}

/* http.live() -> transfers allocated, transfers in flight (leak checks) */
static int l_live(lua_State *L) {
  lua_pushinteger(L, G.live);
  lua_pushinteger(L, G.running);
  return 2;
}

/* The friendly entry point, in Lua so that on_line runs as ordinary task
 * code (it may wait, raise, or be cancelled; <close> aborts the transfer). */
static const char LUA_WRAPPER[] =
    "local c = ...\n"
    "local M = { open = c.open, live = c.live, version = c.version }\n"
    "function M.request(opts)\n"
    "  if type(opts) ~= 'table' then error('mk.http.request: expected a table of options', 2) end\n"
    "  local on_line = opts.on_line\n"
    "  if on_line ~= nil and type(on_line) ~= 'function' then\n"
    "    error('mk.http.request: on_line must be a function', 2)\n"
    "  end\n"
    "  local o = {}\n"
    "  for k, v in pairs(opts) do o[k] = v end\n"
    "  o.lines, o.on_line = on_line ~= nil, nil\n"
    "  local req <close> = c.open(o)\n"
    "  if on_line then\n"
    "    while true do\n"
    "      local lines = req:next_lines()\n"
    "      if not lines then break end\n"
    "      for i = 1, #lines do on_line(lines[i]) end\n"
    "    end\n"
    "  end\n"
    "  return req:wait()\n"
    "end\n"
    "return M\n";

static int l_gc(lua_State *L) {
  xfer *x = luaL_checkudata(L, 1, XFER_MT);
  xfer_close(x);
  return 0;
}

int luaopen_mk_http(lua_State *L) {
  static int global_init;
  if (!global_init) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) return luaL_error(L, "mk.http: curl_global_init failed");
    global_init = 1;
  }
  static const luaL_Reg methods[] = {
      {"next_lines", l_next_lines}, {"wait", l_wait}, {"status", l_status}, {"close", l_close}, {NULL, NULL}};
  luaL_newmetatable(L, XFER_MT);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, l_close);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);

  static const luaL_Reg funcs[] = {{"open", l_open}, {"live", l_live}, {NULL, NULL}};
  if (luaL_loadbuffer(L, LUA_WRAPPER, sizeof LUA_WRAPPER - 1, "=mk.http") != LUA_OK) return lua_error(L);
  luaL_newlib(L, funcs);
  lua_pushstring(L, curl_version());
  lua_setfield(L, -2, "version");
  lua_call(L, 1, 1);
  return 1;
}

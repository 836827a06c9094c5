/* httpd.c: `mk.httpd`, an HTTP server for tasks (the run viewer of
 * `mkengine serve` and `run --ui`). The protocol is GNU libmicrohttpd's
 * (parsing, keep-alive, chunked replies, limits); this file only drives it
 * from the engine's libuv loop: MHD runs in "external polling" mode with
 * epoll, its one epoll descriptor is watched by a uv_poll and its timeout
 * by a uv_timer, and every wake-up calls MHD_run.
 *
 * No Lua runs inside MHD's callbacks. A complete request is parked
 * (MHD_suspend_connection) and queued; a task takes it with
 * `srv:next()` (an mk_op), answers with `req:respond(status, body,
 * headers)` or opens a stream with `req:stream(status, headers)` (Server-
 * Sent Events: `stream:send(text)` appends, `stream:close()` ends), and
 * the connection is resumed. A stream with nothing to send is suspended
 * inside MHD's content reader, so an idle page costs nothing. A send may
 * be held for a while (`stream:send(text, within_s)`): every stream held
 * is resumed by one timer, so sends that come close together cost the
 * loop and the library one write, not one each.
 *
 * A request is owned by MHD (until its "completed" notice) and by its Lua
 * userdata (until __gc); it is freed when both let go. A request the Lua
 * side dropped without answering gets a 500, never a hung connection. */
#include "mk.h"
#include "buf.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define SRV_MT   "mk.httpd.server"
#define REQ_MT   "mk.httpd.request"
#define MAX_BODY (1u << 20)

typedef struct hreq hreq;
typedef struct next_op next_op;

typedef struct server {
  struct MHD_Daemon *d;
  uv_poll_t poll;
  uv_timer_t timer;
  uv_timer_t hold;   /* resumes the streams whose sends are held */
  uint64_t hold_due; /* loop time it fires at (0: not armed) */
  hreq *head, *tail; /* complete requests no task has taken yet */
  hreq *all;         /* every request alive (to resume them at close) */
  next_op *waiter;
  int closed;
  int handles;  /* uv handles not yet closed */
  double cpu_s; /* thread CPU spent inside MHD_run (for the viewer's cost) */
  long live;    /* requests allocated and not yet freed */
} server;

enum { R_RECEIVING, R_QUEUED, R_TAKEN, R_READY, R_SENT, R_STREAM };

struct hreq {
  server *srv;
  struct MHD_Connection *conn; /* NULL once MHD is done with it */
  int state, suspended, refs, too_big;
  int held; /* stream: sent bytes wait for the server's hold timer */
  char *method, *url;
  mk_buf headers; /* "name\0value\0" (names lower case) */
  mk_buf query;   /* "name\0value\0" */
  mk_buf body;
  struct MHD_Response *resp;
  unsigned status;
  mk_buf out; /* stream: bytes not yet handed to MHD */
  size_t out_off;
  int out_closed;
  hreq *next;
  hreq *prev_all, *next_all;
};

struct next_op {
  mk_op op;
  server *srv;
};

static void srv_pump(server *s);

/* ---- the loop side ------------------------------------------------------- */

static void on_poll(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  srv_pump(h->data);
}

static void on_timer(uv_timer_t *t) { srv_pump(t->data); }

/* Let MHD do its work, then re-arm the timer with MHD's next deadline. */
static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void srv_pump(server *s) {
  if (!s->d) return;
  double t0 = thread_cpu();
  MHD_run(s->d);
  s->cpu_s += thread_cpu() - t0;
  if (s->closed || uv_is_closing((uv_handle_t *)&s->timer)) return;
  MHD_UNSIGNED_LONG_LONG ms;
  if (MHD_get_timeout(s->d, &ms) == MHD_YES) uv_timer_start(&s->timer, on_timer, (uint64_t)ms, 0);
  else uv_timer_stop(&s->timer);
}

/* Resume a parked connection; MHD then answers it at the next MHD_run,
 * which a 0 ms timer brings about within this loop iteration. */
static void req_resume(hreq *r) {
  if (!r->conn || !r->suspended) return;
  r->suspended = 0;
  MHD_resume_connection(r->conn);
  if (!r->srv->closed && !uv_is_closing((uv_handle_t *)&r->srv->timer)) uv_timer_start(&r->srv->timer, on_timer, 0, 0);
}

/* The hold timer: what was held goes out now. */
static void on_hold(uv_timer_t *t) {
  server *s = t->data;
  s->hold_due = 0;
  for (hreq *r = s->all; r; r = r->next_all) {
    if (!r->held) continue;
    r->held = 0;
    req_resume(r);
  }
}

/* Resume r's connection within ms milliseconds, with every other stream
 * held until then. */
static void req_hold(hreq *r, uint64_t ms) {
  server *s = r->srv;
  if (s->closed || uv_is_closing((uv_handle_t *)&s->hold)) {
    req_resume(r);
    return;
  }
  r->held = 1;
  uint64_t due = uv_now(s->hold.loop) + ms;
  if (s->hold_due && s->hold_due <= due) return;
  s->hold_due = due;
  uv_timer_start(&s->hold, on_hold, ms, 0);
}

/* The server's memory goes once its handles are closed and no request
 * (held by MHD or by a Lua userdata) points at it. */
static void srv_maybe_free(server *s) {
  if (s->closed && s->handles == 0 && s->live == 0) free(s);
}

static void req_release(hreq *r) {
  if (--r->refs > 0) return;
  server *s = r->srv;
  if (r->resp) MHD_destroy_response(r->resp);
  mk_buf_free(&r->headers);
  mk_buf_free(&r->query);
  mk_buf_free(&r->body);
  mk_buf_free(&r->out);
  free(r->method);
  free(r->url);
  if (r->prev_all) r->prev_all->next_all = r->next_all;
  else r->srv->all = r->next_all;
  if (r->next_all) r->next_all->prev_all = r->prev_all;
  s->live--;
  free(r);
  srv_maybe_free(s);
}

static void wake(server *s) {
  next_op *w = s->waiter;
  if (w && (s->head || s->closed)) {
    s->waiter = NULL;
    mk_op_finish(&w->op);
  }
}

/* ---- MHD callbacks (no Lua here) ----------------------------------------- */

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  mk_buf *b = cls;
  size_t start = b->n;
  if (mk_buf_add(b, key, strlen(key) + 1) != 0) return MHD_NO;
  if (kind == MHD_HEADER_KIND)
    for (size_t i = start; b->p[i]; i++) b->p[i] = (char)((b->p[i] >= 'A' && b->p[i] <= 'Z') ? b->p[i] + 32 : b->p[i]);
  if (mk_buf_add(b, value ? value : "", strlen(value ? value : "") + 1) != 0) return MHD_NO;
  return MHD_YES;
}

static enum MHD_Result reply_now(struct MHD_Connection *c, unsigned status, const char *msg) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(msg), (void *)msg, MHD_RESPMEM_MUST_COPY);
  if (!resp) return MHD_NO;
  MHD_add_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
  enum MHD_Result ret = MHD_queue_response(c, status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static hreq *req_new(server *s, struct MHD_Connection *c, const char *url, const char *method) {
  hreq *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->srv = s;
  r->conn = c;
  r->refs = 1; /* MHD's */
  r->method = strdup(method);
  r->url = strdup(url);
  if (!r->method || !r->url) {
    free(r->method);
    free(r->url);
    free(r);
    return NULL;
  }
  MHD_get_connection_values(c, MHD_HEADER_KIND, collect, &r->headers);
  MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect, &r->query);
  r->next_all = s->all;
  if (s->all) s->all->prev_all = r;
  s->all = r;
  s->live++;
  return r;
}

/* The request is complete: park it for a task. */
static enum MHD_Result req_enqueue(server *s, hreq *r) {
  if (r->too_big) return reply_now(r->conn, 413, "request body too large (limit 1 MiB)\n");
  if (s->closed) return reply_now(r->conn, 503, "server closing\n");
  r->state = R_QUEUED;
  r->next = NULL;
  if (s->tail) s->tail->next = r;
  else s->head = r;
  s->tail = r;
  r->suspended = 1;
  MHD_suspend_connection(r->conn);
  wake(s);
  return MHD_YES;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  (void)version;
  server *s = cls;
  hreq *r = *con_cls;
  if (!r) {
    r = req_new(s, c, url, method);
    if (!r) return MHD_NO;
    *con_cls = r;
    return MHD_YES;
  }
  if (r->state == R_RECEIVING) {
    if (*upload_size) {
      if (r->body.n + *upload_size > MAX_BODY || mk_buf_add(&r->body, upload, *upload_size) != 0) r->too_big = 1;
      *upload_size = 0;
      return MHD_YES;
    }
    return req_enqueue(s, r);
  }
  if (r->state == R_READY || r->state == R_STREAM) {
    enum MHD_Result ret = MHD_queue_response(c, r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    if (r->state == R_READY) r->state = R_SENT;
    return ret;
  }
  return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)cls;
  (void)c;
  (void)toe;
  hreq *r = *con_cls;
  if (!r) return;
  *con_cls = NULL;
  r->conn = NULL;
  r->suspended = 0;
  req_release(r);
}

/* Stream reader: hand over what was sent; with nothing to hand over, park
 * the connection until stream:send or stream:close resumes it. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  hreq *r = cls;
  size_t left = r->out.n - r->out_off;
  if (left > 0) {
    size_t k = left < max ? left : max;
    memcpy(buf, r->out.p + r->out_off, k);
    r->out_off += k;
    if (r->out_off == r->out.n) r->out.n = r->out_off = 0;
    return (ssize_t)k;
  }
  if (r->out_closed || r->srv->closed) return MHD_CONTENT_READER_END_OF_STREAM;
  if (r->conn && !r->suspended) {
    r->suspended = 1;
    MHD_suspend_connection(r->conn);
  }
  return 0;
}

static void stream_done(void *cls) { req_release(cls); }

/* ---- server object -------------------------------------------------------- */

static server *check_srv(lua_State *L) {
  server **p = luaL_checkudata(L, 1, SRV_MT);
  if (!*p) luaL_error(L, "httpd: server was freed");
  return *p;
}

static void on_handle_closed(uv_handle_t *h) {
  server *s = h->data;
  s->handles--;
  srv_maybe_free(s);
}

static int parse_addr(const char *host, int port, struct sockaddr_in *sa) {
  memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  sa->sin_port = htons((uint16_t)port);
  return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* listen{host = "127.0.0.1", port = 0} -> server | nil, err. Port 0 picks
 * a free one: read it back as srv:port(). */
static int l_listen(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "host");
  const char *host = luaL_optstring(L, -1, "127.0.0.1");
  lua_getfield(L, 1, "port");
  lua_Integer port = luaL_optinteger(L, -1, 0);
  luaL_argcheck(L, port >= 0 && port <= 65535, 1, "port must be 0..65535");
  struct sockaddr_in sa;
  if (parse_addr(host, (int)port, &sa) != 0) return mk_push_error(L, "bad_address", "not an IPv4 address: %s", host);
  server **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, SRV_MT);
  server *s = calloc(1, sizeof *s);
  if (!s) return luaL_error(L, "httpd: out of memory");
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
  s->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_access, s, MHD_OPTION_SOCK_ADDR, &sa,
                          MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_CONNECTION_LIMIT, 256u,
                          MHD_OPTION_CONNECTION_TIMEOUT, 120u, MHD_OPTION_END);
  if (!s->d) {
    free(s);
    return mk_push_error(L, "listen", "cannot listen on %s:%d (in use, or not an address of this machine)", host,
                         (int)port);
  }
  const union MHD_DaemonInfo *ep = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_EPOLL_FD);
  uv_loop_t *loop = mk_loop(L);
  uv_poll_init(loop, &s->poll, ep->epoll_fd);
  uv_timer_init(loop, &s->timer);
  uv_timer_init(loop, &s->hold);
  s->poll.data = s->timer.data = s->hold.data = s;
  s->handles = 3;
  uv_poll_start(&s->poll, UV_READABLE, on_poll);
  *box = s;
  srv_pump(s);
  return 1;
}

static int s_port(lua_State *L) {
  server *s = check_srv(L);
  if (!s->d) return 0;
  const union MHD_DaemonInfo *pi = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  lua_pushinteger(L, pi ? pi->port : 0);
  return 1;
}

static void push_pairs(lua_State *L, const mk_buf *b) {
  lua_newtable(L);
  for (size_t i = 0; b->p && i < b->n;) {
    const char *k = b->p + i;
    const char *v = k + strlen(k) + 1;
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
    i = (size_t)(v - b->p) + strlen(v) + 1;
  }
}

/* A request userdata, its fields in the user value. */
static void push_req(lua_State *L, hreq *r) {
  hreq **box = lua_newuserdatauv(L, sizeof *box, 1);
  *box = r;
  r->refs++;
  r->state = R_TAKEN;
  luaL_setmetatable(L, REQ_MT);
  lua_createtable(L, 0, 5);
  lua_pushstring(L, r->method);
  lua_setfield(L, -2, "method");
  lua_pushstring(L, r->url);
  lua_setfield(L, -2, "path");
  push_pairs(L, &r->headers);
  lua_setfield(L, -2, "headers");
  push_pairs(L, &r->query);
  lua_setfield(L, -2, "query");
  lua_pushlstring(L, r->body.p ? r->body.p : "", r->body.n);
  lua_setfield(L, -2, "body");
  lua_setiuservalue(L, -2, 1);
}

static int pop_request(lua_State *L, server *s) {
  hreq *r = s->head;
  if (!r) return 0;
  s->head = r->next;
  if (!s->head) s->tail = NULL;
  if (!r->conn) { /* the client went away while it waited */
    req_release(r);
    return -1;
  }
  push_req(L, r);
  return 1;
}

static int next_results(lua_State *L, mk_op *op) {
  server *s = ((next_op *)op)->srv;
  for (; s;) {
    int got = pop_request(L, s);
    if (got == 1) return 1;
    if (got == 0) break;
  }
  lua_pushnil(L);
  return 1;
}

static void next_cancel(mk_op *op) {
  server *s = ((next_op *)op)->srv;
  if (s && s->waiter == (next_op *)op) s->waiter = NULL;
  mk_op_finish(op);
}

static const mk_op_vt next_vt = {"httpd:next", next_results, next_cancel, NULL};

/* srv:next() -> request | nil (server closed); waits for one. */
static int s_next(lua_State *L) {
  server **box = luaL_checkudata(L, 1, SRV_MT);
  server *s = *box;
  if (!s) return 0;
  for (;;) {
    int got = pop_request(L, s);
    if (got == 1) return 1;
    if (got == 0) break;
  }
  if (s->closed) return 0;
  if (s->waiter) return luaL_error(L, "httpd:next: another task is already waiting on this server");
  next_op *o = mk_op_new(L, sizeof *o, &next_vt);
  o->srv = s;
  s->waiter = o;
  return mk_op_yield(L, &o->op);
}

/* Stop accepting, end streams, answer parked requests, release MHD. */
static void srv_close(server *s, int loop_alive) {
  if (s->closed) return;
  s->closed = 1;
  for (hreq *r = s->all; r; r = r->next_all) req_resume(r);
  s->head = s->tail = NULL; /* parked requests die with their connections */
  if (s->waiter) {
    next_op *w = s->waiter;
    s->waiter = NULL;
    w->srv = NULL;
    mk_op_finish(&w->op);
  }
  if (s->d) {
    MHD_run(s->d);
    MHD_stop_daemon(s->d);
    s->d = NULL;
  }
  if (loop_alive) {
    uv_close((uv_handle_t *)&s->poll, on_handle_closed);
    uv_close((uv_handle_t *)&s->timer, on_handle_closed);
    uv_close((uv_handle_t *)&s->hold, on_handle_closed);
  }
}

/* srv:close() (also __gc): later calls of next() return nil. */
static int s_close(lua_State *L) {
  server **box = luaL_checkudata(L, 1, SRV_MT);
  server *s = *box;
  if (!s) return 0;
  *box = NULL;
  int loop_alive = !uv_is_closing((uv_handle_t *)&s->poll);
  srv_close(s, loop_alive);
  if (!loop_alive) { /* the engine closed the handles already */
    s->handles = 0;
    srv_maybe_free(s);
  }
  return 0;
}

static int s_stats(lua_State *L) {
  server *s = check_srv(L);
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, s->live);
  lua_setfield(L, -2, "requests");
  lua_pushnumber(L, s->cpu_s);
  lua_setfield(L, -2, "cpu_s");
  return 1;
}

/* ---- request object ---------------------------------------------------- */

static hreq *check_req(lua_State *L) {
  hreq **box = luaL_checkudata(L, 1, REQ_MT);
  if (!*box) luaL_error(L, "httpd: request was freed");
  return *box;
}

static int add_headers(lua_State *L, int idx, struct MHD_Response *resp) {
  if (lua_isnoneornil(L, idx)) return 0;
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const char *k = lua_tostring(L, -2), *v = lua_tostring(L, -1);
    if (!k || !v || strchr(k, '\n') || strchr(v, '\n') || strchr(k, '\r') || strchr(v, '\r'))
      return luaL_error(L, "httpd: header names and values must be strings without line breaks");
    MHD_add_response_header(resp, k, v);
    lua_pop(L, 1);
  }
  return 0;
}

static void check_status(lua_State *L, lua_Integer st) {
  luaL_argcheck(L, st >= 100 && st <= 599, 2, "status must be 100..599");
}

/* req:respond(status, body, headers) -> true | false (client gone) */
static int r_respond(lua_State *L) {
  hreq *r = check_req(L);
  lua_Integer st = luaL_checkinteger(L, 2);
  check_status(L, st);
  size_t n;
  const char *body = luaL_optlstring(L, 3, "", &n);
  if (r->state != R_TAKEN) return luaL_error(L, "httpd: this request was answered already");
  struct MHD_Response *resp = MHD_create_response_from_buffer(n, (void *)body, MHD_RESPMEM_MUST_COPY);
  if (!resp) return luaL_error(L, "httpd: out of memory");
  r->resp = resp;
  add_headers(L, 4, resp);
  r->status = (unsigned)st;
  r->state = R_READY;
  lua_pushboolean(L, r->conn != NULL);
  req_resume(r);
  return 1;
}

/* req:stream(status, headers): the reply becomes a stream of unknown
 * length (chunked); the request object is then the stream. */
static int r_stream(lua_State *L) {
  hreq *r = check_req(L);
  lua_Integer st = luaL_checkinteger(L, 2);
  check_status(L, st);
  if (r->state != R_TAKEN) return luaL_error(L, "httpd: this request was answered already");
  struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, r, stream_done);
  if (!resp) return luaL_error(L, "httpd: out of memory");
  r->refs++; /* the response's reader holds r until stream_done */
  r->resp = resp;
  add_headers(L, 3, resp);
  r->status = (unsigned)st;
  r->state = R_STREAM;
  req_resume(r);
  lua_pushboolean(L, r->conn != NULL);
  return 1;
}

/* stream:send(text [, within_s]) -> true | false (the client went away).
 * within_s > 0: the text may wait that long, to go out with later sends. */
static int r_send(lua_State *L) {
  hreq *r = check_req(L);
  size_t n;
  const char *p = luaL_checklstring(L, 2, &n);
  lua_Number within = luaL_optnumber(L, 3, 0);
  luaL_argcheck(L, within >= 0 && within <= 60, 3, "within_s must be 0..60 seconds");
  if (r->state != R_STREAM) return luaL_error(L, "httpd: send needs req:stream() first");
  if (!r->conn || r->out_closed) {
    lua_pushboolean(L, 0);
    return 1;
  }
  if (r->out.n - r->out_off + n > (64u << 20)) { /* a reader that stopped reading */
    lua_pushboolean(L, 0);
    return 1;
  }
  if (mk_buf_add(&r->out, p, n) != 0) return luaL_error(L, "httpd: out of memory");
  uint64_t ms = (uint64_t)(within * 1000 + 0.5);
  if (ms > 0) {
    req_hold(r, ms);
  } else {
    r->held = 0;
    req_resume(r);
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int r_close(lua_State *L) {
  hreq *r = check_req(L);
  if (r->state == R_STREAM) {
    r->out_closed = 1;
    req_resume(r);
  }
  return 0;
}

static int r_open(lua_State *L) {
  hreq *r = check_req(L);
  lua_pushboolean(L, r->conn != NULL && !r->out_closed);
  return 1;
}

static int r_gc(lua_State *L) {
  hreq **box = luaL_checkudata(L, 1, REQ_MT);
  hreq *r = *box;
  if (!r) return 0;
  *box = NULL;
  if (r->state == R_TAKEN && r->conn && !r->srv->closed) { /* dropped unanswered */
    r->resp = MHD_create_response_from_buffer(22, (void *)"internal server error\n", MHD_RESPMEM_PERSISTENT);
    r->status = 500;
    r->state = r->resp ? R_READY : r->state;
    req_resume(r);
  } else if (r->state == R_STREAM) {
    r->out_closed = 1;
    req_resume(r);
  }
  req_release(r);
  return 0;
}

static int r_index(lua_State *L) {
  luaL_checkudata(L, 1, REQ_MT);
  if (luaL_getmetafield(L, 1, "methods") == LUA_TTABLE) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, -2) != LUA_TNIL) return 1;
    lua_pop(L, 2);
  }
  lua_getiuservalue(L, 1, 1);
  lua_pushvalue(L, 2);
  lua_rawget(L, -2);
  return 1;
}

int luaopen_mk_httpd(lua_State *L) {
  static const luaL_Reg srv_m[] = {
      {"next", s_next}, {"port", s_port}, {"close", s_close}, {"stats", s_stats}, {NULL, NULL}};
  static const luaL_Reg req_m[] = {{"respond", r_respond}, {"stream", r_stream}, {"send", r_send},
                                   {"close", r_close},     {"open", r_open},     {NULL, NULL}};
  luaL_newmetatable(L, SRV_MT);
  lua_newtable(L);
  luaL_setfuncs(L, srv_m, 0);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, s_close);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_newmetatable(L, REQ_MT);
  lua_newtable(L);
  luaL_setfuncs(L, req_m, 0);
  lua_setfield(L, -2, "methods");
  lua_pushcfunction(L, r_index);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, r_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {{"listen", l_listen}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}

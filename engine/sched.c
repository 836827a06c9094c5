/* sched.c: the coroutine scheduler (`mk.sched`, wrapped by lua/mk/services/task.lua)
 * and the op mechanism of mk.h. Tasks are Lua threads resumed only from the
 * ready queue at the top of the loop; an engine primitive suspends its task
 * by yielding a private sentinel (WAIT) and is resumed when its op
 * finishes. Also here: sleep, suspend/wake (for Lua-level waits such as
 * semaphores and queues) and join (await). */
#include "runtime.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_NEW, T_READY, T_RUNNING, T_WAITING, T_OK, T_ERROR, T_CANCELLED };
enum { OP_PENDING, OP_DONE, OP_CANCELLED };

static const char *status_names[] = {"pending", "ready", "running", "waiting", "ok", "error", "cancelled"};

typedef struct join_op join_op;

struct mk_task {
  mk_runtime *rt;
  lua_State *co;
  int co_ref, self_ref, res_ref, tb_ref;
  long id;
  int status, nargs, cancel_req, in_ready, observed;
  mk_op *op;
  join_op *joiners;
  mk_task *next_ready;
  mk_task *prev_all, *next_all;
};

struct join_op {
  mk_op op;
  mk_task *target;
  join_op *next;
};

#define TASK_MT "mk.task"
static char WAIT_KEY;
static long ops_live;

#define done(t) ((t)->status >= T_OK)

/* ---- ready queue --------------------------------------------------------- */

/* True while the scheduler is inside uv_run (run_loop). */
static int polling;

static void push_ready(mk_task *t) {
  mk_runtime *rt = t->rt;
  if (t->in_ready || done(t)) return;
  /* libuv knows nothing of the ready queue: a task made ready by a
   * callback that runs before the poll (a timer: curl finishing a transfer
   * from its timeout) would leave that poll blocked with nothing to wake
   * it. uv_stop makes this iteration poll without waiting and return. */
  if (polling) uv_stop(&rt->loop);
  t->in_ready = 1;
  t->next_ready = NULL;
  if (rt->ready_tail) rt->ready_tail->next_ready = t;
  else rt->ready_head = t;
  rt->ready_tail = t;
}

static mk_task *pop_ready(mk_runtime *rt) {
  mk_task *t = rt->ready_head;
  if (!t) return NULL;
  rt->ready_head = t->next_ready;
  if (!rt->ready_head) rt->ready_tail = NULL;
  t->in_ready = 0;
  return t;
}

/* ---- ops ---------------------------------------------------------------- */

static void op_release(mk_op *op) {
  if (--op->refs > 0) return;
  if (op->vt->free) op->vt->free(op);
  ops_live--;
  free(op);
}

long mk_op_live(void) { return ops_live; }

int mk_op_cancelled(const mk_op *op) { return op->state == OP_CANCELLED; }

lua_State *mk_op_state(const mk_op *op) { return ((mk_task *)op->task)->rt->L; }

static void push_cancelled(lua_State *L) { lua_rawgeti(L, LUA_REGISTRYINDEX, mk_rt(L)->cancelled_ref); }

void *mk_op_new(lua_State *L, size_t size, const mk_op_vt *vt) {
  mk_runtime *rt = mk_rt(L);
  mk_task *t = rt->current;
  if (!t) luaL_error(L, "%s: must be called inside a task (mkengine script runs one)", vt->name);
  if (!lua_isyieldable(L))
    luaL_error(L,
               "%s: cannot wait here: inside a metamethod, an iterator or a C function "
               "such as table.sort; move the call out",
               vt->name);
  if (t->cancel_req) {
    push_cancelled(L);
    lua_error(L);
  }
  if (t->op) luaL_error(L, "%s: task#%d is already waiting on %s", vt->name, (int)t->id, t->op->vt->name);
  mk_op *op = calloc(1, size < sizeof(mk_op) ? sizeof(mk_op) : size);
  if (!op) luaL_error(L, "%s: out of memory", vt->name);
  ops_live++;
  op->vt = vt;
  op->task = t;
  op->refs = 2;
  op->state = OP_PENDING;
  t->op = op;
  return op;
}

static int op_cont(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  mk_op *op = (mk_op *)ctx;
  mk_runtime *rt = mk_rt(L);
  if (op->state == OP_CANCELLED) {
    op_release(op);
    push_cancelled(L);
    return lua_error(L);
  }
  int top = lua_gettop(L);
  rt->consumed = op; /* released by the scheduler if results() raises */
  int n = op->vt->results ? op->vt->results(L, op) : 0;
  rt->consumed = NULL;
  op_release(op);
  return lua_gettop(L) - top < n ? lua_gettop(L) - top : n;
}

int mk_op_yield(lua_State *L, mk_op *op) {
  lua_pushlightuserdata(L, &WAIT_KEY);
  return lua_yieldk(L, 1, (lua_KContext)op, op_cont);
}

void mk_op_finish(mk_op *op) {
  if (op->state == OP_PENDING) {
    mk_task *t = op->task;
    op->state = OP_DONE;
    if (t->op == op) t->op = NULL;
    push_ready(t);
  }
  op_release(op);
}

/* ---- tasks -------------------------------------------------------------- */

static mk_task *check_task(lua_State *L, int i) { return luaL_checkudata(L, i, TASK_MT); }

static void unlink_all(mk_task *t) {
  mk_runtime *rt = t->rt;
  if (t->prev_all) t->prev_all->next_all = t->next_all;
  else if (rt->all == t) rt->all = t->next_all;
  if (t->next_all) t->next_all->prev_all = t->prev_all;
  t->prev_all = t->next_all = NULL;
  rt->ntasks--;
}

static void close_thread(mk_runtime *rt, lua_State *co) {
#if LUA_VERSION_RELEASE_NUM >= 50406
  lua_closethread(co, rt->L);
#else
  (void)rt;
  lua_resetthread(co);
#endif
}

/* The task ended: keep its outcome, wake joiners, let the thread go. */
static void finish_task(mk_task *t, int status) {
  mk_runtime *rt = t->rt;
  lua_State *L = rt->L;
  t->status = status;
  unlink_all(t);
  close_thread(rt, t->co);
  luaL_unref(L, LUA_REGISTRYINDEX, t->co_ref);
  t->co_ref = LUA_NOREF;
  t->co = NULL;
  if (status == T_ERROR && !t->joiners) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, rt->unobserved_ref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->self_ref);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
  }
  while (t->joiners) {
    join_op *j = t->joiners;
    t->joiners = j->next;
    j->target = NULL;
    t->observed = 1;
    mk_op_finish(&j->op);
  }
  luaL_unref(L, LUA_REGISTRYINDEX, t->self_ref);
  t->self_ref = LUA_NOREF;
}

static void run_task(mk_runtime *rt, mk_task *t) {
  lua_State *L = rt->L;
  int nargs = 0;
  if (t->status == T_NEW) {
    if (t->cancel_req) {
      finish_task(t, T_CANCELLED);
      return;
    }
    nargs = t->nargs;
  }
  lua_State *co = t->co;
  t->status = T_RUNNING;
  rt->current = t;
  int nres = 0;
  int st = lua_resume(co, L, nargs, &nres);
  rt->current = NULL;
  if (rt->consumed) { /* results() raised */
    mk_op *op = rt->consumed;
    rt->consumed = NULL;
    op_release(op);
  }
  if (st == LUA_YIELD) {
    int waiting = nres >= 1 && lua_touserdata(co, -nres) == &WAIT_KEY;
    lua_pop(co, nres);
    if (waiting && t->op) {
      t->status = T_WAITING;
    } else { /* a plain coroutine.yield at task level: run again later */
      t->status = T_READY;
      push_ready(t);
    }
    return;
  }
  if (st == LUA_OK) {
    lua_createtable(L, nres, 1);
    int tbl = lua_gettop(L);
    lua_xmove(co, L, nres);
    for (int i = nres; i >= 1; i--) lua_rawseti(L, tbl, i);
    lua_pushinteger(L, nres);
    lua_setfield(L, tbl, "n");
    t->res_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    finish_task(t, T_OK);
    return;
  }
  /* error: the coroutine's stack is intact, so the traceback is taken here */
  int base = lua_gettop(L);
  lua_pushvalue(co, -1);
  lua_xmove(co, L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, rt->cancelled_ref);
  int cancelled = lua_rawequal(L, -1, -2);
  lua_settop(L, base + 1);
  if (cancelled) {
    lua_settop(L, base);
    finish_task(t, T_CANCELLED);
    return;
  }
  const char *msg = NULL;
  if (lua_type(L, -1) == LUA_TSTRING) msg = lua_tostring(L, -1);
  else if (luaL_callmeta(L, -1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) msg = lua_tostring(L, -1);
  luaL_traceback(L, co, msg ? msg : "(error object is not a string)", 0);
  t->tb_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_settop(L, base + 1);
  t->res_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_settop(L, base);
  finish_task(t, T_ERROR);
}

/* spawn(fn, ...) -> handle. The task starts at the next loop iteration. */
static int l_spawn(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  mk_runtime *rt = mk_rt(L);
  int nargs = lua_gettop(L) - 1;
  mk_task *t = lua_newuserdatauv(L, sizeof *t, 0);
  memset(t, 0, sizeof *t);
  t->rt = rt;
  t->id = ++rt->next_id;
  t->status = T_NEW;
  t->res_ref = t->tb_ref = LUA_NOREF;
  luaL_setmetatable(L, TASK_MT);
  lua_pushvalue(L, -1);
  t->self_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_State *co = lua_newthread(L);
  t->co = co;
  t->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  for (int i = 2; i <= nargs + 1; i++) lua_pushvalue(L, i);
  lua_xmove(L, co, nargs);
  t->nargs = nargs;
  t->next_all = rt->all;
  if (rt->all) rt->all->prev_all = t;
  rt->all = t;
  rt->ntasks++;
  push_ready(t);
  return 1;
}

static void cancel_task(mk_task *t) {
  if (done(t) || t->cancel_req) return;
  t->cancel_req = 1;
  if (t->status == T_WAITING && t->op) {
    mk_op *op = t->op;
    t->op = NULL;
    op->state = OP_CANCELLED;
    push_ready(t);
    op->vt->cancel(op);
  }
}

static int l_cancel(lua_State *L) {
  cancel_task(check_task(L, 1));
  return 0;
}

static int l_current(lua_State *L) {
  mk_task *t = mk_rt(L)->current;
  if (!t) return 0;
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->self_ref);
  return 1;
}

static int l_now(lua_State *L) {
  lua_pushnumber(L, (lua_Number)uv_hrtime() / 1e9);
  return 1;
}

/* ---- sleep ---------------------------------------------------------------- */

typedef struct {
  mk_op op;
  uv_timer_t timer;
} sleep_op;

static void sleep_closed(uv_handle_t *h) { mk_op_finish(h->data); }

static void sleep_fired(uv_timer_t *tm) { uv_close((uv_handle_t *)tm, sleep_closed); }

static void sleep_cancel(mk_op *op) {
  sleep_op *s = (sleep_op *)op;
  if (!uv_is_closing((uv_handle_t *)&s->timer)) uv_close((uv_handle_t *)&s->timer, sleep_closed);
}

static const mk_op_vt sleep_vt = {"task.sleep", NULL, sleep_cancel, NULL};

uint64_t mk_timer_ms(double s) { return (uint64_t)ceil(s * 1000.0) + 1; }

static int l_sleep(lua_State *L) {
  lua_Number s = luaL_optnumber(L, 1, 0);
  luaL_argcheck(L, s >= 0 && isfinite(s), 1, "seconds must be a finite number >= 0");
  sleep_op *o = mk_op_new(L, sizeof *o, &sleep_vt);
  /* the loop's cached time is stale after long Lua work between polls: a
   * timer started from it would fire early */
  uv_update_time(mk_loop(L));
  uv_timer_init(mk_loop(L), &o->timer);
  o->timer.data = o;
  uv_timer_start(&o->timer, sleep_fired, s > 0 ? mk_timer_ms(s) : 0, 0);
  return mk_op_yield(L, &o->op);
}

/* ---- suspend / wake: the building block of Lua-level waits --------------- */

typedef struct {
  mk_op op;
  int vals_ref;
} suspend_op;

static int suspend_results(lua_State *L, mk_op *op) {
  suspend_op *s = (suspend_op *)op;
  if (s->vals_ref == LUA_NOREF) return 0;
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->vals_ref);
  int n = (int)lua_rawlen(L, -1);
  luaL_checkstack(L, n, "too many values");
  for (int i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -n - 1);
  return n;
}

static void suspend_cancel(mk_op *op) { mk_op_finish(op); }

static void suspend_free(mk_op *op) {
  suspend_op *s = (suspend_op *)op;
  if (s->vals_ref != LUA_NOREF) luaL_unref(mk_op_state(op), LUA_REGISTRYINDEX, s->vals_ref);
}

static const mk_op_vt suspend_vt = {"task.suspend", suspend_results, suspend_cancel, suspend_free};

static int l_suspend(lua_State *L) {
  suspend_op *o = mk_op_new(L, sizeof *o, &suspend_vt);
  o->vals_ref = LUA_NOREF;
  return mk_op_yield(L, &o->op);
}

/* wake(h, ...) -> true if h was suspended (and now gets ...), else false. */
static int l_wake(lua_State *L) {
  mk_task *t = check_task(L, 1);
  if (t->status != T_WAITING || !t->op || t->op->vt != &suspend_vt || t->op->state != OP_PENDING) {
    lua_pushboolean(L, 0);
    return 1;
  }
  suspend_op *o = (suspend_op *)t->op;
  int n = lua_gettop(L) - 1;
  lua_createtable(L, n, 0);
  for (int i = 1; i <= n; i++) {
    lua_pushvalue(L, i + 1);
    lua_rawseti(L, -2, i);
  }
  o->vals_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  mk_op_finish(&o->op);
  lua_pushboolean(L, 1);
  return 1;
}

/* ---- join: wait for a task to end ---------------------------------------- */

/* Push the outcome of a finished task: "ok", results... | "error", err,
 * traceback | "cancelled". */
static int push_outcome(lua_State *L, mk_task *t) {
  t->observed = 1;
  if (t->status == T_OK) {
    lua_pushliteral(L, "ok");
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->res_ref);
    lua_getfield(L, -1, "n");
    int n = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    luaL_checkstack(L, n, "too many results");
    for (int i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
    lua_remove(L, -n - 1);
    return n + 1;
  }
  if (t->status == T_ERROR) {
    lua_pushliteral(L, "error");
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->res_ref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->tb_ref);
    return 3;
  }
  lua_pushliteral(L, "cancelled");
  return 1;
}

static int join_results(lua_State *L, mk_op *op) {
  (void)op;
  mk_task *t = lua_touserdata(L, 1); /* join's argument is still on the stack */
  return push_outcome(L, t);
}

static void join_cancel(mk_op *op) {
  join_op *j = (join_op *)op;
  if (j->target) {
    join_op **pp = &j->target->joiners;
    while (*pp && *pp != j) pp = &(*pp)->next;
    if (*pp) *pp = j->next;
    j->target = NULL;
  }
  mk_op_finish(op);
}

static const mk_op_vt join_vt = {"task.await", join_results, join_cancel, NULL};

static void forget_unobserved(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_rawgeti(L, LUA_REGISTRYINDEX, mk_rt(L)->unobserved_ref);
  lua_pushvalue(L, idx);
  lua_pushnil(L);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

/* join(h) -> outcome (see push_outcome). */
static int l_join(lua_State *L) {
  mk_task *t = check_task(L, 1);
  lua_settop(L, 1);
  forget_unobserved(L, 1);
  if (done(t)) return push_outcome(L, t);
  if (mk_rt(L)->current == t) return luaL_error(L, "task.await: task#%d cannot await itself", (int)t->id);
  join_op *j = mk_op_new(L, sizeof *j, &join_vt);
  j->target = t;
  j->next = t->joiners;
  t->joiners = j;
  return mk_op_yield(L, &j->op);
}

/* ---- handle methods -------------------------------------------------------- */

static int t_status(lua_State *L) {
  mk_task *t = check_task(L, 1);
  lua_pushstring(L, status_names[t->status]);
  return 1;
}

static int t_done(lua_State *L) {
  lua_pushboolean(L, done(check_task(L, 1)));
  return 1;
}

static int t_index(lua_State *L) {
  mk_task *t = check_task(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (!strcmp(k, "id")) {
    lua_pushinteger(L, t->id);
    return 1;
  }
  lua_getmetatable(L, 1);
  lua_getfield(L, -1, "methods");
  lua_getfield(L, -1, k);
  return 1;
}

static int t_tostring(lua_State *L) {
  mk_task *t = check_task(L, 1);
  lua_pushfstring(L, "task#%d (%s)", (int)t->id, status_names[t->status]);
  return 1;
}

static int t_gc(lua_State *L) {
  mk_task *t = check_task(L, 1);
  luaL_unref(L, LUA_REGISTRYINDEX, t->res_ref);
  luaL_unref(L, LUA_REGISTRYINDEX, t->tb_ref);
  t->res_ref = t->tb_ref = LUA_NOREF;
  return 0;
}

/* stats() -> {tasks = live tasks, ops = live ops, ready = queued} */
static int l_stats(lua_State *L) {
  mk_runtime *rt = mk_rt(L);
  int ready = 0;
  for (mk_task *t = rt->ready_head; t; t = t->next_ready) ready++;
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, rt->ntasks);
  lua_setfield(L, -2, "tasks");
  lua_pushinteger(L, ops_live);
  lua_setfield(L, -2, "ops");
  lua_pushinteger(L, ready);
  lua_setfield(L, -2, "ready");
  return 1;
}

/* abandon(): the current task's pending op can never be consumed (its
 * coroutine could not forward the wait); cancel it so nothing leaks. */
static int l_abandon(lua_State *L) {
  mk_task *t = mk_rt(L)->current;
  if (t && t->op) {
    mk_op *op = t->op;
    t->op = NULL;
    op->state = OP_CANCELLED;
    op->vt->cancel(op);
    op_release(op);
  }
  return 0;
}

/* ---- signals -------------------------------------------------------------- */

/* SIGINT / SIGTERM / SIGHUP (the terminal went away): the first cancels every task, so the Lua code of the
 * main task sees task.CANCELLED where it waits and cleans up on its way out
 * (what to record is policy: task.signal() tells it why); the exit code is
 * then 128 + the signal. A second one ends the process at once with the
 * signal's default action (what it left is swept at the next start). */
static void on_signal(uv_signal_t *h, int signum) {
  mk_runtime *rt = h->data;
  if (rt->signal) {
    signal(signum, SIG_DFL);
    raise(signum);
    return;
  }
  rt->signal = signum;
  for (mk_task *t = rt->all; t; t = t->next_all) cancel_task(t);
}

static void signals_start(mk_runtime *rt) {
  const int sigs[MK_NSIGNALS] = {SIGINT, SIGTERM, SIGHUP};
  for (int i = 0; i < MK_NSIGNALS; i++) {
    uv_signal_t *h = &rt->sig_handles[i];
    if (uv_signal_init(&rt->loop, h) != 0) continue;
    h->data = rt;
    uv_signal_start(h, on_signal, sigs[i]);
    uv_unref((uv_handle_t *)h); /* never keeps the loop (or a deadlock check) alive */
  }
}

static const char *signal_name(int s) {
  return s == SIGINT ? "SIGINT" : s == SIGTERM ? "SIGTERM" : s == SIGHUP ? "SIGHUP" : NULL;
}

/* signal() -> "SIGINT" | "SIGTERM" | "SIGHUP" | nil: the signal that is stopping the engine */
static int l_signal(lua_State *L) {
  const char *name = signal_name(mk_rt(L)->signal);
  if (name) lua_pushstring(L, name);
  else lua_pushnil(L);
  return 1;
}

/* ---- the loop --------------------------------------------------------------- */

static int run_loop(mk_runtime *rt, uv_run_mode mode) {
  polling = 1;
  int r = uv_run(&rt->loop, mode);
  polling = 0;
  return r;
}

static void run_ready(mk_runtime *rt) {
  /* only the tasks ready now: a task made ready while running waits a turn,
   * so timers and I/O are polled between rounds */
  mk_task *last = rt->ready_tail;
  while (rt->ready_head) {
    mk_task *t = pop_ready(rt);
    run_task(rt, t);
    if (t == last) break;
  }
}

static void report_error(lua_State *L, mk_task *t) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->tb_ref);
  fprintf(stderr, "mkengine: error in task#%ld: %s\n", t->id, lua_tostring(L, -1));
  lua_pop(L, 1);
}

/* Exit code for the main task's failure: the `exit` field of an error table
 * (usage errors: message + hint, no traceback) or 1 with the traceback. */
static int main_failed(lua_State *L, mk_task *t) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->res_ref);
  if (lua_istable(L, -1) && lua_getfield(L, -1, "exit") == LUA_TNUMBER) {
    int code = (int)lua_tointeger(L, -1);
    lua_getfield(L, -2, "message");
    fprintf(stderr, "mkengine: %s\n", lua_tostring(L, -1) ? lua_tostring(L, -1) : "error");
    lua_getfield(L, -3, "hint");
    if (lua_tostring(L, -1)) fprintf(stderr, "%s\n", lua_tostring(L, -1));
    lua_pop(L, 4);
    return code;
  }
  lua_pop(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->tb_ref);
  fprintf(stderr, "mkengine: %s\n", lua_tostring(L, -1));
  lua_pop(L, 1);
  return 1;
}

static void walk_close(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* Cancel every task still alive and let their ops settle. */
static void drain(mk_runtime *rt) {
  for (mk_task *t = rt->all; t; t = t->next_all) cancel_task(t);
  for (int rounds = 0; rt->ntasks > 0 && rounds < 100000; rounds++) {
    run_ready(rt);
    if (rt->ntasks == 0) break;
    for (mk_task *t = rt->all; t; t = t->next_all) cancel_task(t);
    if (!rt->ready_head && !run_loop(rt, UV_RUN_ONCE) && !rt->ready_head) break;
  }
  /* cancelled operations (a process being killed, a transfer being
   * aborted) finish in their close callbacks: give them up to 5 s so they
   * are freed rather than abandoned */
  uint64_t until = uv_hrtime() + 5000000000ull;
  while (ops_live > 0 && uv_hrtime() < until) {
    if (!run_loop(rt, UV_RUN_ONCE)) break;
  }
}

int mk_sched_run_main(mk_runtime *rt, int nargs) {
  lua_State *L = rt->L;
  lua_pushcfunction(L, l_spawn);
  lua_insert(L, -2 - nargs);
  lua_call(L, nargs + 1, 1);
  mk_task *main = lua_touserdata(L, -1);
  int main_ref = luaL_ref(L, LUA_REGISTRYINDEX); /* keep the handle alive */
  int code = 0;
  signals_start(rt);
  while (!done(main)) {
    run_ready(rt);
    if (done(main)) break;
    if (rt->ready_head) {
      run_loop(rt, UV_RUN_NOWAIT);
    } else if (!run_loop(rt, UV_RUN_ONCE) && !rt->ready_head) {
      fprintf(stderr,
              "mkengine: deadlock: %ld task(s) waiting and nothing pending that could wake them "
              "(an await cycle, or queue:get/semaphore:acquire with no producer)\n",
              rt->ntasks);
      code = 1;
      break;
    }
  }
  if (main->status == T_OK) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, main->res_ref);
    lua_rawgeti(L, -1, 1);
    if (lua_isinteger(L, -1)) code = (int)lua_tointeger(L, -1);
    lua_pop(L, 2);
  } else if (main->status == T_ERROR) {
    code = main_failed(L, main);
  } else if (main->status == T_CANCELLED && !rt->signal) {
    fprintf(stderr, "mkengine: the main task was cancelled\n");
    code = 1;
  }
  if (rt->signal) { /* whatever the main task made of it */
    fprintf(stderr, "mkengine: stopped by %s\n", signal_name(rt->signal));
    code = 128 + rt->signal;
  }
  drain(rt);
  /* errors in tasks that nobody awaited */
  lua_rawgeti(L, LUA_REGISTRYINDEX, rt->unobserved_ref);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    mk_task *t = lua_touserdata(L, -2);
    if (t != main && t->status == T_ERROR && !t->observed) {
      report_error(L, t);
      if (code == 0) code = 1;
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  luaL_unref(L, LUA_REGISTRYINDEX, main_ref);
  return code;
}

void mk_sched_shutdown(mk_runtime *rt) {
  uv_walk(&rt->loop, walk_close, NULL);
  uv_run(&rt->loop, UV_RUN_DEFAULT);
}

static int cancelled_tostring(lua_State *L) {
  lua_pushliteral(L, "task cancelled");
  return 1;
}

void mk_sched_init(mk_runtime *rt) {
  lua_State *L = rt->L;
  lua_newtable(L);
  rt->unobserved_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  /* task.CANCELLED: {kind = "cancelled", message = "task cancelled"} */
  lua_createtable(L, 0, 2);
  lua_pushliteral(L, "cancelled");
  lua_setfield(L, -2, "kind");
  lua_pushliteral(L, "task cancelled");
  lua_setfield(L, -2, "message");
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, cancelled_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_setmetatable(L, -2);
  rt->cancelled_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

int luaopen_mk_sched(lua_State *L) {
  static const luaL_Reg methods[] = {{"cancel", l_cancel}, {"status", t_status}, {"done", t_done}, {NULL, NULL}};
  static const luaL_Reg meta[] = {{"__index", t_index}, {"__tostring", t_tostring}, {"__gc", t_gc}, {NULL, NULL}};
  if (luaL_newmetatable(L, TASK_MT)) {
    luaL_setfuncs(L, meta, 0);
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "methods");
  }
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {{"spawn", l_spawn}, {"cancel", l_cancel},   {"current", l_current}, {"now", l_now},
                                   {"sleep", l_sleep}, {"suspend", l_suspend}, {"wake", l_wake},       {"join", l_join},
                                   {"stats", l_stats}, {"abandon", l_abandon}, {"signal", l_signal},   {NULL, NULL}};
  luaL_newlib(L, funcs);
  lua_pushlightuserdata(L, &WAIT_KEY);
  lua_setfield(L, -2, "WAIT");
  lua_rawgeti(L, LUA_REGISTRYINDEX, mk_rt(L)->cancelled_ref);
  lua_setfield(L, -2, "CANCELLED");
  return 1;
}

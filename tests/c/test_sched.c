/* test_sched.c: the op mechanism seen from a module author: an op built on
 * a libuv timer delivers results to the waiting coroutine, cancel reaches
 * the module's cancel hook, a raising results hook leaks nothing, calls
 * outside a task are refused, every op is freed, and an op finished before
 * the loop's poll resumes its task without waiting for another event. */
#include <stdio.h>
#include <string.h>

#include "mk.h"

#include "check.h"

typedef struct {
  mk_op op;
  uv_timer_t timer;
  int value;
  int raise;
} test_op;

static int cancels, frees;

static void closed(uv_handle_t *h) { mk_op_finish(h->data); }
static void fired(uv_timer_t *t) { uv_close((uv_handle_t *)t, closed); }

static int results(lua_State *L, mk_op *op) {
  test_op *o = (test_op *)op;
  if (o->raise) return luaL_error(L, "results hook failed on purpose");
  lua_pushinteger(L, o->value * 2);
  return 1;
}
static void cancel(mk_op *op) {
  test_op *o = (test_op *)op;
  cancels++;
  if (!uv_is_closing((uv_handle_t *)&o->timer)) uv_close((uv_handle_t *)&o->timer, closed);
}
static void op_free(mk_op *op) {
  (void)op;
  frees++;
}
static const mk_op_vt vt = {"test.double_later", results, cancel, op_free};

/* double_later(value, ms [, raise]) -> value * 2 after ms milliseconds */
static int l_double_later(lua_State *L) {
  int v = (int)luaL_checkinteger(L, 1);
  int ms = (int)luaL_checkinteger(L, 2);
  int raise = lua_toboolean(L, 3);
  test_op *o = mk_op_new(L, sizeof *o, &vt);
  o->value = v;
  o->raise = raise;
  uv_timer_init(mk_loop(L), &o->timer);
  o->timer.data = o;
  uv_timer_start(&o->timer, fired, (uint64_t)ms, 0);
  return mk_op_yield(L, &o->op);
}

/* soon() -> 42, finished straight from the callback of a 0 ms timer: it
 * runs in the first phase of the loop's next iteration, before the poll,
 * as curl finishes a transfer from its timeout. An async handle that never
 * fires keeps the loop alive; a watchdog timer 5 s away is the only other
 * event. rescued() -> whether the watchdog fired (the task was not resumed
 * until then). */
static uv_timer_t soon_timer, watchdog;
static uv_async_t keepalive;
static mk_op *soon_op;
static int rescued;

static void soon_fired(uv_timer_t *t) {
  (void)t;
  mk_op *op = soon_op;
  soon_op = NULL;
  mk_op_finish(op);
}
static void dog_fired(uv_timer_t *t) {
  (void)t;
  rescued = 1;
}
static int soon_results(lua_State *L, mk_op *op) {
  (void)op;
  lua_pushinteger(L, 42);
  return 1;
}
static void soon_cancel(mk_op *op) { (void)op; }
static const mk_op_vt soon_vt = {"test.soon", soon_results, soon_cancel, NULL};

static int l_soon(lua_State *L) {
  mk_op *op = mk_op_new(L, sizeof *op, &soon_vt);
  uv_loop_t *loop = mk_loop(L);
  uv_async_init(loop, &keepalive, NULL);
  uv_timer_init(loop, &watchdog);
  uv_timer_start(&watchdog, dog_fired, 5000, 0);
  uv_timer_init(loop, &soon_timer);
  soon_op = op;
  uv_timer_start(&soon_timer, soon_fired, 0, 0);
  return mk_op_yield(L, op);
}
static int l_rescued(lua_State *L) {
  lua_pushboolean(L, rescued);
  return 1;
}

static int run(const char *src) {
  mk_runtime *rt = mk_runtime_new();
  lua_State *L = mk_runtime_state(rt);
  lua_pushcfunction(L, l_double_later);
  lua_setglobal(L, "double_later");
  lua_pushcfunction(L, l_soon);
  lua_setglobal(L, "soon");
  lua_pushcfunction(L, l_rescued);
  lua_setglobal(L, "rescued");
  if (luaL_loadstring(L, src) != LUA_OK) {
    printf("load error: %s\n", lua_tostring(L, -1));
    mk_runtime_free(rt);
    return -1;
  }
  int code = mk_runtime_run_main(rt, 0);
  mk_runtime_free(rt);
  return code;
}

int main(void) {
  int code = run("local task = require 'mk.services.task'\n"
                 "local hs = {}\n"
                 "for i = 1, 100 do hs[i] = task.spawn(double_later, i, 100 - i) end\n"
                 "local r = task.gather(hs)\n"
                 "for i = 1, 100 do if r[i] ~= 2 * i then return 10 end end\n"
                 "return 0\n");
  CHECK(code == 0, "results reach each waiting task in order of handles");
  CHECK(mk_op_live() == 0 && frees == 100, "every op is freed exactly once after completion");

  cancels = frees = 0;
  code = run("local task = require 'mk.services.task'\n"
             "local h = task.spawn(double_later, 1, 10000)\n"
             "task.sleep(0.01)\n"
             "h:cancel()\n"
             "task.sleep(0.01)\n"
             "return h:status() == 'cancelled' and 0 or 11\n");
  CHECK(code == 0, "cancel ends the waiting task");
  CHECK(cancels == 1, "cancel reaches the module's cancel hook once");
  CHECK(mk_op_live() == 0 && frees == 1, "a cancelled op is freed after its work stopped");

  frees = 0;
  code = run("local ok, err = pcall(double_later, 1, 1, true)\n"
             "return (not ok and tostring(err):find('on purpose')) and 0 or 12\n");
  CHECK(code == 0, "an error raised by the results hook reaches the caller");
  CHECK(mk_op_live() == 0 && frees == 1, "a raising results hook leaks no op");

  code = run("local co = coroutine.wrap(function() return double_later(21, 1) end)\n"
             "return co() == 42 and 0 or 13\n");
  CHECK(code == 0, "an op started inside a user coroutine resumes that coroutine");

  /* outside any task: called directly on the main thread */
  mk_runtime *rt = mk_runtime_new();
  lua_State *L = mk_runtime_state(rt);
  lua_pushcfunction(L, l_double_later);
  lua_pushinteger(L, 1);
  lua_pushinteger(L, 1);
  int st = mk_pcall(L, 2, 0);
  CHECK(st != LUA_OK && strstr(lua_tostring(L, -1), "inside a task") != NULL,
        "an op started outside a task is refused with a clear message");
  lua_pop(L, 1);
  mk_runtime_free(rt);
  CHECK(mk_op_live() == 0, "no op left alive at the end");

  code = run("local task = require 'mk.services.task'\n"
             "local h = task.spawn(soon)\n"
             "local v = task.await(h)\n"
             "return (v == 42 and not rescued()) and 0 or 14\n");
  CHECK(code == 0, "an op finished in a timer callback resumes its task at once (not at the next event)");

  code = run("error({exit = 2, message = 'bad usage'})");
  CHECK(code == 2, "an error table with exit = 2 becomes exit code 2");
  code = run("error('plain failure')");
  CHECK(code == 1, "a plain error in the main task becomes exit code 1");

  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

/* mk.h: what every module of the C core shares: the engine's libuv loop,
 * the "start an operation, yield, resume on completion" mechanism (mk_op),
 * the protected-call helper and the error conventions.
 *
 * How an async primitive is written (see engine/sched.c `sleep` for the
 * smallest complete example):
 *
 *   typedef struct { mk_op op; uv_timer_t timer; ... } my_op;   // mk_op first
 *   static const mk_op_vt my_vt = { "mymod.thing", my_results, my_cancel, my_free };
 *
 *   static int l_thing(lua_State *L) {
 *     ...check arguments (luaL_check*) BEFORE mk_op_new...
 *     my_op *o = mk_op_new(L, sizeof *o, &my_vt);   // raises if L cannot wait
 *     ...start libuv/curl work with o as data...
 *     return mk_op_yield(L, &o->op);                 // never returns to here
 *   }
 *   // completion (libuv callback, main thread): store results in o, then
 *   //   mk_op_finish(&o->op);   -- o may be freed right after: don't touch it
 *   // my_results(L, op): runs inside the resumed coroutine; push results,
 *   //   return their count (may push nil, err or raise with lua_error).
 *   // my_cancel(op): the task was cancelled while waiting; stop the work
 *   //   (kill the process, close the handle, remove the curl easy) and call
 *   //   mk_op_finish once the work has really stopped (e.g. in the close cb).
 *   // my_free(op): release what the op owns (not the op itself). Optional.
 *
 * Ownership: an op has two owners, the task (until it consumed the results
 * or was cancelled) and the work (until mk_op_finish). It is freed, after
 * vt->free, when both let go. Results are pushed only from the scheduler's
 * ready queue, never from inside a libuv callback.
 */
#ifndef MK_H
#define MK_H

#include <stddef.h>
#include <stdint.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <uv.h>

/* ---- runtime ---------------------------------------------------------- */

typedef struct mk_runtime mk_runtime;
typedef struct mk_op mk_op;

/* Create the engine: one lua_State with the standard libraries, cjson,
 * every mk.* C module preloaded and package.path set to find lua/. */
mk_runtime *mk_runtime_new(void);
void mk_runtime_free(mk_runtime *rt);
lua_State *mk_runtime_state(mk_runtime *rt);
/* The function on top of the stack (with nargs arguments above it) runs as
 * the main task; the loop runs until it returns. Returns the process exit
 * code: 0 ok, 1 runtime error (message + traceback printed), or the `exit`
 * field of an error table such as {exit = 2, message = "..."}. */
int mk_runtime_run_main(mk_runtime *rt, int nargs);

/* Engine home: the directory holding lua/, kb/, targets/, examples/. */
const char *mk_home(lua_State *L);
/* Finds the home (home.c): MKENGINE_HOME, the installed share/mkengine
 * beside the executable, or the source tree it was built from. */
void mk_find_home(char *out, size_t cap);
/* The directory of the running executable ("" when unknown). */
const char *mk_exe_dir(void);
/* A helper program that belongs to the running engine, found relative to
 * its executable: <exe_dir>/<build_rel> (a build tree, whatever its name)
 * or <exe_dir>/../<install_rel> (installed under a prefix). Either may be
 * NULL. 0 with the path in out, -1 when neither is an executable file. */
int mk_find_helper(const char *build_rel, const char *install_rel, char *out, size_t cap);
/* The libuv loop of the engine that owns L (any thread of it). */
uv_loop_t *mk_loop(lua_State *L);
/* The engine's main thread: use it (not a coroutine) for registry work in
 * libuv callbacks and in vt->free/cancel, e.g. luaL_unref. */
lua_State *mk_main_state(lua_State *L);
/* Same, from an op (for vt->free and vt->cancel, which get no lua_State). */
lua_State *mk_op_state(const mk_op *op);

/* Call with a message handler that appends a traceback; on error leaves one
 * string "file:line: message\nstack traceback:..." (or the error table with
 * a `traceback` field added) on the stack. Same contract as lua_pcall. */
int mk_pcall(lua_State *L, int nargs, int nresults);

/* ---- operations --------------------------------------------------------- */

typedef struct mk_op_vt {
  const char *name;                        /* for messages */
  int (*results)(lua_State *L, mk_op *op); /* push results, return n */
  void (*cancel)(mk_op *op);               /* stop work, then finish */
  void (*free)(mk_op *op);                 /* optional */
} mk_op_vt;

struct mk_op {
  const mk_op_vt *vt;
  /* private to sched.c */
  void *task;
  int refs;
  int state;
};

/* Allocate (zeroed) an op of `size` bytes for the current task. Raises a
 * Lua error naming vt->name if L is not inside a task, cannot yield (inside
 * a metamethod, a sort comparator, ...), or its task was cancelled. */
void *mk_op_new(lua_State *L, size_t size, const mk_op_vt *vt);
/* Suspend the calling coroutine until the op finishes; on resume the
 * results come from vt->results. Use as `return mk_op_yield(L, op);`. */
int mk_op_yield(lua_State *L, mk_op *op);
/* The work is over (results stored, handles closed). Call exactly once. */
void mk_op_finish(mk_op *op);
/* True once the waiting task was cancelled: results will never be read. */
int mk_op_cancelled(const mk_op *op);
/* Number of ops alive (allocated, not yet freed): for leak checks. */
long mk_op_live(void);

/* ---- timers ------------------------------------------------------------- */

/* Milliseconds to give uv_timer_start for a wait of s seconds (s > 0) that
 * must not end early on uv_hrtime's clock (task.now, wall_s): the loop's
 * clock counts whole milliseconds, truncated, so it runs up to 1 ms behind.
 * Call uv_update_time first (the loop's clock stops during long Lua work). */
uint64_t mk_timer_ms(double s);

/* ---- errors ------------------------------------------------------------- */

/* Push an error table {kind = kind, message = msg} (for `return nil, err`).
 * Returns 2 after pushing nil first: `return mk_push_error(L, "timeout", "...")`. */
int mk_push_error(lua_State *L, const char *kind, const char *fmt, ...);

#endif

/* runtime.h: the engine state shared by runtime.c and sched.c (private to
 * the core; modules use the functions in mk.h). */
#ifndef MK_RUNTIME_H
#define MK_RUNTIME_H
#include "mk.h"
#include <limits.h>

#define MK_NSIGNALS 3 /* the signals that stop the engine: SIGINT, SIGTERM, SIGHUP */

typedef struct mk_task mk_task;

struct mk_runtime {
  lua_State *L; /* main thread; the scheduler runs here */
  uv_loop_t loop;
  char home[PATH_MAX];
  /* scheduler */
  mk_task *current; /* task being resumed, or NULL */
  mk_task *ready_head, *ready_tail;
  mk_task *all; /* doubly linked list of tasks not yet done */
  long ntasks;  /* tasks not yet done */
  long next_id;
  mk_op *consumed;    /* op whose results are being pushed (freed if results raised) */
  int unobserved_ref; /* table: handle -> true for errors nobody awaited */
  int cancelled_ref;  /* the task.CANCELLED error value */
  int signal;         /* SIGINT/TERM/HUP received (0: none): every task was cancelled */
  size_t mem_used;    /* bytes the Lua allocator holds */
  size_t mem_limit;   /* allocations beyond this fail (0: no limit); see mk.limits */
  uv_signal_t sig_handles[MK_NSIGNALS];
};

mk_runtime *mk_rt(lua_State *L);
/* sched.c */
void mk_sched_init(mk_runtime *rt);
int mk_sched_run_main(mk_runtime *rt, int nargs);
void mk_sched_shutdown(mk_runtime *rt);
#endif

/* launch.h: start a program at a cost that does not grow with the engine.
 *
 * libuv 1.44's uv_spawn fork()s the engine: the kernel copies the page
 * tables of everything the engine holds, so one start costs ~0.6 ms at
 * 12 MB of RSS and ~20 ms at 1 GB. mk_spawn uses posix_spawn instead
 * (glibc starts the child with clone(CLONE_VM | CLONE_VFORK): no copy),
 * connects the child's stdio to pipes (a socket pair for its stdin) whose
 * engine ends become uv_pipe_t streams, starts it in a
 * session of its own with every signal at its default and none blocked,
 * and reports its exit through SIGCHLD (a uv_signal_t) and waitpid on its
 * own pid only, so no other child of the engine is reaped by mistake. */
#ifndef MK_LAUNCH_H
#define MK_LAUNCH_H

#include <uv.h>

typedef struct mk_proc mk_proc;
/* exit_status: the exit code when it exited, term_signal: the signal that
 * ended it (0 when it exited), as uv_exit_cb. */
typedef void (*mk_proc_exit_cb)(mk_proc *p, int64_t exit_status, int term_signal);

struct mk_proc {
  uv_signal_t sig; /* first: close (uv_handle_t *)p when done, as a uv_process_t */
  int pid;         /* 0 until started */
  mk_proc_exit_cb exit_cb;
};

enum {
  MK_STDIO_NULL,    /* /dev/null (fds 0-2), nothing (fd 3) */
  MK_STDIO_INHERIT, /* the engine's own fd of that number */
  MK_STDIO_READ,    /* a pipe the child reads (its stdin) */
  MK_STDIO_WRITE,   /* a pipe the child writes (its stdout, stderr, a report) */
};

#define MK_SPAWN_MAX_STDIO 4

typedef struct {
  const char *file; /* absolute path: no PATH search */
  char **args;
  char **env;      /* NULL: the engine's environment */
  const char *cwd; /* NULL: the engine's */
  int stdio_count; /* fds 0 .. stdio_count-1 */
  struct {
    int mode;
    uv_pipe_t *pipe; /* READ / WRITE: initialised (uv_pipe_init), not open */
  } stdio[MK_SPAWN_MAX_STDIO];
  void *data; /* p->sig.data */
  mk_proc_exit_cb exit_cb;
} mk_spawn_options;

/* Start the program. p is initialised either way and must be closed with
 * uv_close((uv_handle_t *)p, ...). Returns 0, or a libuv error code
 * (uv_strerror) when nothing started: then no pipe was opened and the exit
 * callback never runs. */
int mk_spawn(uv_loop_t *loop, mk_proc *p, const mk_spawn_options *o);

#endif

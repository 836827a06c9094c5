/* launch.c: posix_spawn behind a libuv handle (see launch.h). */
#define _GNU_SOURCE
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* SIGCHLD (for any child): has this one exited? waitpid on its pid only. */
static void on_sigchld(uv_signal_t *s, int signum) {
  (void)signum;
  mk_proc *p = (mk_proc *)s;
  int st = 0;
  pid_t r;
  do r = waitpid(p->pid, &st, WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == 0 || (r < 0 && errno != ECHILD)) return; /* still running */
  uv_signal_stop(s);
  if (r < 0) p->exit_cb(p, -1, 0); /* reaped behind our back: status unknown */
  else p->exit_cb(p, WIFEXITED(st) ? WEXITSTATUS(st) : 0, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* ends[i][0] the engine's, ends[i][1] the child's: a pipe for what the
 * child writes (half the kernel's cost of a socket pair), a socket pair
 * for what it reads (the engine ends it with a shutdown, which a pipe
 * lacks). The child's end is moved above the stdio range so that no dup2
 * onto fds 0..count-1 can overwrite a source still to be used. Both ends
 * are close-on-exec; posix_spawn's dup2 clears it on the child's copy. */
static int make_pipes(const mk_spawn_options *o, int ends[][2]) {
  for (int i = 0; i < o->stdio_count; i++) {
    int m = o->stdio[i].mode;
    if (m != MK_STDIO_READ && m != MK_STDIO_WRITE) continue;
    int rc =
        m == MK_STDIO_WRITE ? pipe2(ends[i], O_CLOEXEC) : socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends[i]);
    if (rc < 0) return -errno;
    if (ends[i][1] < o->stdio_count) {
      int fd = fcntl(ends[i][1], F_DUPFD_CLOEXEC, o->stdio_count);
      if (fd < 0) return -errno;
      close(ends[i][1]);
      ends[i][1] = fd;
    }
  }
  return 0;
}

static void close_ends(int count, int ends[][2], int which) {
  for (int i = 0; i < count; i++)
    if (ends[i][which] >= 0) {
      close(ends[i][which]);
      ends[i][which] = -1;
    }
}

/* What the child does between clone and exec: its stdio, then its cwd. */
static int file_actions(posix_spawn_file_actions_t *fa, const mk_spawn_options *o, int ends[][2]) {
  int rc = 0;
  for (int i = 0; i < o->stdio_count && rc == 0; i++) {
    switch (o->stdio[i].mode) {
      case MK_STDIO_NULL:
        if (i < 3) rc = posix_spawn_file_actions_addopen(fa, i, "/dev/null", i == 0 ? O_RDONLY : O_RDWR, 0);
        break;
      case MK_STDIO_INHERIT: rc = posix_spawn_file_actions_adddup2(fa, i, i); break;
      default: rc = posix_spawn_file_actions_adddup2(fa, ends[i][1], i); break;
    }
  }
  if (rc == 0 && o->cwd) rc = posix_spawn_file_actions_addchdir_np(fa, o->cwd);
  return -rc;
}

/* A session of its own (as UV_PROCESS_DETACHED), every signal at its
 * default (the engine ignores SIGPIPE) and none blocked. */
static int attributes(posix_spawnattr_t *at) {
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  int rc = posix_spawnattr_setflags(at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  if (rc == 0) rc = posix_spawnattr_setsigmask(at, &none);
  if (rc == 0) rc = posix_spawnattr_setsigdefault(at, &all);
  return -rc;
}

/* Hand the engine's ends to their uv_pipe_t streams. */
static void open_pipes(const mk_spawn_options *o, int ends[][2]) {
  for (int i = 0; i < o->stdio_count; i++) {
    if (ends[i][0] < 0) continue;
    if (uv_pipe_open(o->stdio[i].pipe, ends[i][0]) < 0) close(ends[i][0]); /* reads as EOF at once */
    ends[i][0] = -1;
  }
}

int mk_spawn(uv_loop_t *loop, mk_proc *p, const mk_spawn_options *o) {
  uv_signal_init(loop, &p->sig);
  p->sig.data = o->data;
  p->pid = 0;
  p->exit_cb = o->exit_cb;
  if (o->stdio_count < 0 || o->stdio_count > MK_SPAWN_MAX_STDIO) return UV_EINVAL;
  int ends[MK_SPAWN_MAX_STDIO][2];
  for (int i = 0; i < MK_SPAWN_MAX_STDIO; i++) ends[i][0] = ends[i][1] = -1;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  int rc = make_pipes(o, ends);
  if (rc == 0) rc = file_actions(&fa, o, ends);
  if (rc == 0) rc = attributes(&at);
  /* watch before the start: an exit cannot come before its watcher */
  if (rc == 0) rc = uv_signal_start(&p->sig, on_sigchld, SIGCHLD);
  pid_t pid = 0;
  if (rc == 0) rc = -posix_spawn(&pid, o->file, &fa, &at, o->args, o->env ? o->env : environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close_ends(o->stdio_count, ends, 1);
  if (rc < 0) {
    close_ends(o->stdio_count, ends, 0);
    uv_signal_stop(&p->sig);
    return rc;
  }
  p->pid = (int)pid;
  open_pipes(o, ends);
  return 0;
}

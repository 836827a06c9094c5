/* proc.c: `mk.proc`, subprocesses for the engine: posix_spawn (launch.c,
 * a cost independent of the engine's size) of the mk-exec wrapper (engine/exec/mk-exec.c), which gives the child its own
 * process group, resource limits and exact rusage. One op per run; the op
 * finishes only after the wrapper exited and stdout, stderr and the report
 * socket reached EOF (or were closed after a grace period), so no handle
 * outlives the op. A timeout or a cancelled task asks the wrapper to kill
 * the whole tree (SIGTERM), then kills both process groups itself if the
 * wrapper does not go within a second. Also proc.spawn: a long-lived child
 * with stdin/stdout open for a line protocol (below). Mechanism only: the
 * sandbox's command line is built in Lua (mk.services.sandbox.apply) and arrives
 * here as a plain argv. */
#include "mk.h"
#include "opts.h"
#include "launch.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define DEFAULT_MAX_OUTPUT ((size_t)64 << 20)
#define KILL_GRACE_MS      1000 /* wrapper's time to kill + reap after SIGTERM */
#define EOF_GRACE_MS       2000 /* after exit: pipes still open are closed */

typedef struct {
  char *p;
  size_t n, cap, max;
  int truncated;
} obuf;

enum { PH_RUN, PH_KILL, PH_EOF };

typedef struct {
  mk_op op;
  mk_proc proc; /* the wrapper */
  uv_pipe_t in, out, err, rep;
  uv_timer_t timer;
  uv_write_t wreq;
  int handles; /* open handles; the op finishes when this reaches 0 */
  int phase;
  int spawned, exited, timed_out, stopping;
  int spawn_err; /* uv error from mk_spawn */
  int64_t exit_status;
  int term_signal;
  int64_t child_pid;
  uint64_t t0, t1;
  char *stdin_data;
  size_t stdin_len;
  obuf ob, eb, rb;
  char *prog; /* argv[0] as given, for messages */
} proc_op;

/* ---- buffers --------------------------------------------------------------- */

/* Doubling growth keeps a 50 MB output linear; bytes past max are counted
 * as truncation and dropped, but the pipe keeps being drained. */
static void obuf_add(obuf *b, const char *p, size_t n) {
  if (b->n + n > b->max) {
    b->truncated = 1;
    n = b->max - b->n;
  }
  if (n == 0) return;
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 65536;
    while (cap < b->n + n) cap *= 2;
    if (cap > b->max) cap = b->max;
    char *q = realloc(b->p, cap);
    if (!q) {
      b->truncated = 1;
      return;
    }
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
}

/* ---- handle lifecycle --------------------------------------------------- */

static void on_close(uv_handle_t *h) {
  proc_op *o = h->data;
  if (--o->handles == 0) mk_op_finish(&o->op);
}

static void close_handle(proc_op *o, uv_handle_t *h) {
  if (h->data == o && !uv_is_closing(h)) uv_close(h, on_close);
}

static void close_pipes(proc_op *o) {
  close_handle(o, (uv_handle_t *)&o->in);
  close_handle(o, (uv_handle_t *)&o->out);
  close_handle(o, (uv_handle_t *)&o->err);
  close_handle(o, (uv_handle_t *)&o->rep);
}

/* Once the wrapper is gone and the pipes are closed, the timer is the last
 * handle standing. */
static void maybe_done(proc_op *o) {
  if (!o->exited) return;
  if (o->out.data == o && !uv_is_closing((uv_handle_t *)&o->out)) return;
  if (o->err.data == o && !uv_is_closing((uv_handle_t *)&o->err)) return;
  if (o->rep.data == o && !uv_is_closing((uv_handle_t *)&o->rep)) return;
  close_handle(o, (uv_handle_t *)&o->in);
  close_handle(o, (uv_handle_t *)&o->timer);
}

/* The wrapper's first report line names the child: "pid N". */
static void report_pid(const obuf *rb, int64_t *child_pid) {
  if (*child_pid || rb->n < 5) return;
  const char *nl = memchr(rb->p, '\n', rb->n);
  if (!nl) return;
  long long pid;
  if (sscanf(rb->p, "pid %lld", &pid) == 1 && pid > 0) *child_pid = pid;
}

/* ---- killing ------------------------------------------------------------ */

static void on_timer(uv_timer_t *t);

/* The child's group dies at once; SIGTERM asks the wrapper to kill the
 * descendants that left the group (it is their subreaper), reap them all
 * and still report rusage. */
static void tree_term(const mk_proc *wrapper, int64_t child_pid, uv_timer_t *grace, uv_timer_cb cb) {
  if (child_pid > 0) kill(-(pid_t)child_pid, SIGKILL);
  if (wrapper->pid > 0) kill(wrapper->pid, SIGTERM); /* not reaped yet: still ours */
  uv_update_time(grace->loop);                       /* may come from Lua after a long stretch of work */
  uv_timer_start(grace, cb, KILL_GRACE_MS, 0);
}

/* The wrapper did not go within the grace period: both groups, directly. */
static void tree_kill(int wrapper_pid, int64_t child_pid) {
  if (wrapper_pid > 0) {
    kill(-wrapper_pid, SIGKILL);
    kill(wrapper_pid, SIGKILL);
  }
  if (child_pid > 0) {
    kill(-(pid_t)child_pid, SIGKILL);
    kill((pid_t)child_pid, SIGKILL);
  }
}

static void stop(proc_op *o) {
  if (o->stopping || o->exited) return;
  o->stopping = 1;
  o->phase = PH_KILL;
  tree_term(&o->proc, o->child_pid, &o->timer, on_timer);
}

static void on_timer(uv_timer_t *t) {
  proc_op *o = t->data;
  switch (o->phase) {
    case PH_RUN:
      o->timed_out = 1;
      stop(o);
      break;
    case PH_KILL: tree_kill(o->proc.pid, o->child_pid); break;
    case PH_EOF:
      /* A descendant escaped the wrapper and holds a pipe: stop waiting. */
      close_pipes(o);
      maybe_done(o);
      break;
  }
}

static void on_proc_exit(mk_proc *p, int64_t status, int sig) {
  proc_op *o = p->sig.data;
  o->t1 = uv_hrtime();
  o->exited = 1;
  o->exit_status = status;
  o->term_signal = sig;
  close_handle(o, (uv_handle_t *)&o->proc);
  o->phase = PH_EOF;
  uv_timer_start(&o->timer, on_timer, EOF_GRACE_MS, 0);
  maybe_done(o);
}

/* ---- pipes -------------------------------------------------------------- */

static char read_scratch[65536];

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  (void)h;
  (void)hint;
  *buf = uv_buf_init(read_scratch, sizeof read_scratch);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  proc_op *o = s->data;
  if (n > 0) {
    obuf *b = s == (uv_stream_t *)&o->out ? &o->ob : s == (uv_stream_t *)&o->err ? &o->eb : &o->rb;
    obuf_add(b, buf->base, (size_t)n);
    if (b == &o->rb) report_pid(&o->rb, &o->child_pid);
  } else if (n < 0) {
    close_handle(o, (uv_handle_t *)s);
    maybe_done(o);
  }
}

static void on_write(uv_write_t *w, int status) {
  proc_op *o = w->data;
  (void)status; /* EPIPE: the child did not read all of its input */
  close_handle(o, (uv_handle_t *)&o->in);
}

/* ---- op vtable ---------------------------------------------------------- */

static void push_spawn_error(lua_State *L, const char *prog, const char *why) {
  mk_push_error(L, "spawn", "cannot run '%s': %s", prog, why);
}

/* How a wrapped child ended, from the wrapper's report (pid, exec errno,
 * exit status + rusage) and libuv's exit callback. */
typedef struct {
  int exec_errno;
  int have_exit, raw;
  long long cpu_us;
  long rss;
  int timed_out, term_signal;
  int64_t exit_status;
  double wall_s;
  int pid;
} outcome;

static void parse_report(outcome *oc, const char *p, size_t n) {
  const char *end = p + n;
  while (p && p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) break;
    char line[256];
    size_t len = (size_t)(nl - p) < sizeof line - 1 ? (size_t)(nl - p) : sizeof line - 1;
    memcpy(line, p, len);
    line[len] = 0;
    if (sscanf(line, "exit %d %lld %ld", &oc->raw, &oc->cpu_us, &oc->rss) == 3) oc->have_exit = 1;
    else sscanf(line, "exec %d", &oc->exec_errno);
    p = nl + 1;
  }
}

/* The result table of a run (without stdout/stderr): status, code, signal,
 * wall_s, cpu_s, max_rss_kb, pid. */
static void push_outcome(lua_State *L, const outcome *oc) {
  lua_createtable(L, 0, 12);
  const char *status;
  int code = -1, sig = 0;
  if (oc->have_exit) {
    if (WIFEXITED(oc->raw)) code = WEXITSTATUS(oc->raw);
    else if (WIFSIGNALED(oc->raw)) sig = WTERMSIG(oc->raw);
  } else if (oc->term_signal) {
    sig = oc->term_signal; /* the wrapper itself was killed */
  } else {
    code = (int)oc->exit_status;
  }
  if (oc->timed_out) status = "timeout";
  else if (sig) status = "signaled";
  else status = "exited";
  lua_pushstring(L, status);
  lua_setfield(L, -2, "status");
  if (code >= 0) {
    lua_pushinteger(L, code);
    lua_setfield(L, -2, "code");
  }
  if (sig) {
    lua_pushinteger(L, sig);
    lua_setfield(L, -2, "signal");
  }
  lua_pushnumber(L, oc->wall_s);
  lua_setfield(L, -2, "wall_s");
  if (oc->have_exit) {
    lua_pushnumber(L, (double)oc->cpu_us / 1e6);
    lua_setfield(L, -2, "cpu_s");
    lua_pushinteger(L, oc->rss);
    lua_setfield(L, -2, "max_rss_kb");
  }
  lua_pushinteger(L, oc->pid);
  lua_setfield(L, -2, "pid");
}

static int proc_results(lua_State *L, mk_op *op) {
  proc_op *o = (proc_op *)op;
  if (!o->spawned) {
    push_spawn_error(L, o->prog, uv_strerror(o->spawn_err));
    return 2;
  }
  outcome oc = {.timed_out = o->timed_out,
                .term_signal = o->term_signal,
                .exit_status = o->exit_status,
                .wall_s = (double)(o->t1 - o->t0) / 1e9,
                .pid = o->proc.pid};
  parse_report(&oc, o->rb.p, o->rb.n);
  if (oc.exec_errno) {
    push_spawn_error(L, o->prog, strerror(oc.exec_errno));
    return 2;
  }
  push_outcome(L, &oc);
  lua_pushlstring(L, o->ob.p ? o->ob.p : "", o->ob.n);
  lua_setfield(L, -2, "stdout");
  lua_pushlstring(L, o->eb.p ? o->eb.p : "", o->eb.n);
  lua_setfield(L, -2, "stderr");
  lua_pushboolean(L, o->ob.truncated || o->eb.truncated);
  lua_setfield(L, -2, "truncated");
  return 1;
}

static void proc_cancel(mk_op *op) {
  proc_op *o = (proc_op *)op;
  if (!o->exited) stop(o);
  else {
    close_pipes(o);
    maybe_done(o);
  }
}

static void proc_free(mk_op *op) {
  proc_op *o = (proc_op *)op;
  free(o->ob.p);
  free(o->eb.p);
  free(o->rb.p);
  free(o->stdin_data);
  free(o->prog);
}

static const mk_op_vt proc_vt = {"proc.run", proc_results, proc_cancel, proc_free};

/* ---- arguments ---------------------------------------------------------- */

/* $MKENGINE_EXEC, else the mk-exec beside the running engine (its build
 * tree or install prefix: runtime.c), else the paths compiled in. */
static const char *exec_path(void) {
  const char *e = getenv("MKENGINE_EXEC");
  if (e && *e) return e;
  static char near_exe[PATH_MAX];
  if (near_exe[0]) return near_exe; /* found once: a path lookup per run otherwise */
  if (mk_find_helper("engine/exec/mk-exec", "libexec/mkengine/mk-exec", near_exe, sizeof near_exe) == 0)
    return near_exe;
  near_exe[0] = 0;
#ifdef MK_EXEC_PATH
  if (access(MK_EXEC_PATH, X_OK) == 0) return MK_EXEC_PATH;
#endif
#ifdef MK_EXEC_INSTALL_PATH
  if (access(MK_EXEC_INSTALL_PATH, X_OK) == 0) return MK_EXEC_INSTALL_PATH;
#endif
  return NULL;
}

/* Find prog the way execvp will (PATH from the child's environment), so
 * "no such program" is a spawn error rather than an exit status. */
static int resolve(const char *prog, const char *cwd, const char *path) {
  char buf[PATH_MAX];
  if (strchr(prog, '/')) {
    if (prog[0] != '/' && cwd) snprintf(buf, sizeof buf, "%s/%s", cwd, prog);
    else snprintf(buf, sizeof buf, "%s", prog);
    return access(buf, X_OK) == 0 ? 0 : -errno;
  }
  if (!path) path = "/usr/local/bin:/usr/bin:/bin";
  const char *s = path;
  while (1) {
    const char *c = strchr(s, ':');
    size_t len = c ? (size_t)(c - s) : strlen(s);
    if (len == 0) snprintf(buf, sizeof buf, "%s", prog);
    else snprintf(buf, sizeof buf, "%.*s/%s", (int)len, s, prog);
    if (len == 0 && cwd && prog[0] != '/') snprintf(buf, sizeof buf, "%s/%s", cwd, prog);
    if (access(buf, X_OK) == 0) return 0;
    if (!c) break;
    s = c + 1;
  }
  return -ENOENT;
}

/* Names of inherited variables kept from sandboxed code: API keys and the
 * like must not reach candidate programs (which could print them into
 * logs and prompts). Passing one in `env` explicitly still works. */
static int secret_name(const char *e, size_t len) {
  static const char *const words[] = {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", NULL};
  char up[256];
  if (len >= sizeof up) len = sizeof up - 1;
  for (size_t i = 0; i < len; i++) up[i] = (char)(e[i] >= 'a' && e[i] <= 'z' ? e[i] - 32 : e[i]);
  up[len] = 0;
  for (int i = 0; words[i]; i++)
    if (strstr(up, words[i])) return 1;
  return 0;
}

/* Child environment (a Lua table of strings at index `envt`, or none):
 * the engine's environment with env's entries set (false removes one);
 * clear_env = true starts from nothing. Everything lives in Lua memory
 * (the "K=V" strings in an anchor table, the array in a userdata, both
 * left on the stack), so an error raised later leaks nothing. */
static char **build_env(lua_State *L, int envt, int clear, int scrub, const char **path) {
  size_t cap = 1;
  if (!clear)
    for (char **e = environ; *e; e++) cap++;
  if (envt) {
    lua_pushnil(L);
    while (lua_next(L, envt)) {
      if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "proc: env keys must be strings");
      int ty = lua_type(L, -1);
      if (ty != LUA_TSTRING && ty != LUA_TNUMBER && !(ty == LUA_TBOOLEAN && !lua_toboolean(L, -1)))
        luaL_error(L, "proc: env values must be strings, numbers or false");
      cap++;
      lua_pop(L, 1);
    }
  }
  lua_newtable(L); /* anchor for the strings */
  int anchor = lua_gettop(L);
  char **v = lua_newuserdatauv(L, cap * sizeof *v, 0);
  size_t n = 0;
  if (!clear) {
    for (char **e = environ; *e; e++) {
      const char *eq = strchr(*e, '=');
      if (!eq) continue;
      if (scrub && secret_name(*e, (size_t)(eq - *e))) continue;
      if (envt) {
        lua_pushlstring(L, *e, (size_t)(eq - *e));
        int ty = lua_rawget(L, envt);
        lua_pop(L, 1);
        if (ty != LUA_TNIL) continue; /* overridden or removed */
      }
      v[n++] = *e; /* environ outlives the spawn */
    }
  }
  if (envt) {
    lua_pushnil(L);
    while (lua_next(L, envt)) {
      if (lua_type(L, -1) != LUA_TBOOLEAN) {
        const char *key = lua_tostring(L, -2);
        lua_pushvalue(L, -1); /* a copy: tostring may not convert the value lua_next sees */
        const char *val = lua_tostring(L, -1);
        v[n++] = (char *)lua_pushfstring(L, "%s=%s", key, val);
        lua_rawseti(L, anchor, (lua_Integer)n);
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
    }
  }
  v[n] = NULL;
  *path = NULL;
  for (size_t i = 0; i < n; i++)
    if (strncmp(v[i], "PATH=", 5) == 0) *path = v[i] + 5;
  return v;
}

/* What proc.run and proc.spawn share: the checked command line of the
 * wrapper (mk-exec, limits, --, argv), its environment and cwd. Strings
 * and arrays live in Lua memory on the stack above the options table, so
 * an error raised later leaks nothing. */
typedef struct {
  const char *fn;   /* "proc.run" / "proc.spawn": for messages */
  const char *prog; /* argv[1] */
  const char *cwd;
  const char *helper;
  char **args;
  char **env;
} spec;

static const char *const lim_names[4] = {"mem_mb", "cpu_s", "nproc", "fsize_mb"};
static const char *const lim_flags[4] = {"-m", "-c", "-n", "-f"};

/* options.limits {mem_mb, cpu_s, nproc, fsize_mb} into whole units
 * (rounded up; 0 = none). */
static void read_limits(lua_State *L, const char *fn, long lim[4]) {
  int ty = lua_getfield(L, 1, "limits");
  if (ty == LUA_TTABLE) {
    int limt = lua_gettop(L);
    for (int i = 0; i < 4; i++) {
      double v = mk_opt_nonneg(L, limt, lim_names[i], 0, fn);
      lim[i] = v > 0 && v < 1 ? 1 : (long)(v + 0.999999);
    }
  } else if (ty != LUA_TNIL) {
    luaL_error(L, "%s: 'limits' must be a table", fn);
  }
  lua_pop(L, 1);
}

/* The wrapper's argv: mk-exec [-m N]... [-w] [-u] -- argv... (strings
 * kept alive on the stack). */
static char **wrapper_argv(lua_State *L, const char *helper, const long lim[4], int give_cwd, int switched, int argt,
                           lua_Integer argc) {
  size_t nargs = 1 + 8 + 2 + 1 + (size_t)argc + 1;
  char **args = lua_newuserdatauv(L, nargs * sizeof *args, 0);
  size_t k = 0;
  args[k++] = (char *)helper;
  for (int i = 0; i < 4; i++) {
    if (lim[i] <= 0) continue;
    args[k++] = (char *)lim_flags[i];
    args[k++] = (char *)lua_pushfstring(L, "%d", (int)(lim[i] > INT_MAX ? INT_MAX : lim[i]));
  }
  if (lim[2] > 0) {
    /* nproc under a root engine: the child must not be root (see mk-exec) */
    if (give_cwd) args[k++] = "-w";
    if (!switched) args[k++] = "-u";
  }
  args[k++] = "--";
  for (lua_Integer i = 1; i <= argc; i++) {
    lua_geti(L, argt, i);
    args[k++] = (char *)lua_tostring(L, -1);
  }
  args[k] = NULL;
  return args;
}

/* Parse the options table at index 1. Argument mistakes raise; a runtime
 * failure (no wrapper, no program, no cwd) pushes nil, err and returns 2,
 * else returns 0. The wrapped argv is the caller's business (mk.services.sandbox.apply
 * in Lua): C only sees the final command line and three flags that a
 * sandbox sets: scrub_env, give_cwd, switches_user. */
static int parse_spec(lua_State *L, spec *sp) {
  const char *fn = sp->fn;
  if (lua_getfield(L, 1, "sandbox") != LUA_TNIL)
    return luaL_error(L, "%s: 'sandbox' is applied in Lua: %s(require('mk.services.sandbox').apply(opts))", fn, fn);
  lua_pop(L, 1);
  int argt = lua_gettop(L) + 1;
  if (lua_getfield(L, 1, "argv") != LUA_TTABLE)
    return luaL_error(L, "%s: 'argv' must be a non-empty table of strings", fn);
  lua_Integer argc = luaL_len(L, argt);
  luaL_checkstack(L, (int)argc + 16, "argv too long");
  if (argc < 1) return luaL_error(L, "%s: 'argv' must be a non-empty table of strings", fn);
  for (lua_Integer i = 1; i <= argc; i++) {
    if (lua_geti(L, argt, i) != LUA_TSTRING && !lua_isnumber(L, -1))
      return luaL_error(L, "%s: argv[%d] must be a string", fn, (int)i);
    lua_pop(L, 1);
  }
  int scrub = mk_opt_bool(L, 1, "scrub_env");
  int give_cwd = mk_opt_bool(L, 1, "give_cwd");
  int switched = mk_opt_bool(L, 1, "switches_user");
  lua_geti(L, argt, 1);
  const char *prog = luaL_checkstring(L, -1); /* stays on the stack */
  sp->prog = prog;
  sp->cwd = mk_opt_string(L, 1, "cwd", NULL, fn);
  long lim[4] = {0, 0, 0, 0};
  read_limits(L, fn, lim);
  int envt = 0;
  int ty = lua_getfield(L, 1, "env");
  if (ty == LUA_TTABLE) envt = lua_gettop(L);
  else if (ty != LUA_TNIL) return luaL_error(L, "%s: 'env' must be a table", fn);
  lua_getfield(L, 1, "clear_env");
  int clear_env = lua_toboolean(L, -1);
  lua_pop(L, 1);

  sp->helper = exec_path();
  if (!sp->helper) return mk_push_error(L, "spawn", "%s: the mk-exec helper was not built (set MKENGINE_EXEC)", fn);
  const char *path = NULL;
  sp->env = build_env(L, envt, clear_env, scrub, &path);
  if (sp->cwd && access(sp->cwd, X_OK) != 0)
    return mk_push_error(L, "spawn", "cannot run '%s': working directory %s: %s", prog, sp->cwd, strerror(errno));
  int r = resolve(prog, sp->cwd, path);
  if (r < 0) {
    push_spawn_error(L, prog, strerror(-r));
    return 2;
  }

  sp->args = wrapper_argv(L, sp->helper, lim, give_cwd, switched, argt, argc);
  return 0;
}

/* Start the wrapper of a parsed spec with posix_spawn (engine/launch.c: a
 * cost independent of the engine's size): stdin from `in` (NULL: /dev/null,
 * or the engine's own stdin with inherit_in), stdout, stderr and the report
 * socket into out, err, rep. Returns 0 or a libuv error code. */
static int start_wrapper(uv_loop_t *loop, mk_proc *p, const spec *sp, uv_pipe_t *in, int inherit_in, uv_pipe_t *out,
                         uv_pipe_t *err, uv_pipe_t *rep, void *data, mk_proc_exit_cb cb) {
  mk_spawn_options so = {.file = sp->helper,
                         .args = sp->args,
                         .env = sp->env,
                         .cwd = sp->cwd,
                         .stdio_count = 4,
                         .data = data,
                         .exit_cb = cb};
  so.stdio[0].mode = in ? MK_STDIO_READ : inherit_in ? MK_STDIO_INHERIT : MK_STDIO_NULL;
  so.stdio[0].pipe = in;
  so.stdio[1].mode = so.stdio[2].mode = so.stdio[3].mode = MK_STDIO_WRITE;
  so.stdio[1].pipe = out;
  so.stdio[2].pipe = err;
  so.stdio[3].pipe = rep;
  return mk_spawn(loop, p, &so);
}

/* The op of a run with its timer and pipes initialised (stdin only when
 * there is input to deliver). */
static proc_op *new_run_op(lua_State *L, const char *prog, double max_output, int with_stdin) {
  proc_op *o = mk_op_new(L, sizeof *o, &proc_vt);
  uv_loop_t *loop = mk_loop(L);
  o->prog = strdup(prog);
  o->ob.max = o->eb.max = (size_t)max_output;
  o->rb.max = 4096;
  uv_timer_init(loop, &o->timer);
  uv_pipe_init(loop, &o->out, 0);
  uv_pipe_init(loop, &o->err, 0);
  uv_pipe_init(loop, &o->rep, 0);
  o->timer.data = o->out.data = o->err.data = o->rep.data = o;
  o->handles = 4;
  if (with_stdin) {
    uv_pipe_init(loop, &o->in, 0);
    o->in.data = o;
    o->handles++;
  }
  return o;
}

/* Hand the child its input (a copy: the Lua string may go) and close its
 * stdin after it, or at once when there is none. */
static void send_stdin(proc_op *o, const char *data, size_t len) {
  if (len == 0) {
    close_handle(o, (uv_handle_t *)&o->in);
    return;
  }
  o->stdin_data = malloc(len);
  if (!o->stdin_data) {
    close_handle(o, (uv_handle_t *)&o->in);
    return;
  }
  memcpy(o->stdin_data, data, len);
  o->stdin_len = len;
  uv_buf_t b = uv_buf_init(o->stdin_data, (unsigned)len);
  o->wreq.data = o;
  if (uv_write(&o->wreq, (uv_stream_t *)&o->in, &b, 1, on_write) < 0) close_handle(o, (uv_handle_t *)&o->in);
}

/* proc.run{argv, cwd, env, clear_env, stdin, timeout, max_output, limits,
 * scrub_env, give_cwd, switches_user} -> result | nil, {kind = "spawn", message} */
static int l_run(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  size_t stdin_len = 0;
  const char *stdin_data = NULL;
  int ty = lua_getfield(L, 1, "stdin"); /* index 2 */
  if (ty == LUA_TSTRING) stdin_data = lua_tolstring(L, -1, &stdin_len);
  else if (ty != LUA_TNIL) return luaL_error(L, "proc.run: 'stdin' must be a string");
  double timeout = mk_opt_nonneg(L, 1, "timeout", 0, "proc.run");
  double max_output = mk_opt_nonneg(L, 1, "max_output", (double)DEFAULT_MAX_OUTPUT, "proc.run");
  if (max_output > (double)((size_t)1 << 40)) max_output = (double)((size_t)1 << 40);
  spec sp = {.fn = "proc.run"};
  if (parse_spec(L, &sp)) return 2;

  proc_op *o = new_run_op(L, sp.prog, max_output, stdin_data != NULL);
  o->t0 = uv_hrtime();
  int r = start_wrapper(mk_loop(L), &o->proc, &sp, stdin_data ? &o->in : NULL, 0, &o->out, &o->err, &o->rep, o,
                        on_proc_exit);
  o->handles++; /* the process handle must be closed even if spawn failed */
  if (r < 0) {
    o->spawn_err = r;
    o->exited = 1;
    o->t1 = o->t0;
    close_handle(o, (uv_handle_t *)&o->proc);
    close_pipes(o);
    close_handle(o, (uv_handle_t *)&o->timer);
    return mk_op_yield(L, &o->op);
  }
  o->spawned = 1;
  uv_read_start((uv_stream_t *)&o->out, on_alloc, on_read);
  uv_read_start((uv_stream_t *)&o->err, on_alloc, on_read);
  uv_read_start((uv_stream_t *)&o->rep, on_alloc, on_read);
  if (stdin_data) send_stdin(o, stdin_data, stdin_len);
  if (timeout > 0) {
    o->phase = PH_RUN;
    /* the loop's clock stops while Lua works without waiting (seconds of
     * commits): a timeout counted from it could end the run at once; and
     * the child's wall_s must never be less than its timeout */
    uv_update_time(mk_loop(L));
    uv_timer_start(&o->timer, on_timer, mk_timer_ms(timeout), 0);
  }
  return mk_op_yield(L, &o->op);
}

/* ---- proc.spawn: a child that stays up ----------------------------------
 *
 * A long-lived child (a worker, an ssh connection, salloc) behind the same
 * mk-exec wrapper, with its stdin and stdout kept open for a line protocol.
 * The child state lives in malloc'd memory owned by its libuv handles; the
 * Lua userdata only points at it. It is freed when both are gone: every
 * handle closed (exit seen, every pipe at EOF or closed) and the userdata
 * collected. Waits (read_line, wait) are ops: a task waiting in one that is
 * cancelled kills the tree, and the op finishes only once the child is
 * completely gone (exit and EOF), as proc.run does. A collected handle
 * kills its child: no process outlives the Lua object that controls it. */

#define CHILD_MT           "mk.proc.child"
#define STDOUT_HIGH_WATER  ((size_t)4 << 20) /* stop reading while unread */
#define DEFAULT_MAX_STDERR ((size_t)64 << 10)

typedef struct child child;

typedef struct {
  mk_op op;
  child *c;
  int kind;   /* 0 read_line, 1 wait */
  char *line; /* read_line: the line (without "\n"), NULL at EOF */
  size_t len;
  outcome oc; /* wait */
  char *err;  /* wait: stderr kept */
  size_t errn;
} child_op;

struct child {
  mk_proc proc; /* the wrapper */
  uv_pipe_t in, out, err, rep;
  uv_timer_t timer;
  int handles;     /* handles not yet closed */
  int walked;      /* handles closed at shutdown by someone else */
  int udata_alive; /* the Lua userdata still points here */
  int phase, exited, stopping, reading, out_eof, complete, in_shutdown;
  int64_t exit_status;
  int term_signal;
  int64_t child_pid;
  uint64_t t0, t1;
  obuf ob; /* stdout not yet returned as lines; ob.p + off is the start */
  size_t off;
  obuf eb, rb;
  child_op *reader, *waiter;
};

typedef struct {
  child *c;
} child_ud;

static void child_free(child *c) {
  free(c->ob.p);
  free(c->eb.p);
  free(c->rb.p);
  free(c);
}

static void child_outcome(child *c, outcome *oc) {
  memset(oc, 0, sizeof *oc);
  oc->term_signal = c->term_signal;
  oc->exit_status = c->exit_status;
  oc->wall_s = (double)(c->t1 - c->t0) / 1e9;
  oc->pid = c->proc.pid;
  parse_report(oc, c->rb.p, c->rb.n);
}

/* Hand the next line (or EOF) to a waiting reader. */
static int take_line(child *c, char **line, size_t *len) {
  char *start = c->ob.p ? c->ob.p + c->off : NULL;
  size_t avail = c->ob.n - c->off;
  char *nl = start ? memchr(start, '\n', avail) : NULL;
  size_t n;
  if (nl) n = (size_t)(nl - start);
  else if (c->out_eof && avail > 0) n = avail;
  else return 0;
  *line = malloc(n + 1);
  memcpy(*line, start, n);
  (*line)[n] = 0;
  *len = n;
  c->off += nl ? n + 1 : n;
  if (c->off == c->ob.n) c->off = c->ob.n = 0;
  return 1;
}

static void feed_reader(child *c) {
  child_op *o = c->reader;
  if (!o || mk_op_cancelled(&o->op)) return;
  if (take_line(c, &o->line, &o->len) || c->out_eof) {
    c->reader = NULL;
    mk_op_finish(&o->op);
  }
}

/* Everything is closed: settle the waits, free if Lua let go too. */
static void child_complete(child *c) {
  c->complete = 1;
  if (c->reader) {
    child_op *o = c->reader;
    c->reader = NULL;
    if (!mk_op_cancelled(&o->op)) take_line(c, &o->line, &o->len);
    mk_op_finish(&o->op);
  }
  if (c->waiter) {
    child_op *o = c->waiter;
    c->waiter = NULL;
    child_outcome(c, &o->oc);
    if (c->eb.n) {
      o->err = malloc(c->eb.n);
      memcpy(o->err, c->eb.p, c->eb.n);
      o->errn = c->eb.n;
    }
    mk_op_finish(&o->op);
  }
  if (!c->udata_alive) child_free(c);
}

static void child_on_close(uv_handle_t *h) {
  child *c = h->data;
  if (--c->handles == 0) child_complete(c);
}

static void child_close(child *c, uv_handle_t *h) {
  if (h->data == c && !uv_is_closing(h)) uv_close(h, child_on_close);
}

static int child_open(child *c, uv_handle_t *h) { return h->data == c && !uv_is_closing(h); }

static void child_maybe_done(child *c) {
  if (!c->exited) return;
  if (child_open(c, (uv_handle_t *)&c->out) || child_open(c, (uv_handle_t *)&c->err) ||
      child_open(c, (uv_handle_t *)&c->rep))
    return;
  child_close(c, (uv_handle_t *)&c->in);
  child_close(c, (uv_handle_t *)&c->timer);
}

static void child_on_timer(uv_timer_t *t);

/* Kill the tree: as stop() for a run. */
static void child_stop(child *c) {
  if (c->stopping || c->exited) return;
  c->stopping = 1;
  c->phase = PH_KILL;
  tree_term(&c->proc, c->child_pid, &c->timer, child_on_timer);
}

static void child_on_timer(uv_timer_t *t) {
  child *c = t->data;
  if (c->phase == PH_KILL) {
    tree_kill(c->proc.pid, c->child_pid);
  } else if (c->phase == PH_EOF) {
    child_close(c, (uv_handle_t *)&c->out);
    child_close(c, (uv_handle_t *)&c->err);
    child_close(c, (uv_handle_t *)&c->rep);
    if (!c->out_eof) {
      c->out_eof = 1;
      feed_reader(c);
    }
    child_maybe_done(c);
  }
}

static void child_on_exit(mk_proc *p, int64_t status, int sig) {
  child *c = p->sig.data;
  c->t1 = uv_hrtime();
  c->exited = 1;
  c->exit_status = status;
  c->term_signal = sig;
  child_close(c, (uv_handle_t *)&c->proc);
  c->phase = PH_EOF;
  uv_timer_start(&c->timer, child_on_timer, EOF_GRACE_MS, 0);
  child_maybe_done(c);
}

static void child_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  child *c = s->data;
  if (n > 0) {
    if (s == (uv_stream_t *)&c->out) {
      obuf_add(&c->ob, buf->base, (size_t)n);
      feed_reader(c);
      /* nobody is reading: stop at the high-water mark (the child then
       * blocks on its pipe) rather than buffer without bound */
      if (!c->reader && c->ob.n - c->off > STDOUT_HIGH_WATER && c->reading) {
        uv_read_stop(s);
        c->reading = 0;
      }
    } else if (s == (uv_stream_t *)&c->err) {
      obuf_add(&c->eb, buf->base, (size_t)n);
    } else {
      obuf_add(&c->rb, buf->base, (size_t)n);
      report_pid(&c->rb, &c->child_pid);
    }
  } else if (n < 0) {
    if (s == (uv_stream_t *)&c->out) {
      c->out_eof = 1;
      c->reading = 0;
    }
    child_close(c, (uv_handle_t *)s);
    if (s == (uv_stream_t *)&c->out) feed_reader(c);
    child_maybe_done(c);
  }
}

static void start_reading(child *c) {
  if (c->reading || c->out_eof || !child_open(c, (uv_handle_t *)&c->out)) return;
  /* compact before growing again */
  if (c->off > 0) {
    memmove(c->ob.p, c->ob.p + c->off, c->ob.n - c->off);
    c->ob.n -= c->off;
    c->off = 0;
  }
  if (uv_read_start((uv_stream_t *)&c->out, on_alloc, child_on_read) == 0) c->reading = 1;
}

static int child_op_results(lua_State *L, mk_op *op) {
  child_op *o = (child_op *)op;
  if (o->kind == 0) {
    if (o->line) lua_pushlstring(L, o->line, o->len);
    else lua_pushnil(L);
    return 1;
  }
  if (o->oc.exec_errno) {
    mk_push_error(L, "spawn", "cannot run the child: %s", strerror(o->oc.exec_errno));
    return 2;
  }
  push_outcome(L, &o->oc);
  lua_pushlstring(L, o->err ? o->err : "", o->errn);
  lua_setfield(L, -2, "stderr");
  return 1;
}

/* The waiting task was cancelled: kill the tree; the op finishes when the
 * child is completely gone (child_complete). */
static void child_op_cancel(mk_op *op) {
  child_op *o = (child_op *)op;
  child *c = o->c;
  if (c->complete) {
    mk_op_finish(op);
    return;
  }
  if (!c->exited) child_stop(c);
  else {
    child_close(c, (uv_handle_t *)&c->out);
    child_close(c, (uv_handle_t *)&c->err);
    child_close(c, (uv_handle_t *)&c->rep);
    child_maybe_done(c);
  }
}

static void child_op_free(mk_op *op) {
  child_op *o = (child_op *)op;
  free(o->line);
  free(o->err);
}

static const mk_op_vt read_vt = {"child:read_line", child_op_results, child_op_cancel, child_op_free};
static const mk_op_vt wait_vt = {"child:wait", child_op_results, child_op_cancel, child_op_free};

static child *check_child(lua_State *L) {
  child_ud *u = luaL_checkudata(L, 1, CHILD_MT);
  if (!u->c) luaL_error(L, "child: the handle was closed");
  return u->c;
}

/* h:read_line() -> line | nil at EOF. Waits for a whole line. */
static int c_read_line(lua_State *L) {
  child *c = check_child(L);
  char *line;
  size_t len;
  if (take_line(c, &line, &len)) {
    lua_pushlstring(L, line, len);
    free(line);
    return 1;
  }
  if (c->out_eof || c->complete) {
    lua_pushnil(L);
    return 1;
  }
  if (c->reader) return luaL_error(L, "child:read_line: another task is already reading this child");
  child_op *o = mk_op_new(L, sizeof *o, &read_vt);
  o->c = c;
  o->kind = 0;
  c->reader = o;
  start_reading(c);
  return mk_op_yield(L, &o->op);
}

typedef struct {
  uv_write_t req;
  char data[];
} wbuf;

static void child_on_write(uv_write_t *w, int status) {
  (void)status; /* EPIPE: the child went away; read_line/wait tell */
  free(w);
}

/* h:write(s) -> true | nil, err. Queues s on the child's stdin and
 * returns at once (never waits), so it may be called anywhere. */
static int c_write(lua_State *L) {
  child *c = check_child(L);
  size_t n;
  const char *s = luaL_checklstring(L, 2, &n);
  if (!child_open(c, (uv_handle_t *)&c->in) || c->exited)
    return mk_push_error(L, "closed", "child:write: the child's stdin is closed");
  if (n == 0) {
    lua_pushboolean(L, 1);
    return 1;
  }
  wbuf *w = malloc(sizeof *w + n);
  if (!w) return luaL_error(L, "child:write: out of memory");
  memcpy(w->data, s, n);
  uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
  int r = uv_write(&w->req, (uv_stream_t *)&c->in, &b, 1, child_on_write);
  if (r < 0) {
    free(w);
    return mk_push_error(L, "closed", "child:write: %s", uv_strerror(r));
  }
  lua_pushboolean(L, 1);
  return 1;
}

static void child_on_shutdown(uv_shutdown_t *req, int status) {
  (void)status;
  child *c = req->handle->data;
  free(req);
  child_close(c, (uv_handle_t *)&c->in);
}

/* h:close() -> true. Close the child's stdin once queued writes are out
 * (the child sees EOF). */
static int c_close(lua_State *L) {
  child *c = check_child(L);
  if (child_open(c, (uv_handle_t *)&c->in) && !c->in_shutdown) {
    uv_shutdown_t *req = malloc(sizeof *req);
    if (req && uv_shutdown(req, (uv_stream_t *)&c->in, child_on_shutdown) == 0) c->in_shutdown = 1;
    else {
      free(req);
      child_close(c, (uv_handle_t *)&c->in);
    }
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* h:kill() kills the tree (as a timeout does); h:kill(sig) sends sig to the
 * child's process group only (SIGSTOP/SIGCONT, SIGINT...). -> true | false */
static int c_kill(lua_State *L) {
  child *c = check_child(L);
  if (lua_isnoneornil(L, 2)) {
    int was = !c->exited;
    child_stop(c);
    lua_pushboolean(L, was);
    return 1;
  }
  int sig = (int)luaL_checkinteger(L, 2);
  if (c->exited || c->child_pid <= 0) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lua_pushboolean(L, kill(-(pid_t)c->child_pid, sig) == 0);
  return 1;
}

/* h:wait() -> result {status, code, signal, wall_s, cpu_s, max_rss_kb, pid,
 * stderr}: once the child exited and its pipes reached EOF. */
static int c_wait(lua_State *L) {
  child *c = check_child(L);
  if (c->complete) {
    outcome oc;
    child_outcome(c, &oc);
    if (oc.exec_errno) return mk_push_error(L, "spawn", "cannot run the child: %s", strerror(oc.exec_errno));
    push_outcome(L, &oc);
    lua_pushlstring(L, c->eb.p ? c->eb.p : "", c->eb.n);
    lua_setfield(L, -2, "stderr");
    return 1;
  }
  if (c->waiter) return luaL_error(L, "child:wait: another task is already waiting for this child");
  child_op *o = mk_op_new(L, sizeof *o, &wait_vt);
  o->c = c;
  o->kind = 1;
  c->waiter = o;
  /* keep draining stdout so the child can finish writing */
  c->ob.max = (size_t)1 << 40;
  start_reading(c);
  return mk_op_yield(L, &o->op);
}

/* h:pid() -> the child's pid (its process group), or nil before it is known. */
static int c_pid(lua_State *L) {
  child *c = check_child(L);
  if (c->child_pid > 0) lua_pushinteger(L, c->child_pid);
  else lua_pushnil(L);
  return 1;
}

/* h:stderr() -> what the child wrote on stderr so far (the first max_stderr
 * bytes). */
static int c_stderr(lua_State *L) {
  child *c = check_child(L);
  lua_pushlstring(L, c->eb.p ? c->eb.p : "", c->eb.n);
  return 1;
}

/* h:running() -> whether the child has not exited yet. */
static int c_running(lua_State *L) {
  child *c = check_child(L);
  lua_pushboolean(L, !c->exited);
  return 1;
}

/* Collected: the child dies with its handle. Handles that the runtime's
 * shutdown already closed (without our callback) count as gone. */
static int c_gc(lua_State *L) {
  child_ud *u = luaL_checkudata(L, 1, CHILD_MT);
  child *c = u->c;
  if (!c) return 0;
  u->c = NULL;
  c->udata_alive = 0;
  if (c->complete) {
    child_free(c);
    return 0;
  }
  uv_handle_t *hs[] = {(uv_handle_t *)&c->proc, (uv_handle_t *)&c->in,  (uv_handle_t *)&c->out,
                       (uv_handle_t *)&c->err,  (uv_handle_t *)&c->rep, (uv_handle_t *)&c->timer};
  int shut = 0;
  for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
    if (hs[i]->data == c && uv_is_closing(hs[i]) && !(c->walked & (1 << i)) && hs[i]->close_cb != child_on_close) {
      c->walked |= 1 << i;
      shut = 1;
    }
  if (shut) {
    /* runtime shutdown (mk_sched_shutdown closed every handle and ran the
     * loop until they were closed): kill what is left and let go */
    if (c->child_pid > 0) kill(-(pid_t)c->child_pid, SIGKILL);
    if (c->proc.pid > 0 && !c->exited) kill(c->proc.pid, SIGTERM);
    child_free(c);
    return 0;
  }
  if (!c->exited) child_stop(c);
  child_close(c, (uv_handle_t *)&c->in);
  child_close(c, (uv_handle_t *)&c->out);
  child_close(c, (uv_handle_t *)&c->err);
  child_close(c, (uv_handle_t *)&c->rep);
  if (c->exited) child_maybe_done(c);
  return 0;
}

/* A child's state with its timer and pipes initialised; the process handle
 * is initialised by the start (mk_spawn), which counts as its sixth. */
static child *new_child(uv_loop_t *loop, double max_stderr) {
  child *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->ob.max = (size_t)1 << 40;
  c->eb.max = (size_t)max_stderr;
  c->rb.max = 4096;
  uv_timer_init(loop, &c->timer);
  uv_pipe_init(loop, &c->in, 0);
  uv_pipe_init(loop, &c->out, 0);
  uv_pipe_init(loop, &c->err, 0);
  uv_pipe_init(loop, &c->rep, 0);
  c->timer.data = c->in.data = c->out.data = c->err.data = c->rep.data = c;
  c->handles = 6;
  return c;
}

/* proc.spawn{argv, cwd, env, clear_env, limits, max_stderr, stdin, scrub_env,
 * give_cwd, switches_user} -> handle | nil, {kind = "spawn", message}.
 * Does not wait: may be called outside a task (its handle's waits may not). */
static int l_spawn(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  double max_stderr = mk_opt_nonneg(L, 1, "max_stderr", (double)DEFAULT_MAX_STDERR, "proc.spawn");
  const char *in_mode = mk_opt_string(L, 1, "stdin", NULL, "proc.spawn");
  int inherit_in = in_mode && strcmp(in_mode, "inherit") == 0;
  if (in_mode && !inherit_in) return luaL_error(L, "proc.spawn: 'stdin' may only be \"inherit\"");
  spec sp = {.fn = "proc.spawn"};
  if (parse_spec(L, &sp)) return 2;
  uv_loop_t *loop = mk_loop(L);
  child *c = new_child(loop, max_stderr);
  if (!c) return luaL_error(L, "proc.spawn: out of memory");
  c->t0 = uv_hrtime();
  int r = start_wrapper(loop, &c->proc, &sp, inherit_in ? NULL : &c->in, inherit_in, &c->out, &c->err, &c->rep, c,
                        child_on_exit);
  if (r < 0) {
    /* nothing to wait for: close everything; the last close frees c */
    c->exited = c->complete = 0;
    c->udata_alive = 0;
    uv_close((uv_handle_t *)&c->proc, child_on_close);
    uv_close((uv_handle_t *)&c->in, child_on_close);
    uv_close((uv_handle_t *)&c->out, child_on_close);
    uv_close((uv_handle_t *)&c->err, child_on_close);
    uv_close((uv_handle_t *)&c->rep, child_on_close);
    uv_close((uv_handle_t *)&c->timer, child_on_close);
    push_spawn_error(L, sp.prog, uv_strerror(r));
    return 2;
  }
  if (inherit_in) child_close(c, (uv_handle_t *)&c->in);
  uv_read_start((uv_stream_t *)&c->err, on_alloc, child_on_read);
  uv_read_start((uv_stream_t *)&c->rep, on_alloc, child_on_read);
  c->reading = 1;
  uv_read_start((uv_stream_t *)&c->out, on_alloc, child_on_read);
  child_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->c = c;
  c->udata_alive = 1;
  luaL_setmetatable(L, CHILD_MT);
  return 1;
}

int luaopen_mk_proc(lua_State *L) {
  static const luaL_Reg funcs[] = {{"run", l_run}, {"spawn", l_spawn}, {NULL, NULL}};
  static const luaL_Reg methods[] = {{"read_line", c_read_line}, {"write", c_write},     {"close", c_close},
                                     {"kill", c_kill},           {"wait", c_wait},       {"pid", c_pid},
                                     {"stderr", c_stderr},       {"running", c_running}, {NULL, NULL}};
  /* A child that exits before reading its stdin must not kill the engine. */
  signal(SIGPIPE, SIG_IGN);
  if (luaL_newmetatable(L, CHILD_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, c_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}

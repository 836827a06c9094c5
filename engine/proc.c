/* proc.c: `mk.proc`, subprocesses for the engine: uv_spawn behind the
 * mk-exec wrapper (engine/exec/mk-exec.c), which gives the child its own
 * process group, resource limits and exact rusage. One op per run; the op
 * finishes only after the wrapper exited and stdout, stderr and the report
 * socket reached EOF (or were closed after a grace period), so no handle
 * outlives the op. A timeout or a cancelled task asks the wrapper to kill
 * the whole tree (SIGTERM), then kills both process groups itself if the
 * wrapper does not go within a second. */
#include "mk.h"

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
#define KILL_GRACE_MS 1000 /* wrapper's time to kill + reap after SIGTERM */
#define EOF_GRACE_MS 2000  /* after exit: pipes still open are closed */

typedef struct {
  char *p;
  size_t n, cap, max;
  int truncated;
} obuf;

enum { PH_RUN, PH_KILL, PH_EOF };

typedef struct {
  mk_op op;
  uv_process_t proc;
  uv_pipe_t in, out, err, rep;
  uv_timer_t timer;
  uv_write_t wreq;
  int handles;   /* open handles; the op finishes when this reaches 0 */
  int phase;
  int spawned, exited, timed_out, stopping;
  int spawn_err; /* uv error from uv_spawn */
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

static void parse_child_pid(proc_op *o) {
  if (o->child_pid || o->rb.n < 5) return;
  const char *nl = memchr(o->rb.p, '\n', o->rb.n);
  if (!nl) return;
  long long pid;
  if (sscanf(o->rb.p, "pid %lld", &pid) == 1 && pid > 0) o->child_pid = pid;
}

/* ---- killing ------------------------------------------------------------ */

static void on_timer(uv_timer_t *t);

/* The child's group dies at once; SIGTERM asks the wrapper to kill the
 * descendants that left the group (it is their subreaper), reap them all
 * and still report rusage. */
static void stop(proc_op *o) {
  if (o->stopping || o->exited) return;
  o->stopping = 1;
  if (o->child_pid > 0) kill(-(pid_t)o->child_pid, SIGKILL);
  uv_process_kill(&o->proc, SIGTERM);
  o->phase = PH_KILL;
  uv_timer_start(&o->timer, on_timer, KILL_GRACE_MS, 0);
}

static void hard_kill(proc_op *o) {
  int pid = o->proc.pid;
  if (pid > 0) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
  }
  if (o->child_pid > 0) {
    kill(-(pid_t)o->child_pid, SIGKILL);
    kill((pid_t)o->child_pid, SIGKILL);
  }
}

static void on_timer(uv_timer_t *t) {
  proc_op *o = t->data;
  switch (o->phase) {
  case PH_RUN:
    o->timed_out = 1;
    stop(o);
    break;
  case PH_KILL:
    hard_kill(o);
    break;
  case PH_EOF:
    /* A descendant escaped the wrapper and holds a pipe: stop waiting. */
    close_pipes(o);
    maybe_done(o);
    break;
  }
}

static void on_proc_exit(uv_process_t *p, int64_t status, int sig) {
  proc_op *o = p->data;
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
    if (b == &o->rb) parse_child_pid(o);
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

static int proc_results(lua_State *L, mk_op *op) {
  proc_op *o = (proc_op *)op;
  if (!o->spawned) {
    push_spawn_error(L, o->prog, uv_strerror(o->spawn_err));
    return 2;
  }
  /* The wrapper's report: pid, exec errno, exit status + rusage. */
  int have_exit = 0, exec_errno = 0, raw = 0;
  long long cpu_us = 0;
  long rss = 0;
  const char *p = o->rb.p, *end = o->rb.p + o->rb.n;
  while (p && p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) break;
    char line[256];
    size_t len = (size_t)(nl - p) < sizeof line - 1 ? (size_t)(nl - p) : sizeof line - 1;
    memcpy(line, p, len);
    line[len] = 0;
    if (sscanf(line, "exit %d %lld %ld", &raw, &cpu_us, &rss) == 3) have_exit = 1;
    else sscanf(line, "exec %d", &exec_errno);
    p = nl + 1;
  }
  if (exec_errno) {
    push_spawn_error(L, o->prog, strerror(exec_errno));
    return 2;
  }
  lua_createtable(L, 0, 12);
  const char *status;
  int code = -1, sig = 0;
  if (have_exit) {
    if (WIFEXITED(raw)) code = WEXITSTATUS(raw);
    else if (WIFSIGNALED(raw)) sig = WTERMSIG(raw);
  } else if (o->term_signal) {
    sig = o->term_signal; /* the wrapper itself was killed */
  } else {
    code = (int)o->exit_status;
  }
  if (o->timed_out) status = "timeout";
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
  lua_pushlstring(L, o->ob.p ? o->ob.p : "", o->ob.n);
  lua_setfield(L, -2, "stdout");
  lua_pushlstring(L, o->eb.p ? o->eb.p : "", o->eb.n);
  lua_setfield(L, -2, "stderr");
  lua_pushboolean(L, o->ob.truncated || o->eb.truncated);
  lua_setfield(L, -2, "truncated");
  lua_pushnumber(L, (double)(o->t1 - o->t0) / 1e9);
  lua_setfield(L, -2, "wall_s");
  if (have_exit) {
    lua_pushnumber(L, (double)cpu_us / 1e6);
    lua_setfield(L, -2, "cpu_s");
    lua_pushinteger(L, rss);
    lua_setfield(L, -2, "max_rss_kb");
  }
  lua_pushinteger(L, o->proc.pid);
  lua_setfield(L, -2, "pid");
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

static const char *exec_path(void) {
  const char *e = getenv("MKENGINE_EXEC");
  if (e && *e) return e;
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

static const char *opt_string(lua_State *L, int t, const char *k) {
  int ty = lua_getfield(L, t, k);
  const char *s = NULL;
  if (ty != LUA_TNIL) {
    if (ty != LUA_TSTRING) luaL_error(L, "proc.run: '%s' must be a string", k);
    s = lua_tostring(L, -1);
  }
  lua_pop(L, 1); /* the string stays alive: it is referenced by the table */
  return s;
}

static double opt_number(lua_State *L, int t, const char *k, double dflt) {
  int ty = lua_getfield(L, t, k);
  double v = dflt;
  if (ty != LUA_TNIL) {
    if (!lua_isnumber(L, -1)) luaL_error(L, "proc.run: '%s' must be a number", k);
    v = lua_tonumber(L, -1);
    if (v < 0) luaL_error(L, "proc.run: '%s' must not be negative", k);
  }
  lua_pop(L, 1);
  return v;
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
      if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "proc.run: env keys must be strings");
      int ty = lua_type(L, -1);
      if (ty != LUA_TSTRING && ty != LUA_TNUMBER && !(ty == LUA_TBOOLEAN && !lua_toboolean(L, -1)))
        luaL_error(L, "proc.run: env values must be strings, numbers or false");
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

/* proc.run{argv, cwd, env, clear_env, stdin, timeout, max_output, limits,
 * sandbox} -> result | nil, {kind = "spawn", message} */
static int l_run(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);

  /* sandbox = {...}: argv is rewritten by mk.services.sandbox.wrap, cwd defaults to
   * the sandbox's workdir. */
  const char *sb_workdir = NULL;
  int sb_user = 0; /* the sandbox runs the command as nobody */
  int want_nproc = 0;
  if (lua_getfield(L, 1, "limits") == LUA_TTABLE) {
    lua_getfield(L, -1, "nproc");
    want_nproc = lua_isnumber(L, -1) && lua_tonumber(L, -1) > 0;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (lua_getfield(L, 1, "sandbox") == LUA_TTABLE) { /* index 2 */
    sb_workdir = opt_string(L, 2, "workdir");
    lua_getglobal(L, "require");
    lua_pushliteral(L, "mk.services.sandbox");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "wrap");
    lua_getfield(L, 1, "argv");
    /* a copy of the sandbox table, with user = "nobody" when an nproc
     * limit must hold for a root engine */
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, 2)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_settable(L, -4);
    }
    if (want_nproc) {
      lua_pushliteral(L, "nobody");
      lua_setfield(L, -2, "user");
    }
    lua_call(L, 2, 2); /* wrapped argv, whether the sandbox switches user */
    sb_user = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_remove(L, 3); /* index 3: wrapped argv */
  } else if (!lua_isnil(L, 2)) {
    return luaL_error(L, "proc.run: 'sandbox' must be a table");
  } else {
    lua_pushnil(L); /* index 3 */
  }
  if (lua_getfield(L, 1, "argv") != LUA_TTABLE) /* index 4 */
    return luaL_error(L, "proc.run: 'argv' must be a non-empty table of strings");
  int argt = lua_istable(L, 3) ? 3 : 4;
  lua_Integer argc = luaL_len(L, 4), wargc = luaL_len(L, argt);
  luaL_checkstack(L, (int)wargc + 16, "proc.run: argv too long");
  if (argc < 1) return luaL_error(L, "proc.run: 'argv' must be a non-empty table of strings");
  for (lua_Integer i = 1; i <= wargc; i++) {
    if (lua_geti(L, argt, i) != LUA_TSTRING && !lua_isnumber(L, -1))
      return luaL_error(L, "proc.run: argv[%d] must be a string", (int)i);
    lua_pop(L, 1);
  }
  lua_geti(L, 4, 1);
  const char *prog = luaL_checkstring(L, -1); /* index 5 */

  const char *cwd = opt_string(L, 1, "cwd");
  if (!cwd) cwd = sb_workdir;
  size_t stdin_len = 0;
  const char *stdin_data = NULL;
  int ty = lua_getfield(L, 1, "stdin"); /* index 6 */
  if (ty == LUA_TSTRING) stdin_data = lua_tolstring(L, -1, &stdin_len);
  else if (ty != LUA_TNIL) return luaL_error(L, "proc.run: 'stdin' must be a string");
  double timeout = opt_number(L, 1, "timeout", 0);
  double max_output = opt_number(L, 1, "max_output", (double)DEFAULT_MAX_OUTPUT);
  if (max_output > (double)((size_t)1 << 40)) max_output = (double)((size_t)1 << 40);
  long lim[4] = {0, 0, 0, 0};
  static const char *const lim_names[4] = {"mem_mb", "cpu_s", "nproc", "fsize_mb"};
  static const char *const lim_flags[4] = {"-m", "-c", "-n", "-f"};
  ty = lua_getfield(L, 1, "limits"); /* index 7 */
  if (ty == LUA_TTABLE) {
    for (int i = 0; i < 4; i++) {
      double v = opt_number(L, 7, lim_names[i], 0);
      lim[i] = v > 0 && v < 1 ? 1 : (long)(v + 0.999999);
    }
  } else if (ty != LUA_TNIL) {
    return luaL_error(L, "proc.run: 'limits' must be a table");
  }
  int envt = 0;
  ty = lua_getfield(L, 1, "env"); /* index 8 */
  if (ty == LUA_TTABLE) envt = 8;
  else if (ty != LUA_TNIL) return luaL_error(L, "proc.run: 'env' must be a table");
  lua_getfield(L, 1, "clear_env");
  int clear_env = lua_toboolean(L, -1);
  lua_pop(L, 1);

  const char *helper = exec_path();
  if (!helper) return mk_push_error(L, "spawn", "proc.run: the mk-exec helper was not built (set MKENGINE_EXEC)");

  const char *path = NULL;
  char **env = build_env(L, envt, clear_env, sb_workdir != NULL, &path);
  if (cwd && access(cwd, X_OK) != 0)
    return mk_push_error(L, "spawn", "cannot run '%s': working directory %s: %s", prog, cwd, strerror(errno));
  int r = resolve(prog, cwd, path);
  if (r < 0) {
    push_spawn_error(L, prog, strerror(-r));
    return 2;
  }

  /* wrapper argv: mk-exec [-m N]... -- argv... */
  size_t nargs = 1 + 8 + 2 + 1 + (size_t)wargc + 1;
  char **args = lua_newuserdatauv(L, nargs * sizeof *args, 0);
  char limbuf[4][32];
  size_t k = 0;
  args[k++] = (char *)helper;
  for (int i = 0; i < 4; i++) {
    if (lim[i] <= 0) continue;
    snprintf(limbuf[i], sizeof limbuf[i], "%ld", lim[i]);
    args[k++] = (char *)lim_flags[i];
    args[k++] = limbuf[i];
  }
  if (lim[2] > 0) {
    /* nproc under a root engine: the child must not be root (see mk-exec) */
    if (sb_workdir) args[k++] = "-w";
    if (!sb_user) args[k++] = "-u";
  }
  args[k++] = "--";
  for (lua_Integer i = 1; i <= wargc; i++) {
    lua_geti(L, argt, i);
    args[k++] = (char *)lua_tostring(L, -1); /* kept alive on the stack */
  }
  args[k] = NULL;

  proc_op *o = mk_op_new(L, sizeof *o, &proc_vt);
  uv_loop_t *loop = mk_loop(L);
  o->prog = strdup(prog);
  o->ob.max = o->eb.max = (size_t)max_output;
  o->rb.max = 4096;
  uv_timer_init(loop, &o->timer);
  o->timer.data = o;
  o->handles = 1;
  uv_pipe_init(loop, &o->out, 0);
  uv_pipe_init(loop, &o->err, 0);
  uv_pipe_init(loop, &o->rep, 0);
  o->out.data = o->err.data = o->rep.data = o;
  o->handles += 3;
  uv_stdio_container_t stdio[4];
  if (stdin_data) {
    uv_pipe_init(loop, &o->in, 0);
    o->in.data = o;
    o->handles++;
    stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
    stdio[0].data.stream = (uv_stream_t *)&o->in;
  } else {
    stdio[0].flags = UV_IGNORE;
  }
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&o->out;
  stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[2].data.stream = (uv_stream_t *)&o->err;
  stdio[3].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[3].data.stream = (uv_stream_t *)&o->rep;

  uv_process_options_t opts;
  memset(&opts, 0, sizeof opts);
  opts.file = helper;
  opts.args = args;
  opts.env = env;
  opts.cwd = cwd;
  opts.flags = UV_PROCESS_DETACHED;
  opts.stdio_count = 4;
  opts.stdio = stdio;
  opts.exit_cb = on_proc_exit;
  o->proc.data = o;
  o->t0 = uv_hrtime();
  r = uv_spawn(loop, &o->proc, &opts);
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
  if (stdin_data) {
    if (stdin_len > 0) {
      o->stdin_data = malloc(stdin_len);
      memcpy(o->stdin_data, stdin_data, stdin_len);
      o->stdin_len = stdin_len;
      uv_buf_t b = uv_buf_init(o->stdin_data, (unsigned)stdin_len);
      o->wreq.data = o;
      if (uv_write(&o->wreq, (uv_stream_t *)&o->in, &b, 1, on_write) < 0) close_handle(o, (uv_handle_t *)&o->in);
    } else {
      close_handle(o, (uv_handle_t *)&o->in);
    }
  }
  if (timeout > 0) {
    o->phase = PH_RUN;
    uv_timer_start(&o->timer, on_timer, (uint64_t)(timeout * 1000 + 0.5), 0);
  }
  return mk_op_yield(L, &o->op);
}

int luaopen_mk_proc(lua_State *L) {
  static const luaL_Reg funcs[] = {{"run", l_run}, {NULL, NULL}};
  /* A child that exits before reading its stdin must not kill the engine. */
  signal(SIGPIPE, SIG_IGN);
  luaL_newlib(L, funcs);
  return 1;
}

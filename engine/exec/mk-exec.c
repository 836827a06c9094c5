/* mk-exec.c: the exec wrapper mk.proc starts in front of every child.
 *
 *   mk-exec [-m MEM_MB] [-c CPU_S] [-n NPROC] [-f FSIZE_MB] [-w] [-u] -- PROGRAM ARGS...
 *
 * An unknown option or a missing PROGRAM exits 125 ("usage" on fd 3).
 *
 * The engine starts this program (engine/launch.c, posix_spawn) in a
 * session of its own with the child's stdin/stdout/stderr on fds 0-2 and a
 * report socket on fd 3. It exists because a start without fork() has no
 * pre-exec hook and an exit status carries no rusage. It:
 *   - forks the real child into a process group of its own (pgid = its pid),
 *     sets the resource limits there, then execs PROGRAM;
 *   - is a child subreaper, so descendants that double-fork or setsid are
 *     reparented to it and can still be killed;
 *   - on SIGTERM (the engine's timeout/cancel) or when the engine's end of
 *     fd 3 goes away, kills the child's group and every descendant;
 *   - when the child exits, kills what is left (background jobs would
 *     otherwise hold the output pipes open and outlive the run), reaps all
 *     of it with wait4 and sums the rusage of everything it reaped;
 *   - reports on fd 3, one line each:
 *       pid <child pid>
 *       exec <errno>                 (exec failed: nothing ran)
 *       exit <raw wait status> <user+sys cpu µs> <max rss KiB>
 * Running as root, Linux does not enforce RLIMIT_NPROC. Then -u runs the
 * child as nobody (65534:65534) so the limit holds, and -w first hands its
 * working directory (a private workdir) to nobody, recursively, so the
 * child can still write there. (Inside bubblewrap the sandbox does the
 * switch itself; mk-exec only hands over the workdir.) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REPORT_FD 3
#define NOBODY    65534

static pid_t child;
static long long cpu_us;
static long max_rss_kb;

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n <= 0) return;
  const char *p = line;
  while (n > 0) {
    ssize_t w = write(REPORT_FD, p, (size_t)n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= (int)w;
  }
}

static void account(const struct rusage *ru) {
  cpu_us += (long long)ru->ru_utime.tv_sec * 1000000 + ru->ru_utime.tv_usec;
  cpu_us += (long long)ru->ru_stime.tv_sec * 1000000 + ru->ru_stime.tv_usec;
  if (ru->ru_maxrss > max_rss_kb) max_rss_kb = ru->ru_maxrss;
}

/* Kill our direct children (and their groups): after the child's group is
 * killed, these are descendants that changed group and were reparented to
 * us, the subreaper. */
static int kill_children(void) {
  int found = 0;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
  FILE *f = fopen(path, "r");
  if (f) {
    int pid;
    while (fscanf(f, "%d", &pid) == 1) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      found++;
    }
    fclose(f);
    return found;
  }
  /* No CONFIG_PROC_CHILDREN: scan /proc for our children. */
  DIR *d = opendir("/proc");
  if (!d) return 0;
  struct dirent *e;
  pid_t me = getpid();
  while ((e = readdir(d))) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0) continue;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *s = fopen(path, "r");
    if (!s) continue;
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, s);
    fclose(s);
    buf[n] = 0;
    char *rp = strrchr(buf, ')'); /* comm may contain spaces */
    int ppid;
    if (rp && sscanf(rp + 1, " %*c %d", &ppid) == 1 && ppid == me) {
      kill(-(pid_t)pid, SIGKILL);
      kill((pid_t)pid, SIGKILL);
      found++;
    }
  }
  closedir(d);
  return found;
}

static void reap(int block) {
  int st;
  struct rusage ru;
  pid_t p;
  while ((p = wait4(-1, &st, block ? 0 : WNOHANG, &ru)) > 0) {
    account(&ru);
    block = 0;
  }
}

/* No child left, not even a zombie. We are the subreaper and the child's
 * session is ours, so every live descendant has a live ancestor among our
 * children: none left means nothing left to kill. */
static int no_children(void) {
  siginfo_t si;
  return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD;
}

/* Kill and reap every descendant; bounded so the wrapper itself can never
 * hang (processes in uninterruptible sleep die when they wake). The usual
 * child leaves nothing behind: then no kill and no /proc read. */
static void kill_all(void) {
  for (int round = 0; round < 1000 && !no_children(); round++) {
    if (round > 0) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    kill(-child, SIGKILL);
    kill_children();
    reap(0);
  }
}

static int give_to_nobody(const char *path, const struct stat *st, int flag, struct FTW *f) {
  (void)st;
  (void)flag;
  (void)f;
  lchown(path, NOBODY, NOBODY);
  return 0;
}

static void set_limit(int res, rlim_t soft, rlim_t hard) {
  struct rlimit rl = {soft, hard};
  setrlimit(res, &rl);
}

static long opt_num(const char *s, int flag) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == 0 || *end || v < 0) {
    fprintf(stderr, "mk-exec: option -%c wants a number >= 0, not '%s'\n", flag, s);
    report("usage invalid -%c\n", flag);
    _exit(125);
  }
  return v;
}

typedef struct {
  long mem_mb, cpu_s, nproc, fsize_mb;
  int give_cwd, drop;
  char **argv; /* PROGRAM ARGS... */
} options;

static int usage(void) {
  fprintf(stderr, "usage: mk-exec [-m MB] [-c S] [-n N] [-f MB] [-w] [-u] -- PROGRAM ARGS...\n");
  report("usage\n");
  return 125;
}

/* Options end at "--" or at the first non-option ("+": no permuting, so the
 * program's own options are never read as ours); an unknown option or a
 * missing program is a usage error (125), never a program to run. */
static int parse_options(int argc, char **argv, options *o) {
  int c;
  opterr = 1;
  while ((c = getopt(argc, argv, "+m:c:n:f:wu")) != -1) {
    switch (c) {
      case 'm': o->mem_mb = opt_num(optarg, c); break;
      case 'c': o->cpu_s = opt_num(optarg, c); break;
      case 'n': o->nproc = opt_num(optarg, c); break;
      case 'f': o->fsize_mb = opt_num(optarg, c); break;
      case 'w': o->give_cwd = 1; break;
      case 'u': o->drop = 1; break;
      default: return -1;
    }
  }
  if (optind >= argc) return -1;
  o->argv = argv + optind;
  return 0;
}

/* Every signal back to its default. posix_spawn (the engine's start) leaves
 * glibc's two internal signals ignored, which glibc's signal calls cannot
 * undo; an all-zero kernel sigaction is SIG_DFL on every architecture. */
static void default_signals(void) {
  unsigned long dfl[4] = {0, 0, 0, 0};
  for (int sig = 1; sig < 65; sig++)
    if (sig != SIGKILL && sig != SIGSTOP) syscall(SYS_rt_sigaction, sig, dfl, NULL, 8);
}

/* Report an errno on the exec pipe and die: the parent turns it into
 * "exec <errno>" (nothing ran). */
static void exec_failed(int ep) {
  int e = errno;
  if (write(ep, &e, sizeof e) < 0) _exit(127);
  _exit(127);
}

/* Exec one file; a file the kernel cannot run (ENOEXEC: a script without
 * "#!") is run by /bin/sh, as glibc's execvp does (musl's does not). */
static void exec_file(const char *file, char **argv) {
  execv(file, argv);
  if (errno != ENOEXEC) return;
  size_t n = 0;
  while (argv[n]) n++;
  char **sh = calloc(n + 2, sizeof *sh);
  if (!sh) return;
  sh[0] = "/bin/sh";
  sh[1] = (char *)file;
  memcpy(sh + 2, argv + 1, n * sizeof *sh); /* argv[1..n], NULL */
  execv("/bin/sh", sh);
  free(sh);
  errno = ENOEXEC;
}

/* execvp: a name without '/' is looked up in $PATH (glibc's default when
 * unset); returns (with errno) only when nothing could be run. */
static void exec_program(char **argv) {
  if (strchr(argv[0], '/')) {
    exec_file(argv[0], argv);
    return;
  }
  const char *path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin";
  int denied = 0;
  char buf[4096];
  for (const char *s = path;;) {
    const char *c = strchr(s, ':');
    int len = c ? (int)(c - s) : (int)strlen(s);
    if (snprintf(buf, sizeof buf, "%.*s%s%s", len, s, len ? "/" : "", argv[0]) < (int)sizeof buf) {
      exec_file(buf, argv);
      if (errno == EACCES) denied = 1;
      else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE && errno != ENODEV) return;
    }
    if (!c) break;
    s = c + 1;
  }
  errno = denied ? EACCES : ENOENT;
}

/* In the forked child: its own group, its limits, maybe nobody, then exec. */
static void run_child(const options *o, const sigset_t *old, int ep) {
  setpgid(0, 0);
  default_signals();
  sigprocmask(SIG_SETMASK, old, NULL);
  set_limit(RLIMIT_CORE, 0, 0);
  if (o->mem_mb) set_limit(RLIMIT_AS, (rlim_t)o->mem_mb << 20, (rlim_t)o->mem_mb << 20);
  if (o->cpu_s) set_limit(RLIMIT_CPU, (rlim_t)o->cpu_s, (rlim_t)o->cpu_s + 1);
  if (o->fsize_mb) set_limit(RLIMIT_FSIZE, (rlim_t)o->fsize_mb << 20, (rlim_t)o->fsize_mb << 20);
  if (o->nproc) set_limit(RLIMIT_NPROC, (rlim_t)o->nproc, (rlim_t)o->nproc);
  if (geteuid() == 0 && o->give_cwd) nftw(".", give_to_nobody, 16, FTW_PHYS);
  if (geteuid() == 0 && o->drop && (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0))
    exec_failed(ep);
  exec_program(o->argv);
  exec_failed(ep);
}

/* Fork and exec the child; report its pid, then whether its exec failed. */
static int start_child(const options *o, const sigset_t *old) {
  int ep[2];
  if (pipe2(ep, O_CLOEXEC) < 0) return -1;
  child = fork();
  if (child < 0) return -1;
  if (child == 0) run_child(o, old, ep[1]);
  setpgid(child, child); /* both sides, so no kill can find it in our group */
  close(ep[1]);
  report("pid %d\n", (int)child);
  int e;
  ssize_t n;
  while ((n = read(ep[0], &e, sizeof e)) < 0 && errno == EINTR) {}
  close(ep[0]);
  if (n == (ssize_t)sizeof e) report("exec %d\n", e);
  return 0;
}

/* Only the child and its descendants may hold the output pipes now. */
static void release_stdio(void) {
  int dn = open("/dev/null", O_RDWR);
  if (dn < 0) return;
  dup2(dn, 0);
  dup2(dn, 1);
  dup2(dn, 2);
  if (dn > 2) close(dn);
}

/* Wait for the child, reaping (and accounting) whatever exits meanwhile;
 * a SIGTERM/SIGINT/SIGHUP or the engine's end of fd 3 going away kills
 * the child's group. Returns the child's raw wait status. */
static int wait_child(const sigset_t *set, int watch) {
  int sfd = signalfd(-1, set, SFD_CLOEXEC | SFD_NONBLOCK);
  int status = 0;
  for (;;) {
    int st;
    struct rusage ru;
    pid_t p;
    while ((p = wait4(-1, &st, WNOHANG, &ru)) > 0) {
      account(&ru);
      if (p == child) return st;
    }
    if (p < 0 && errno == ECHILD) return status;
    struct pollfd pf[2] = {{sfd, POLLIN, 0}, {watch, 0, 0}};
    int r = poll(pf, 2, sfd < 0 ? 100 : -1);
    if (r < 0 && errno != EINTR) return status;
    int stop = 0;
    if (pf[0].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
        if (si.ssi_signo != SIGCHLD) stop = 1;
    }
    if (pf[1].revents & (POLLHUP | POLLERR | POLLNVAL)) stop = 1; /* engine gone */
    if (stop) {
      kill(-child, SIGKILL);
      kill(child, SIGKILL);
    }
  }
}

int main(int argc, char **argv) {
  options o = {0};
  if (parse_options(argc, argv, &o) < 0) return usage();
  /* Without fd 3 (run by hand) there is no report and no engine to watch. */
  int watch = fcntl(REPORT_FD, F_SETFD, FD_CLOEXEC) == 0 ? REPORT_FD : -1;

  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, &old);
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  if (start_child(&o, &old) < 0) {
    report("exec %d\n", errno);
    return 126;
  }
  release_stdio();
  int status = wait_child(&set, watch);
  kill_all();
  report("exit %d %lld %ld\n", status, cpu_us, max_rss_kb);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

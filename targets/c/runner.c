/* runner.c (mkc-run): runs a candidate kernel, compiled as a shared object
 * with a generated glue function `mk_call(void *const *args)`, on frozen or
 * seeded inputs, inside the sandbox. It owns what the candidate must not
 * control: input generation, NaN-poisoned outputs with canaries, the clock,
 * the rotation of input sets, the check that every timed call produced the
 * same outputs, and a seccomp filter that turns file, process and network
 * access into SIGSYS (reported as MKREJECT).
 *
 * Protocol. stdin carries the plan (lines of tokens):
 *   nonce HEX | mode test|bench|gen | so PATH | blob PATH | tol ATOL RTOL
 *   bench WARMUP MIN_TIME MIN_REPS MAX_REPS FLUSH_BYTES [MAX_TIME] | counters 0|1
 *                 (timed calls until MIN_TIME s and MIN_REPS calls; then on
 *                 while the median is not known to +-2.5% (95% interval
 *                 from order statistics), up to MAX_TIME s: default MIN_TIME)
 *   probes N      (bench: the last N cases are fresh inputs, each timed once
 *                  after the loop; outputs go to the blob for checking)
 *   case ID
 *     arg in|inout NAME DTYPE COUNT file PATH [save PATH]
 *     arg in|inout NAME DTYPE COUNT gen SEED uniform|normal A B [save PATH]
 *     arg out NAME DTYPE COUNT [save PATH]
 *     arg int NAME VALUE | arg float NAME VALUE
 *   end
 * stdout ends with one line `MKRESULT <nonce> {json}`; a crash prints
 * `MKCRASH <nonce> ...`, a forbidden syscall `MKREJECT <nonce> ...`, a setup
 * failure `MKERROR <nonce> ...`. The nonce is known only to the engine and
 * this process, so text printed by the kernel cannot pass for a verdict.
 *
 * `mkc-run peaks [THREADS]` prints the machine's peaks as JSON instead. */
#include "common.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

double mkc_peak_gflops(int threads, float *sink);
double mkc_peak_gbps(int threads);

enum { K_IN, K_OUT, K_INOUT, K_INT, K_FLOAT };
enum { SRC_NONE, SRC_FILE, SRC_GEN };
#define CANARY 64

typedef struct {
  char name[64];
  int kind;
  mkc_dtype dt;
  size_t count, bytes;
  int src, in_fd, save_fd;
  uint64_t seed;
  int normal;
  double a, b;
  int ival;
  float fval;
  unsigned char *buf;   /* what the kernel sees */
  unsigned char *alloc; /* allocation (inputs: mmap; outputs: with canaries) */
  size_t alloc_len;
  unsigned char *pristine; /* inout: initial contents, restored before each call */
  unsigned char *first;    /* outputs of this set's first call (bench) */
  int first_is_buf;        /* probes: first points at buf, not a copy */
  int mapped;              /* bench inputs: the frozen file mapped, not copied */
} arg_t;

typedef struct {
  char id[128];
  arg_t *args;
  int nargs;
} case_t;

static struct {
  char nonce[80];
  char mode[16];
  char so[4096];
  int blob_fd;
  off_t blob_off;
  double atol, rtol;
  int warmup, min_reps, max_reps;
  double min_time, max_time;
  size_t flush_bytes;
  int counters;
  int probes;  /* the last `probes` cases: fresh inputs timed once after the loop */
  int trusted; /* the engine's own reference: test mode may write its save files */
  case_t *cases;
  int ncases;
  const char *current_case;
} P = {.blob_fd = -1,
       .atol = 1e-4,
       .rtol = 1e-4,
       .warmup = 3,
       .min_reps = 5,
       .max_reps = 200,
       .min_time = 1.0,
       .max_time = 1.0};

/* Read-only input ranges, for naming a write to an input in the SEGV report. */
#define MAX_RANGES 256
static struct {
  const char *name;
  uintptr_t lo, hi;
} ranges[MAX_RANGES];
static int nranges;

/* ---- output helpers ---------------------------------------------------- */

static void out_raw(const char *s, size_t n) {
  while (n) {
    ssize_t w = write(1, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void fail(const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char line[2300];
  int n = snprintf(line, sizeof line, "\nMKERROR %s %s\n", P.nonce, msg);
  out_raw(line, (size_t)n);
  _exit(3);
}

/* ---- signals ------------------------------------------------------------ */

static const char *sysname(long nr) {
  switch (nr) {
    /* one case per system call, kept as a table */
    // clang-format off
#define N(x) case SYS_##x: return #x;
#ifdef SYS_open
  N(open)
#endif
#ifdef SYS_creat
  N(creat)
#endif
#ifdef SYS_fork
  N(fork)
#endif
#ifdef SYS_vfork
  N(vfork)
#endif
#ifdef SYS_unlink
  N(unlink)
#endif
#ifdef SYS_rename
  N(rename)
#endif
#ifdef SYS_mkdir
  N(mkdir)
#endif
  N(openat) N(execve) N(execveat) N(clone) N(socket) N(connect) N(ptrace) N(kill) N(tgkill)
  N(tkill) N(unlinkat) N(renameat) N(mkdirat) N(write) N(writev) N(pwrite64) N(mmap)
  N(memfd_create) N(shmget) N(perf_event_open) N(bind) N(sendfile) N(ftruncate) N(fallocate)
  N(process_vm_writev) N(process_vm_readv) N(mount) N(unshare) N(setns) N(bpf)
#undef N
        // clang-format on
        default : return "?";
  }
}

static void utoa(char *dst, unsigned long v, int base) {
  char tmp[32];
  int n = 0;
  do {
    tmp[n++] = "0123456789abcdef"[v % (unsigned)base];
    v /= (unsigned)base;
  } while (v);
  while (n) *dst++ = tmp[--n];
  *dst = 0;
}

/* Async-signal-safe enough: only write(2), no stdio, no malloc. */
static void catcat(char *dst, size_t cap, const char *s) {
  size_t n = strlen(dst);
  while (*s && n + 1 < cap) dst[n++] = *s++;
  dst[n] = 0;
}

static void on_sigsys(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  char line[512] = "\nMKREJECT ", num[32];
  catcat(line, sizeof line, P.nonce);
  catcat(line, sizeof line, " syscall ");
  catcat(line, sizeof line, sysname(si->si_syscall));
  catcat(line, sizeof line, " ");
  utoa(num, (unsigned long)si->si_syscall, 10);
  catcat(line, sizeof line, num);
  catcat(line, sizeof line, "\n");
  out_raw(line, strlen(line));
  _exit(86);
}

static void on_crash(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  char line[700] = "\nMKCRASH ", num[32];
  catcat(line, sizeof line, P.nonce);
  catcat(line, sizeof line, " ");
  catcat(line, sizeof line,
         sig == SIGSEGV   ? "SIGSEGV"
         : sig == SIGBUS  ? "SIGBUS"
         : sig == SIGFPE  ? "SIGFPE"
         : sig == SIGILL  ? "SIGILL"
         : sig == SIGABRT ? "SIGABRT"
                          : "signal");
  catcat(line, sizeof line, " case=");
  catcat(line, sizeof line, P.current_case ? P.current_case : "-");
  if (sig == SIGSEGV || sig == SIGBUS) {
    uintptr_t a = (uintptr_t)si->si_addr;
    const char *what = NULL;
    for (int i = 0; i < nranges; i++)
      if (a >= ranges[i].lo && a < ranges[i].hi) what = ranges[i].name;
    if (what) {
      catcat(line, sizeof line, " wrote-to-input=");
      catcat(line, sizeof line, what);
    } else if (a < 65536) {
      catcat(line, sizeof line, " null-pointer");
    }
    catcat(line, sizeof line, " addr=0x");
    utoa(num, a, 16);
    catcat(line, sizeof line, num);
  }
  catcat(line, sizeof line, "\n");
  out_raw(line, strlen(line));
  signal(sig, SIG_DFL);
  raise(sig);
}

static void install_handlers(void) {
  static char altstack[1 << 16];
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sa.sa_sigaction = on_crash;
  int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaction(sigs[i], &sa, NULL);
  sa.sa_sigaction = on_sigsys;
  sigaction(SIGSYS, &sa, NULL);
}

/* ---- seccomp ------------------------------------------------------------ */

#if defined(__x86_64__)
#define MK_AUDIT_ARCH 0xc000003eu /* AUDIT_ARCH_X86_64 */
#elif defined(__aarch64__)
#define MK_AUDIT_ARCH 0xc00000b7u /* AUDIT_ARCH_AARCH64 */
#endif

typedef struct {
  struct sock_filter f[512];
  int n;
} bpf_t;
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))
static void emit(bpf_t *p, struct sock_filter s) {
  if (p->n < 512) p->f[p->n++] = s;
}
static void ld_nr(bpf_t *p) {
  emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
}
static void ld_arg(bpf_t *p, int i) { emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(i))); }
static void ret(bpf_t *p, uint32_t a) { emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, a)); }
static void jeq(bpf_t *p, uint32_t k, uint8_t jt, uint8_t jf) {
  emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, jt, jf));
}
static void jset(bpf_t *p, uint32_t k, uint8_t jt, uint8_t jf) {
  emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, k, jt, jf));
}

/* nr → action */
static void rule(bpf_t *p, long nr, uint32_t action) {
  ld_nr(p);
  jeq(p, (uint32_t)nr, 0, 1);
  ret(p, action);
}
/* nr: if_any when arg i has any bit of mask set, else if_none */
static void rule_bits(bpf_t *p, long nr, int i, uint32_t mask, uint32_t if_any, uint32_t if_none) {
  ld_nr(p);
  jeq(p, (uint32_t)nr, 0, 4);
  ld_arg(p, i);
  jset(p, mask, 0, 1);
  ret(p, if_any);
  ret(p, if_none);
}
/* nr with any bit of mask set in arg i → action, else allow */
static void rule_mask(bpf_t *p, long nr, int i, uint32_t mask, uint32_t action) {
  rule_bits(p, nr, i, mask, action, SECCOMP_RET_ALLOW);
}
/* nr requires a bit of mask in arg i (clone needs CLONE_THREAD), else action */
static void rule_need(bpf_t *p, long nr, int i, uint32_t mask, uint32_t action) {
  rule_bits(p, nr, i, mask, SECCOMP_RET_ALLOW, action);
}
/* nr allowed only when arg i (low 32 bits) is one of vals, else action */
static void rule_in(bpf_t *p, long nr, int i, const uint32_t *vals, int n, uint32_t action) {
  ld_nr(p);
  jeq(p, (uint32_t)nr, 0, (uint8_t)(n + 3));
  ld_arg(p, i);
  for (int k = 0; k < n; k++) jeq(p, vals[k], (uint8_t)(n - k), 0);
  ret(p, action);
  ret(p, SECCOMP_RET_ALLOW);
}

static int seccomp_load(bpf_t *p) {
  ret(p, SECCOMP_RET_ALLOW);
  struct sock_fprog prog = {.len = (unsigned short)p->n, .filter = p->f};
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

static void arch_check(bpf_t *p) {
#ifdef MK_AUDIT_ARCH
  emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
  jeq(p, MK_AUDIT_ARCH, 1, 0);
  ret(p, SECCOMP_RET_KILL_PROCESS);
#else
  (void)p;
#endif
}

static int seccomp_ok = 0;

#ifdef MK_AUDIT_ARCH
/* Stage 1 denies these outright (one system call each, kept as a table). */
// clang-format off
static const long STAGE1_DENY[] = {
#ifdef SYS_creat
  SYS_creat,
#endif
#ifdef SYS_fork
  SYS_fork,
#endif
#ifdef SYS_vfork
  SYS_vfork,
#endif
#ifdef SYS_unlink
  SYS_unlink, SYS_rename, SYS_mkdir, SYS_rmdir, SYS_symlink, SYS_link, SYS_chmod, SYS_chown, SYS_lchown, SYS_mknod,
#endif
  SYS_execve, SYS_execveat, SYS_socket, SYS_socketpair, SYS_connect, SYS_bind, SYS_listen, SYS_accept,
  SYS_accept4, SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev, SYS_unlinkat, SYS_renameat,
  SYS_renameat2, SYS_mkdirat, SYS_symlinkat, SYS_linkat, SYS_fchmod, SYS_fchmodat, SYS_fchown, SYS_fchownat,
  SYS_truncate, SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot, SYS_memfd_create, SYS_io_uring_setup,
  SYS_bpf, SYS_keyctl, SYS_add_key, SYS_request_key, SYS_setns, SYS_unshare, SYS_userfaultfd, SYS_init_module,
  SYS_finit_module, SYS_delete_module, SYS_reboot, SYS_kexec_load, SYS_swapon, SYS_swapoff, SYS_sethostname,
  SYS_setdomainname, SYS_settimeofday, SYS_clock_settime, SYS_clock_adjtime, SYS_adjtimex, SYS_mknodat,
  SYS_pidfd_open, SYS_pidfd_send_signal, SYS_pidfd_getfd, SYS_kcmp, SYS_shmget, SYS_msgget, SYS_semget,
  SYS_mq_open, SYS_tkill, SYS_perf_event_open, SYS_quotactl, SYS_acct, SYS_personality,
  SYS_open_by_handle_at, SYS_name_to_handle_at, SYS_fanotify_init, SYS_process_madvise,
};
// clang-format on
#endif

/* Stage 1, before dlopen: no writing opens, no new processes, no network,
 * no signals to others, no namespace or filesystem changes. */
static void seccomp_stage1(void) {
#ifdef MK_AUDIT_ARCH
  static bpf_t p;
  const uint32_t T = SECCOMP_RET_TRAP, NOSYS = SECCOMP_RET_ERRNO | ENOSYS;
  const uint32_t wr = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
  arch_check(&p);
#ifdef SYS_open
  rule_mask(&p, SYS_open, 1, wr, T);
#endif
  rule_mask(&p, SYS_openat, 2, wr, T);
  rule(&p, SYS_openat2, NOSYS);
  rule(&p, SYS_clone3, NOSYS); /* glibc falls back to clone, whose flags we can see */
  rule_need(&p, SYS_clone, 0, CLONE_THREAD, T);
  uint32_t me = (uint32_t)getpid();
  rule_in(&p, SYS_kill, 0, &me, 1, T);
  rule_in(&p, SYS_tgkill, 0, &me, 1, T);
  for (size_t i = 0; i < sizeof STAGE1_DENY / sizeof *STAGE1_DENY; i++) rule(&p, STAGE1_DENY[i], T);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && seccomp_load(&p) == 0) seccomp_ok = 1;
#endif
}

/* Stage 2, after dlopen and after inputs are read: no opens at all; in the
 * candidate modes, writes only to stdout/stderr and the blob, no file
 * mappings (which would write a file without a syscall). */
static void seccomp_stage2(int strict) {
#ifdef MK_AUDIT_ARCH
  if (!seccomp_ok) return;
  static bpf_t p;
  const uint32_t T = SECCOMP_RET_TRAP;
  arch_check(&p);
#ifdef SYS_open
  rule(&p, SYS_open, T);
#endif
  rule(&p, SYS_openat, T);
  rule(&p, SYS_openat2, T);
  if (strict) {
    uint32_t std[] = {1, 2}, blob = (uint32_t)P.blob_fd, anon = 0xffffffffu;
    rule_in(&p, SYS_write, 0, std, 2, T);
    rule_in(&p, SYS_writev, 0, std, 2, T);
    rule_in(&p, SYS_pwrite64, 0, &blob, 1, T);
    rule_in(&p, SYS_mmap, 4, &anon, 1, T);
    long deny[] = {SYS_pwritev,  SYS_pwritev2, SYS_sendfile,  SYS_splice,   SYS_copy_file_range,
                   SYS_vmsplice, SYS_tee,      SYS_fallocate, SYS_ftruncate};
    for (size_t i = 0; i < sizeof deny / sizeof *deny; i++) rule(&p, deny[i], T);
  }
  if (seccomp_load(&p) != 0) seccomp_ok = 0;
#else
  (void)strict;
#endif
}

/* ---- plan --------------------------------------------------------------- */

static size_t round_page(size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return (n + pg - 1) / pg * pg;
}

/* Buffers of the input sets and outputs come straight from mmap, with
 * transparent huge pages asked for: on the VMs we run on, first-touch
 * faults of 4 KiB pages cost more than the writes into them (1.3 GB/s
 * against 6 GB/s with 2 MiB pages, BENCHMARKS.md), and a benchmark
 * touches over a GB of fresh memory. */
static void *big_alloc(size_t n) {
  size_t len = round_page(n ? n : 1);
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
  if (len >= ((size_t)2 << 20)) madvise(p, len, MADV_HUGEPAGE);
#endif
  return p;
}
static void big_free(void *p, size_t n) {
  if (p) munmap(p, round_page(n ? n : 1));
}

static int open_save(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create %s: %s", path, strerror(errno));
  return fd;
}

/* A plan line with fewer than k tokens (the directive included) fails. */
static void need(char **t, int n, int k, int line) {
  if (n < k) fail("plan line %d: '%s' needs %d fields", line, t[0], k - 1);
}

/* bench WARMUP MIN_TIME MIN_REPS MAX_REPS FLUSH_BYTES [MAX_TIME] */
static void parse_bench(char **t, int n, int line) {
  need(t, n, 6, line);
  P.warmup = atoi(t[1]);
  P.min_time = atof(t[2]);
  P.min_reps = atoi(t[3]);
  P.max_reps = atoi(t[4]);
  P.flush_bytes = (size_t)atoll(t[5]);
  P.max_time = n > 6 ? atof(t[6]) : P.min_time;
  if (P.max_time < P.min_time) P.max_time = P.min_time;
  if (P.min_reps < 1) P.min_reps = 1;
  if (P.max_reps < P.min_reps) P.max_reps = P.min_reps;
}

/* case ID: a new case, the one later arg lines belong to. */
static case_t *parse_case(char **t, int n, int line, int *cap) {
  need(t, n, 2, line);
  if (P.ncases == *cap) {
    *cap = *cap ? *cap * 2 : 8;
    P.cases = realloc(P.cases, sizeof *P.cases * (size_t)*cap);
    if (!P.cases) fail("out of memory");
  }
  case_t *cur = &P.cases[P.ncases++];
  memset(cur, 0, sizeof *cur);
  snprintf(cur->id, sizeof cur->id, "%s", t[1]);
  return cur;
}

/* The source of an in/inout argument from token 5 on (file PATH | gen SEED
 * uniform|normal A B); the index of the token after it. */
static int parse_source(arg_t *a, char **t, int n, int line) {
  need(t, n, 7, line);
  if (!strcmp(t[5], "file")) {
    a->src = SRC_FILE;
    a->in_fd = open(t[6], O_RDONLY | O_CLOEXEC);
    if (a->in_fd < 0) fail("cannot open input %s: %s", t[6], strerror(errno));
    return 7;
  }
  if (strcmp(t[5], "gen")) fail("plan line %d: input source must be file or gen", line);
  need(t, n, 10, line);
  a->src = SRC_GEN;
  a->seed = strtoull(t[6], NULL, 10);
  a->normal = !strcmp(t[7], "normal");
  a->a = atof(t[8]);
  a->b = atof(t[9]);
  return 10;
}

/* arg KIND NAME ...: one argument of the current case (see the top of the
 * file for the forms). */
static void parse_arg(case_t *cur, char **t, int n, int line) {
  need(t, n, 4, line);
  if (!cur) fail("plan line %d: arg outside a case", line);
  cur->args = realloc(cur->args, sizeof *cur->args * (size_t)(cur->nargs + 1));
  if (!cur->args) fail("out of memory");
  arg_t *a = &cur->args[cur->nargs++];
  memset(a, 0, sizeof *a);
  a->in_fd = a->save_fd = -1;
  snprintf(a->name, sizeof a->name, "%s", t[2]);
  const char *k = t[1];
  if (!strcmp(k, "int")) {
    a->kind = K_INT;
    a->ival = atoi(t[3]);
    return;
  }
  if (!strcmp(k, "float")) {
    a->kind = K_FLOAT;
    a->fval = strtof(t[3], NULL);
    return;
  }
  a->kind = !strcmp(k, "in") ? K_IN : !strcmp(k, "out") ? K_OUT : !strcmp(k, "inout") ? K_INOUT : -1;
  if (a->kind < 0) fail("plan line %d: unknown arg kind %s", line, k);
  need(t, n, 5, line);
  a->dt = mkc_dtype_parse(t[3]);
  if (a->dt == MKC_BAD) fail("plan line %d: unknown dtype %s", line, t[3]);
  a->count = (size_t)strtoull(t[4], NULL, 10);
  a->bytes = a->count * mkc_dtype_size(a->dt);
  int i = a->kind != K_OUT ? parse_source(a, t, n, line) : 5;
  if (i + 1 < n && !strcmp(t[i], "save")) a->save_fd = open_save(t[i + 1]);
}

/* The directives that set values: NAME ARG (tol: ATOL RTOL). 1 when t[0]
 * was one of them. */
static int parse_setting(char **t, int n, int line) {
  static const char *const names[] = {"nonce", "mode", "so", "blob", "tol", "counters", "probes", "trusted", NULL};
  const char *d = t[0];
  int known = 0;
  for (int i = 0; names[i] && !known; i++) known = !strcmp(d, names[i]);
  if (!known) return 0;
  need(t, n, strcmp(d, "tol") ? 2 : 3, line);
  if (!strcmp(d, "nonce")) snprintf(P.nonce, sizeof P.nonce, "%s", t[1]);
  else if (!strcmp(d, "mode")) snprintf(P.mode, sizeof P.mode, "%s", t[1]);
  else if (!strcmp(d, "so")) snprintf(P.so, sizeof P.so, "%s", t[1]);
  else if (!strcmp(d, "blob")) P.blob_fd = open_save(t[1]);
  else if (!strcmp(d, "tol")) {
    P.atol = atof(t[1]);
    P.rtol = atof(t[2]);
  } else if (!strcmp(d, "counters")) P.counters = atoi(t[1]);
  else if (!strcmp(d, "probes")) P.probes = atoi(t[1]);
  else P.trusted = atoi(t[1]);
  return 1;
}

static void parse_plan(char *text) {
  mkc_lines L;
  mkc_lines_init(&L, text);
  case_t *cur = NULL;
  int cap = 0;
  while (mkc_lines_next(&L)) {
    char **t = L.tok;
    if (!strcmp(t[0], "mkc") || parse_setting(t, L.ntok, L.line)) continue;
    if (!strcmp(t[0], "bench")) parse_bench(t, L.ntok, L.line);
    else if (!strcmp(t[0], "case")) cur = parse_case(t, L.ntok, L.line, &cap);
    else if (!strcmp(t[0], "end")) cur = NULL;
    else if (!strcmp(t[0], "arg")) parse_arg(cur, t, L.ntok, L.line);
    else fail("plan line %d: unknown directive %s", L.line, t[0]);
  }
  mkc_lines_free(&L);
  if (!P.mode[0] || !P.so[0]) fail("plan lacks mode or so");
}

/* ---- inputs ------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double unif(uint64_t *s) { return (double)(splitmix(s) >> 11) * 0x1.0p-53; }

/* Deterministic in (seed, argument name): the same seed fills each argument
 * differently, and the engine can regenerate any input set. */
static void store(arg_t *a, long i, double v) {
  switch (a->dt) {
    case MKC_F32: ((float *)a->buf)[i] = (float)v; break;
    case MKC_F64: ((double *)a->buf)[i] = v; break;
    case MKC_I32: ((int32_t *)a->buf)[i] = (int32_t)v; break;
    case MKC_I64: ((int64_t *)a->buf)[i] = (int64_t)v; break;
    default: break;
  }
}

static void gen_fill(arg_t *a) {
  uint64_t s0 = a->seed * 0x2545f4914f6cdd1dull;
  for (const char *c = a->name; *c; c++) s0 = (s0 ^ (unsigned char)*c) * 0x100000001b3ull;
  /* splitmix's state after k draws is s0 + k * step, so element i's draws
   * are known without the ones before it: the fill runs on all threads and
   * gives the same values as a sequential one, whatever the thread count. */
  const uint64_t step = 0x9e3779b97f4a7c15ull;
  const long n = (long)a->count;
  if (a->normal && a->dt == MKC_F32) {
    /* float32 arguments: the same pairs in single precision (the values
     * are stored as floats anyway; logf and sincosf cost half as much, and
     * probe inputs are regenerated on every benchmark) */
#pragma omp parallel for schedule(static) if (n > (1L << 16))
    for (long j = 0; j < (n + 1) / 2; j++) {
      uint64_t s = s0 + (uint64_t)(2 * j) * step;
      float u1 = (float)(splitmix(&s) >> 40) * 0x1.0p-24f, u2 = (float)(splitmix(&s) >> 40) * 0x1.0p-24f;
      if (u1 < 0x1.0p-25f) u1 = 0x1.0p-25f;
      float r = (float)a->b * sqrtf(-2.0f * logf(u1)), sn, cs;
      sincosf(6.2831853f * u2, &sn, &cs);
      ((float *)a->buf)[2 * j] = (float)a->a + r * cs;
      if (2 * j + 1 < n) ((float *)a->buf)[2 * j + 1] = (float)a->a + r * sn;
    }
    return;
  }
  if (a->normal) {
    /* Box-Muller, both outputs of a pair: elements 2j and 2j+1 share the
     * draws 2j+1 and 2j+2 (radius and angle); one log, sqrt and sincos for
     * two values. */
#pragma omp parallel for schedule(static) if (n > (1L << 16))
    for (long j = 0; j < (n + 1) / 2; j++) {
      uint64_t s = s0 + (uint64_t)(2 * j) * step;
      double u1 = unif(&s), u2 = unif(&s);
      if (u1 < 1e-300) u1 = 1e-300;
      double r = a->b * sqrt(-2.0 * log(u1)), sn, cs;
      sincos(6.283185307179586 * u2, &sn, &cs);
      store(a, 2 * j, a->a + r * cs);
      if (2 * j + 1 < n) store(a, 2 * j + 1, a->a + r * sn);
    }
    return;
  }
#pragma omp parallel for schedule(static) if (n > (1L << 16))
  for (long i = 0; i < n; i++) {
    uint64_t s = s0 + (uint64_t)i * step;
    if (a->dt == MKC_I32 || a->dt == MKC_I64) {
      double span = floor(a->b) - ceil(a->a) + 1;
      store(a, i, ceil(a->a) + floor(unif(&s) * (span > 0 ? span : 1)));
    } else {
      store(a, i, a->a + (a->b - a->a) * unif(&s));
    }
  }
}

static void write_all_at(int fd, const void *p, size_t n, off_t off) {
  const char *c = p;
  while (n) {
    ssize_t w = pwrite(fd, c, n, off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("write failed: %s", strerror(errno));
    c += w;
    n -= (size_t)w;
    off += w;
  }
}

static void fill_canary(arg_t *a) {
  memset(a->alloc, 0xa5, CANARY);
  memset(a->alloc + CANARY + a->bytes, 0xa5, CANARY);
}
static const char *canary_broken(arg_t *a) {
  for (int i = 0; i < CANARY; i++)
    if (a->alloc[i] != 0xa5) return "before the start";
  for (int i = 0; i < CANARY; i++)
    if (a->alloc[CANARY + a->bytes + i] != 0xa5) return "past the end";
  return NULL;
}

/* Bench: input files (the frozen sets', and the probes' when the engine
 * made them ahead) are mapped read-only (private) from the page cache,
 * where they already are, instead of being copied into fresh memory: on a
 * VM, fresh memory costs host page faults. Done before the kernel is
 * loaded, since the second seccomp stage forbids mapping files. This shows
 * the kernel nothing it could not have had before: the files are open
 * before it loads, and a generated probe's seed is in the plan in memory. */
static void map_bench_inputs(void) {
  for (int ci = 0; ci < P.ncases; ci++) {
    case_t *c = &P.cases[ci];
    for (int i = 0; i < c->nargs; i++) {
      arg_t *a = &c->args[i];
      if (a->kind != K_IN || a->src != SRC_FILE || a->in_fd < 0 || a->bytes < ((size_t)1 << 20)) continue;
      struct stat st;
      if (fstat(a->in_fd, &st) != 0 || st.st_size < (off_t)a->bytes)
        fail("input file for %s is shorter than %zu bytes", a->name, a->bytes);
      size_t len = round_page(a->bytes);
      void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, a->in_fd, 0);
      if (m == MAP_FAILED) continue; /* setup_case reads it instead */
      close(a->in_fd);
      a->in_fd = -1;
      a->alloc = a->buf = m;
      a->alloc_len = len;
      a->mapped = 1;
    }
  }
}

/* Name an input's pages in the SEGV report of a write to them. */
static void add_range(const arg_t *a) {
  if (nranges >= MAX_RANGES) return;
  ranges[nranges].name = a->name;
  ranges[nranges].lo = (uintptr_t)a->alloc;
  ranges[nranges].hi = (uintptr_t)a->alloc + a->alloc_len;
  nranges++;
}

static void setup_case(case_t *c) {
  for (int i = 0; i < c->nargs; i++) {
    arg_t *a = &c->args[i];
    if (a->kind == K_INT || a->kind == K_FLOAT) continue;
    if (a->mapped) {
      add_range(a);
      continue;
    } /* mapped, read-only, before the kernel was loaded */
    if (a->kind == K_IN) {
      /* Inputs live in their own pages, read-only during calls, so a kernel
       * writing its inputs faults and the report names the argument. */
      a->alloc_len = round_page(a->bytes ? a->bytes : 1);
      a->alloc = big_alloc(a->alloc_len);
      if (!a->alloc) fail("cannot allocate %zu bytes for %s", a->bytes, a->name);
      a->buf = a->alloc;
    } else {
      a->alloc_len = a->bytes + 2 * CANARY;
      a->alloc = big_alloc(a->alloc_len);
      if (!a->alloc) fail("cannot allocate %zu bytes for %s", a->bytes, a->name);
      a->buf = a->alloc + CANARY;
      fill_canary(a);
    }
    if (a->kind == K_OUT) {
      mkc_poison(a->buf, a->dt, a->count);
      continue;
    }
    if (a->src == SRC_FILE) {
      size_t got = 0;
      while (got < a->bytes) {
        ssize_t r = read(a->in_fd, a->buf + got, a->bytes - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) fail("input file for %s is shorter than %zu bytes", a->name, a->bytes);
        got += (size_t)r;
      }
      close(a->in_fd);
      a->in_fd = -1;
    } else gen_fill(a);
    if (a->save_fd >= 0) {
      write_all_at(a->save_fd, a->buf, a->bytes, 0);
      close(a->save_fd);
      a->save_fd = -1;
    }
    if (a->kind == K_IN) {
      mprotect(a->alloc, a->alloc_len, PROT_READ);
      add_range(a);
    } else {
      a->pristine = big_alloc(a->bytes);
      if (!a->pristine) fail("out of memory");
      memcpy(a->pristine, a->buf, a->bytes);
    }
  }
}

static void free_case(case_t *c) {
  for (int i = 0; i < c->nargs; i++) {
    arg_t *a = &c->args[i];
    big_free(a->alloc, a->alloc_len);
    big_free(a->pristine, a->bytes);
    if (!a->first_is_buf) big_free(a->first, a->bytes);
    a->alloc = a->buf = a->pristine = a->first = NULL;
  }
}

/* ---- calls -------------------------------------------------------------- */

typedef void (*mk_call_fn)(void *const *args);
static mk_call_fn entry;

/* mkc_poison in slices on all threads, for big outputs (between calls) */
static void poison(arg_t *a) {
  if (a->bytes < ((size_t)8 << 20)) {
    mkc_poison(a->buf, a->dt, a->count);
    return;
  }
  const size_t esz = mkc_dtype_size(a->dt), per = ((size_t)1 << 20) / esz, nslices = (a->count + per - 1) / per;
#pragma omp parallel for schedule(static)
  for (size_t k = 0; k < nslices; k++) {
    size_t lo = k * per, n = a->count - lo < per ? a->count - lo : per;
    mkc_poison(a->buf + lo * esz, a->dt, n);
  }
}

static void prepare_call(case_t *c, void **argv) {
  for (int i = 0; i < c->nargs; i++) {
    arg_t *a = &c->args[i];
    if (a->kind == K_OUT) poison(a);
    if (a->kind == K_INOUT) memcpy(a->buf, a->pristine, a->bytes);
    argv[i] = a->kind == K_INT ? (void *)&a->ival : a->kind == K_FLOAT ? (void *)&a->fval : (void *)a->buf;
  }
}

static int is_outish(const arg_t *a) { return a->kind == K_OUT || a->kind == K_INOUT; }

/* Append an argument's current contents to the blob; JSON entry into b. */
static void emit_out(mk_buf *b, case_t *c, arg_t *a, const unsigned char *data, int *first) {
  write_all_at(P.blob_fd, data, a->bytes, P.blob_off);
  mkc_printf(b, "%s{\"case\":", *first ? "" : ",");
  mkc_json_str(b, c->id);
  mkc_printf(b, ",\"name\":");
  mkc_json_str(b, a->name);
  mkc_printf(b, ",\"offset\":%lld,\"bytes\":%zu,\"hash\":\"%016llx\"}", (long long)P.blob_off, a->bytes,
             (unsigned long long)mkc_hash64(data, a->bytes));
  P.blob_off += (off_t)a->bytes;
  *first = 0;
}

/* ---- modes -------------------------------------------------------------- */

static void mode_test(mk_buf *b, int gen) {
  mkc_printf(b, "{\"mode\":\"%s\",\"cases\":[", gen ? "gen" : "test");
  for (int ci = 0; ci < P.ncases; ci++) {
    case_t *c = &P.cases[ci];
    void *argv[64];
    if (c->nargs > 64) fail("too many arguments");
    P.current_case = c->id;
    setup_case(c);
    prepare_call(c, argv);
    double t0 = mkc_now();
    entry(argv);
    double dt = mkc_now() - t0;
    mkc_printf(b, "%s{\"id\":", ci ? "," : "");
    mkc_json_str(b, c->id);
    mkc_printf(b, ",\"kernel_s\":%.9g,\"canary\":", dt);
    const char *broken = NULL, *bname = NULL;
    for (int i = 0; i < c->nargs; i++)
      if (is_outish(&c->args[i]) && !broken && (broken = canary_broken(&c->args[i]))) bname = c->args[i].name;
    if (broken) {
      char msg[200];
      snprintf(msg, sizeof msg, "wrote %s of '%s'", broken, bname);
      mkc_json_str(b, msg);
    } else mkc_printf(b, "null");
    mkc_printf(b, ",\"outs\":[");
    int first = 1;
    for (int i = 0; i < c->nargs; i++) {
      arg_t *a = &c->args[i];
      if (!is_outish(a)) continue;
      if (gen && a->save_fd >= 0) {
        write_all_at(a->save_fd, a->buf, a->bytes, 0);
        close(a->save_fd);
        a->save_fd = -1;
      } else if (P.blob_fd >= 0) emit_out(b, c, a, a->buf, &first);
    }
    mkc_printf(b, "]}");
    free_case(c);
  }
  mkc_printf(b, "]");
}

/* Compare an output with the set's first output; 0 when equal within
 * tolerance, else the index + 1 of the first bad element. */
static size_t differs(const arg_t *a, const unsigned char *now, const unsigned char *ref, const char **why) {
  /* deterministic kernels repeat their bits exactly: one memcmp at memory
   * speed, in slices on all threads for big outputs (untimed, between calls) */
  if (a->bytes < ((size_t)8 << 20)) {
    if (!memcmp(now, ref, a->bytes)) return 0;
  } else {
    const size_t slice = (size_t)1 << 20, nslices = (a->bytes + slice - 1) / slice;
    int diff = 0;
#pragma omp parallel for schedule(static) reduction(| : diff)
    for (size_t k = 0; k < nslices; k++) {
      size_t off = k * slice, len = a->bytes - off < slice ? a->bytes - off : slice;
      diff |= memcmp(now + off, ref + off, len) != 0;
    }
    if (!diff) return 0;
  }
  for (size_t i = 0; i < a->count; i++) {
    if (mkc_is_poison(now, a->dt, i) && !mkc_is_poison(ref, a->dt, i)) {
      *why = "left unwritten";
      return i + 1;
    }
    double x = mkc_get(now, a->dt, i), y = mkc_get(ref, a->dt, i);
    if (isnan(x) || isnan(y)) {
      if (isnan(x) != isnan(y)) {
        *why = "NaN in one call only";
        return i + 1;
      }
      continue;
    }
    if (fabs(x - y) > P.atol + P.rtol * fabs(y)) {
      *why = "different value";
      return i + 1;
    }
  }
  return 0;
}

static double cpu_of(const struct rusage *r) {
  return (double)(r->ru_utime.tv_sec + r->ru_stime.tv_sec) + (double)(r->ru_utime.tv_usec + r->ru_stime.tv_usec) * 1e-6;
}

static int cmp_dbl(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

typedef struct {
  int fd;
  const char *name;
} counter_t;
static counter_t counters[6];
static int ncounters;
static char counters_err[256];

static void open_counters(void) {
  struct {
    uint32_t type;
    uint64_t config;
    const char *name;
  } want[] = {
      {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "cycles"},
      {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, "instructions"},
      {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES, "cache_references"},
      {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, "cache_misses"},
      {PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, "branch_misses"},
      {PERF_TYPE_HW_CACHE,
       PERF_COUNT_HW_CACHE_L1D | (PERF_COUNT_HW_CACHE_OP_READ << 8) | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16),
       "l1d_misses"},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    struct perf_event_attr pa;
    memset(&pa, 0, sizeof pa);
    pa.size = sizeof pa;
    pa.type = want[i].type;
    pa.config = want[i].config;
    pa.disabled = 1;
    pa.inherit = 1; /* OpenMP threads are created later and count too */
    pa.exclude_kernel = 1;
    pa.exclude_hv = 1;
    int fd = (int)syscall(SYS_perf_event_open, &pa, 0, -1, -1, 0);
    if (fd < 0) {
      if (!counters_err[0])
        snprintf(counters_err, sizeof counters_err, "perf_event_open(%s): %s", want[i].name, strerror(errno));
      continue;
    }
    counters[ncounters].fd = fd;
    counters[ncounters].name = want[i].name;
    ncounters++;
  }
}

static void counters_ctl(int on) {
  for (int i = 0; i < ncounters; i++) ioctl(counters[i].fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

/* Write back and drop every cache line of one call's arguments (inputs,
 * outputs with their canaries), from all cache levels: what the call then
 * reads comes from memory, as after a flush of the whole cache, at a cost
 * proportional to the call's data instead of the cache's size (a 480 MB
 * last-level cache made the old flush, touching twice the cache, cost far
 * more than small kernels). x86-64 with CLFLUSHOPT (plain CLFLUSH is
 * serialising: 100x slower in a VM here) and AArch64 (DC CIVAC); elsewhere
 * the old flush runs. */
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
static int can_evict(void) {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 23)); /* CPUID.7.0:EBX.CLFLUSHOPT */
}
__attribute__((target("clflushopt"))) static void evict_range(const unsigned char *p, size_t n) {
  _mm_mfence();
  for (size_t o = 0; o < n; o += 64) _mm_clflushopt((void *)(p + o));
  if (n) _mm_clflushopt((void *)(p + n - 1));
  _mm_mfence();
}
#elif defined(__aarch64__)
static int can_evict(void) { return 1; }
static void evict_range(const unsigned char *p, size_t n) {
  __asm__ volatile("dsb ish" : : : "memory");
  for (size_t o = 0; o < n; o += 64) __asm__ volatile("dc civac, %0" : : "r"(p + o) : "memory");
  if (n) __asm__ volatile("dc civac, %0" : : "r"(p + n - 1) : "memory");
  __asm__ volatile("dsb ish" : : : "memory");
}
#else
static int can_evict(void) { return 0; }
static void evict_range(const unsigned char *p, size_t n) {
  (void)p;
  (void)n;
}
#endif

static void evict_case(case_t *c) {
  for (int i = 0; i < c->nargs; i++)
    if (c->args[i].alloc) evict_range(c->args[i].alloc, c->args[i].alloc_len); /* scalars have none */
}

/* The median of n sorted values (0 when there are none). */
static double median_sorted(const double *x, int n) {
  if (n < 1) return 0;
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Is the median of the n timed calls so far known to +-2.5%? (On the VMs
 * we measured, the median drifts by more than that over a second, so a
 * tighter goal only buys longer runs: BENCHMARKS.md.) The
 * distribution-free 95% interval of a median lies between the order
 * statistics n/2 -+ 0.98 sqrt(n); scratch holds a copy to sort. */
static int median_settled(const double *times, double *scratch, int n) {
  if (n < 8) return 0;
  memcpy(scratch, times, sizeof *times * (size_t)n);
  qsort(scratch, (size_t)n, sizeof *scratch, cmp_dbl);
  double h = 0.98 * sqrt((double)n);
  int lo = (int)floor(n / 2.0 - h), hi = (int)ceil(n / 2.0 + h);
  if (lo < 0) lo = 0;
  if (hi > n - 1) hi = n - 1;
  double med = median_sorted(scratch, n);
  return med > 0 && (scratch[hi] - scratch[lo]) <= 0.05 * med;
}

/* The benchmark's state: the input sets (the first R cases; the probes
 * follow them), the timed calls so far, where the runner's time went. */
typedef struct {
  int R;
  void *(*argv)[64];
  unsigned char *flush;            /* the old flush's buffer, where eviction is not possible */
  double *times, *clean, *scratch; /* each max_reps long */
  int reps, nclean;
  long calls, bad_calls;
  char bad_desc[512];
  double total, cpu_loop; /* seconds of the timed calls: wall, process CPU (all threads) */
  double setup_s, prep_s, verify_s, wall0, loop_s;
} bench_t;

static void setup_cases(int from, int to) {
  for (int i = from; i < to; i++) {
    if (P.cases[i].nargs > 64) fail("too many arguments");
    setup_case(&P.cases[i]);
  }
}

static void *must_malloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) fail("out of memory");
  return p;
}

static void bench_setup(bench_t *B) {
  double setup0 = mkc_now();
  B->R = P.ncases - P.probes;
  if (B->R < 1 || P.probes < 0) fail("bench needs at least one input set");
  B->argv = calloc((size_t)B->R, sizeof *B->argv);
  if (!B->argv) fail("out of memory");
  setup_cases(0, B->R);
  /* The probes' inputs are made now too, though the kernel first sees them
   * after the loop: their (OpenMP) fill must not run just before a probe's
   * timed call, whose process CPU time would then count the fill threads
   * still spinning for work (GOMP spins for milliseconds), which made a
   * plain kernel look like one that caches its results on a busy machine.
   * The memory limit already counts the probe sets. */
  setup_cases(B->R, P.ncases);
  if (P.flush_bytes && !can_evict()) {
    B->flush = must_malloc(P.flush_bytes);
    memset(B->flush, 1, P.flush_bytes);
  }
  size_t nt = (size_t)P.max_reps;
  B->times = must_malloc(sizeof *B->times * nt);
  B->clean = must_malloc(sizeof *B->clean * nt);
  B->scratch = must_malloc(sizeof *B->scratch * nt);
  B->setup_s = mkc_now() - setup0;
}

static void bench_free(bench_t *B) {
  free(B->times);
  free(B->clean);
  free(B->scratch);
  free(B->flush);
  free(B->argv);
}

/* Enough timed calls: min_reps, and min_time with the median settled or
 * max_time spent. Untimed work (poison, flush, checks) can dwarf a tiny
 * kernel: the wall time is capped too, once min_reps calls are in. */
static int bench_done(const bench_t *B) {
  double wall_cap = P.max_time * 10 > P.max_time + 2 ? P.max_time * 10 : P.max_time + 2;
  if (B->reps < P.min_reps) return 0;
  if (B->total >= P.min_time && (B->total >= P.max_time || median_settled(B->times, B->scratch, B->reps))) return 1;
  return mkc_now() - B->wall0 > wall_cap;
}

/* One call of the kernel on input set s; a timed one is recorded. */
static void bench_call(bench_t *B, int s, int timed) {
  case_t *c = &P.cases[s];
  P.current_case = c->id;
  double p0 = mkc_now();
  prepare_call(c, B->argv[s]);
  B->prep_s += mkc_now() - p0;
  if (timed && P.flush_bytes) {
    /* the input sets alone do not cover the cache: evict this call's
     * data, so a small working set is not measured warm */
    if (B->flush)
      for (size_t i = 0; i < P.flush_bytes; i += 64) B->flush[i]++;
    else evict_case(c);
  }
  /* involuntary context switches of the whole process around the call:
   * how many timed calls ran without another process preempting them */
  struct rusage ru0, ru1;
  if (timed) {
    getrusage(RUSAGE_SELF, &ru0);
    counters_ctl(1);
  }
  double t0 = mkc_now();
  entry(B->argv[s]);
  double dt = mkc_now() - t0;
  if (timed) {
    counters_ctl(0);
    getrusage(RUSAGE_SELF, &ru1);
    B->times[B->reps++] = dt;
    B->total += dt;
    if (ru1.ru_nivcsw == ru0.ru_nivcsw) B->clean[B->nclean++] = dt;
    B->cpu_loop += cpu_of(&ru1) - cpu_of(&ru0);
  }
  B->calls++;
}

/* After a call on input set s: its canaries intact and its outputs equal
 * to the set's first call (kept as the outputs to check). */
static void bench_verify(bench_t *B, int s) {
  case_t *c = &P.cases[s];
  double v0 = mkc_now();
  for (int i = 0; i < c->nargs; i++) {
    arg_t *a = &c->args[i];
    if (!is_outish(a)) continue;
    const char *broken = canary_broken(a);
    if (broken) {
      B->bad_calls++;
      if (!B->bad_desc[0])
        snprintf(B->bad_desc, sizeof B->bad_desc, "call %ld wrote %s of '%s'", B->calls, broken, a->name);
      fill_canary(a);
      continue;
    }
    if (!a->first) {
      a->first = big_alloc(a->bytes);
      if (!a->first) fail("out of memory");
      memcpy(a->first, a->buf, a->bytes);
      continue;
    }
    const char *why = "";
    size_t at = differs(a, a->buf, a->first, &why);
    if (!at) continue;
    B->bad_calls++;
    if (!B->bad_desc[0])
      snprintf(B->bad_desc, sizeof B->bad_desc,
               "call %ld (input set %d) gave a different '%s' than the first call on the same inputs: element %zu %s "
               "(got %.6g, first call %.6g)",
               B->calls, s + 1, a->name, at - 1, why, mkc_get(a->buf, a->dt, at - 1), mkc_get(a->first, a->dt, at - 1));
  }
  B->verify_s += mkc_now() - v0;
}

/* Warm-up calls (every set gets a first call), then timed calls over the
 * sets in turn until bench_done. */
static void bench_loop(bench_t *B) {
  int warm = P.warmup > B->R ? P.warmup : B->R;
  B->wall0 = mkc_now();
  for (int k = 0; k < warm + P.max_reps; k++) {
    int timed = k >= warm;
    if (timed && bench_done(B)) break;
    bench_call(B, k % B->R, timed);
    bench_verify(B, k % B->R);
  }
  B->loop_s = mkc_now() - B->wall0;
}

/* The statistics of the timed calls (sorts times and clean). They are over
 * all timed calls: a multi-threaded kernel is preempted far more often
 * than a single-threaded baseline on a busy machine, so keeping only
 * undisturbed calls would compare different populations. The undisturbed
 * median is reported beside it. */
static void emit_bench_stats(mk_buf *b, bench_t *B) {
  int n = B->reps;
  mkc_printf(b, "{\"mode\":\"bench\",\"sets\":%d,\"calls\":%ld,\"reps\":%d,\"total_s\":%.9g,\"bad_calls\":%ld,\"bad\":",
             B->R, B->calls, n, B->total, B->bad_calls);
  if (B->bad_desc[0]) mkc_json_str(b, B->bad_desc);
  else mkc_printf(b, "null");
  mkc_printf(b, ",\"times\":[");
  for (int i = 0; i < n; i++) mkc_printf(b, "%s%.9g", i ? "," : "", B->times[i]);
  mkc_printf(b, "]");
  qsort(B->times, (size_t)n, sizeof *B->times, cmp_dbl);
  qsort(B->clean, (size_t)B->nclean, sizeof *B->clean, cmp_dbl);
  mkc_printf(b, ",\"cpu_per_call_s\":%.9g", n ? B->cpu_loop / n : 0);
  /* where the runner's time went: input sets made, the whole call loop, and
   * within it the per-call poisoning and the per-call output checks */
  mkc_printf(b, ",\"setup_s\":%.6g,\"loop_s\":%.6g,\"prep_s\":%.6g,\"verify_s\":%.6g", B->setup_s, B->loop_s, B->prep_s,
             B->verify_s);
  mkc_printf(b, ",\"clean\":%d,\"median_undisturbed_s\":%.9g", B->nclean, median_sorted(B->clean, B->nclean));
  const double *st = B->times;
  mkc_printf(b, ",\"median_s\":%.9g", median_sorted(st, n));
  mkc_printf(b, ",\"min_s\":%.9g,\"max_s\":%.9g", n ? st[0] : 0, n ? st[n - 1] : 0);
  mkc_printf(b, ",\"p10_s\":%.9g,\"p90_s\":%.9g", n ? st[n / 10] : 0,
             n ? st[(n * 9) / 10 < n ? (n * 9) / 10 : n - 1] : 0);
}

/* Hardware counters over the timed calls, per call. */
static void emit_counters(mk_buf *b, int reps) {
  mkc_printf(b, ",\"counters\":{");
  for (int i = 0; i < ncounters; i++) {
    uint64_t v = 0;
    if (read(counters[i].fd, &v, sizeof v) != (ssize_t)sizeof v) v = 0;
    mkc_printf(b, "%s\"%s\":%.6g", i ? "," : "", counters[i].name, reps ? (double)v / reps : 0.0);
  }
  mkc_printf(b, "},\"counters_error\":");
  if (counters_err[0]) mkc_json_str(b, counters_err);
  else mkc_printf(b, "null");
}

/* Probes: inputs the kernel has never been given, each timed on its first
 * and only call. A kernel that serves repeated inputs from a cache of
 * earlier results is fast in the loop and slow here; the engine also
 * checks these outputs against the reference. */
static void run_probes(mk_buf *b, const bench_t *B) {
  mkc_printf(b, ",\"probes\":[");
  for (int pi = 0; pi < P.probes; pi++) {
    case_t *c = &P.cases[B->R + pi];
    void *pargv[64];
    P.current_case = c->id;
    prepare_call(c, pargv);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    double t0 = mkc_now();
    entry(pargv);
    double dt = mkc_now() - t0;
    getrusage(RUSAGE_SELF, &ru1);
    mkc_printf(b, "%s{\"id\":", pi ? "," : "");
    mkc_json_str(b, c->id);
    mkc_printf(b, ",\"time_s\":%.9g,\"cpu_s\":%.9g,\"preempted\":%s}", dt, cpu_of(&ru1) - cpu_of(&ru0),
               ru1.ru_nivcsw != ru0.ru_nivcsw ? "true" : "false");
    for (int i = 0; i < c->nargs; i++) {
      arg_t *a = &c->args[i];
      if (!is_outish(a) || canary_broken(a)) continue;
      /* the probe's buffers see no other call: its outputs go to the
       * checker from where the kernel wrote them, without a copy */
      a->first = a->buf;
      a->first_is_buf = 1;
    }
  }
  mkc_printf(b, "]");
}

/* The outputs handed to the checker: each set's first call, each probe's. */
static void emit_bench_outs(mk_buf *b) {
  mkc_printf(b, ",\"outs\":[");
  int first = 1;
  for (int s = 0; s < P.ncases; s++) {
    case_t *c = &P.cases[s];
    for (int i = 0; i < c->nargs; i++)
      if (is_outish(&c->args[i]) && c->args[i].first) emit_out(b, c, &c->args[i], c->args[i].first, &first);
  }
  mkc_printf(b, "]");
}

static void mode_bench(mk_buf *b) {
  bench_t B = {0};
  bench_setup(&B);
  bench_loop(&B);
  emit_bench_stats(b, &B);
  if (P.counters) emit_counters(b, B.reps);
  run_probes(b, &B);
  double outs0 = mkc_now();
  emit_bench_outs(b);
  mkc_printf(b, ",\"outs_s\":%.6g,\"probes_s\":%.6g", mkc_now() - outs0, outs0 - B.wall0 - B.loop_s);
  bench_free(&B);
}

static int peaks(int argc, char **argv) {
  int threads = argc > 2 ? atoi(argv[2]) : omp_get_max_threads();
  if (threads < 1) threads = 1;
  float sink = 0;
  double g1 = mkc_peak_gflops(1, &sink), gn = threads > 1 ? mkc_peak_gflops(threads, &sink) : g1;
  double b1 = mkc_peak_gbps(1), bn = threads > 1 ? mkc_peak_gbps(threads) : b1;
  printf("{\"threads\":%d,\"gflops\":%.4g,\"gflops_1t\":%.4g,\"gbps\":%.4g,\"gbps_1t\":%.4g,\"sink\":%g}\n", threads,
         gn, g1, bn, b1, (double)(sink != sink));
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "peaks")) return peaks(argc, argv);
  if (argc > 1) {
    fprintf(stderr, "usage: mkc-run < PLAN   |   mkc-run peaks [THREADS]\n");
    return 2;
  }
  size_t len;
  char *plan = mkc_read_all(0, &len);
  if (!plan) fail("cannot read the plan from stdin");
  parse_plan(plan);
  int gen = !strcmp(P.mode, "gen"), bench = !strcmp(P.mode, "bench");
  if (!gen && !bench && strcmp(P.mode, "test")) fail("unknown mode %s", P.mode);
  if (!gen && P.blob_fd < 0) fail("plan lacks a blob");
  if (bench && P.counters) open_counters();
  if (bench) map_bench_inputs();
  install_handlers();
  seccomp_stage1();
  void *h = dlopen(P.so, RTLD_NOW | RTLD_LOCAL);
  if (!h) fail("cannot load the kernel: %s", dlerror());
  entry = (mk_call_fn)(uintptr_t)dlsym(h, "mk_call");
  if (!entry) fail("the kernel has no mk_call glue: %s", dlerror());
  mk_buf b = {0};
  if (bench) {
    /* inputs come from pre-opened files or seeds, so open(2) can close now */
    seccomp_stage2(1);
    mode_bench(&b);
  } else {
    /* test/gen cases load one at a time from pre-opened files; the
     * reference, when it also saves the inputs it generated (probes made
     * ahead), writes those files too */
    seccomp_stage2(!gen && !P.trusted);
    mode_test(&b, gen);
  }
  mkc_printf(&b, ",\"seccomp\":%s,\"threads\":%d}", seccomp_ok ? "true" : "false", omp_get_max_threads());
  char head[200];
  int hn = snprintf(head, sizeof head, "\nMKRESULT %s ", P.nonce);
  out_raw(head, (size_t)hn);
  out_raw(b.p, b.n);
  out_raw("\n", 1);
  return 0;
}

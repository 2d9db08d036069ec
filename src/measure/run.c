/* run.c: the runner half of measure.h. Each candidate runs in a forked child (own process group,
 * resource limits, wall-clock time-out) that checks its output and times it, reporting one small
 * binary message through a pipe; plus the seeded input data, the output check and the reference. */
#define _GNU_SOURCE
#include "cwm/measure.h"
#include "measure_internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define MSG_MAGIC 0x43574d52u /* "CWMR" */
#define FLUSH_BYTES (64u << 20)
#define REF_HDR 64            /* keeps the floats after the header 64-byte aligned */

/* What a child reports before the timed repeats: the check's verdict, the calls per repeat it
 * proposes, a slow candidate's one call, whether the sandbox holds. Smaller than PIPE_BUF, so one
 * write() is atomic. None of it is a timing the parent takes on trust (runner_parent_repeats). */
typedef struct {
  uint32_t magic;
  int32_t error;
  int32_t sandbox;    /* cwm_sandbox_enter's return, and its message */
  int32_t pad;
  int64_t number;     /* calls per repeat from the warm-up; 0 when the repeats are not to run */
  double slow_s;      /* > 0: cut off as slow, its fastest call (at least the cut-off, or refused) */
  char msg[256];
  char sandbox_msg[128];
} child_msg;

typedef void (*kernel_fn)(float *const *args);

/* ---- data -------------------------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* SplitMix64 on a counter: element j depends only on (seed, arg, j), so any slice can be produced
 * independently and the loop has no carried state. 24 random bits give k / 2^23 - 1, which is
 * exact in float and uniform in [-1, 1). */
void cwm_measure_fill(float *a, long n, unsigned long long seed, int arg) {
  const uint64_t g = 0x9e3779b97f4a7c15ULL;
  uint64_t key = mix64((uint64_t)seed * g ^ mix64((uint64_t)(arg + 1) * 0xd1b54a32d192ed03ULL));
  const float scale = 1.0f / 8388608.0f;
  for (long j = 0; j < n; j++) {
    uint64_t h = mix64(key + (uint64_t)j * g);
    a[j] = (float)((int32_t)(h >> 40) - 8388608) * scale;
  }
}

int cwm_measure_check(const float *out, const cwm_reference *ref, double tol, char *msg, size_t n) {
  double maxref = 0;
  for (long i = 0; i < ref->len; i++) {
    double r = fabs((double)ref->out[i]);
    if (isfinite(r) && r > maxref) maxref = r;
  }
  double tol_abs = tol * (1 + maxref) * sqrt(ref->red_len > 1 ? (double)ref->red_len : 1.0);
  long first = -1;
  double maxerr = 0;
  for (long i = 0; i < ref->len; i++) {
    double o = out[i], r = ref->out[i];
    int bad;
    double e;
    if (!isfinite(r)) {
      /* A non-finite expectation can only be matched exactly (same infinity, or NaN for NaN). */
      bad = isnan(r) ? !isnan(o) : o != r;
      e = bad ? INFINITY : 0;
    } else if (!isfinite(o)) {
      bad = 1;
      e = INFINITY;
    } else {
      e = fabs(o - r);
      bad = e > tol_abs;
    }
    if (e > maxerr || (isnan(e) && !isnan(maxerr))) maxerr = e;
    if (bad && first < 0) first = i;
  }
  if (first < 0) return 1;
  if (msg && n)
    snprintf(msg, n, "out[%ld] = %.9g, expected %.9g (max abs error %.3g > tol %.3g)", first,
             (double)out[first], (double)ref->out[first], maxerr, tol_abs);
  return 0;
}

/* ---- the child --------------------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void send_and_exit(int fd, child_msg *m) {
  m->magic = MSG_MAGIC;
  const char *p = (const char *)m;
  size_t left = sizeof *m;
  while (left) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    p += w;
    left -= (size_t)w;
  }
  _exit(0);
}

/* Closes every inherited descriptor but stdio, the report pipe and the control socket, so a
 * kernel cannot touch the parent's files and RLIMIT_NOFILE is not spent on them. */
static void close_inherited(int keep, int keep2) {
  int fds[1024], nfd = 0;
  DIR *d = opendir("/proc/self/fd");
  if (d) {
    int dfd = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) && nfd < 1024) {
      int fd = atoi(e->d_name);
      if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && fd > 2 && fd != keep && fd != keep2 && fd != dfd)
        fds[nfd++] = fd;
    }
    closedir(d);
    for (int i = 0; i < nfd; i++) close(fds[i]);
  } else {
    for (int fd = 3; fd < 1024; fd++)
      if (fd != keep && fd != keep2) close(fd);
  }
}

/* Sets soft = v and hard = v + extra, never above the inherited hard limit. */
static void set_limit(int res, rlim_t v, rlim_t extra) {
  struct rlimit rl;
  if (getrlimit(res, &rl) != 0) return;
  rlim_t hard = v + extra;
  if (rl.rlim_max != RLIM_INFINITY && hard > rl.rlim_max) hard = rl.rlim_max;
  if (v > hard) v = hard;
  rl.rlim_cur = v;
  rl.rlim_max = hard;
  setrlimit(res, &rl);
}

/* Address space already mapped (libraries, the parent's heap, the reference copy-on-write):
 * mem_limit_mb is granted on top of it, since a parent built with sanitizers or holding a model
 * can map far more than any sensible kernel limit. */
static rlim_t mapped_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long pages = 0;
  if (fscanf(f, "%lu", &pages) != 1) pages = 0;
  fclose(f);
  return (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
}

static double time_calls(kernel_fn fn, float *const *args, long number) {
  double t0 = now_s();
  for (long k = 0; k < number; k++) fn(args);
  return now_s() - t0;
}

/* A 64-byte aligned block of len floats for argument i, or the child reports that it could not.
 * guard: it ends where an inaccessible page begins, so a read past it faults (never freed). */
static float *child_alloc(int wfd, child_msg *m, long len, int i, int guard) {
  size_t bytes = ((size_t)(len > 0 ? len : 1) * sizeof(float) + 63) & ~(size_t)63, page = (size_t)sysconf(_SC_PAGESIZE);
  size_t span = guard ? (bytes + page - 1) / page * page : 0;
  unsigned char *g = guard ? mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : NULL;
  float *a = !guard ? aligned_alloc(64, bytes)
             : g != MAP_FAILED && !mprotect(g + span, page, PROT_NONE) ? (float *)(void *)(g + span - bytes) : NULL;
  if (!a) {
    m->error = CWM_MERR_RUNTIME;
    snprintf(m->msg, sizeof m->msg, "cannot allocate %.1f MiB for argument %d within the memory limit",
             (double)bytes / 1048576.0, i);
    send_and_exit(wfd, m);
  }
  return a;
}

/* The memory the repeats write through to flush the caches (--flush-cache), allocated before the
 * child's address-space limit. */
static unsigned char *flush_buf;

/* The child's process state before the kernel is loaded: dies with the parent, its own process
 * group, no stdin/stdout, only the result pipe open, resource limits, the OpenMP environment.
 * Returns the thread count. */
static int child_isolate(int wfd, int cfd, pid_t parent, const cwm_measure_opts *o, int timing, double timeout) {
#ifdef __linux__
  /* Die with the parent: a killed cwm must not leave kernels running. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
#endif
  setpgid(0, 0);
  int nul = open("/dev/null", O_RDWR);
  if (nul >= 0) {
    dup2(nul, 0);
    dup2(nul, 1); /* the kernel must not write into the caller's stdout (it may be a data stream) */
    if (nul > 2) close(nul);
  }
  close_inherited(wfd, cfd);
  fcntl(cfd, F_SETFL, O_NONBLOCK); /* the repeats' wait spins (runner_child_repeats) */
  signal(SIGPIPE, SIG_DFL);

  if (timing && o->flush_cache) flush_buf = malloc(FLUSH_BYTES); /* before RLIMIT_AS: not the kernel's */
#ifdef __GLIBC__
  /* Kernels allocate their local and packed buffers on every call. Served from the heap and kept
   * there between calls, as in a program that calls a kernel in a loop, they cost the same from
   * the second call on, whatever state of the parent's allocator fork copied: glibc's default
   * (mmap above 128 KiB, raised only after such a block is freed) made the same batch_matmul
   * 1.3 ms on its second call and 150 us from about the tenth under cwm measure, 133 us from the
   * first under cwm tune, whose parent had already raised it. */
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif

  long mb = o->mem_limit_mb > 0 ? o->mem_limit_mb : 4096;
  set_limit(RLIMIT_AS, mapped_bytes() + (rlim_t)mb * 1024 * 1024, 0);
  int thr = o->threads > 0 ? o->threads : 1;
  /* CPU seconds add up over threads; the hard limit one second later, so the soft one's SIGXCPU
   * (reported as a time-out) comes first, not a bare SIGKILL. */
  set_limit(RLIMIT_CPU, (rlim_t)((timeout * 2 + 1) * thr), 1);
  set_limit(RLIMIT_NOFILE, 64, 0);
  set_limit(RLIMIT_CORE, 0, 0);
  set_limit(RLIMIT_FSIZE, 0, 0); /* no file written, whatever is opened (the sandbox opens none) */
#ifdef __linux__
  prctl(PR_SET_DUMPABLE, 0);
#endif

  char tb[32];
  snprintf(tb, sizeof tb, "%d", thr);
  /* libgomp reads it at load (the dlopen); the wait policy stays a program's default (spin, then
   * sleep): passive made a 4.4 us kernel on 2 threads take 62 us, waking a thread each region */
  setenv("OMP_NUM_THREADS", tb, 1);
  return thr;
}

/* The kernel's arguments: seeded inputs (converted once, untimed, to the kernel's layout when it
 * has a conversion), the output filled with NaN so that an element the kernel misses shows. */
static void child_args(int wfd, child_msg *m, void *h, const cwm_measure_opts *o, const cwm_candidate *c,
                       float *shared_out, float **args) {
  float *src[CWM_MAX_ARGS];
  int nargs = c->nargs;
  for (int i = 0; i < nargs; i++) {
    int is_out = i == nargs - 1;
    int packed = !is_out && c->pack_entry && c->src_len[i] > 0;
    long len = c->arg_len[i] > 0 ? c->arg_len[i] : 1;
    args[i] = is_out && shared_out ? shared_out : child_alloc(wfd, m, len, i, o->guard_pages);
    src[i] = packed ? child_alloc(wfd, m, c->src_len[i], i, o->guard_pages) : args[i];
    if (is_out || packed) /* an element the kernel (or the conversion) misses stays NaN */
      for (long j = 0; j < len; j++) args[i][j] = NAN;
    if (!is_out) cwm_measure_fill(src[i], packed ? c->src_len[i] : len, o->seed, i);
  }
  if (c->pack_entry) {
    /* weights stored in the kernel's layout: converted once from the seeded data, untimed */
    void *psym = dlsym(h, c->pack_entry);
    if (!psym) {
      m->error = CWM_MERR_INSTANTIATION;
      snprintf(m->msg, sizeof m->msg, "layout conversion '%s' not found in the built object", c->pack_entry);
      send_and_exit(wfd, m);
    }
    void (*pack)(float *const *, float *const *);
    memcpy(&pack, &psym, sizeof pack);
    pack(src, args);
    for (int i = 0; i < nargs && !o->guard_pages; i++) if (src[i] != args[i]) free(src[i]);
  }
}

static void omp_nothing(void *data) { (void)data; }

/* Starts the OpenMP thread pool of the kernel's runtime (libgomp's GOMP_parallel, when the kernel
 * object links it) with an empty parallel region of thr threads. */
static void start_omp_threads(void *h, int thr) {
  void *sym = dlsym(h, "GOMP_parallel");
  if (!sym || thr <= 1) return;
  void (*par)(void (*)(void *), void *, unsigned, unsigned);
  memcpy(&par, &sym, sizeof par);
  par(omp_nothing, NULL, (unsigned)thr, 0);
}

/* Runs in the forked child and never returns. shared_out, if set, is the output buffer (a shared
 * mapping the parent reads back: the reference); timing = 0 runs once only. */
static void child_main(int wfd, int cfd, pid_t parent, const cwm_measure_opts *o, const char *so,
                       const cwm_candidate *c, const cwm_reference *ref, double timeout,
                       int timing, float *shared_out) {
  double t_start = now_s();
  child_msg m;
  memset(&m, 0, sizeof m);
  int thr = child_isolate(wfd, cfd, parent, o, timing, timeout);

  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    m.error = CWM_MERR_INSTANTIATION;
    const char *e = dlerror();
    snprintf(m.msg, sizeof m.msg, "dlopen: %s", e ? e : "failed");
    send_and_exit(wfd, &m);
  }
  void *sym = dlsym(h, c->entry);
  if (!sym) {
    m.error = CWM_MERR_INSTANTIATION;
    snprintf(m.msg, sizeof m.msg, "entry '%s' not found in the built object", c->entry);
    send_and_exit(wfd, &m);
  }
  kernel_fn fn;
  memcpy(&fn, &sym, sizeof fn);
  /* If the parent already had libgomp loaded, the environment came too late; set it directly. */
  void *set_thr = dlsym(h, "omp_set_num_threads");
  if (set_thr) {
    void (*f)(int);
    memcpy(&f, &set_thr, sizeof f);
    f(thr);
  }

  float *args[CWM_MAX_ARGS];
  int nargs = c->nargs;
  child_args(wfd, &m, h, o, c, shared_out, args);
  float *out = args[nargs - 1];

  /* From here on only the kernel and the timing loop run, confined to what they need: OpenMP's
   * threads started first by an empty parallel region (libgomp keeps them for the kernel's), then
   * no more processes for this user (root is exempt from the limit, not from the sandbox) */
  start_omp_threads(h, thr);
  set_limit(RLIMIT_NPROC, 0, 0);
  m.sandbox = cwm_sandbox_enter(wfd, cfd, m.sandbox_msg, sizeof m.sandbox_msg);
  /* The checked call is the first of the warm-up: it touches every page and loads the code. */
  double t_first = time_calls(fn, args, 1);
  if (o->check && ref && ref->out) {
    if (ref->len != c->arg_len[nargs - 1]) {
      m.error = CWM_MERR_WRONG_ANSWER;
      snprintf(m.msg, sizeof m.msg, "output has %ld elements, reference %ld", c->arg_len[nargs - 1],
               ref->len);
      send_and_exit(wfd, &m);
    }
    char cm[256];
    if (!cwm_measure_check(out, ref, o->tol, cm, sizeof cm)) {
      m.error = CWM_MERR_WRONG_ANSWER;
      snprintf(m.msg, sizeof m.msg, "%s", cm);
      send_and_exit(wfd, &m);
    }
  }
  if (!timing) send_and_exit(wfd, &m);
  /* Warm-up. The first calls pay for page faults (on this VM, the host backs a page at its first
   * touch, and a kernel's heap grows over its first calls until its buffers' layout settles),
   * code loading and the OpenMP runtime's start, for several calls, not one: a batch_matmul that
   * runs in 133 us took 1.3 ms on each of its first three (calls per repeat set from its second
   * call made its repeats 3 ms long, the first of them still slow: 290 us logged; judged by that
   * call, at 10x the best so far, it would have been cut off as slow), a 2 ms conv2d took 10 ms
   * on each of its first four. So calls are repeated one at a time, at least six (two for a
   * kernel whose first call took four repeat lengths), until the last three are within 15% of the
   * fastest and they have taken the target repeat length (a second or 200 calls at most); the
   * cut-off reads the fastest of at least 12 of them and 20 ms (or a quarter second's, or 200),
   * and the calls per repeat come from the slowest of the last three. A margin of the time-out is
   * left for the repeats, so a slow but correct kernel reports fewer repeats instead of being
   * killed. */
  double deadline = t_start + 0.8 * timeout; /* a margin of the time-out for the repeats */
  double target = (o->min_repeat_ms > 0 ? o->min_repeat_ms : 0) / 1000.0;
  double t_warm = t_first, fastest = t_first;
  if (t_first < 1.0) {
    double spent = 0, last[3] = {0, 0, 0};
    int min_calls = t_first < 4 * target ? 6 : 2; /* a slow phase looks steady from within */
    for (int k = 0; k < 200; k++) {
      double t = time_calls(fn, args, 1);
      spent += t;
      last[k % 3] = t;
      if (t < fastest) fastest = t;
      t_warm = fmax(last[0], fmax(last[1], last[2]));
      if (k >= min_calls - 1 && t_warm <= 1.15 * fastest && spent >= target) break;
      if (spent >= 1.0 || now_s() + t > deadline) break;
      if (o->slow_cutoff_s > 0 && fastest > o->slow_cutoff_s && ((k >= 11 && spent >= 0.02) || spent >= 0.25)) break;
    }
  }
  if (o->slow_cutoff_s > 0 && fastest > o->slow_cutoff_s) {
    m.slow_s = fastest;
    send_and_exit(wfd, &m);
  }
  long number = 1;
  if (t_warm < target) {
    /* calls per repeat from the warm estimate, as TVM scales `number` from the last one; 8 calls
     * when a single one is very short */
    if (t_warm < 1e-4) t_warm = time_calls(fn, args, 8) / 8;
    if (t_warm < target) {
      double want = target / (t_warm > 1e-9 ? t_warm : 1e-9);
      number = want > (double)(1L << 40) ? (1L << 40) : (long)ceil(want);
    }
  }
  m.number = number;
  m.magic = MSG_MAGIC;
  runner_send(wfd, &m, sizeof m);
  runner_child_repeats(wfd, cfd, fn, args, flush_buf, FLUSH_BYTES);
}

/* ---- the parent -------------------------------------------------------------------------- */
static const char *sig_name(int s) {
  switch (s) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGSYS: return "SIGSYS";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGPIPE: return "SIGPIPE";
    case SIGTRAP: return "SIGTRAP";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGALRM: return "SIGALRM";
    default: return "signal";
  }
}

/* The notice, once per process, that kernels run without the seccomp filter. */
static void sandbox_notice(const child_msg *m) {
  static int said;
  if (m->sandbox == 0 || said) return;
  said = 1;
  char note[sizeof m->sandbox_msg];
  memcpy(note, m->sandbox_msg, sizeof note);
  note[sizeof note - 1] = 0;
  fprintf(stderr, "cwm: %s%s\n", note,
          m->sandbox > 0 ? " (scripts/install-deps.sh installs libseccomp-dev)" : "; kernels run unsandboxed");
}

/* The child's report, checked: what the child may say (its verdict, a slow call at least the
 * cut-off) and the timings taken here. */
static void report_result(const cwm_measure_opts *o, child_msg *m, const double *costs, int nc,
                          cwm_result *res) {
  res->error = m->error;
  m->msg[sizeof m->msg - 1] = 0;
  snprintf(res->msg, sizeof res->msg, "%s", m->msg);
  res->ncosts = 0;
  if (m->error != CWM_MERR_NONE) return;
  if (m->slow_s > 0) {
    if (o->slow_cutoff_s > 0 && m->slow_s >= o->slow_cutoff_s) {
      res->costs[res->ncosts++] = m->slow_s;
    } else {
      res->error = CWM_MERR_RUNTIME;
      snprintf(res->msg, sizeof res->msg, "timing protocol violated: a slow call of %g s under the cut-off",
               m->slow_s);
    }
    return;
  }
  for (int i = 0; i < nc && i < 32; i++) res->costs[res->ncosts++] = costs[i];
}

/* Forks one child and waits for its report (and times its repeats) with a wall-clock time-out.
 * Whatever happens, the whole process group is killed and the child reaped before returning.
 * Returns non-zero only if the child could not be started. */
static int run_child(const cwm_measure_opts *o, const char *so, const cwm_candidate *c,
                     const cwm_reference *ref, double timeout, int timing, float *shared_out,
                     cwm_result *res, cwm_err *err) {
  double t0 = cwm_now();
  int p[2], s[2];
  if (pipe2(p, O_CLOEXEC) != 0)
    return cwm_fail(err, CWM_EMEASURE, "cannot create the runner pipe: %s", strerror(errno));
  /* the control channel is a socket so that a send to a dead child fails instead of raising
   * SIGPIPE in cwm (MSG_NOSIGNAL) */
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) != 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    return cwm_fail(err, CWM_EMEASURE, "cannot create the runner's control socket: %s", strerror(e));
  }
  pid_t parent = getpid();
  fflush(NULL);
  cwm_omp_release(); /* a kernel's parallel regions would wait for the parent's OpenMP threads */
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    close(s[0]);
    close(s[1]);
    return cwm_fail(err, CWM_EMEASURE, "cannot fork the runner child: %s", strerror(e));
  }
  if (pid == 0) {
    close(p[0]);
    close(s[0]);
    child_main(p[1], s[1], parent, o, so, c, ref, timeout, timing, shared_out);
    _exit(1);
  }
  setpgid(pid, pid);
  close(p[1]);
  close(s[1]);
  fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);

  child_msg m;
  double costs[32];
  int nc = 0;
  char perr[160] = "";
  int rc = runner_read(p[0], pid, &m, sizeof m, t0 + timeout);
  if (rc == RUNNER_OK && m.magic != MSG_MAGIC) {
    snprintf(perr, sizeof perr, "a report without the runner's mark");
    rc = RUNNER_PROTOCOL;
  }
  if (rc == RUNNER_OK) sandbox_notice(&m);
  if (rc == RUNNER_OK && timing && m.error == CWM_MERR_NONE && m.slow_s <= 0) {
    if (m.number < 1) {
      snprintf(perr, sizeof perr, "%lld calls per repeat", (long long)m.number);
      rc = RUNNER_PROTOCOL;
    } else {
      rc = runner_parent_repeats(o, p[0], s[0], pid, m.number, t0, timeout, costs, &nc, perr, sizeof perr);
    }
  }
  close(s[0]);
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  close(p[0]);
  res->run_s = cwm_now() - t0;

  res->ncosts = 0;
  if (rc == RUNNER_OK) {
    report_result(o, &m, costs, nc, res);
  } else if (rc == RUNNER_PROTOCOL) {
    res->error = CWM_MERR_RUNTIME;
    snprintf(res->msg, sizeof res->msg, "timing protocol violated: %s", perr);
  } else if (rc == RUNNER_TIMEOUT) {
    res->error = CWM_MERR_RUN_TIMEOUT;
    snprintf(res->msg, sizeof res->msg, "exceeded the %gs run time-out", timeout);
  } else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGXCPU) {
    res->error = CWM_MERR_RUN_TIMEOUT;
    snprintf(res->msg, sizeof res->msg, "CPU time limit exceeded (SIGXCPU)");
  } else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS) {
    res->error = CWM_MERR_RUNTIME;
    snprintf(res->msg, sizeof res->msg, "killed by SIGSYS: a blocked system call (the kernel sandbox "
                                        "allows memory, threads, the clock and the report pipe)");
  } else if (WIFSIGNALED(st)) {
    res->error = CWM_MERR_RUNTIME;
    snprintf(res->msg, sizeof res->msg, "killed by %s (%s)", sig_name(WTERMSIG(st)),
             strsignal(WTERMSIG(st)));
  } else {
    res->error = CWM_MERR_RUNTIME;
    snprintf(res->msg, sizeof res->msg, "exited with status %d without a result",
             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
  return CWM_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void set_median(cwm_result *r) {
  if (r->error != CWM_MERR_NONE || r->ncosts <= 0) {
    if (r->error == CWM_MERR_NONE) {
      r->error = CWM_MERR_UNKNOWN;
      snprintf(r->msg, sizeof r->msg, "no timing was reported");
    }
    r->median = 1e10;
    return;
  }
  double s[32];
  memcpy(s, r->costs, sizeof(double) * (size_t)r->ncosts);
  qsort(s, (size_t)r->ncosts, sizeof(double), cmp_double);
  int k = r->ncosts;
  r->median = k % 2 ? s[k / 2] : 0.5 * (s[k / 2 - 1] + s[k / 2]);
}

static double g_build_s, g_run_s;

void cwm_measure_add_seconds(double build_s, double run_s) {
  g_build_s += build_s;
  g_run_s += run_s;
}

void cwm_measure_seconds(double *build_s, double *run_s) {
  if (build_s) *build_s = g_build_s;
  if (run_s) *run_s = g_run_s;
}

/* The host's timing lock: <cache dir>/timing-<host>.lock, opened for one measuring call
 * (close-on-exec; the runner child closes its copy, so a dead process never holds it). -1 when it
 * cannot be opened: timing goes on unlocked. */
static int timing_lock_fd(const cwm_measure_opts *o, const char *host) {
  char path[4200];
  snprintf(path, sizeof path, "%s/timing-%s.lock", cwm_measure_cache_dir(o), host);
  return open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
}

static void timing_lock(int fd, int op) {
  if (fd < 0) return;
  while (flock(fd, op) != 0 && errno == EINTR) {}
}

int cwm_measure(const cwm_measure_opts *o, const cwm_candidate *c, int n, const cwm_reference *ref,
                cwm_result *res, cwm_err *err) {
  if (n <= 0) return CWM_OK;
  if (o->measurer) return o->measurer->measure(o->measurer, o, c, n, ref, res, err);
  char **so = cwm_xcalloc((size_t)n, sizeof *so);
  double t0 = now_s();
  int rc = cwm_build(o, c, n, so, res, err);
  double t1 = now_s();
  g_build_s += t1 - t0;
  if (rc) {
    free(so);
    return rc;
  }
  char host[64];
  cwm_hostname(host, sizeof host);
  for (int i = 0; i < n; i++) {
    snprintf(res[i].host, sizeof res[i].host, "%s", host);
    res[i].target = NULL;
  }
  /* Sequential and after every compiler has exited: timings must not share the machine. */
  double timeout = o->run_timeout_s > 0 ? o->run_timeout_s : 10;
  int lock = timing_lock_fd(o, host);
  for (int i = 0; i < n && rc == CWM_OK; i++) {
    if (!so[i]) {
      res[i].median = 1e10;
      continue;
    }
    timing_lock(lock, LOCK_EX);
    rc = run_child(o, so[i], &c[i], o->check ? ref : NULL, timeout, 1, NULL, &res[i], err);
    timing_lock(lock, LOCK_UN);
    /* flock is not fair: taken again at once, it would starve another process waiting for it for
     * as long as this batch lasts (a second tune on the host made no progress for minutes). A
     * millisecond lets a waiter, woken by the unlock, take its turn. */
    if (lock >= 0 && i + 1 < n) nanosleep(&(struct timespec){0, 1000000L}, NULL);
    if (rc == CWM_OK) set_median(&res[i]);
    if (o->verbose) {
      if (res[i].error)
        fprintf(stderr, "cwm: %s: %s: %s\n", c[i].entry, cwm_merr_name(res[i].error), res[i].msg);
      else
        fprintf(stderr, "cwm: %s: %.6g ms\n", c[i].entry, res[i].median * 1e3);
    }
  }
  if (lock >= 0) close(lock);
  for (int i = 0; i < n; i++) free(so[i]);
  free(so);
  g_run_s += now_s() - t1;
  return rc;
}

/* ---- the reference ----------------------------------------------------------------------- */

typedef struct {
  char magic[8];
  uint64_t len;
  uint64_t checksum;
  uint64_t seed;
  uint64_t key;
  uint64_t pad[3];
} ref_hdr;
_Static_assert(sizeof(ref_hdr) == REF_HDR, "reference header size");

/* Four independent multiply-mix lanes over 64-bit words: fast enough for hundreds of MB. */
static uint64_t checksum(const float *a, long n) {
  const unsigned char *p = (const unsigned char *)a;
  size_t bytes = (size_t)n * sizeof(float), nw = bytes / 8;
  uint64_t h[4] = {1, 2, 3, 4};
  size_t i = 0;
  for (; i + 4 <= nw; i += 4)
    for (int l = 0; l < 4; l++) {
      uint64_t w;
      memcpy(&w, p + (i + (size_t)l) * 8, 8);
      h[l] = (h[l] ^ w) * 0x9e3779b97f4a7c15ULL;
      h[l] ^= h[l] >> 29;
    }
  uint64_t r = (uint64_t)bytes;
  for (; i < nw; i++) {
    uint64_t w;
    memcpy(&w, p + i * 8, 8);
    r = mix64(r ^ w);
  }
  for (size_t k = nw * 8; k < bytes; k++) r = mix64(r ^ p[k]);
  for (int l = 0; l < 4; l++) r = mix64(r ^ h[l]);
  return r;
}

static uint64_t ref_key(const cwm_candidate *c, unsigned long long seed) {
  cwm_buf k;
  cwm_buf_init(&k);
  cwm_buf_puts(&k, c->body);
  cwm_buf_printf(&k, "\x01%s\x01%d\x01%llu", c->entry, c->nargs, seed);
  for (int i = 0; i < c->nargs; i++) cwm_buf_printf(&k, ",%ld", c->arg_len[i]);
  uint64_t h = cwm_hash64(k.s, k.len);
  cwm_buf_free(&k);
  return h;
}

/* Loads a cached reference; NULL (and the caller recomputes) if missing, short, or corrupt. */
static float *load_ref(const char *path, long len, uint64_t key, unsigned long long seed) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  ref_hdr h;
  float *a = NULL;
  if (fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, "CWMREF01", 8) == 0 &&
      h.len == (uint64_t)len && h.key == key && h.seed == (uint64_t)seed) {
    a = cwm_xmalloc((size_t)len * sizeof(float));
    char extra;
    if (fread(a, sizeof(float), (size_t)len, f) != (size_t)len || fread(&extra, 1, 1, f) != 0 ||
        checksum(a, len) != h.checksum) {
      free(a);
      a = NULL;
    }
  }
  fclose(f);
  return a;
}

int cwm_reference_compute(const cwm_measure_opts *o, const cwm_candidate *ref_kernel, long red_len,
                          cwm_reference **out, cwm_err *err) {
  *out = NULL;
  const cwm_candidate *c = ref_kernel;
  if (!c || !c->body || !c->entry || c->nargs < 1 || c->nargs > CWM_MAX_ARGS ||
      c->arg_len[c->nargs - 1] <= 0)
    return cwm_fail(err, CWM_EMEASURE, "malformed reference kernel");
  long len = c->arg_len[c->nargs - 1];
  const char *dir = cwm_measure_cache_dir(o);
  uint64_t key = ref_key(c, o->seed);
  char hex[17], path[4200];
  cwm_hash_hex(key, hex);
  snprintf(path, sizeof path, "%s/%s.ref", dir, hex);

  float *data = load_ref(path, len, key, o->seed);
  if (!data) {
    char *so = NULL;
    cwm_result r;
    int rc = cwm_build(o, c, 1, &so, &r, err);
    if (rc) return rc;
    if (!so)
      return cwm_fail(err, CWM_EMEASURE, "reference kernel %s does not build: %s: %s", c->entry,
                      cwm_merr_name(r.error), r.msg);
    /* The output lives in a shared mapping so the parent reads it back without a copy through
     * the pipe; the header in front lets the same block be written to the cache file as is. */
    size_t bytes = REF_HDR + (size_t)len * sizeof(float);
    void *blk = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (blk == MAP_FAILED) {
      free(so);
      return cwm_fail(err, CWM_EMEASURE, "cannot map %.1f MiB for the reference output: %s",
                      (double)bytes / 1048576.0, strerror(errno));
    }
    float *shared = (float *)((char *)blk + REF_HDR);
    double timeout = o->run_timeout_s > 120 ? o->run_timeout_s : 120;
    cwm_measure_opts ro = *o;
    ro.check = 0;
    memset(&r, 0, sizeof r);
    rc = run_child(&ro, so, c, NULL, timeout, 0, shared, &r, err);
    free(so);
    if (rc == CWM_OK && r.error != CWM_MERR_NONE)
      rc = cwm_fail(err, CWM_EMEASURE, "reference kernel %s failed: %s: %s", c->entry,
                    cwm_merr_name(r.error), r.msg);
    if (rc) {
      munmap(blk, bytes);
      return rc;
    }
    ref_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "CWMREF01", 8);
    h.len = (uint64_t)len;
    h.checksum = checksum(shared, len);
    h.seed = o->seed;
    h.key = key;
    memcpy(blk, &h, sizeof h);
    cwm_err werr;
    /* Only a cache: failing to write it costs a recomputation next time, nothing more. */
    if (cwm_write_file_atomic(path, blk, bytes, &werr) != CWM_OK && o->verbose)
      fprintf(stderr, "cwm: cannot cache the reference: %s\n", werr.msg);
    data = cwm_xmalloc((size_t)len * sizeof(float));
    memcpy(data, shared, (size_t)len * sizeof(float));
    munmap(blk, bytes);
  } else if (o->verbose) {
    fprintf(stderr, "cwm: reference %s loaded from %s\n", c->entry, path);
  }
  cwm_reference *rf = cwm_xcalloc(1, sizeof *rf);
  rf->len = len;
  rf->out = data;
  rf->red_len = red_len;
  *out = rf;
  return CWM_OK;
}

void cwm_reference_free(cwm_reference *r) {
  if (!r) return;
  free(r->out);
  free(r);
}

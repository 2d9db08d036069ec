/* test_sandbox.c: kernels that try to get out of the runner child (fork, exec, setsid, a file, a
 * shared mapping, a socket, a signal to the parent, forged timings on every descriptor or on the
 * report pipe) must each end as a candidate error with no trace outside, the parent measuring on;
 * OpenMP kernels with two and three threads measure as usual under the sandbox; the compiler runs
 * under its limits. Without libseccomp only the notice, the timing protocol and the compiler's
 * limits are tested (the escapes would succeed). */
#define _GNU_SOURCE
#include "cwm/measure.h"
#include "testlib.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 1000

#ifdef CWM_HAVE_SECCOMP
#define SANDBOXED 1
#else
#define SANDBOXED 0
#endif

static char g_dir[4096];
static char g_marker[4300];
static volatile sig_atomic_t g_got_term;

static void on_term(int s) {
  (void)s;
  g_got_term = 1;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

static cwm_candidate cand(const char *body, const char *entry) {
  cwm_candidate c;
  memset(&c, 0, sizeof c);
  c.body = body;
  c.entry = entry;
  c.nargs = 3;
  c.arg_len[0] = c.arg_len[1] = c.arg_len[2] = N;
  return c;
}

static cwm_measure_opts opts(int threads) {
  cwm_measure_opts o;
  cwm_measure_opts_default(&o);
  test_env_measure(&o);
  o.cache_dir = g_dir;
  o.cflags = "-O2 -fPIC -shared -fopenmp";
  o.threads = threads;
  o.repeats = 3;
  o.min_repeat_ms = 5;
  o.run_timeout_s = 2;
  o.mem_limit_mb = 256;
  o.build_jobs = 2;
  o.verbose = getenv("CWM_TEST_VERBOSE") != NULL; /* each result on stderr */
  return o;
}

/* A kernel named entry that runs `attempt` on every call, then adds correctly. */
static char *body_of(const char *entry, const char *attempt) {
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_printf(
      &b,
      "#include <fcntl.h>\n#include <signal.h>\n#include <stdio.h>\n#include <string.h>\n"
      "#include <errno.h>\n#include <time.h>\n#include <sys/mman.h>\n#include <sys/socket.h>\n#include "
      "<unistd.h>\n"
      "void %s(float *const *args) { const float *a = args[0], *b = args[1]; float *c = args[2];\n"
      "  %s\n"
      "  #pragma omp parallel for\n"
      "  for (long i = 0; i < %d; i++) c[i] = a[i] + b[i]; }\n",
      entry, attempt, N);
  return cwm_buf_take(&b);
}

static cwm_reference *make_reference(void) {
  cwm_measure_opts o = opts(1);
  char *body = body_of("k_ref", "");
  cwm_candidate rc = cand(body, "k_ref");
  cwm_reference *ref = NULL;
  cwm_err err = {0};
  CHECKF(cwm_reference_compute(&o, &rc, 1, &ref, &err) == CWM_OK, "%s", err.msg);
  free(body);
  return ref;
}

/* The report pipe is the child's only write-only descriptor above stdio: a private mapping of it
 * fails with EACCES (the control socket gives ENODEV), and a private mapping is allowed. */
#define FIND_REPORT_FD \
  "int rfd = -1; for (int fd = 3; fd < 64 && rfd < 0; fd++) {" \
  " void *p = mmap(0, 4096, PROT_READ, MAP_PRIVATE, fd, 0);" \
  " if (p == MAP_FAILED && errno == EACCES) rfd = fd; else if (p != MAP_FAILED) munmap(p, 4096); }"

/* 200 us of the clock (allowed), on every call */
#define SPIN_200US \
  " struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);" \
  " do clock_gettime(CLOCK_MONOTONIC, &t1);" \
  " while ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec) < 2e5);"

static void test_escapes(const cwm_reference *ref) {
  char exec_a[4600], open_a[4600], fork_a[4600];
  snprintf(exec_a, sizeof exec_a, "execl(\"/bin/sh\", \"sh\", \"-c\", \"touch %s\", (char *)0);",
           g_marker);
  snprintf(open_a, sizeof open_a,
           "int fd = open(\"%s\", O_WRONLY | O_CREAT, 0600); if (fd >= 0) (void)!write(fd, \"x\", 1);",
           g_marker);
  snprintf(fork_a, sizeof fork_a,
           "if (fork() == 0) { int fd = open(\"%s\", O_WRONLY | O_CREAT, 0600); (void)fd; _exit(0); }",
           g_marker);
  /* each: the attempt, and what the error names (SIGSYS: the sandbox killed it) */
  const char *att[][3] = {
      {"e_fork", fork_a, "SIGSYS"},
      {"e_exec", exec_a, "SIGSYS"},
      {"e_setsid", "setsid();", "SIGSYS"},
      {"e_open", open_a, "SIGSYS"},
      {"e_socket", "(void)!socket(AF_INET, SOCK_STREAM, 0);", "SIGSYS"},
      {"e_kill", "kill(getppid(), SIGTERM);", "SIGSYS"},
      /* a shared mapping of an inherited descriptor (stderr, were it a file opened read-write) */
      {"e_mmap", "(void)!mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 2, 0);", "SIGSYS"},
      /* a report of 1e-12 s (in the old report's layout) on every descriptor */
      {"e_forge_all",
       "static double fake[40] = {1e-12, 1e-12}; for (int fd = 0; fd < 64; fd++) (void)!write(fd, fake, "
       "sizeof fake);",
       "SIGSYS"},
      /* the report pipe found and flooded with done bytes: early and extra bytes */
      {"e_forge_pipe",
       FIND_REPORT_FD
       " static char d[64]; memset(d, 'd', sizeof d); if (rfd >= 0) (void)!write(rfd, d, sizeof d);",
       "protocol"},
      /* the same, one done byte per call of 200 us once 3 ms have passed since the first: late in
       * the warm-up, which lasts at least the 5 ms of a repeat, or in the timed repeats (a count of
       * calls would miss them all when a preempted call made the repeats one call each) */
      {"e_forge_late",
       FIND_REPORT_FD SPIN_200US " static double t_first; double t = t1.tv_sec + t1.tv_nsec * 1e-9;"
       " if (t_first == 0) t_first = t; if (t - t_first > 3e-3 && rfd >= 0) (void)!write(rfd, \"d\", 1);",
       "protocol"},
  };
  enum { NE = sizeof att / sizeof att[0] };
  /* every escape followed by a good kernel: the parent measures on after each */
  cwm_candidate c[2 * NE];
  char *bodies[2 * NE];
  char names[NE][32];
  for (int i = 0; i < NE; i++) {
    bodies[2 * i] = body_of(att[i][0], SANDBOXED || strcmp(att[i][2], "SIGSYS") ? att[i][1] : "");
    c[2 * i] = cand(bodies[2 * i], att[i][0]);
    snprintf(names[i], sizeof names[i], "k_good%d", i);
    bodies[2 * i + 1] = body_of(names[i], "");
    c[2 * i + 1] = cand(bodies[2 * i + 1], names[i]);
  }
  cwm_result res[2 * NE];
  cwm_measure_opts o = opts(2);
  cwm_err err = {0};
  CHECKF(cwm_measure(&o, c, 2 * NE, ref, res, &err) == CWM_OK, "%s", err.msg);
  for (int i = 0; i < NE; i++) {
    const cwm_result *r = &res[2 * i], *g = &res[2 * i + 1];
    if (SANDBOXED || strcmp(att[i][2], "SIGSYS"))
      CHECKF(r->error == CWM_MERR_RUNTIME && strstr(r->msg, att[i][2]) && r->ncosts == 0,
             "%s: %s (%s), expected a runtime error naming %s", att[i][0], cwm_merr_name(r->error),
             r->msg, att[i][2]);
    CHECKF(g->error == CWM_MERR_NONE && g->median > 1e-8 && g->median < 1, "%s after %s: %s %g",
           names[i], att[i][0], g->msg, g->median);
  }
  for (int i = 0; i < 2 * NE; i++) free(bodies[i]);
  usleep(200000); /* what an escaped process would do has had time to happen */
  if (SANDBOXED) CHECKF(access(g_marker, F_OK) != 0, "%s exists: a kernel got out", g_marker);
  CHECK(!g_got_term);
  CHECK(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
}

/* OpenMP kernels under the sandbox: two threads (their pool started before the filter), and more
 * threads than that, started after it through clone (clone3 fails with ENOSYS); the latter only as
 * root, since RLIMIT_NPROC 0 forbids any new thread to other users. */
static void test_omp(const cwm_reference *ref) {
  char *b2 = body_of("k_omp2", "");
  char *b3 = body_of("k_omp3", "");
  char *p3 = strstr(b3, "#pragma omp parallel for");
  cwm_buf nb;
  cwm_buf_init(&nb);
  cwm_buf_printf(&nb, "%.*s#pragma omp parallel for num_threads(3)%s", (int)(p3 - b3), b3,
                 p3 + strlen("#pragma omp parallel for"));
  free(b3);
  b3 = cwm_buf_take(&nb);
  cwm_candidate c[2] = {cand(b2, "k_omp2"), cand(b3, "k_omp3")};
  int n = geteuid() == 0 ? 2 : 1;
  cwm_result res[2];
  cwm_measure_opts o = opts(2);
  cwm_err err = {0};
  CHECKF(cwm_measure(&o, c, n, ref, res, &err) == CWM_OK, "%s", err.msg);
  for (int i = 0; i < n; i++)
    CHECKF(res[i].error == CWM_MERR_NONE && res[i].ncosts == 3 && res[i].median > 1e-8, "%s: %s (%s)",
           c[i].entry, cwm_merr_name(res[i].error), res[i].msg);
  free(b2);
  free(b3);
}

/* The compiler runs under a CPU-time and an address-space limit (build.c): a compiler script
 * reports its own and fails. */
static void test_compiler_limits(void) {
  char limits[4200], script[4200], text[8600];
  snprintf(limits, sizeof limits, "%s/cc-limits", g_dir);
  snprintf(script, sizeof script, "%s/limitcc.sh", g_dir);
  snprintf(text, sizeof text, "#!/bin/sh\necho \"$(ulimit -t) $(ulimit -v)\" > %s\nexit 1\n", limits);
  cwm_err err = {0};
  CHECKF(cwm_write_file_atomic(script, text, strlen(text), &err) == CWM_OK, "%s", err.msg);
  chmod(script, 0700);
  cwm_measure_opts o = opts(1);
  o.cc = script;
  char *body = body_of("k_cc", "");
  cwm_candidate c = cand(body, "k_cc");
  char *so = NULL;
  cwm_result r;
  cwm_build(&o, &c, 1, &so, &r, &err);
  CHECK(so == NULL);
  size_t n = 0;
  char *got = cwm_read_file(limits, &n, &err);
  CHECKF(got && !strcmp(got, "300 8388608\n"), "the compiler's limits: %s", got ? got : "(not written)");
  free(got);
  free(so);
  free(body);
}

int main(void) {
  /* The kernels here are a few instructions on 2 threads, so a repeat is thousands of calls, each
   * two barriers. Under libgomp's default wait policy (the runner's: see run.c) a thread that
   * reaches a barrier spins for the other; with one other busy process on a 2-core machine the
   * other is often descheduled, each call waits out a spin, and 4 of 5 runs timed a good kernel
   * out at 2 s. What is tested here is the sandbox, not the wait: the threads sleep instead. */
  setenv("OMP_WAIT_POLICY", "passive", 1);
  const char *base = getenv("CWM_CACHE_DIR");
  if (!base || !*base) base = "/tmp";
  cwm_mkdir_p(base, NULL);
  snprintf(g_dir, sizeof g_dir, "%s/test_sandbox-XXXXXX", base);
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    return 1;
  }
  snprintf(g_marker, sizeof g_marker, "%s/escaped", g_dir);
  signal(SIGTERM, on_term); /* a kernel's kill(getppid(), SIGTERM) must not arrive */
  cwm_reference *ref = make_reference();
  if (ref) {
    test_escapes(ref);
    test_omp(ref);
  }
  test_compiler_limits();
  cwm_reference_free(ref);
  nftw(g_dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
  return test_done();
}

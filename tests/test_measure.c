/* test_measure.c: the builder and runner on hand-written kernels: correct ones, wrong answers,
 * crashes, hangs, memory hogs, fork bombs in miniature, compile errors, the cache, the reference,
 * and the infrastructure failures (no compiler, unwritable cache), with the parent left intact. */
#define _GNU_SOURCE
#include "cwm/measure.h"
#include "testlib.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N 1000

/* Kernels run under the seccomp sandbox (src/measure/sandbox.c) when libseccomp was built in. */
#ifdef CWM_HAVE_SECCOMP
#define SANDBOXED 1
#else
#define SANDBOXED 0
#endif

/* Under AddressSanitizer the child's own SEGV handler exits with status 1, and an exhausted
 * address space makes ASan itself hang, so those two expectations relax there. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static char g_dir[4096];   /* this run's private cache directory */

static int count_fds(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
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

static cwm_measure_opts opts(void) {
  cwm_measure_opts o;
  cwm_measure_opts_default(&o);
  test_env_measure(&o);
  o.cache_dir = g_dir;
  o.cflags = "-O2 -fPIC -shared -fopenmp";
  o.repeats = 3;
  o.min_repeat_ms = 5;
  o.run_timeout_s = 1;
  o.mem_limit_mb = 256;
  o.build_jobs = 2;
  o.batch = 4;
  return o;
}

#define ADD_BODY(name) \
  "void " name "(float *const *args) { const float *a = args[0], *b = args[1]; float *c = args[2];\n" \
  "  for (long i = 0; i < 1000; i++) c[i] = a[i] + b[i]; }\n"

static const char *k_ref =
    "void k_ref(float *const *args) { const float *a = args[0], *b = args[1]; float *c = args[2];\n"
    "  for (long i = 0; i < 1000; i++) c[i] = (float)((double)a[i] + (double)b[i]); }\n";
static const char *k_add = ADD_BODY("k_add");
static const char *k_add2 = ADD_BODY("k_add2");
static const char *k_add3 = ADD_BODY("k_add3");
/* a kernel whose first call is slow (30 ms of spinning: a cold start) and every later one fast */
static const char *k_coldstart =
    "#include <time.h>\n"
    "void k_coldstart(float *const *args) { const float *a = args[0], *b = args[1]; float *c = args[2];\n"
    "  static int warm;\n"
    "  if (!warm) { struct timespec t0, t; clock_gettime(CLOCK_MONOTONIC, &t0);\n"
    "    do clock_gettime(CLOCK_MONOTONIC, &t); while ((t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) * 1e-6 < 30);\n"
    "    warm = 1; }\n"
    "  for (long i = 0; i < 1000; i++) c[i] = a[i] + b[i]; }\n";
/* slow for its first five calls (the checked one included), 10 ms each, then fast: a kernel
 * whose allocator and runtime warm up over several calls */
static const char *k_slowstart =
    "#include <time.h>\n"
    "void k_slowstart(float *const *args) { const float *a = args[0], *b = args[1]; float *c = args[2];\n"
    "  static int calls;\n"
    "  if (calls++ < 5) { struct timespec t0, t; clock_gettime(CLOCK_MONOTONIC, &t0);\n"
    "    do clock_gettime(CLOCK_MONOTONIC, &t); while ((t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) * 1e-6 < 10); }\n"
    "  for (long i = 0; i < 1000; i++) c[i] = a[i] + b[i]; }\n";
static const char *k_wrong =
    "void k_wrong(float *const *args) { const float *a = args[0], *b = args[1]; float *c = args[2];\n"
    "  for (long i = 0; i < 1000; i++) c[i] = a[i] + b[i];\n  c[17] += 1.0f; }\n";
static const char *k_unwritten =
    "void k_unwritten(float *const *args) { const float *a = args[0], *b = args[1]; float *c = args[2];\n"
    "  for (long i = 0; i < 999; i++) c[i] = a[i] + b[i]; }\n";
static const char *k_bad =
    "void k_bad(float *const *args) { float *c = args[2];\n"
    "  c[0] = 1.0f +; }\n";
static const char *k_segv =
    "void k_segv(float *const *args) { volatile float *volatile p = 0; (void)args; *p = 1.0f; }\n";
static const char *k_abort = "void k_abort(float *const *args) { (void)args; abort(); }\n";
static const char *k_loop =
    "void k_loop(float *const *args) { volatile long x = 0; (void)args; for (;;) x++; }\n";
static const char *k_hog =
    "static void *volatile k_hog_sink;\n"
    "void k_hog(float *const *args) { (void)args;\n"
    "  for (;;) { char *p = malloc(1 << 20); memset(p, 1, 1 << 20); *(void **)p = k_hog_sink;\n"
    "    k_hog_sink = p; } }\n";
static const char *k_omp =
    "void k_omp(float *const *args) { const float *a = args[0], *b = args[1]; float *c = args[2];\n"
    "  #pragma omp parallel for\n"
    "  for (long i = 0; i < 1000; i++) c[i] = a[i] + b[i]; }\n";

/* Forks (once) a grandchild that sleeps forever, records its pid (as a symbolic link's target: the
 * child may write no byte to a file), then computes correctly. */
static char *forker_body(const char *pidfile) {
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_printf(&b,
                 "#include <stdio.h>\n#include <unistd.h>\n"
                 "static int k_forker_done;\n"
                 "void k_forker(float *const *args) { const float *a = args[0], *b = args[1];\n"
                 "  float *c = args[2];\n"
                 "  if (!k_forker_done) { k_forker_done = 1; pid_t p = fork();\n"
                 "    if (p == 0) { for (;;) pause(); }\n"
                 "    char s[16]; snprintf(s, sizeof s, \"%%d\", (int)p); (void)!symlink(s, \"%s\"); }\n"
                 "  for (long i = 0; i < 1000; i++) c[i] = a[i] + b[i]; }\n",
                 pidfile);
  return cwm_buf_take(&b);
}

/* Dead or a zombie waiting for init: either way no longer running. */
static int proc_gone(int pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  for (int t = 0; t < 200; t++) {
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    char buf[512] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')');
    if (rp && (rp[2] == 'Z' || rp[2] == 'X')) return 1;
    usleep(10000);
  }
  return 0;
}

static void test_fill_and_check(void) {
  float *a = malloc(sizeof(float) * 100000), *b = malloc(sizeof(float) * 100000);
  cwm_measure_fill(a, 100000, 7, 0);
  cwm_measure_fill(b, 100000, 7, 0);
  CHECK(memcmp(a, b, sizeof(float) * 100000) == 0);
  double sum = 0, lo = 1, hi = -1;
  for (int i = 0; i < 100000; i++) {
    sum += a[i];
    if (a[i] < lo) lo = a[i];
    if (a[i] > hi) hi = a[i];
  }
  CHECKF(lo >= -1 && hi < 1 && lo < -0.99 && hi > 0.99, "range [%g, %g]", lo, hi);
  CHECKF(fabs(sum / 100000) < 0.01, "mean %g", sum / 100000);
  cwm_measure_fill(b, 100000, 7, 1);
  int same = 0;
  for (int i = 0; i < 100000; i++) same += a[i] == b[i];
  CHECKF(same < 100, "args 0 and 1 share %d values", same);
  cwm_measure_fill(b, 100000, 8, 0);
  CHECK(memcmp(a, b, sizeof(float) * 100000) != 0);
  /* A slice filled alone equals the same slice of the whole: the fill is counter-based. */
  float tail[10];
  cwm_measure_fill(tail, 10, 7, 0);
  CHECK(memcmp(tail, a, sizeof tail) == 0);

  float ref_out[4] = {1, 2, 3, 4}, out[4] = {1, 2, 3, 4};
  cwm_reference ref = {4, ref_out, 1};
  char msg[256] = "";
  CHECK(cwm_measure_check(out, &ref, 1e-5, msg, sizeof msg));
  out[2] = 3.5f;
  CHECK(!cwm_measure_check(out, &ref, 1e-5, msg, sizeof msg));
  CHECKF(strstr(msg, "out[2] = 3.5, expected 3") != NULL, "msg: %s", msg);
  CHECK(cwm_measure_check(out, &ref, 0.2, msg, sizeof msg)); /* 0.5 <= 0.2 * (1 + 4) */
  out[2] = NAN;
  CHECK(!cwm_measure_check(out, &ref, 1.0, msg, sizeof msg));
  out[2] = INFINITY;
  CHECK(!cwm_measure_check(out, &ref, 1.0, msg, sizeof msg));
  out[2] = 3.0f + 1e-4f;
  ref.red_len = 10000; /* sqrt(10000) * 1e-5 * 5 = 5e-3 */
  CHECK(cwm_measure_check(out, &ref, 1e-5, msg, sizeof msg));
  free(a);
  free(b);
}

static void test_names(void) {
  CHECK(strcmp(cwm_merr_name(CWM_MERR_NONE), "none") == 0);
  CHECK(strcmp(cwm_merr_name(CWM_MERR_WRONG_ANSWER), "wrong_answer") == 0);
  CHECK(strcmp(cwm_merr_name(CWM_MERR_RUN_TIMEOUT), "run_timeout") == 0);
  CHECK(strcmp(cwm_merr_name(99), "unknown") == 0);
  CHECK(strstr(cwm_measure_prelude(), "#include <math.h>") != NULL);
  cwm_measure_opts o;
  cwm_measure_opts_default(&o);
  CHECK(o.threads == 1 && o.repeats == 5 && o.batch == 4 && o.check == 1 && o.seed == 1);
  CHECK(o.build_jobs >= 1 && o.cc && o.cflags && o.tol == 1e-5);
}

static cwm_reference *test_reference(void) {
  cwm_measure_opts o = opts();
  cwm_candidate rc = cand(k_ref, "k_ref");
  cwm_reference *ref = NULL;
  cwm_err err = {0};
  CHECKF(cwm_reference_compute(&o, &rc, 1, &ref, &err) == CWM_OK, "%s", err.msg);
  if (!ref) return NULL;
  CHECK(ref->len == N && ref->red_len == 1);
  float a[N], b[N];
  cwm_measure_fill(a, N, o.seed, 0);
  cwm_measure_fill(b, N, o.seed, 1);
  int bad = 0;
  for (int i = 0; i < N; i++) bad += ref->out[i] != a[i] + b[i];
  CHECKF(bad == 0, "%d reference values differ", bad);

  /* Find the .ref file; the next process (here: the next call) loads it without building. */
  char refpath[4400] = "";
  DIR *d = opendir(g_dir);
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strstr(e->d_name, ".ref")) snprintf(refpath, sizeof refpath, "%s/%s", g_dir, e->d_name);
  if (d) closedir(d);
  CHECK(refpath[0] != 0);
  char *so[1];
  cwm_result r;
  cwm_build(&o, &rc, 1, so, &r, &err);
  if (so[0]) unlink(so[0]);
  free(so[0]);
  long runs = cwm_measure_compiler_runs();
  cwm_reference *again = NULL;
  CHECK(cwm_reference_compute(&o, &rc, 1, &again, &err) == CWM_OK);
  CHECK(cwm_measure_compiler_runs() == runs);
  CHECK(again && memcmp(again->out, ref->out, sizeof(float) * N) == 0);
  cwm_reference_free(again);

  /* A truncated file is ignored and recomputed (and rewritten whole). */
  struct stat sb;
  CHECK(stat(refpath, &sb) == 0);
  off_t full = sb.st_size;
  CHECK(truncate(refpath, full / 2) == 0);
  again = NULL;
  CHECK(cwm_reference_compute(&o, &rc, 1, &again, &err) == CWM_OK);
  CHECK(cwm_measure_compiler_runs() == runs + 1);
  CHECK(again && memcmp(again->out, ref->out, sizeof(float) * N) == 0);
  CHECK(stat(refpath, &sb) == 0 && sb.st_size == full);
  cwm_reference_free(again);
  return ref;
}

static void test_mixed(const cwm_reference *ref) {
  char pidfile[4200];
  snprintf(pidfile, sizeof pidfile, "%s/sleeper.pid", g_dir);
  char *forker = forker_body(pidfile);
  cwm_candidate c[11] = {
      cand(k_add, "k_add"),   cand(k_wrong, "k_wrong"), cand(k_unwritten, "k_unwritten"),
      cand(k_bad, "k_bad"),   cand(k_segv, "k_segv"),   cand(k_loop, "k_loop"),
      cand(k_add2, "k_add2"), cand(k_abort, "k_abort"), cand(k_add, "k_add"),
      cand(forker, "k_forker"), cand(k_add3, "k_add3")};
  cwm_result res[11];
  cwm_measure_opts o = opts();
  cwm_err err = {0};
  double t0 = cwm_now();
  int rc = cwm_measure(&o, c, 11, ref, res, &err);
  double dt = cwm_now() - t0;
  CHECKF(rc == CWM_OK, "%s", err.msg);
  CHECKF(dt < 15, "took %gs", dt);
  const int expect[11] = {CWM_MERR_NONE,        CWM_MERR_WRONG_ANSWER, CWM_MERR_WRONG_ANSWER,
                          CWM_MERR_COMPILE_HOST, CWM_MERR_RUNTIME,     CWM_MERR_RUN_TIMEOUT,
                          CWM_MERR_NONE,        CWM_MERR_RUNTIME,      CWM_MERR_NONE,
                          SANDBOXED ? CWM_MERR_RUNTIME : CWM_MERR_NONE, CWM_MERR_NONE};
  for (int i = 0; i < 11; i++) {
    CHECKF(res[i].error == expect[i], "%s: %s (%s), expected %s", c[i].entry,
           cwm_merr_name(res[i].error), res[i].msg, cwm_merr_name(expect[i]));
    if (expect[i] == CWM_MERR_NONE) {
      CHECKF(res[i].median > 0 && res[i].median < 1e-2, "%s median %g", c[i].entry, res[i].median);
      CHECK(res[i].ncosts == 3);
      CHECK((i == 8 || res[i].build_s > 0) && res[i].run_s > 0); /* 8 repeats 0: built once */
    } else {
      CHECK(res[i].median == 1e10);
    }
  }
  CHECKF(strstr(res[1].msg, "out[17]") != NULL, "%s", res[1].msg);
  CHECKF(strstr(res[2].msg, "out[999] = nan") != NULL, "%s", res[2].msg);
  CHECKF(strstr(res[3].msg, "error") && strstr(res[3].msg, "k_bad.c:2"), "%s", res[3].msg);
  CHECKF(SANITIZED || strstr(res[4].msg, "SIGSEGV") != NULL, "%s", res[4].msg);
  CHECKF(strstr(res[7].msg, "SIGABRT") != NULL, "%s", res[7].msg);
  CHECKF(res[5].run_s >= 0.9 && res[5].run_s < 3, "loop run_s %g", res[5].run_s);

  /* The sandbox kills the forker at fork (SIGSYS); unsandboxed, its grandchild died with its
   * process group. */
  char pidtext[32] = "";
  ssize_t pidlen = readlink(pidfile, pidtext, sizeof pidtext - 1);
  int spid = pidlen > 0 ? atoi(pidtext) : 0;
  if (SANDBOXED) {
    CHECKF(strstr(res[9].msg, "SIGSYS") != NULL && pidlen < 0, "k_forker: %s, pid %d", res[9].msg, spid);
  } else {
    CHECKF(spid > 0 && proc_gone(spid), "sleeper %d still running", spid);
  }
  if (spid > 0 && !proc_gone(spid)) kill(spid, SIGKILL);
  free(forker);

  /* Cache: building the good ones again starts no compiler. */
  long runs = cwm_measure_compiler_runs();
  char *so[3];
  cwm_result r3[3];
  cwm_candidate again[3] = {c[0], c[6], c[10]};
  CHECK(cwm_build(&o, again, 3, so, r3, &err) == CWM_OK);
  CHECK(cwm_measure_compiler_runs() == runs);
  for (int i = 0; i < 3; i++) {
    CHECK(so[i] != NULL && r3[i].error == CWM_MERR_NONE && r3[i].build_s == 0);
    free(so[i]);
  }
}

/* Timings on one host take turns: while another process holds <cache>/timing-<host>.lock, a
 * measurement waits for it; and each result names the host. */
static void test_timing_lock(const cwm_reference *ref) {
  cwm_measure_opts o = opts();
  cwm_candidate c = cand(k_add, "k_add");
  cwm_result res;
  cwm_err err = {0};
  CHECK(cwm_measure(&o, &c, 1, ref, &res, &err) == CWM_OK && res.error == 0); /* built and cached */
  char host[64], path[4300];
  cwm_hostname(host, sizeof host);
  CHECKF(strcmp(res.host, host) == 0, "result host '%s', expected '%s'", res.host, host);
  snprintf(path, sizeof path, "%s/timing-%s.lock", g_dir, host);
  int sync[2];
  CHECK(pipe(sync) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) _exit(1);
    if (write(sync[1], "x", 1) != 1) _exit(1);
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
    _exit(0);
  }
  char x;
  CHECK(read(sync[0], &x, 1) == 1);
  double t0 = cwm_now();
  CHECK(cwm_measure(&o, &c, 1, ref, &res, &err) == CWM_OK && res.error == 0);
  double dt = cwm_now() - t0;
  CHECKF(dt > 0.8, "measured in %.2f s while another process held the timing lock for 1 s", dt);
  int st;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  close(sync[0]);
  close(sync[1]);
}

/* slow_cutoff_s: a kernel whose warm-up calls all outlast it is timed by the fastest of them
 * alone; the same kernel without the cutoff (or under a cutoff it beats) gets its repeats. */
static void test_slow_cutoff(const cwm_reference *ref) {
  cwm_measure_opts o = opts();
  cwm_candidate c[2] = {cand(k_add, "k_add"), cand(k_add2, "k_add2")};
  cwm_result r[2];
  cwm_err err = {0};
  o.slow_cutoff_s = 1e-12;
  CHECKF(cwm_measure(&o, c, 1, ref, r, &err) == CWM_OK, "%s", err.msg);
  CHECKF(r[0].error == CWM_MERR_NONE && r[0].ncosts == 1 && r[0].median > 0, "%s: %d costs", cwm_merr_name(r[0].error),
         r[0].ncosts);
  o.slow_cutoff_s = 100;
  CHECKF(cwm_measure(&o, c + 1, 1, ref, r + 1, &err) == CWM_OK, "%s", err.msg);
  CHECKF(r[1].error == CWM_MERR_NONE && r[1].ncosts == o.repeats, "%d costs", r[1].ncosts);
  /* the cut-off is judged on a warm call: a fast kernel with a slow first call gets its repeats,
   * and its time is the warm one (it was recorded as the 30 ms cold call) */
  cwm_candidate cs = cand(k_coldstart, "k_coldstart");
  o.slow_cutoff_s = 0.005;
  CHECKF(cwm_measure(&o, &cs, 1, ref, r, &err) == CWM_OK, "%s", err.msg);
  CHECKF(r[0].error == CWM_MERR_NONE && r[0].ncosts == o.repeats && r[0].median < 0.005, "%s: %d costs, median %g s",
         cwm_merr_name(r[0].error), r[0].ncosts, r[0].median);
  /* ... and on the fastest of several warm calls, and every repeat comes after the warm-up: a
   * kernel slow for its first five calls is neither cut off (its first four warm calls are 10 ms, twice the
   * cut-off) nor timed on a slow call, with the cut-off or without */
  for (int cut = 0; cut < 2; cut++) {
    cwm_candidate ss = cand(k_slowstart, "k_slowstart");
    o.slow_cutoff_s = cut ? 0.005 : 0;
    CHECKF(cwm_measure(&o, &ss, 1, ref, r, &err) == CWM_OK, "%s", err.msg);
    CHECKF(r[0].error == CWM_MERR_NONE && r[0].ncosts == o.repeats, "cut-off %g: %s, %d costs", o.slow_cutoff_s,
           cwm_merr_name(r[0].error), r[0].ncosts);
    for (int k = 0; k < r[0].ncosts; k++)
      CHECKF(r[0].costs[k] < 0.001, "cut-off %g: repeat %d took %g s a call (a slow warm-up call)", o.slow_cutoff_s, k,
             r[0].costs[k]);
  }
}

/* Unbounded allocation hits RLIMIT_AS in the child: malloc fails and the kernel crashes. Its own
 * call with a longer time-out, since first-touching 256 MiB can take a second on a VM. */
static void test_hog(void) {
  if (SANITIZED) return;
  cwm_measure_opts o = opts();
  o.run_timeout_s = 20;
  cwm_candidate c = cand(k_hog, "k_hog");
  cwm_result r;
  cwm_err err = {0};
  CHECKF(cwm_measure(&o, &c, 1, NULL, &r, &err) == CWM_OK, "%s", err.msg);
  CHECKF(r.error == CWM_MERR_RUNTIME && strstr(r.msg, "SIGSEGV"), "k_hog: %s (%s)",
         cwm_merr_name(r.error), r.msg);
}

/* Two identical new candidates in one call compile once; an OpenMP kernel runs on 2 threads;
 * the cache-flush path works. */
static void test_dedupe_omp(const cwm_reference *ref) {
  cwm_measure_opts o = opts();
  o.threads = 2;
  o.flush_cache = 1;
  o.run_timeout_s = 5;
  o.mem_limit_mb = 1024; /* thread stacks and the 64 MiB flush buffer */
  cwm_candidate c[2] = {cand(k_omp, "k_omp"), cand(k_omp, "k_omp")};
  cwm_result res[2];
  cwm_err err = {0};
  long runs = cwm_measure_compiler_runs();
  CHECKF(cwm_measure(&o, c, 2, ref, res, &err) == CWM_OK, "%s", err.msg);
  CHECK(cwm_measure_compiler_runs() == runs + 1);
  for (int i = 0; i < 2; i++)
    CHECKF(res[i].error == CWM_MERR_NONE && res[i].median > 0, "k_omp: %s %s",
           cwm_merr_name(res[i].error), res[i].msg);
  CHECKF(getenv("OMP_NUM_THREADS") == NULL, "the child's environment leaked into the parent");
}

static void omp_nothing(void *data) { (void)data; }

/* A parent that has run an OpenMP team of 2 threads (as XGBoost's predictions do inside cwm tune)
 * still times a 2-thread kernel: without the team released before the fork, the kernel's first
 * parallel region waits for the parent's threads until the time-out. */
static void test_parent_omp(const cwm_reference *ref) {
  void *g = dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL);
  void *sym = g ? dlsym(g, "GOMP_parallel") : NULL;
  if (!sym) {
    fprintf(stderr, "no libgomp: the parent's OpenMP team is not tested\n");
    return;
  }
  void (*par)(void (*)(void *), void *, unsigned, unsigned);
  *(void **)&par = sym;
  par(omp_nothing, NULL, 2, 0);
  cwm_measure_opts o = opts();
  o.threads = 2;
  o.run_timeout_s = 5;
  o.mem_limit_mb = 1024;
  cwm_candidate c = cand(k_omp, "k_omp");
  cwm_result r;
  cwm_err err = {0};
  CHECKF(cwm_measure(&o, &c, 1, ref, &r, &err) == CWM_OK, "%s", err.msg);
  CHECKF(r.error == CWM_MERR_NONE && r.median > 0 && r.median < 0.01, "k_omp after the parent's team: %s %s",
         cwm_merr_name(r.error), r.msg);
}

static void write_script(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fputs(text, f);
  fclose(f);
  chmod(path, 0755);
}

static void test_infrastructure(void) {
  cwm_candidate c[2] = {cand(k_add, "k_inf"), cand(k_add2, "k_inf2")};
  char *so[2];
  cwm_result res[2];
  cwm_err err = {0};

  cwm_measure_opts o = opts();
  o.cc = "/nonexistent/cc";
  int rc = cwm_build(&o, c, 2, so, res, &err);
  CHECKF(rc == CWM_ECOMPILER && strstr(err.msg, "not found") && strstr(err.msg, "/nonexistent/cc"),
         "rc %d: %s", rc, err.msg);
  CHECK(so[0] == NULL && so[1] == NULL);

  /* A compiler that hangs: killed, with its whole group, at the build time-out. */
  char script[4200];
  snprintf(script, sizeof script, "%s/slowcc.sh", g_dir);
  write_script(script, "#!/bin/sh\nsleep 30\n");
  o = opts();
  o.cc = script;
  o.build_timeout_s = 0.3;
  double t0 = cwm_now();
  rc = cwm_build(&o, c, 1, so, res, &err);
  CHECKF(rc == CWM_OK && res[0].error == CWM_MERR_BUILD_TIMEOUT && so[0] == NULL, "rc %d: %s %s", rc,
         cwm_merr_name(res[0].error), res[0].msg);
  CHECK(cwm_now() - t0 < 2);

  /* A compiler that fails on everything: the toolchain is blamed, not the candidate. */
  snprintf(script, sizeof script, "%s/badcc.sh", g_dir);
  write_script(script, "#!/bin/sh\necho 'cc1: error: unrecognized option' >&2\nexit 1\n");
  o.cc = script;
  o.build_timeout_s = 10;
  rc = cwm_build(&o, c, 2, so, res, &err);
  CHECKF(rc == CWM_ECOMPILER && strstr(err.msg, "unrecognized option"), "rc %d: %s", rc, err.msg);
  CHECK(so[0] == NULL && so[1] == NULL);

  /* Unwritable cache directory: a path below a regular file fails even for root. */
  char file[4200], bad[4300];
  snprintf(file, sizeof file, "%s/plainfile", g_dir);
  write_script(file, "x");
  snprintf(bad, sizeof bad, "%s/sub", file);
  o = opts();
  o.cache_dir = bad;
  rc = cwm_build(&o, c, 2, so, res, &err);
  CHECKF(rc == CWM_EIO && strstr(err.msg, file), "rc %d: %s", rc, err.msg);
  cwm_result mres[2];
  rc = cwm_measure(&o, c, 2, NULL, mres, &err);
  CHECK(rc == CWM_EIO);
}

static int file_exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

static void age_file(const char *p, long seconds) {
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= seconds;
  t[1] = t[0];
  utimensat(AT_FDCWD, p, t, 0);
}

/* The cache: a private directory, sealed entries (a damaged object is rebuilt, not loaded), the
 * size bound (least recently used first) and stale temporaries. */
static void test_cache(void) {
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/cache-a", g_dir);
  cwm_measure_opts o = opts();
  o.cache_dir = dir;
  cwm_candidate c[1] = {cand(ADD_BODY("cache_add"), "cache_add")};
  char *so[1];
  cwm_result res[1];
  cwm_err err = {0};
  int rc = cwm_build(&o, c, 1, so, res, &err);
  CHECKF(rc == CWM_OK && so[0], "rc %d: %s", rc, err.msg);
  struct stat sb;
  CHECK(stat(dir, &sb) == 0 && (sb.st_mode & 0777) == 0700);
  char sum[4300];
  snprintf(sum, sizeof sum, "%.*s.sum", so[0] ? (int)strlen(so[0]) - 3 : 0, so[0] ? so[0] : "");
  CHECKF(file_exists(sum), "no seal %s", sum);

  /* a truncated object is rebuilt, and the rebuilt one runs */
  if (so[0]) {
    CHECK(truncate(so[0], 100) == 0);
    long runs = cwm_measure_compiler_runs();
    char *so2[1];
    rc = cwm_build(&o, c, 1, so2, res, &err);
    CHECKF(rc == CWM_OK && so2[0] && cwm_measure_compiler_runs() == runs + 1, "rc %d: %s", rc, err.msg);
    CHECK(stat(so[0], &sb) == 0 && sb.st_size > 100);
    cwm_result mr[1];
    rc = cwm_measure(&o, c, 1, NULL, mr, &err);
    CHECKF(rc == CWM_OK && mr[0].error == CWM_MERR_NONE, "rc %d error %d: %s", rc, mr[0].error, mr[0].msg);
    /* and an intact one is a hit: nothing compiled */
    free(so2[0]);
    runs = cwm_measure_compiler_runs();
    rc = cwm_build(&o, c, 1, so2, res, &err);
    CHECK(rc == CWM_OK && cwm_measure_compiler_runs() == runs);
    free(so2[0]);
  }

  /* a directory open to others is made private; one of another user is refused */
  chmod(dir, 0777);
  free(so[0]);
  rc = cwm_build(&o, c, 1, so, res, &err);
  CHECK(rc == CWM_OK && stat(dir, &sb) == 0 && (sb.st_mode & 0777) == 0700);
  if (geteuid() == 0) {
    char other[4200];
    snprintf(other, sizeof other, "%s/cache-nobody", g_dir);
    mkdir(other, 0700);
    CHECK(chown(other, 65534, 65534) == 0);
    o.cache_dir = other;
    char *so3[1];
    rc = cwm_build(&o, c, 1, so3, res, &err);
    CHECKF(rc == CWM_EIO && strstr(err.msg, "belongs to uid 65534"), "rc %d: %s", rc, err.msg);
    o.cache_dir = dir;
  } else {
    printf("skipped: a cache directory of another user (needs root to make one)\n");
  }

  /* the bound: 1 MB of old objects goes, least recently used first; the seal goes with its object */
  char old1[4300], old2[4300], tmpold[4300], tmpnew[4300];
  snprintf(old1, sizeof old1, "%s/00000000000000a1.so", dir);
  snprintf(old2, sizeof old2, "%s/00000000000000a2.so", dir);
  char *blob = cwm_xcalloc(1, 700 << 10);
  cwm_write_file_atomic(old1, blob, 700 << 10, NULL);
  cwm_write_file_atomic(old2, blob, 700 << 10, NULL);
  free(blob);
  age_file(old1, 7200);
  age_file(old2, 3600);
  snprintf(tmpold, sizeof tmpold, "%s/.tmp-1-1.c", dir);
  snprintf(tmpnew, sizeof tmpnew, "%s/.tmp-1-2.c", dir);
  cwm_write_file_atomic(tmpold, "x", 1, NULL);
  cwm_write_file_atomic(tmpnew, "x", 1, NULL);
  age_file(tmpold, 7200);
  o.cache_max_mb = 1;
  cwm_measure_cache_tidy(&o);
  CHECK(!file_exists(old1));     /* the oldest goes first */
  CHECK(file_exists(old2));      /* and no more than the bound needs */
  CHECK(!file_exists(tmpold));   /* a temporary of a killed run */
  CHECK(file_exists(tmpnew));    /* a temporary that may be in use stays */
  CHECK(so[0] && file_exists(so[0])); /* the object just used is the newest */
  unlink(tmpnew);
  free(so[0]);
}

int main(void) {
  const char *base = getenv("CWM_CACHE_DIR");
  if (!base || !*base) base = "/tmp";
  cwm_mkdir_p(base, NULL);
  snprintf(g_dir, sizeof g_dir, "%s/test_measure-XXXXXX", base);
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    return 1;
  }
  int fds0 = count_fds();
  struct rlimit as0, as1;
  getrlimit(RLIMIT_AS, &as0);

  test_names();
  test_fill_and_check();
  cwm_reference *ref = test_reference();
  if (ref) {
    test_mixed(ref);
    test_slow_cutoff(ref);
    test_timing_lock(ref);
    test_dedupe_omp(ref);
    test_parent_omp(ref);
  }
  test_hog();
  test_infrastructure();
  test_cache();
  cwm_reference_free(ref);

  /* The parent is as it was: no descriptor leaked, no child left, no limit changed, and no
   * temporary file left in the cache. */
  CHECKF(count_fds() == fds0, "fds %d -> %d", fds0, count_fds());
  errno = 0;
  CHECK(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
  getrlimit(RLIMIT_AS, &as1);
  CHECK(as0.rlim_cur == as1.rlim_cur);
  DIR *d = opendir(g_dir);
  struct dirent *e;
  while (d && (e = readdir(d)))
    CHECKF(strncmp(e->d_name, ".tmp", 4) && !strstr(e->d_name, ".tmp.") && strncmp(e->d_name, ".probe", 6),
           "leftover %s", e->d_name);
  if (d) closedir(d);
  nftw(g_dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
  return test_done();
}

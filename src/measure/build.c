/* build.c: the builder half of measure.h. Turns candidate C bodies into shared objects in a cache
 * directory keyed by source hash, compiling batches of kernels in parallel compiler processes
 * (fork/execvp, never a shell) with a time-out each, and retrying a failed batch member by member. */
#define _GNU_SOURCE
#include "measure_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PATH_CAP 4096

/* Compiler processes started by this process; lets tests prove that a cache hit compiles nothing. */
static long g_compiler_runs;
long cwm_measure_compiler_runs(void) { return g_compiler_runs; }

/* Distinguishes the temporary files of successive jobs of one process (the pid separates processes
 * sharing a cache directory). */
static unsigned long g_tmp_seq;

void cwm_measure_opts_default(cwm_measure_opts *o) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  /* cache_dir NULL: cwm_measure_cache_dir's fallback */
  *o = (cwm_measure_opts){.threads = 1, .repeats = 5, .min_repeat_ms = 50, .budget_s = 1.0, .run_timeout_s = 10,
                          .build_timeout_s = 60, .mem_limit_mb = 4096, .build_jobs = ncpu > 0 ? (int)ncpu : 1,
                          .batch = 4, .check = 1, .tol = 1e-5, .cc = "gcc",
                          .cflags = "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -fPIC -shared",
                          .cache_max_mb = 2048, .seed = 1};
}

const char *cwm_merr_name(int e) {
  static const char *const names[] = {"none",          "instantiation", "compile_host",
                                      "compile_device", "runtime",       "wrong_answer",
                                      "build_timeout", "run_timeout",   "unknown"};
  if (e < 0 || e > CWM_MERR_UNKNOWN) return "unknown";
  return names[e];
}

/* Standard headers only: the generated code must build with any C11 compiler and the prelude is
 * part of every cache key, so it stays small and stable. */
const char *cwm_measure_prelude(void) {
  return "#include <math.h>\n"
         "#include <stdlib.h>\n"
         "#include <string.h>\n"
         "#include <stdint.h>\n"
         "#include <stddef.h>\n"
         "#include <float.h>\n";
}

/* ---- argv ---------------------------------------------------------------------------------- */

typedef struct {
  char **v;
  int n, cap;
} argv_t;

static void argv_push(argv_t *a, const char *s) {
  if (a->n + 2 > a->cap) {
    a->cap = a->cap ? a->cap * 2 : 16;
    a->v = cwm_xrealloc(a->v, sizeof(char *) * (size_t)a->cap);
  }
  a->v[a->n++] = s ? cwm_xstrdup(s) : NULL;
  a->v[a->n] = NULL;
}

/* Splits on blanks: cc may be "ccache gcc" and cflags a flag list; no quoting, by design, since
 * nothing here goes through a shell. */
static void argv_split(argv_t *a, const char *s) {
  while (s && *s) {
    while (*s == ' ' || *s == '\t') s++;
    const char *e = s;
    while (*e && *e != ' ' && *e != '\t') e++;
    if (e > s) {
      char *t = cwm_xmalloc((size_t)(e - s) + 1);
      memcpy(t, s, (size_t)(e - s));
      t[e - s] = 0;
      argv_push(a, t);
      free(t);
    }
    s = e;
  }
}

static void argv_free(argv_t *a) {
  for (int i = 0; i < a->n; i++) free(a->v[i]);
  free(a->v);
  a->v = NULL;
  a->n = a->cap = 0;
}

/* ---- one compiler process ------------------------------------------------------------------ */

/* Starts `base... -o so c -lm` with stdout and stderr in errf, in its own process group so a
 * time-out can kill cc1/as/ld too. Exec failure is reported through a close-on-exec pipe, which
 * tells "compiler missing" apart from "compiler ran and exited 127". */
static int spawn_compiler(const argv_t *base, const char *cfile, const char *sofile,
                          const char *errf, pid_t *pid_out, cwm_err *err) {
  argv_t a = {0};
  for (int i = 0; i < base->n; i++) argv_push(&a, base->v[i]);
  argv_push(&a, "-o");
  argv_push(&a, sofile);
  argv_push(&a, cfile);
  /* The kernel may call expf/tanhf...; linking libm here keeps dlopen from depending on whether
   * the host executable happens to pull libm in. */
  argv_push(&a, "-lm");

  int efd = open(errf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (efd < 0) {
    argv_free(&a);
    return cwm_fail(err, CWM_EIO, "%s: cannot create: %s", errf, strerror(errno));
  }
  int ep[2];
  if (pipe2(ep, O_CLOEXEC) != 0) {
    close(efd);
    argv_free(&a);
    return cwm_fail(err, CWM_ECOMPILER, "cannot start the C compiler: pipe: %s", strerror(errno));
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(efd);
    close(ep[0]);
    close(ep[1]);
    argv_free(&a);
    return cwm_fail(err, CWM_ECOMPILER, "cannot start the C compiler: fork: %s", strerror(e));
  }
  if (pid == 0) {
    setpgid(0, 0);
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) dup2(nul, 0);
    dup2(efd, 1);
    dup2(efd, 2);
    setenv("LC_ALL", "C", 1); /* plain ASCII quotes in the diagnostic that becomes res.msg */
    /* The compiler of a pathological program (a huge unrolled loop nest) must not take the
     * machine: 300 CPU seconds and 8 GiB of address space per compiler process, inherited by
     * cc1 and the assembler; far above any kernel's needs (a few seconds, a few hundred MB). */
    struct rlimit cpu = {300, 301}, as = {8UL << 30, 8UL << 30};
    setrlimit(RLIMIT_CPU, &cpu);
    setrlimit(RLIMIT_AS, &as);
    execvp(a.v[0], a.v);
    int e = errno;
    ssize_t w = write(ep[1], &e, sizeof e);
    (void)w;
    _exit(127);
  }
  setpgid(pid, pid); /* both sides set it, so there is no window where kill(-pid) misses */
  g_compiler_runs++;
  close(efd);
  close(ep[1]);
  int child_errno = 0;
  ssize_t r;
  do r = read(ep[0], &child_errno, sizeof child_errno);
  while (r < 0 && errno == EINTR);
  close(ep[0]);
  if (r == (ssize_t)sizeof child_errno) {
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    unlink(errf);
    int rc;
    if (child_errno == ENOENT)
      rc = cwm_fail(err, CWM_ECOMPILER, "C compiler '%s' not found; install build-essential or set CC",
                    a.v[0]);
    else
      rc = cwm_fail(err, CWM_ECOMPILER, "C compiler '%s' cannot be executed: %s", a.v[0],
                    strerror(child_errno));
    argv_free(&a);
    return rc;
  }
  argv_free(&a);
  *pid_out = pid;
  return CWM_OK;
}

/* First diagnostic that names an error; "error:" lines win over lines merely containing "error"
 * (a function called k_error would otherwise match its "In function" line). */
static void first_error_line(const char *errf, char *msg, size_t cap, const char *fallback) {
  char *text = cwm_read_file(errf, NULL, NULL);
  const char *best = NULL, *weak = NULL, *any = NULL;
  size_t best_n = 0, weak_n = 0, any_n = 0;
  for (const char *p = text; p && *p;) {
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char line[1024];
    size_t m = n < sizeof line - 1 ? n : sizeof line - 1;
    memcpy(line, p, m);
    line[m] = 0;
    if (!best && strstr(line, "error:")) best = p, best_n = n;
    if (!weak && strstr(line, "error")) weak = p, weak_n = n;
    if (!any && m > 0) any = p, any_n = n;
    p = e ? e + 1 : p + n;
  }
  const char *s = best ? best : weak ? weak : any;
  size_t n = best ? best_n : weak ? weak_n : any_n;
  if (s) {
    if (n > cap - 1) n = cap - 1;
    memcpy(msg, s, n);
    msg[n] = 0;
  } else {
    snprintf(msg, cap, "%s", fallback);
  }
  free(text);
}

/* Waits for one compiler with a time-out; used only for the toolchain probe. 1 = ok. */
static int wait_compiler(pid_t pid, double timeout_s, int *status) {
  double t0 = cwm_now();
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return 1;
    if (r < 0 && errno != EINTR) return 0;
    if (cwm_now() - t0 > timeout_s) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      while (waitpid(pid, status, 0) < 0 && errno == EINTR) {}
      return 0;
    }
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
}

/* ---- the build --------------------------------------------------------------------------- */

typedef struct {
  int *mem;
  int nmem;
  pid_t pid;
  double t0;
  char cfile[PATH_CAP], sofile[PATH_CAP], errf[PATH_CAP];
} job_t;

typedef struct {
  const cwm_measure_opts *o;
  const cwm_candidate *c;
  const char *dir;
  argv_t base;
  char (*final)[PATH_CAP]; /* <dir>/<hex>.so per candidate */
  char **so_path;
  cwm_result *res;
  job_t **jobs;
  int njobs, capjobs;
  double timeout;
  int installed; /* objects put into the cache by this build */
} build_t;

static void tmp_names(build_t *b, job_t *j) {
  unsigned long seq = ++g_tmp_seq;
  long pid = (long)getpid();
  snprintf(j->cfile, PATH_CAP, "%s/.tmp-%ld-%lu.c", b->dir, pid, seq);
  snprintf(j->sofile, PATH_CAP, "%s/.tmp-%ld-%lu.so", b->dir, pid, seq);
  snprintf(j->errf, PATH_CAP, "%s/.tmp-%ld-%lu.err", b->dir, pid, seq);
}

static job_t *add_job(build_t *b, const int *mem, int nmem) {
  job_t *j = cwm_xcalloc(1, sizeof *j);
  j->mem = cwm_xmalloc(sizeof(int) * (size_t)nmem);
  memcpy(j->mem, mem, sizeof(int) * (size_t)nmem);
  j->nmem = nmem;
  j->pid = -1;
  if (b->njobs == b->capjobs) {
    b->capjobs = b->capjobs ? b->capjobs * 2 : 16;
    b->jobs = cwm_xrealloc(b->jobs, sizeof(job_t *) * (size_t)b->capjobs);
  }
  b->jobs[b->njobs++] = j;
  return j;
}

/* `#line` gives every diagnostic the candidate's own name and line numbers, so the message is the
 * same whether the kernel was compiled in a batch or alone. */
static void put_line_directive(cwm_buf *s, const char *entry) {
  cwm_buf_puts(s, "#line 1 \"");
  for (const char *p = entry; *p; p++) {
    char ch = *p;
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             ch == '_';
    cwm_buf_putc(s, ok ? ch : '_');
  }
  cwm_buf_puts(s, ".c\"\n");
}

static int write_source(const char *path, const char *text, cwm_err *err) {
  FILE *f = fopen(path, "wb");
  if (!f) return cwm_fail(err, CWM_EIO, "%s: cannot write: %s", path, strerror(errno));
  size_t n = strlen(text);
  int bad = fwrite(text, 1, n, f) != n;
  if (fclose(f) != 0) bad = 1;
  if (bad) {
    unlink(path);
    return cwm_fail(err, CWM_EIO, "%s: write failed", path);
  }
  return CWM_OK;
}

static int start_job(build_t *b, job_t *j, cwm_err *err) {
  tmp_names(b, j);
  cwm_buf s;
  cwm_buf_init(&s);
  cwm_buf_puts(&s, cwm_measure_prelude());
  for (int k = 0; k < j->nmem; k++) {
    const cwm_candidate *c = &b->c[j->mem[k]];
    put_line_directive(&s, c->entry);
    cwm_buf_puts(&s, c->body);
    cwm_buf_puts(&s, "\n");
  }
  int rc = write_source(j->cfile, s.s, err);
  cwm_buf_free(&s);
  if (rc) return rc;
  if (b->o->verbose)
    fprintf(stderr, "cwm: compiling %d kernel(s), first %s\n", j->nmem, b->c[j->mem[0]].entry);
  j->t0 = cwm_now();
  rc = spawn_compiler(&b->base, j->cfile, j->sofile, j->errf, &j->pid, err);
  if (rc) {
    unlink(j->cfile);
    j->pid = -1;
  }
  return rc;
}

static void unlink_job_files(job_t *j) {
  unlink(j->cfile);
  unlink(j->sofile);
  unlink(j->errf);
}

static int copy_file(const char *from, const char *to) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  if (in < 0) return -1;
  int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (out < 0) {
    close(in);
    return -1;
  }
  char buf[65536];
  int bad = 0;
  for (;;) {
    ssize_t r = read(in, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) { bad = 1; break; }
    if (r == 0) break;
    for (ssize_t off = 0; off < r;) {
      ssize_t w = write(out, buf + off, (size_t)(r - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) { bad = 1; break; }
      off += w;
    }
    if (bad) break;
  }
  close(in);
  if (close(out) != 0) bad = 1;
  if (bad) unlink(to);
  return bad ? -1 : 0;
}

/* Each member's object appears under its real name by rename only, so a crash never leaves a
 * half-written .so where a later run would take it for a cache hit. */
static int install(build_t *b, job_t *j, cwm_err *err) {
  /* every member is a link to (or copy of) the job's object: one seal serves them all */
  char seal[SEAL_MAX];
  int sealed = cache_seal_text(j->sofile, seal, sizeof seal) == 0;
  for (int k = 0; k < j->nmem; k++) {
    int i = j->mem[k];
    char tmp[PATH_CAP + 64];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lu", b->final[i], (long)getpid(), ++g_tmp_seq);
    if (link(j->sofile, tmp) != 0 && copy_file(j->sofile, tmp) != 0)
      return cwm_fail(err, CWM_EIO, "%s: cannot write into cache directory %s: %s", tmp, b->dir,
                      strerror(errno));
    if (rename(tmp, b->final[i]) != 0) {
      int e = errno;
      unlink(tmp);
      return cwm_fail(err, CWM_EIO, "%s: cannot rename into place: %s", b->final[i], strerror(e));
    }
    if (sealed) cache_write_seal(b->final[i], seal);
    b->so_path[i] = cwm_xstrdup(b->final[i]);
    b->installed++;
  }
  return CWM_OK;
}

/* Whether cc + cflags can build a trivial kernel; asked once per configuration, and only after a
 * single-candidate compile failed, so a broken toolchain (bad flag, no libgomp) is reported as
 * CWM_ECOMPILER instead of blaming every candidate. */
static int probe_toolchain(build_t *b, cwm_err *err) {
  static uint64_t verified[8];
  static int nverified;
  cwm_buf key;
  cwm_buf_init(&key);
  cwm_buf_printf(&key, "%s\n%s", b->o->cc, b->o->cflags ? b->o->cflags : "");
  uint64_t h = cwm_hash64(key.s, key.len);
  cwm_buf_free(&key);
  for (int i = 0; i < nverified; i++)
    if (verified[i] == h) return CWM_OK;

  job_t j;
  memset(&j, 0, sizeof j);
  tmp_names(b, &j);
  cwm_buf s;
  cwm_buf_init(&s);
  cwm_buf_puts(&s, cwm_measure_prelude());
  cwm_buf_puts(&s, "void cwm_probe_kernel(float *const *args) { args[0][0] = 0.0f; }\n");
  int rc = write_source(j.cfile, s.s, err);
  cwm_buf_free(&s);
  if (rc) return rc;
  pid_t pid;
  rc = spawn_compiler(&b->base, j.cfile, j.sofile, j.errf, &pid, err);
  if (rc) {
    unlink_job_files(&j);
    return rc;
  }
  int st = 0;
  int done = wait_compiler(pid, b->timeout, &st);
  if (done && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    unlink_job_files(&j);
    if (nverified < 8) verified[nverified++] = h;
    return CWM_OK;
  }
  char line[256];
  first_error_line(j.errf, line, sizeof line, done ? "no diagnostic" : "timed out");
  unlink_job_files(&j);
  return cwm_fail(err, CWM_ECOMPILER, "C compiler '%s' with flags '%s' cannot build a trivial kernel: %s",
                  b->base.v[0], b->o->cflags ? b->o->cflags : "", line);
}

/* A finished (or killed) compiler: install the objects, split a failed batch, or blame the one
 * member. Returns non-zero only for infrastructure failures. */
static int finish_job(build_t *b, job_t *j, int status, int timed_out, cwm_err *err) {
  double dt = cwm_now() - j->t0;
  for (int k = 0; k < j->nmem; k++) b->res[j->mem[k]].build_s += dt / j->nmem;
  int ok = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0 && access(j->sofile, F_OK) == 0;
  int rc = CWM_OK;
  if (ok) {
    rc = install(b, j, err);
  } else if (j->nmem > 1) {
    /* Retry alone, so the error (or the time-out) lands on the candidate that caused it. */
    if (b->o->verbose)
      fprintf(stderr, "cwm: batch of %d failed to build; compiling its members one by one\n", j->nmem);
    for (int k = 0; k < j->nmem; k++) add_job(b, &j->mem[k], 1);
  } else {
    int i = j->mem[0];
    cwm_result *r = &b->res[i];
    if (timed_out) {
      r->error = CWM_MERR_BUILD_TIMEOUT;
      snprintf(r->msg, sizeof r->msg, "compiler exceeded the %gs build time-out", b->timeout);
    } else {
      rc = probe_toolchain(b, err);
      r->error = CWM_MERR_COMPILE_HOST;
      char fb[64];
      if (WIFSIGNALED(status)) snprintf(fb, sizeof fb, "compiler killed by signal %d", WTERMSIG(status));
      else snprintf(fb, sizeof fb, "compiler exited with status %d", WEXITSTATUS(status));
      first_error_line(j->errf, r->msg, sizeof r->msg, fb);
    }
    if (b->o->verbose) fprintf(stderr, "cwm: %s: %s: %s\n", b->c[i].entry, cwm_merr_name(r->error), r->msg);
  }
  unlink_job_files(j);
  return rc;
}

static void kill_running(job_t **run, int nrun) {
  for (int k = 0; k < nrun; k++) {
    int st;
    kill(-run[k]->pid, SIGKILL);
    kill(run[k]->pid, SIGKILL);
    while (waitpid(run[k]->pid, &st, 0) < 0 && errno == EINTR) {}
    unlink_job_files(run[k]);
  }
}

/* Runs the job list with at most build_jobs compilers at once; jobs appended while running (the
 * retries of failed batches) are picked up by the same loop. */
static int run_jobs(build_t *b, cwm_err *err) {
  int maxrun = b->o->build_jobs > 0 ? b->o->build_jobs : 1;
  job_t **run = cwm_xcalloc((size_t)maxrun, sizeof *run);
  int nrun = 0, next = 0, rc = CWM_OK;
  while (rc == CWM_OK && (next < b->njobs || nrun > 0)) {
    while (rc == CWM_OK && nrun < maxrun && next < b->njobs) {
      job_t *j = b->jobs[next++];
      rc = start_job(b, j, err);
      if (rc == CWM_OK) run[nrun++] = j;
    }
    if (rc) break;
    int progressed = 0;
    for (int k = 0; k < nrun && rc == CWM_OK;) {
      job_t *j = run[k];
      int st = 0, timed_out = 0;
      pid_t r = waitpid(j->pid, &st, WNOHANG);
      if (r == 0 && cwm_now() - j->t0 > b->timeout) {
        kill(-j->pid, SIGKILL);
        kill(j->pid, SIGKILL);
        while ((r = waitpid(j->pid, &st, 0)) < 0 && errno == EINTR) {}
        timed_out = 1;
      }
      if (r == j->pid || (r < 0 && errno != EINTR)) {
        run[k] = run[--nrun];
        progressed = 1;
        if (r < 0) st = 1 << 8; /* child already reaped elsewhere: count as a failed compile */
        rc = finish_job(b, j, st, timed_out, err);
      } else {
        k++;
      }
    }
    if (!progressed && rc == CWM_OK) {
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
    }
  }
  if (rc) kill_running(run, nrun);
  free(run);
  return rc;
}

static uint64_t cand_key(const cwm_measure_opts *o, const cwm_candidate *c) {
  cwm_buf k;
  cwm_buf_init(&k);
  cwm_buf_puts(&k, cwm_measure_prelude());
  cwm_buf_putc(&k, '\x01');
  cwm_buf_puts(&k, c->entry);
  cwm_buf_putc(&k, '\x01');
  cwm_buf_puts(&k, c->body);
  cwm_buf_putc(&k, '\x01');
  cwm_buf_puts(&k, o->cc ? o->cc : "gcc");
  cwm_buf_putc(&k, '\x01');
  cwm_buf_puts(&k, o->cflags ? o->cflags : "");
  uint64_t h = cwm_hash64(k.s, k.len);
  cwm_buf_free(&k);
  return h;
}

/* Trims the cache on the first build of a process, then every 64 new objects. */
static void maybe_tidy(const build_t *b) {
  static long since_tidy = -1;
  if (since_tidy < 0 || (since_tidy += b->installed) >= 64) {
    cache_tidy(b->dir, b->o->cache_max_mb);
    since_tidy = 0;
  }
}

int cwm_build(const cwm_measure_opts *o, const cwm_candidate *c, int n, char **so_path,
              cwm_result *res, cwm_err *err) {
  if (n <= 0) return CWM_OK;
  cwm_result *own_res = NULL;
  if (!res) res = own_res = cwm_xcalloc((size_t)n, sizeof *res);
  for (int i = 0; i < n; i++) {
    so_path[i] = NULL;
    memset(&res[i], 0, sizeof res[i]);
    res[i].median = 1e10;
  }
  build_t b;
  memset(&b, 0, sizeof b);
  b.o = o;
  b.c = c;
  b.so_path = so_path;
  b.res = res;
  b.dir = cwm_measure_cache_dir(o);
  b.timeout = o->build_timeout_s > 0 ? o->build_timeout_s : 60;
  int rc = cache_prepare(b.dir, err);
  if (rc) {
    if (err && err->code == CWM_EIO && !strstr(err->msg, b.dir)) {
      char m[sizeof err->msg];
      snprintf(m, sizeof m, "%s", err->msg);
      cwm_fail(err, CWM_EIO, "cache directory %s: %s", b.dir, m);
    }
    free(own_res);
    return rc;
  }
  argv_split(&b.base, o->cc ? o->cc : "gcc");
  if (b.base.n == 0) {
    argv_free(&b.base);
    free(own_res);
    return cwm_fail(err, CWM_ECOMPILER, "no C compiler configured; set CC");
  }
  argv_split(&b.base, o->cflags);

  b.final = cwm_xcalloc((size_t)n, sizeof *b.final);
  uint64_t *key = cwm_xcalloc((size_t)n, sizeof *key);
  int *owner = cwm_xmalloc(sizeof(int) * (size_t)n);   /* first miss with the same key, or -1 */
  int *miss = cwm_xmalloc(sizeof(int) * (size_t)n);
  int nmiss = 0;
  for (int i = 0; i < n; i++) {
    owner[i] = -1;
    const cwm_candidate *ci = &c[i];
    if (!ci->body || !ci->entry || !*ci->entry || ci->nargs < 1 || ci->nargs > CWM_MAX_ARGS) {
      res[i].error = CWM_MERR_INSTANTIATION;
      snprintf(res[i].msg, sizeof res[i].msg, "malformed candidate (body, entry or nargs=%d)", ci->nargs);
      continue;
    }
    key[i] = cand_key(o, ci);
    char hex[17];
    cwm_hash_hex(key[i], hex);
    snprintf(b.final[i], PATH_CAP, "%s/%s.so", b.dir, hex);
    if (cache_hit(b.final[i])) {
      so_path[i] = cwm_xstrdup(b.final[i]);
      continue;
    }
    for (int k = 0; k < nmiss; k++)
      if (key[miss[k]] == key[i]) { owner[i] = miss[k]; break; }
    if (owner[i] < 0) miss[nmiss++] = i;
  }

  /* Greedy batches in candidate order; two bodies with the same entry name would clash in one
   * translation unit, so such a pair goes to different batches. */
  int bsz = o->batch > 0 ? o->batch : 1;
  int *taken = cwm_xcalloc((size_t)(nmiss ? nmiss : 1), sizeof *taken);
  int *mem = cwm_xmalloc(sizeof(int) * (size_t)bsz);
  for (int start = 0; start < nmiss; start++) {
    if (taken[start]) continue;
    int nm = 0;
    for (int k = start; k < nmiss && nm < bsz; k++) {
      if (taken[k]) continue;
      int clash = 0;
      for (int q = 0; q < nm; q++)
        if (strcmp(c[mem[q]].entry, c[miss[k]].entry) == 0) clash = 1;
      if (clash) continue;
      mem[nm++] = miss[k];
      taken[k] = 1;
    }
    add_job(&b, mem, nm);
  }
  free(mem);
  free(taken);

  rc = run_jobs(&b, err);
  maybe_tidy(&b);

  for (int i = 0; i < n; i++) {
    int w = owner[i];
    if (w < 0) continue;
    res[i].error = res[w].error;
    memcpy(res[i].msg, res[w].msg, sizeof res[i].msg);
    if (so_path[w]) so_path[i] = cwm_xstrdup(so_path[w]);
  }
  if (rc) {
    for (int i = 0; i < n; i++) {
      free(so_path[i]);
      so_path[i] = NULL;
      if (res[i].error == CWM_MERR_NONE) {
        res[i].error = CWM_MERR_UNKNOWN;
        snprintf(res[i].msg, sizeof res[i].msg, "%.255s", err ? err->msg : "build infrastructure failed");
      }
    }
  }
  for (int i = 0; i < b.njobs; i++) {
    free(b.jobs[i]->mem);
    free(b.jobs[i]);
  }
  free(b.jobs);
  free(b.final);
  free(key);
  free(owner);
  free(miss);
  argv_free(&b.base);
  free(own_res);
  return rc;
}

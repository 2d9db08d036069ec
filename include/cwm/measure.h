/* measure.h: the builder (C source -> shared object, in parallel, cached by source hash) and the
 * runner (each candidate in its own child process with limits and a time-out, checked against a
 * reference output, then timed). A candidate that fails becomes an error kind; the caller goes on.
 * It knows nothing of states or models: it sees C source and argument sizes. */
#ifndef CWM_MEASURE_H
#define CWM_MEASURE_H

#include "cwm/record.h"
#include "cwm/util.h"

/* Error kinds, numbered as Ansor's MeasureErrorNO. */
typedef enum {
  CWM_MERR_NONE = 0,
  CWM_MERR_INSTANTIATION = 1,
  CWM_MERR_COMPILE_HOST = 2,
  CWM_MERR_COMPILE_DEVICE = 3,
  CWM_MERR_RUNTIME = 4,        /* crashed: signal, non-zero exit, resource limit */
  CWM_MERR_WRONG_ANSWER = 5,
  CWM_MERR_BUILD_TIMEOUT = 6,
  CWM_MERR_RUN_TIMEOUT = 7,
  CWM_MERR_UNKNOWN = 8
} cwm_merr;
const char *cwm_merr_name(int e);

/* One kernel to build and run. `body` is a C fragment that defines exactly one external function
 * `void <entry>(float *const *args)` (plus anything else it needs as static, with names made
 * unique by the entry name); it is compiled after cwm_measure_prelude(). args[0..nargs) are the
 * inputs in order, then the output last; arg_len[i] is each one's length in floats. */
typedef struct {
  const char *body;
  const char *entry;
  int nargs;
  long arg_len[CWM_MAX_ARGS];
  /* Inputs the kernel takes in another layout (a weight stored as the schedule reads it): input i
   * with src_len[i] > 0 is seeded as src_len[i] floats, like the reference's arg i, and converted
   * once into its arg_len[i] floats by `void <pack_entry>(float *const *src, float *const *dst)`
   * (also defined by body), before the checked call and outside the timed region. */
  const char *pack_entry;
  long src_len[CWM_MAX_ARGS];
} cwm_candidate;

struct cwm_measurer;

typedef struct {
  int threads;            /* OMP_NUM_THREADS for the child; default 1 */
  int repeats;            /* timed repeats, the median is reported; default 5 */
  double min_repeat_ms;   /* each repeat runs the kernel enough times to last this; default 50 */
  double budget_s;        /* after 3 repeats, stop once the repeats took this long; default 1 */
  double slow_cutoff_s;   /* a candidate whose checked first call and a second, warm call both take
                             longer than this is timed by the warm call alone (one cost, no
                             repeats; the cold first call of a small kernel can take 10x its
                             time, page faults and runtime start included): the search sets it to 10x
                             its best so far, since such a candidate cannot become the best and
                             timing it precisely spent most of a round on ansor's and random's
                             slowest picks; 0 = off (default, and for data-set collection) */
  int flush_cache;        /* write a 64 MiB buffer before each repeat; default 0 */
  double run_timeout_s;   /* per candidate, wall clock; default 10 */
  double build_timeout_s; /* per compiler invocation; default 60 */
  long mem_limit_mb;      /* RLIMIT_AS of the child; default 4096 */
  int build_jobs;         /* parallel compiler processes; default = online CPUs */
  int batch;              /* kernels per compiler invocation; default 4 */
  int check;              /* compare against the reference; default 1 */
  int guard_pages;        /* each argument ends within 60 bytes of an inaccessible page, so that a
                             kernel reading or writing past it dies (a runtime error) instead of
                             reading the next buffer; default 0 (tests set it; the timed layout
                             is that of aligned_alloc) */
  double tol;             /* tolerance factor, see cwm_measure_check; default 1e-5 */
  const char *cc;         /* default "gcc" */
  const char *cflags;     /* default "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -fPIC -shared" */
  const char *cache_dir;  /* default NULL: /tmp/cwm-cache-<uid> (the CLI: --cache-dir, $CWM_CACHE_DIR or
                             ~/.cache/cwm); created 0700, refused when another user owns it */
  long cache_max_mb;      /* the cache is trimmed to 80% of this, least recently used first; default
                             2048, 0: no bound */
  unsigned long long seed;/* input data seed; default 1 */
  int verbose;
  /* NULL (default): cwm_measure builds and times here. Otherwise it hands each call to this
   * measurer (the MPI worker farm of dist/), which must fill the results as it would. */
  struct cwm_measurer *measurer;
} cwm_measure_opts;

void cwm_measure_opts_default(cwm_measure_opts *o);
const char *cwm_measure_prelude(void);

/* Expected output of a workload: computed once by running a reference kernel (a straightforward
 * implementation with double accumulation) on the seeded inputs. */
typedef struct {
  long len;
  float *out;
  long red_len;   /* longest reduction feeding the output; scales the tolerance */
} cwm_reference;

/* Builds and runs the reference candidate (no check, run once, generous time-out). */
int cwm_reference_compute(const cwm_measure_opts *o, const cwm_candidate *ref_kernel, long red_len,
                          cwm_reference **out, cwm_err *err);
void cwm_reference_free(cwm_reference *r);

typedef struct {
  int error;            /* cwm_merr */
  int ncosts;
  double costs[32];     /* seconds per call, one per repeat */
  double median;        /* seconds; 1e10 on error */
  double build_s, run_s;
  char msg[256];        /* first line of the compiler error, the signal, the mismatch ... */
  char host[64];        /* the host that built and timed it (cwm_hostname) */
  const cwm_target *target; /* the machine that timed it when a measurer did (owned by the
                               measurer); NULL: this process's machine */
} cwm_result;

/* Measuring elsewhere: cwm_measure(o, ...) with o->measurer set returns measure(...)'s status. */
typedef struct cwm_measurer {
  int (*measure)(struct cwm_measurer *m, const cwm_measure_opts *o, const cwm_candidate *c, int n,
                 const cwm_reference *ref, cwm_result *res, cwm_err *err);
  /* the machine every result is timed on, when they all are on one kind (the farm's workers);
   * NULL when mixed */
  const cwm_target *target;
} cwm_measurer;

/* Fills input arg i with the seeded pseudo-random data every run uses (uniform in [-1, 1)). */
void cwm_measure_fill(float *a, long n, unsigned long long seed, int arg);
/* 1 if out matches ref within tol * (1 + max|ref|) * sqrt(max(1, red_len)) everywhere (NaN fails);
 * fills msg with the first mismatch otherwise. */
int cwm_measure_check(const float *out, const cwm_reference *ref, double tol, char *msg, size_t n);

/* Builds all candidates (parallel, batched, cached), then runs them one by one with no compiler
 * running. Timings on one host never overlap: each takes an exclusive lock on
 * <cache dir>/timing-<host>.lock, so separate cwm processes (or MPI ranks) sharing a cache
 * directory on one host take turns, and hosts sharing it over NFS do not wait on each other. ref may be NULL (no check). Returns CWM_OK unless the infrastructure failed (no
 * compiler, cache directory unwritable ...); candidate failures are in res[i].error. */
int cwm_measure(const cwm_measure_opts *o, const cwm_candidate *c, int n, const cwm_reference *ref,
                cwm_result *res, cwm_err *err);

/* Builds only; so_path[i] receives an owned path or NULL with res[i] filled with the error. */
int cwm_build(const cwm_measure_opts *o, const cwm_candidate *c, int n, char **so_path,
              cwm_result *res, cwm_err *err);

/* The cache directory o would use: o->cache_dir, else /tmp/cwm-cache-<uid>. */
const char *cwm_measure_cache_dir(const cwm_measure_opts *o);
/* Compiler processes this process has started so far (tests use it to tell a cache hit). */
long cwm_measure_compiler_runs(void);
/* Trims the cache now (the builder does it on its first build and then every 64 new objects):
 * compiler temporaries over an hour old, and least recently used entries beyond o->cache_max_mb. */
void cwm_measure_cache_tidy(const cwm_measure_opts *o);
/* Wall seconds this process has spent in cwm_measure building (compilers) and running (timing
 * children) so far; either pointer may be NULL. */
void cwm_measure_seconds(double *build_s, double *run_s);
/* A measurer adds what its workers spent (summed over them) to those figures. */
void cwm_measure_add_seconds(double build_s, double run_s);

#endif

/* netc.h: the network compiler. From a partitioned graph and a tuning log it writes a
 * self-contained C library into a directory: every task's best kernel from the log (the
 * untransformed loop nest where the log has none), the glue between them (src/netc/netrt.c), the
 * weights in one file, a buffer plan in which intermediate tensors share one arena where their
 * lifetimes allow, a header with <prefix>_create / _run / _free, a Makefile and a runner program
 * that reads inputs from a file, runs, writes the outputs and times N runs. */
#ifndef CWM_NETC_H
#define CWM_NETC_H

#include "cwm/partition.h"
#include "cwm/state.h"

typedef struct {
  const char *prefix;    /* a C identifier naming the API and the files; "model" */
  const char *source;    /* the model file's name, for comments; may be NULL */
  int vec_lanes;         /* register tile width for the kernels; 0: the host's */
  const char *cc;        /* the Makefile's default compiler; "cc" */
  const char *cflags;    /* its default flags; "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math" */
} cwm_netc_opts;

void cwm_netc_opts_default(cwm_netc_opts *o);

/* The schedule each task runs: steps from a log (its fastest error-free record of the task's
 * workload key) or none (the untransformed nest). */
typedef struct {
  cwm_step *steps; /* owned */
  int nsteps;
  double cost;     /* seconds, as logged; 0 when none */
  int from_log;
} cwm_netc_sched;

/* Fills sched[0..p->ntasks) from the log at log_path (NULL: every task untransformed). Records
 * whose steps no longer replay on the task's workload are skipped. *nbad: lines that did not parse. */
int cwm_netc_schedules(const cwm_partition *p, const char *log_path, cwm_netc_sched *sched, int *nbad, cwm_err *err);
void cwm_netc_schedules_free(cwm_netc_sched *sched, int n);

typedef struct {
  int ntasks, tuned;         /* tasks, and those with a schedule from the log */
  int nsteps, kernel_steps;  /* steps run per inference */
  long long arena_bytes;     /* the planned arena for intermediate tensors */
  long long naive_bytes;     /* the same tensors each in its own buffer */
  long long weight_bytes;    /* the weights file's data */
  long long packed_bytes;    /* weights converted to the kernels' layouts at create time */
} cwm_netc_result;

/* 1 if s can be a library's prefix: a C identifier of at most 40 characters. */
int cwm_netc_name_ok(const char *s);

/* Writes DIR/<prefix>.c, .h, _weights.bin, _runner.c, Makefile, <prefix>.cmake. The directory is
 * created; every file is written atomically. */
int cwm_netc_write(const cwm_partition *p, const cwm_netc_sched *sched, const char *dir, const cwm_netc_opts *o,
                   cwm_netc_result *res, cwm_err *err);

#endif

/* search.h: measuring states (codegen + build + run + records), and the search policy.
 * Everything here sits on top of state, codegen, measure and record. */
#ifndef CWM_SEARCH_H
#define CWM_SEARCH_H

#include "cwm/codegen.h"
#include "cwm/measure.h"
#include "cwm/record.h"

/* A workload being measured: its DAG, its reference output, the target and options. */
typedef struct cwm_task cwm_task;

cwm_task *cwm_task_new(const cwm_workload *w, const cwm_measure_opts *o, cwm_err *err);
void cwm_task_free(cwm_task *t);
const cwm_dag *cwm_task_dag(const cwm_task *t);
const cwm_measure_opts *cwm_task_opts(const cwm_task *t);
double cwm_task_flops(const cwm_task *t);
/* Computes (or loads from the cache) the reference output; done lazily by measure too. */
int cwm_task_reference(cwm_task *t, cwm_err *err);

/* Generates, builds, checks and times the states; fills one record per state (recs[i] is
 * initialised here and owned by the caller). Candidate failures become error records. */
int cwm_task_measure(cwm_task *t, cwm_state *const *states, int n, cwm_record *recs, cwm_err *err);

/* ---- the tuner (tune.c) ---- */
#include "cwm/sketch.h"
struct cwm_costmodel;

typedef struct {
  int trials;              /* measurements of this workload in the log, resumed ones included */
  int per_round;           /* 64 */
  int population;          /* 2048 */
  int generations;         /* 4 */
  double mutation_prob;    /* 0.85 */
  double eps_greedy;       /* 0.05 */
  int init_min_population; /* 50 */
  uint64_t seed;
  cwm_space_opts space;
  const char *log_path;    /* resumed from and appended to; NULL = no log */
  volatile int *stop;      /* set (e.g. by SIGINT) to end after the current chunk */
  void (*progress)(void *ud, const char *line);
  void *progress_ud;
} cwm_tune_opts;

typedef struct {
  int measured, errors, resumed, skipped, corrupt_lines;
  double best_cost;        /* seconds; 1e10 if nothing ran */
  cwm_step *best_steps;    /* owned */
  int best_nsteps;
  double seconds;
} cwm_tune_result;

void cwm_tune_opts_default(cwm_tune_opts *o);
int cwm_tune(cwm_task *t, struct cwm_costmodel *m, const cwm_tune_opts *o, cwm_tune_result *res, cwm_err *err);
void cwm_tune_result_free(cwm_tune_result *r);

/* Writes the kernel of a state as DIR/<name>.c, DIR/<name>.h and DIR/<name>_example.c (which
 * checks the kernel against a straightforward reference and prints the max error). */
int cwm_export(const cwm_state *s, const char *dir, const char *name, cwm_err *err);

/* Hand-written schedules ("matmul_1024", "conv_s1_3x3"); steps are malloc'ed. */
int cwm_hand_schedule(const char *id, cwm_step **steps, int *n, cwm_err *err);

#endif

/* search.h: measuring states (codegen + build + run + records), and the search policy.
 * Everything here sits on top of state, codegen, measure and record. */
#ifndef CWM_SEARCH_H
#define CWM_SEARCH_H

#include "cwm/codegen.h"
#include "cwm/measure.h"
#include "cwm/record.h"

/* A workload being measured: its DAG, its reference output, the target and options. */
typedef struct cwm_task cwm_task;

/* The kernel as a measure candidate (pointers into k). */
void cwm_kernel_candidate(const cwm_kernel *k, cwm_candidate *c);
cwm_task *cwm_task_new(const cwm_workload *w, const cwm_measure_opts *o, cwm_err *err);
void cwm_task_free(cwm_task *t);
const cwm_dag *cwm_task_dag(const cwm_task *t);
const cwm_measure_opts *cwm_task_opts(const cwm_task *t);
/* The target string its records carry (cwm_target_string of this machine, threads, cc, cflags). */
const char *cwm_task_target(const cwm_task *t);
/* Sets the measure option slow_cutoff_s of the task's later measurements (0: off), and shortens
 * their run time-out to 5x that (2 s at least; the task's own time-out at most). */
void cwm_task_set_slow_cutoff(cwm_task *t, double seconds);
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
  double family_quota;     /* the most of a round's picks (a fraction) that one family
                              (cwm_state_family) may take once programs are measured; 0 = off
                              (TVM's search); < 0 (default) = the cost model's family_quota */
  int init_min_population; /* 50 */
  int init_population;     /* random samples that start a round's evolution; 0 = population (as
                              Ansor: one batch of `population` annotations, the distinct valid
                              ones kept, at least init_min_population) */
  int resume_whole;        /* resumed records all count as done, none waits for its round to be
                              searched again (data collection: only the count matters) */
  int confirm;             /* at the end, the `confirm` best measured programs (by their logged
                              figure) are timed again in turn, confirm_rounds times, and the one
                              with the lowest median is the result; 0 = off (the library default) */
  int confirm_rounds;      /* 3 */
  uint64_t seed;
  cwm_space_opts space;
  const char *log_path;    /* resumed from and appended to; NULL = no log */
  volatile int *stop;      /* set (e.g. by SIGINT) to end after the current chunk */
  void (*progress)(void *ud, const char *line);
  void *progress_ud;
} cwm_tune_opts;

typedef struct {
  int measured, errors, resumed, skipped, corrupt_lines;
  int other_target;        /* records of the workload in the log measured with other threads, compiler
                              or flags (or vector width): not resumed */
  int other_cpu;           /* resumed records measured on another CPU model (their target's -cpuid) */
  char other_cpuid[24];    /* the first such record's */
  double best_cost;        /* seconds; 1e10 if nothing ran (the confirmed median when confirmed) */
  double best_logged;      /* the result's own figure in the log (seconds) */
  int confirmed;           /* programs timed again at the end (0: best_cost is the log's minimum) */
  cwm_step *best_steps;    /* owned */
  int best_nsteps;
  double seconds;
} cwm_tune_result;

void cwm_tune_opts_default(cwm_tune_opts *o);
/* Tunes one workload until the log holds o->trials of its records (or Ctrl-C, or the search space
 * runs dry): cwm_tuner rounds of o->per_round. CWM_ENOSCHED when every measured candidate failed. */
int cwm_tune(cwm_task *t, struct cwm_costmodel *m, const cwm_tune_opts *o, cwm_tune_result *res, cwm_err *err);
void cwm_tune_result_free(cwm_tune_result *r);

/* The tuner of one task, one round at a time (what cwm_tune loops over and the task scheduler
 * interleaves). It borrows the task and the model (several tuners may share one model) and copies
 * the options; o->trials and o->per_round are not used (each round says how many to measure).
 * With o->log_path, the log's records of this workload are resumed (they train the model and are
 * never measured again) and new records are appended to it. */
typedef struct cwm_tuner cwm_tuner;
cwm_tuner *cwm_tuner_new(cwm_task *t, struct cwm_costmodel *m, const cwm_tune_opts *o, cwm_err *err);
void cwm_tuner_free(cwm_tuner *tu);
/* Resumes from records already read (those of other workloads are skipped; a record whose steps
 * do not replay is skipped and counted): for callers that read one log for many tuners. */
int cwm_tuner_resume(cwm_tuner *tu, const cwm_record *recs, int n, cwm_err *err);
/* New records go to log (borrowed; NULL = none) instead of the tuner's own handle on o->log_path. */
void cwm_tuner_set_log(cwm_tuner *tu, cwm_log *log);
/* One round: searches and measures up to `want` programs never measured before (in chunks of 16,
 * stopping early when *o->stop is set), appends their records and updates the model. *nmeasured
 * is 0 when the search found no new candidate or the stop flag was already set. */
int cwm_tuner_round(cwm_tuner *tu, int want, int *nmeasured, cwm_err *err);
/* The candidates the next round would measure (up to want, best predicted first), measuring
 * nothing and changing nothing: the same seed, model and history propose the same list. The
 * states are the caller's (cwm_state_free each, free the array). */
int cwm_tuner_propose(cwm_tuner *tu, int want, cwm_state ***picks, int *npicks, cwm_err *err);
double cwm_tuner_best(const cwm_tuner *tu);          /* seconds; 1e10 while nothing ran */
int cwm_tuner_best_steps(const cwm_tuner *tu, const cwm_step **steps); /* borrowed; 0 if none */
int cwm_tuner_trials(const cwm_tuner *tu);           /* records of the workload: resumed + measured */
cwm_task *cwm_tuner_task(const cwm_tuner *tu);
/* A snapshot of the counters and the best program (res->best_steps owned by res). */
void cwm_tuner_result(const cwm_tuner *tu, cwm_tune_result *res);
/* Times the k best measured programs (by their logged figures) again in turn, `rounds` times, and
 * makes the one with the lowest median the best (cwm_tuner_best then returns that median). */
int cwm_tuner_confirm(cwm_tuner *tu, int k, int rounds, cwm_err *err);

/* Writes the kernel of a state as DIR/<name>.c, DIR/<name>.h and DIR/<name>_example.c (which
 * checks the kernel against a straightforward reference and prints the max error). */
int cwm_export(const cwm_state *s, const char *dir, const char *name, cwm_err *err);
/* cwm_export for the target the schedule was tuned for (a record's cwm_target_string): the kernel
 * gets that instruction set's register-tile width, and NAME.h records the target, the flags that
 * build it and the thread count. NULL target: cwm_export's (this process's width, not recorded).
 * Either way NAME.c checks the CPU when loaded (NAME_cpu_missing) and aborts naming a missing
 * instruction set instead of dying of SIGILL. */
int cwm_export_for(const cwm_state *s, const char *dir, const char *name, const char *target, cwm_err *err);
/* Whether name can name an exported kernel: a C identifier of at most 60 characters that is not
 * a keyword, reserved, a name of the libc or libm functions the exported files use, or cwm_*. */
int cwm_export_name_ok(const char *name);

/* Hand-written schedules ("matmul_1024", "dense_qkv", "conv_s1_3x3"), with 16-lane register tiles
 * where cwm_codegen_host_lanes() is 16; steps are malloc'ed. */
int cwm_hand_schedule(const char *id, cwm_step **steps, int *n, cwm_err *err);

#endif

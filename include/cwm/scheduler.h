/* scheduler.h: whole networks. A network is a list of subgraphs (op-library workloads) with
 * weights, how often each runs in one inference. The task scheduler shares a budget of trials
 * among the subgraphs' tuners so as to lower the estimated end-to-end latency, the sum of weight x
 * best latency, with Ansor's gradient strategy. Network files are described in networks/README.md. */
#ifndef CWM_SCHEDULER_H
#define CWM_SCHEDULER_H

#include "cwm/search.h"

struct cwm_costmodel;

/* ---- network files (network.c) ---- */

typedef struct {
  char name[64];   /* a C identifier, unique in the network (export directory and kernel name) */
  double weight;   /* > 0: how often the subgraph runs per inference */
  char op[32];     /* the op library's op name: dense, conv2d, ... (the similarity group) */
  char spec[512];  /* "op params", the op library's spec */
  cwm_workload *w; /* owned; w->name is the subgraph's name */
  int line;        /* line in the file */
} cwm_subgraph;

typedef struct {
  char name[64];   /* the file's base name without its extension */
  int n;
  cwm_subgraph *sub;
} cwm_network;

/* Parses network text; path names the file in messages ("path:line:col: what is wrong"), and the
 * network is named after it. Every line is checked: four tab-separated fields, a unique C
 * identifier, a positive weight, a spec the op library accepts, no workload given twice. */
cwm_network *cwm_network_parse(const char *text, const char *path, cwm_err *err);
cwm_network *cwm_network_load(const char *path, cwm_err *err);
void cwm_network_free(cwm_network *net);
/* Sum of weight x the op library's flop count of each subgraph. */
double cwm_network_flops(const cwm_network *net);

/* ---- the task scheduler's choice (scheduler.c), no measuring ---- */

typedef struct {
  double alpha;        /* 0.2: weight of the backward (observed) gradient */
  double beta;         /* 2: how much slower than its similar tasks a task is expected to end */
  int backward_window; /* 3 rounds */
  double eps_greedy;   /* 0.05: probability of a random live task after the warm-up */
  int early_stopping;  /* rounds without improvement after which a task is left alone; 0 = never */
  int error_rounds;    /* 3: rounds after which a task of which nothing ran is left alone */
  uint64_t seed;
} cwm_sched_opts;

void cwm_sched_opts_default(cwm_sched_opts *o);

/* State of the choice: per task its weight, flops, similarity group (tasks of one op kind share a
 * group id >= 0; -1 = none), rounds tuned and best latency after each round. */
typedef struct cwm_sched cwm_sched;
cwm_sched *cwm_sched_new(int n, const double *weight, const double *flops, const int *group,
                         const cwm_sched_opts *o);
void cwm_sched_free(cwm_sched *s);
/* A task whose best reaches its lower bound (seconds; 0 = none) is not tuned further. */
void cwm_sched_set_lower_bound(cwm_sched *s, int task, double seconds);
/* Records a round of `task`: its best latency so far (seconds; >= 1e10 = nothing ran yet) and the
 * programs measured in the round (0 = the search space ran dry: the task is done). Also applies
 * Ansor's regrouping: a task tuned 5 rounds more than the rest of its group that is still more
 * than beta times slower (in FLOP/s) than the group's best leaves the group. */
void cwm_sched_update(cwm_sched *s, int task, double best, int measured);
/* Restores a task's history from a log: best latency after each of its `rounds` rounds. */
void cwm_sched_restore(cwm_sched *s, int task, const double *history, int rounds);
/* The next task to tune, -1 when every task is done. Tasks never tuned come first, in order
 * (warm-up); then, with probability eps_greedy a random live task, else the live task with the
 * most negative estimated gradient of the objective (a random one when all are equal):
 *   grad_i = w_i * (alpha * backward_i + (1 - alpha) * forward_i)
 *   backward_i = (best_i(r - 1) - best_i(r - 1 - window)) / window   (0 until r > window)
 *   forward_i = min(-best_i / r, beta * flops_i / max_{j similar} (flops_j / best_j) - best_i)
 * with r the task's rounds (the bound from similar tasks only when its group has two or more).
 * A task is done when its search space ran dry, when it has been tuned error_rounds rounds and
 * nothing of it ever ran (only errors; until then its best of 1e10 makes it the first choice),
 * when it reached its lower bound, or after early_stopping idle rounds. */
int cwm_sched_next(cwm_sched *s);
double cwm_sched_gradient(const cwm_sched *s, int task); /* the estimate above; 0 if done or untuned */
int cwm_sched_done(const cwm_sched *s, int task);
int cwm_sched_rounds(const cwm_sched *s, int task);
double cwm_sched_best(const cwm_sched *s, int task);
/* Sum of weight x best over tasks that have a best; *missing (may be NULL) = tasks without one. */
double cwm_sched_objective(const cwm_sched *s, int *missing);

/* ---- tuning a network (scheduler.c) ---- */

typedef struct {
  int round;          /* rounds of this run, from 1 */
  int warmup;         /* 1 during the round-robin warm-up */
  int task;           /* the subgraph tuned in this round */
  const char *name;
  int measured;       /* programs measured in this round */
  int trials, budget; /* the network's records in the log (resumed included) / --trials */
  double task_best;   /* seconds; >= 1e10 if none ran */
  double est_latency; /* seconds: sum of weight x best over the tasks that have one */
  int missing;        /* tasks without a best yet */
  int ntasks;
  double elapsed, eta; /* seconds */
} cwm_net_progress;

typedef struct {
  int trials;         /* the network's records in the log, resumed ones included (1000) */
  int per_round;      /* 64, at most trials / tasks (as Ansor) */
  double peak_gflops; /* > 0: a task reaching flops / peak is done */
  cwm_sched_opts sched;
  cwm_tune_opts tune; /* search knobs for every task; its trials, per_round, log_path, stop and
                         progress are ignored, its seed is mixed with each task's workload key */
  const char *log_path; /* one log for every task: resumed per task, appended to */
  volatile int *stop;   /* set (e.g. by SIGINT) to end after the measurements in flight */
  void (*progress)(void *ud, const cwm_net_progress *p);
  void (*note)(void *ud, const char *line);
  void *ud;
} cwm_net_opts;

typedef struct {
  char name[64];
  char key[17];
  double weight, flops;
  double best_cost;       /* seconds, 1e10 if nothing ran */
  cwm_step *best_steps;   /* owned */
  int best_nsteps;
  int trials, measured, resumed, errors, rounds;
  int done;               /* the scheduler left it alone (see cwm_sched_next) */
} cwm_net_task_result;

typedef struct {
  int ntasks;
  cwm_net_task_result *tasks; /* in the network's order */
  double est_latency;         /* seconds: sum of weight x best over tasks with a best */
  int missing;                /* tasks without a best */
  int trials, measured, resumed, errors, rounds, corrupt_lines;
  double seconds;
} cwm_net_result;

void cwm_net_opts_default(cwm_net_opts *o);
/* Tunes the network's subgraphs (one cwm_task each, measured with mo) with one shared cost model
 * until the log holds o->trials records of them, every task is done, or *o->stop is set. Each
 * task first gets one round (unless the log already has its records), then cwm_sched_next picks.
 * The result is filled even on failure. CWM_EUSAGE when trials < tasks; CWM_ENOSCHED when
 * candidates were measured but none ran. */
int cwm_tune_network(const cwm_network *net, struct cwm_costmodel *m, const cwm_measure_opts *mo,
                     const cwm_net_opts *o, cwm_net_result *res, cwm_err *err);
void cwm_net_result_free(cwm_net_result *r);

#endif

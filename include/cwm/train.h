/* train.h: the layer above the search that makes and uses training data: trajectories sampled
 * with the search's own sampler, measured collections, re-measurement for label noise, noise
 * pairs (the same program written differently), the world model's training (encoder,
 * transition, ranker) and offline evaluation of cost models. The search and the world model at
 * tuning time know nothing of it. */
#ifndef CWM_TRAIN_H
#define CWM_TRAIN_H

#include "cwm/costmodel.h"
#include "cwm/dataset.h"
#include "cwm/measure.h"
#include "cwm/sketch.h"
#include "cwm/world.h"

/* ------------------------------------------------------------ statistics (train/stats.c) */

/* Statistics of a trajectory file or a log as text: counts per op kind, trajectory length
 * min/median/max, error rate per kind, latency min/median/max of the good records. */
int cwm_dataset_stats(const char *path, cwm_buf *report, cwm_err *err);

/* ------------------------------------------------------------ sampling (train/sample.c) */

/* Up to n distinct trajectories of d from the real search sampler: about half random
 * annotations of Ansor's sketches (cwm_sample_initial), the rest chains of 1-3 mutations of
 * those. Deterministic for the seed. *out is malloc'ed (cwm_trajs_free). */
int cwm_traj_sample(const cwm_dag *d, const cwm_space_opts *o, uint64_t seed, int n, cwm_traj **out,
                    int *nout, cwm_err *err);
void cwm_trajs_free(cwm_traj *t, int n);

/* ------------------------------------------------------------ measured collection (train/collect.c) */

typedef struct {
  int per_workload;            /* records per workload in the log when done */
  uint64_t seed;
  const char *log_path;
  int population, generations; /* the short evolution; default 512, 2 */
  cwm_measure_opts measure;    /* the runner's protocol; threads 1 */
  volatile int *stop;
  void (*progress)(void *ud, const char *line);
  void *progress_ud;
} cwm_collect_opts;

typedef struct {
  int done, skipped, failed;   /* workloads finished now, already complete, failed */
  int measured, errors, resumed;
  double seconds;
  char first_failure[256];
} cwm_collect_result;

void cwm_collect_opts_default(cwm_collect_opts *o);
/* For each workload: skip it when the log holds per_workload records of its key, else tune it
 * with the random model (random sketch samples plus a short evolution, per_round =
 * per_workload, deduplicated against the log) until it does. A workload whose every candidate
 * fails is counted and skipped; infrastructure failures end the run with their error. */
int cwm_dataset_measure(const cwm_wl_entry *wl, int n, const cwm_collect_opts *o, cwm_collect_result *res,
                        cwm_err *err);

/* Label noise: re-measures a seeded random fraction of the good records of a log with the same
 * protocol into out_path (resumable: programs already there are not measured again) and reports
 * the median relative difference |t2 - t1| / t1 between the two timings. */
typedef struct {
  const char *log_path, *out_path;
  double fraction;             /* default 0.02 */
  uint64_t seed;
  cwm_measure_opts measure;    /* threads 1, time-out 3 s as cwm_dataset_measure */
  volatile int *stop;
  void (*progress)(void *ud, const char *line);
  void *progress_ud;
} cwm_remeasure_opts;

/* Pairs grouped by when their first timing was taken: a stretch is a run of originals with no
 * gap over an hour between them (in order of their timestamps). A stretch whose median t2/t1 is
 * far from 1 is a machine that ran at another speed then, not noise between repeats. */
#define CWM_REMEASURE_MAX_STRETCH 16
typedef struct {
  long first, last;            /* the originals' timestamps, unix seconds */
  int n;
  double median_ratio, median_rel_diff;
} cwm_remeasure_stretch;

typedef struct {
  int selected, measured, resumed, skipped, failed_now, compared;
  double median_rel_diff, p90_rel_diff;
  double median_ratio;         /* median of t2 / t1: above 1, the programs run slower now */
  double seconds;              /* spent re-measuring (resumed programs cost none) */
  int nstretch;                /* the last stretch takes every later pair once there are 16 */
  cwm_remeasure_stretch stretch[CWM_REMEASURE_MAX_STRETCH];
} cwm_remeasure_result;

void cwm_remeasure_opts_default(cwm_remeasure_opts *o);
int cwm_dataset_remeasure(const cwm_remeasure_opts *o, cwm_remeasure_result *res, cwm_err *err);

/* ------------------------------------------------------------ noise pairs (train/noise.c) */

/* Replays steps on d, a workload of another shape: SP steps take the extent of the iterator they
 * split there, and their lengths shrink (largest first) until their product fits it. */
int cwm_replay_fit(const cwm_dag *d, const cwm_step *steps, int n, cwm_state **out, cwm_err *err);
/* The same with every split's lengths kept: only the extents are d's (a tile that no longer
 * divides its axis is an uneven tile); an error where a step does not apply. */
int cwm_replay_retarget(const cwm_dag *d, const cwm_step *steps, int n, cwm_state **out, cwm_err *err);

enum { CWM_NOISE_SHAPE = 0, CWM_NOISE_RENAME = 1, CWM_NOISE_REORDER = 2 };

/* A pair of printed states that mean the same computation written differently: the final
 * state of steps on d, and
 *   kind 0: the same schedule on the workload with one dimension changed by one (rebuilt with
 *           the op library; SP extents follow the new shape, lengths shrink where they no
 *           longer fit);
 *   kind 1: the same schedule on the workload with its axes renamed consistently;
 *   kind 2: the same schedule with two independent statements swapped (falls back to kind 1
 *           when the workload has none, or when the schedule hides the swap: one of the two
 *           attached inside a third stage prints at the same place either way).
 * text_a and text_b are owned. */
int cwm_noise_pair(const cwm_dag *d, const cwm_step *steps, int n, int kind, cwm_rng *r, char **text_a,
                   char **text_b, cwm_err *err);

/* The same, also handing back the second program (owned workload and steps) and what changed. */
typedef struct {
  int kind;            /* the kind made (2 may become 1) */
  cwm_workload *wb;    /* the second workload */
  cwm_step *steps_b;   /* its steps */
  int nsteps_b;
  char what[160];      /* "M 24 -> 23", "axes renamed: i->q ...", "swapped mu and var" */
} cwm_noise_info;
int cwm_noise_pair_ex(const cwm_dag *d, const cwm_step *steps, int n, int kind, cwm_rng *r, char **text_a,
                      char **text_b, cwm_noise_info *info, cwm_err *err);
void cwm_noise_info_free(cwm_noise_info *info);

/* ---- training (train/encoder_train.c, transition_train.c, ranker_train.c) ---------------------------------------------------------------- */

typedef struct {
  const char *traj_path;    /* trajectory file (cwm dataset sample) for encoder and transition */
  const char *log_path;     /* measured records (tuning log / dataset measure) for the ranker */
  double valid_fraction;    /* by workload key; 0.1 */
  int epochs;               /* encoder/transition epochs; 2 */
  int batch;                /* 32 */
  int max_traj;             /* trajectories used per part (0: all) */
  float lr;                 /* 1e-3 */
  float temperature;        /* InfoNCE; 0.1 */
  int ranker_rounds;        /* 300 */
  uint64_t seed;
  int no_contrastive;       /* ablation: skip encoder training (random encoder) */
  const char *targets_cache; /* file prefix where the transition's encoder targets are kept */
  int target_states;        /* transition: encoder targets of at most this many states a trajectory
                             * (the first, the last and random ones between; 0: every state) */
  float value_gap;          /* value head: pairs closer than this in log cost are no pair; 0.05 */
  float weight_decay;       /* AdamW decay of the transition (and value head); 0.01 */
  volatile int *stop;
  void (*progress)(void *ud, const char *line);
  void *progress_ud;
} cwm_train_opts;

void cwm_train_opts_default(cwm_train_opts *o);

/* Builds the vocabulary from the initial and final states of (up to max_traj) trajectories. */
int cwm_world_build_vocab(const char *traj_path, int max_traj, int min_count, cwm_vocab **out, cwm_err *err);
/* Contrastive training of E (InfoNCE over noise pairs and same-workload states). */
int cwm_world_train_encoder(cwm_world *w, const cwm_train_opts *o, cwm_err *err);
/* Rollout training of F with E frozen (state matching + margin ranking against another
 * trajectory's state at the same step); with o->log_path also the value head: a pairwise
 * ranking loss on the measured records of the training workloads, back through every TransH
 * step into the action network; the weights kept are the average over the second half of the
 * epochs. */
int cwm_world_train_transition(cwm_world *w, const cwm_train_opts *o, cwm_err *err);
/* Trains the ranker on the measured records of the training part of o->log_path. */
int cwm_world_train_ranker(cwm_world *w, const cwm_train_opts *o, cwm_err *err);

/* ---- evaluation support ------------------------------------------------------------------- */

/* Measured records of one part of log_path's split (CWM_SPLIT_TRAIN / _VALID / _ALL) grouped by
 * workload (consecutive rows), as feature rows of the given mode; groups with fewer than 2 valid
 * records are left out. All outputs owned (free()); keys_out may be NULL. o (may be NULL) gives
 * progress and the stop flag. */
int cwm_world_record_groups(cwm_world *w, const char *log_path, double vf, int part, int mode, float **rows_out,
                            double **costs_out, int **sizes_out, int *ngroups_out, int *nrows_out,
                            char (**keys_out)[17], const cwm_train_opts *o, cwm_err *err);

/* ---- offline evaluation (train/eval.c) ---------------------------------------------------------- */

typedef struct {
  const char *records;        /* measured records: split by workload into train / held-out */
  double valid_fraction;      /* the held-out part; must be the one the model was trained with */
  const char *ablation_model; /* a model trained without contrastive pre-training, or NULL */
  uint64_t seed;
  int speed_candidates;       /* candidates for the scoring-speed figure (default 2000) */
  const char *dump_rows;      /* if set: every record's features written there (analysis) */
  void (*progress)(void *ud, const char *line);
  void *progress_ud;
} cwm_eval_opts;

/* Ranking quality on the held-out workloads of o->records for world, its ablations, ansor
 * (trained on the training part of the same records) and random; scoring speed; noise-pair
 * embedding similarity. Appends a Markdown report to out. */
int cwm_world_eval_ranking(cwm_world *w, const cwm_eval_opts *o, cwm_buf *out, cwm_err *err);

/* How the cost model m orders the measured records of each workload of records (all of them, no
 * split): per workload the best latency, the latency of the model's first pick, top-k scores,
 * NDCG@10 and Kendall's tau, as a Markdown table; with list, every record in the model's order.
 * For looking into a search: which of the candidates it measured the model would have put first. */
int cwm_eval_score(cwm_costmodel *m, const char *records, int list, cwm_buf *out, cwm_err *err);
/* Updates m with the first count (all: <= 0) measured records of log, per_round at a time, in
 * the log's order, as the tuning run that measured them did. */
int cwm_eval_train(cwm_costmodel *m, const char *log, int count, int per_round, cwm_err *err);

/* Syntactic noise without measuring: count candidates of workload a from the search's initial
 * sampler (seed), or, when candidates names a log, the schedules of its records of a (a tuning
 * log of a: the programs a search measured), the same schedules replayed on b (sampled ones by
 * cwm_replay_fit, a log's by cwm_replay_retarget: the programs it measured, tiles kept), both
 * scored by m; prints the number that fit both, Kendall's tau-b of the two score vectors
 * and how many of a's top 8 are b's top 8. *tau gets the correlation (NULL: not wanted). */
int cwm_eval_noise(cwm_costmodel *m, const cwm_workload *a, const cwm_workload *b, int count, uint64_t seed,
                   const char *candidates, cwm_buf *out, double *tau, cwm_err *err);

/* Ansor's cost model trained on the measured records of records (the training part of the split
 * by workload when vf > 0, everything when vf = 0) and saved to out: the file `cwm tune --model
 * ansor --pretrained FILE` loads. */
int cwm_ansor_pretrain(const char *records, double vf, uint64_t seed, const char *out,
                       void (*progress)(void *, const char *), void *ud, cwm_err *err);

#endif

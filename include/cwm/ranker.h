/* ranker.h: the world model's ranker and the features it sees besides the rolled-out latent
 * state: LambdaMART (XGBoost, objective rank:ndcg) with one query group per workload, trained on
 * relevance grades (cwm_relevance_grades) and boosted further after every measurement round;
 * and the action/hardware feature row of a step list (DESIGN.md, "The world model in detail").
 * XGBoost is opened at run time (xgb.h): without it every ranker call fails with CWM_EDEP. */
#ifndef CWM_RANKER_H
#define CWM_RANKER_H

#include <stddef.h>
#include <stdint.h>

#include "cwm/metrics.h"
#include "cwm/state.h"
#include "cwm/util.h"

/* ------------------------------------------------------------------ the ranker */

typedef struct cwm_ranker cwm_ranker;

typedef struct {
  int max_depth;            /* tree depth; default 6 */
  double eta;               /* shrinkage; default 0.1 */
  double min_child_weight;  /* minimum hessian in a leaf; default 0.01 (LambdaMART hessians are
                               small, XGBoost's default 1 leaves the trees stumps) */
  int rounds;               /* trees per train call when its rounds argument is <= 0; default 200 */
  uint64_t seed;            /* default 0 */
  int nthread;              /* 0 (default): cwm_xgb_nthread(), 1 under 4 CPUs else 2 */
} cwm_ranker_params;

void cwm_ranker_params_default(cwm_ranker_params *p);

/* An untrained ranker (p NULL: the defaults). NULL with CWM_EDEP when XGBoost is missing. */
cwm_ranker *cwm_ranker_new(const cwm_ranker_params *p, cwm_err *err);
void cwm_ranker_free(cwm_ranker *r);

/* Training data: X is nrows x ncols row-major floats (NaN = missing); labels are relevance
 * grades, whole numbers in [0, 31]; the rows of query group g (one workload) are the
 * group_sizes[g] rows after those of groups 0..g-1, and the sizes add up to nrows (empty groups
 * are allowed and skipped). Only the order within a group is learned, never a comparison across
 * groups. Data that breaks these rules is CWM_EINTERNAL (a caller's bug); XGBoost failing is
 * CWM_EDEP with its message. */

/* Trains a new ensemble of `rounds` trees (<= 0: params.rounds) from scratch, replacing any
 * earlier one. On failure the ranker keeps its earlier ensemble. */
int cwm_ranker_train(cwm_ranker *r, const float *X, int nrows, int ncols, const float *labels,
                     const int *group_sizes, int ngroups, int rounds, cwm_err *err);

/* Adds `rounds` trees (<= 0: params.rounds / 4, at least 1) fitted to these rows on top of the
 * existing ensemble (an untrained ranker trains from scratch). The rows are typically the groups
 * measured in the last round; passing everything measured so far instead keeps earlier groups in
 * the gradient too. ncols must match the earlier training. On failure the ranker may hold some
 * of the new trees: cwm_ranker_rounds says how many. */
int cwm_ranker_boost(cwm_ranker *r, const float *X, int nrows, int ncols, const float *labels,
                     const int *group_sizes, int ngroups, int rounds, cwm_err *err);

/* Scores rows (higher = predicted faster; comparable within a workload only) into out[nrows].
 * CWM_EMODEL if the ranker is untrained or ncols differs from its training data.
 * Deterministic; not safe to call on one ranker from two threads at once. */
int cwm_ranker_predict(cwm_ranker *r, const float *X, int nrows, int ncols, double *out, cwm_err *err);

/* Boosting from a prior score: with col >= 0, column col of every row (NaN read as 0) is the
 * base margin of training, boosting and prediction, so the trees fit what that score gets wrong
 * instead of ranking from scratch (the world model's value head is that score). Not kept in the
 * byte form: the owner sets it after loading. -1 (the default) turns it off. */
void cwm_ranker_set_margin_col(cwm_ranker *r, int col);

int cwm_ranker_rounds(const cwm_ranker *r); /* trees so far; 0 = untrained */
int cwm_ranker_ncols(const cwm_ranker *r);  /* features per row; 0 = untrained */

/* The ranker as bytes, to embed in a model file: *data is malloc'ed (free() it), *len its size.
 * Layout (little-endian): "CWMRANK1", u32 version, u32 ncols, u32 rounds (trees), then the
 * parameters (u32 max_depth, f64 eta, f64 min_child_weight, u64 seed, u32 nthread, u32 rounds),
 * u64 booster bytes, XGBoost's UBJSON model, then the FNV-1a hash of everything before it. The
 * parameters travel along because XGBoost's model bytes do not hold them and boosting a loaded
 * ranker needs them. The booster is checked (cwm_xgb_booster_check) before XGBoost reads it. */
int cwm_ranker_save(const cwm_ranker *r, void **data, size_t *len, cwm_err *err);
/* The inverse; CWM_EMODEL naming what is wrong for truncated, altered or foreign bytes. */
cwm_ranker *cwm_ranker_load(const void *data, size_t len, cwm_err *err);

/* ------------------------------------------------------------------ action and hardware features */

/* The machine as the ranker sees it. */
typedef struct {
  int cores;            /* online CPUs */
  int vector_floats;    /* SIMD width in floats: 16 with AVX-512F, 8 with AVX/AVX2, else 4 */
  double l1_kib, l2_kib, l3_kib; /* data/unified cache sizes of cpu0 in KiB */
} cwm_hwinfo;

/* Defaults when nothing can be read: 32 KiB, 1024 KiB, 16384 KiB. */
#define CWM_HW_L1_KIB 32.0
#define CWM_HW_L2_KIB 1024.0
#define CWM_HW_L3_KIB 16384.0

/* Reads the cache sizes from cache_dir (sysfs layout: index<N>/{level,type,size}; NULL:
 * /sys/devices/system/cpu/cpu0/cache), falling back to sysconf, then to the defaults. */
void cwm_hwinfo_read(cwm_hwinfo *hw, const char *cache_dir);
/* This machine, read once per process. */
const cwm_hwinfo *cwm_hwinfo_host(void);
/* The vector width cwm_hwinfo_host reports from now on: the target's when kernels are tuned for an
 * instruction set narrower than the CPU's (--target); n <= 0 goes back to the CPU's. Call it before
 * any other thread reads the host. */
void cwm_hwinfo_set_vector_floats(int n);
/* The machine a record measured on `target` (a cwm_target_string; NULL or "": an older record
 * without one) ran on: the host's, with the target's threads as the cores and its instruction
 * set's vector width. Target strings carry no cache sizes: those stay the host's. */
void cwm_hwinfo_of_target(cwm_hwinfo *hw, const char *target);

/* The action/hardware feature row: CWM_ACT_NFEAT floats, in this order. Extents are loop
 * extents of the final state as its nodes record them. Computed from `final` (the state the
 * steps lead to) when given; without it, the entries marked (state) are NaN (missing to XGBoost)
 * and the loop counts come from the AN steps. */
#define CWM_ACT_KIND 0          /* 14 counts, one per cwm_step_kind in enum order (AN, FU, ... RF) */
#define CWM_ACT_LEN 14          /* number of steps */
#define CWM_ACT_PAR_EXTENT 15   /* (state) product of the extents of a stage's parallel loops,
                                   max over stages (stages run one after another); 1 if none */
#define CWM_ACT_PAR_LOOPS 16    /* loops annotated parallel */
#define CWM_ACT_PAR_EFF 17      /* (state) PAR_EXTENT / (ceil(PAR_EXTENT / cores) * cores): the
                                   busy fraction of the cores */
#define CWM_ACT_VEC_LEN 18      /* (state) extent of the vectorized loop, max over stages; 0 if none */
#define CWM_ACT_VEC_LOOPS 19    /* loops annotated vectorize */
#define CWM_ACT_VEC_EFF 20      /* (state) VEC_LEN / (ceil(VEC_LEN / width) * width); 0 if none */
#define CWM_ACT_UNROLL 21       /* auto_unroll_max_step, max over stages (PR steps without state) */
#define CWM_ACT_UNROLL_LOOPS 22 /* loops annotated unroll */
#define CWM_ACT_COMPUTE_AT 23   /* stages computed at another's loop (CA steps without state) */
#define CWM_ACT_INLINED 24      /* stages inlined (CI steps without state) */
#define CWM_ACT_STAGES 25       /* (state) stages that are not placeholders (cache stages count) */
#define CWM_ACT_CORES 26        /* hardware: cores */
#define CWM_ACT_VEC_WIDTH 27    /* hardware: SIMD width in floats */
#define CWM_ACT_L1 28           /* hardware: L1 data cache, KiB */
#define CWM_ACT_L2 29           /* hardware: L2, KiB */
#define CWM_ACT_L3 30           /* hardware: L3, KiB */
#define CWM_ACT_REDUNDANCY 31   /* (state) log2 of the loop-body executions of every stage (its
                                   loops times the loops of where it is computed) over its op's
                                   domain: 0 unless a compute location recomputes */
#define CWM_ACT_SCALAR_RED 32   /* (state) share of those executions in reductions whose innermost
                                   loop is a reduction loop (a serial accumulation chain) */
#define CWM_ACT_TILE_ACC 33     /* (state) log2 of the accumulators of the main reduction (the one
                                   with the most loop-body executions): spatial iterations inside
                                   its innermost reduction loop; 0 without a reduction */
#define CWM_ACT_TILE_REUSE 34   /* (state) those accumulators over the elements the reads touch per
                                   execution of that loop: FMAs per load of the register tile */
#define CWM_ACT_RED_INNER 35    /* (state) log2 of that innermost reduction loop's extent */
#define CWM_ACT_NFEAT 36

/* Fills row[CWM_ACT_NFEAT] from steps[0..n), the final state (may be NULL) and hw (NULL: the
 * host). Never fails. */
void cwm_action_features(const cwm_step *steps, int n, const cwm_state *final, const cwm_hwinfo *hw,
                         float *row);

#endif

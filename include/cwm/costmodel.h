/* costmodel.h: the cost-model interface the search uses, and the models behind it.
 * A model is updated with measured records (their states) and scores batches of candidate
 * states; higher scores mean faster programs. Swapping models changes nothing else. */
#ifndef CWM_COSTMODEL_H
#define CWM_COSTMODEL_H

#include "cwm/codegen.h"
#include "cwm/record.h"

typedef struct cwm_costmodel cwm_costmodel;

struct cwm_costmodel {
  const char *name;
  /* states[i] is the program of recs[i] (same workload within one call, or several; records
   * carry the workload key). Error records count as very slow programs. */
  int (*update)(cwm_costmodel *m, cwm_state *const *states, const cwm_record *recs, int n, cwm_err *err);
  int (*predict)(cwm_costmodel *m, cwm_state *const *states, int n, double *scores, cwm_err *err);
  int (*save)(cwm_costmodel *m, const char *path, cwm_err *err); /* may be NULL */
  void (*free)(cwm_costmodel *m);
  /* 1 when scores never depend on measurements (random): the search then does not seed its
   * population with the best measured programs, so its decisions do not depend on timings */
  int ignores_measurements;
  /* the search's family quota this model is meant to be searched with (cwm_tune_opts
   * .family_quota < 0 takes it): 0 for Ansor's and random (TVM's search), 0.25 for the world
   * model's */
  double family_quota;
};

int cwm_costmodel_update(cwm_costmodel *m, cwm_state *const *states, const cwm_record *recs, int n, cwm_err *err);
int cwm_costmodel_predict(cwm_costmodel *m, cwm_state *const *states, int n, double *scores, cwm_err *err);
void cwm_costmodel_free(cwm_costmodel *m);

/* Uniform random scores: a hash of the seed and the state's step list, so a state gets the same
 * score whenever it is scored. */
cwm_costmodel *cwm_costmodel_random(uint64_t seed);

/* Ansor's cost model: per-store feature rows (see cwm_ansor_features) and gradient-boosted
 * trees through XGBoost's C API, trained on throughput normalised per workload with the
 * pack-sum objective (a program's score is the sum of its stores' predictions). Retrained
 * from scratch when enough new records arrived; random scores until it has 100 records.
 * pretrained: NULL, or a file written by save (records of other workloads). */
cwm_costmodel *cwm_costmodel_ansor(uint64_t seed, const char *pretrained, cwm_err *err);
/* The same with the pretrained model file's bytes in memory (the fuzz target's entry point). */
cwm_costmodel *cwm_costmodel_ansor_from_buffer(uint64_t seed, const void *data, size_t len, cwm_err *err);
/* Checks an XGBoost booster as UBJSON bytes before XGBoost, which trusts its lengths and tree
 * indices, loads it: 0 when it is a well-formed single-output gbtree over nfeat features whose
 * trees are proper binary trees; -1 with why filled otherwise (booster_check.c). */
int cwm_xgb_booster_check(const void *data, size_t n, int nfeat, char *why, size_t whyn);

/* Ansor's per-store features: CWM_ANSOR_NFEAT floats per store. Returns the number of rows
 * (stores) written into *rows (owned, rows x CWM_ANSOR_NFEAT). */
#define CWM_ANSOR_NFEAT 164
int cwm_ansor_features(const cwm_state *s, float **rows, int *nrows, cwm_err *err);
/* Precisely: on success returns 0 with *nrows rows in *rows (malloc'ed, free() it); as in Ansor
 * there is one row per buffer written (the stores of one buffer, e.g. a reduction's init and
 * update, share it; op counts add up, the rest comes from the last store). On failure (a
 * sketch, a state that does not lower) returns the error code with *rows NULL, *nrows 0.
 * Column layout (Ansor's feature.cc order; values through slog, one-hots raw): */
#define CWM_AF_OPS 0            /* 16 op counts x outer_prod */
#define CWM_AF_VEC 16           /* num, prod, innermost len, 8-way position one-hot */
#define CWM_AF_UNROLL 27        /* same for unrolled loops */
#define CWM_AF_PARALLEL 38      /* same for parallel loops */
#define CWM_AF_GPU 49           /* 8 GPU entries, 0 on CPU */
#define CWM_AF_BUF 57           /* 5 buffers x CWM_AF_BUF_W */
#define CWM_AF_BUF_W 18
#define CWM_AF_AI 147           /* 10-point arithmetic-intensity curve */
#define CWM_AF_ALLOC 157        /* alloc size, alloc prod, alloc outer prod, alloc inner prod */
#define CWM_AF_OUTER 161        /* outer_prod, number of loops, auto_unroll_max_step */

/* Ansor model knobs (section 3 of the reference notes). */
#define CWM_ANSOR_WARMUP 100    /* random scores until more records than this */
/* Score of a state whose features cannot be computed (Ansor predicts -inf). */
#define CWM_SCORE_INVALID (-1e30)

#endif

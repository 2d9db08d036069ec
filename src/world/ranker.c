/* ranker.c: the world model's ranker, LambdaMART through XGBoost's C API (rank:ndcg, one query
 * group per workload). Training replaces the ensemble; boosting adds trees fitted to new rows on
 * top of it (XGBoost keeps predicting the old trees on the new matrix and fits the residual
 * lambdas). The byte form carries the training parameters, which XGBoost's model bytes lack. */
#include "cwm/ranker.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/costmodel.h" /* cwm_xgb_booster_check */
#include "cwm/xgb.h"

#define MAGIC "CWMRANK1"
#define VERSION 1u
#define HDR_BYTES 64
#define MAX_GRADE 31   /* XGBoost's NDCG gain 2^grade - 1 must fit */
#define MAX_ROUNDS (1 << 20)
#define MAX_COLS (1 << 20)

struct cwm_ranker {
  cwm_ranker_params p;
  const cwm_xgb_api *x;
  cwm_xgb_booster b; /* NULL until trained */
  int ncols, rounds;
  int margin_col; /* -1: none */
};

void cwm_ranker_set_margin_col(cwm_ranker *r, int col) { r->margin_col = col; }

/* Sets the base margin of d from column margin_col of X, if the ranker has one. */
static int set_margin(const cwm_ranker *r, cwm_xgb_dmatrix d, const float *X, int nrows, int ncols, cwm_err *err) {
  if (r->margin_col < 0 || r->margin_col >= ncols) return CWM_OK;
  float *m = cwm_xmalloc(sizeof(float) * (size_t)(nrows ? nrows : 1));
  for (int i = 0; i < nrows; i++) {
    float v = X[(size_t)i * ncols + r->margin_col];
    m[i] = isfinite(v) ? v : 0.0f;
  }
  int rc = r->x->XGDMatrixSetFloatInfo(d, "base_margin", m, (cwm_xgb_ulong)nrows) != 0
               ? cwm_xgb_fail(r->x, err, "setting the base margin")
               : CWM_OK;
  free(m);
  return rc;
}

void cwm_ranker_params_default(cwm_ranker_params *p) {
  *p = (cwm_ranker_params){.max_depth = 6, .eta = 0.1, .min_child_weight = 0.01, .rounds = 200};
}

static int check_params(const cwm_ranker_params *p, cwm_err *err) {
  if (p->max_depth < 1 || p->max_depth > 32 || !(p->eta > 0 && p->eta <= 1) ||
      !(p->min_child_weight >= 0 && isfinite(p->min_child_weight)) || p->rounds < 1 || p->rounds > MAX_ROUNDS ||
      p->nthread < 0 || p->nthread > 1024)
    return cwm_fail(err, CWM_EINTERNAL,
                    "ranker: bad parameters (max_depth %d, eta %g, min_child_weight %g, rounds %d, nthread %d)",
                    p->max_depth, p->eta, p->min_child_weight, p->rounds, p->nthread);
  return CWM_OK;
}

cwm_ranker *cwm_ranker_new(const cwm_ranker_params *p, cwm_err *err) {
  cwm_ranker_params d;
  cwm_ranker_params_default(&d);
  if (!p) p = &d;
  if (check_params(p, err)) return NULL;
  const cwm_xgb_api *x = cwm_xgb(err);
  if (!x) return NULL;
  cwm_ranker *r = cwm_xcalloc(1, sizeof *r);
  r->p = *p;
  r->x = x;
  r->margin_col = -1;
  return r;
}

void cwm_ranker_free(cwm_ranker *r) {
  if (!r) return;
  if (r->b) r->x->XGBoosterFree(r->b);
  free(r);
}

int cwm_ranker_rounds(const cwm_ranker *r) { return r->rounds; }
int cwm_ranker_ncols(const cwm_ranker *r) { return r->ncols; }

static int set_params(const cwm_ranker *r, cwm_xgb_booster b, cwm_err *err) {
  char depth[16], eta[32], mcw[32], seed[32], nth[16];
  snprintf(depth, sizeof depth, "%d", r->p.max_depth);
  snprintf(eta, sizeof eta, "%.17g", r->p.eta);
  snprintf(mcw, sizeof mcw, "%.17g", r->p.min_child_weight);
  snprintf(seed, sizeof seed, "%d", (int)(r->p.seed % 2147483647u));
  snprintf(nth, sizeof nth, "%d", r->p.nthread > 0 ? r->p.nthread : cwm_xgb_nthread());
  const char *kv[][2] = {
      {"objective", "rank:ndcg"},
      {"tree_method", "hist"}, /* fast, and deterministic for a thread count */
      {"max_depth", depth},
      {"eta", eta},
      {"min_child_weight", mcw},
      {"seed", seed},
      {"nthread", nth},
      {"verbosity", "0"},
      {"disable_default_eval_metric", "1"},
  };
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
    if (r->x->XGBoosterSetParam(b, kv[i][0], kv[i][1]) != 0) return cwm_xgb_fail(r->x, err, "setting parameters");
  return CWM_OK;
}

/* Checks the shape and the labels, then builds the matrix with labels and query groups
 * (empty groups dropped: XGBoost has no use for them). */
static int make_train_matrix(const cwm_ranker *r, const float *X, int nrows, int ncols, const float *labels,
                             const int *group_sizes, int ngroups, cwm_xgb_dmatrix *out, cwm_err *err) {
  *out = NULL;
  if (nrows <= 0 || ncols <= 0 || ncols > MAX_COLS || ngroups <= 0 || !X || !labels || !group_sizes)
    return cwm_fail(err, CWM_EINTERNAL, "ranker: no training data (%d rows of %d features, %d groups)", nrows,
                    ncols, ngroups);
  long sum = 0;
  for (int g = 0; g < ngroups; g++) {
    if (group_sizes[g] < 0)
      return cwm_fail(err, CWM_EINTERNAL, "ranker: group %d has negative size %d", g, group_sizes[g]);
    sum += group_sizes[g];
  }
  if (sum != nrows)
    return cwm_fail(err, CWM_EINTERNAL, "ranker: the groups hold %ld rows, the matrix %d", sum, nrows);
  for (int i = 0; i < nrows; i++)
    if (!(labels[i] >= 0 && labels[i] <= MAX_GRADE && labels[i] == floorf(labels[i])))
      return cwm_fail(err, CWM_EINTERNAL, "ranker: label %g of row %d is not a whole grade in [0, %d]",
                      (double)labels[i], i, MAX_GRADE);
  unsigned *gs = cwm_xmalloc(sizeof *gs * (size_t)ngroups);
  int ng = 0;
  for (int g = 0; g < ngroups; g++)
    if (group_sizes[g] > 0) gs[ng++] = (unsigned)group_sizes[g];
  const cwm_xgb_api *x = r->x;
  cwm_xgb_dmatrix d = NULL;
  int rc = CWM_OK;
  if (x->XGDMatrixCreateFromMat(X, (cwm_xgb_ulong)nrows, (cwm_xgb_ulong)ncols, NAN, &d) != 0)
    rc = cwm_xgb_fail(x, err, "creating the training matrix");
  else if (x->XGDMatrixSetFloatInfo(d, "label", labels, (cwm_xgb_ulong)nrows) != 0)
    rc = cwm_xgb_fail(x, err, "setting labels");
  else if (x->XGDMatrixSetUIntInfo(d, "group", gs, (cwm_xgb_ulong)ng) != 0)
    rc = cwm_xgb_fail(x, err, "setting query groups");
  else
    rc = set_margin(r, d, X, nrows, ncols, err);
  free(gs);
  if (rc) {
    if (d) x->XGDMatrixFree(d);
    return rc;
  }
  *out = d;
  return CWM_OK;
}

int cwm_ranker_train(cwm_ranker *r, const float *X, int nrows, int ncols, const float *labels,
                     const int *group_sizes, int ngroups, int rounds, cwm_err *err) {
  if (rounds <= 0) rounds = r->p.rounds;
  if (rounds > MAX_ROUNDS) return cwm_fail(err, CWM_EINTERNAL, "ranker: %d rounds is too many", rounds);
  const cwm_xgb_api *x = r->x;
  cwm_xgb_dmatrix d = NULL;
  cwm_xgb_booster b = NULL;
  int rc = make_train_matrix(r, X, nrows, ncols, labels, group_sizes, ngroups, &d, err);
  if (rc) return rc;
  if (x->XGBoosterCreate(&d, 1, &b) != 0) {
    rc = cwm_xgb_fail(x, err, "creating a booster");
    goto out;
  }
  if ((rc = set_params(r, b, err))) goto out;
  for (int it = 0; it < rounds; it++)
    if (x->XGBoosterUpdateOneIter(b, it, d) != 0) {
      rc = cwm_xgb_fail(x, err, "boosting");
      goto out;
    }
  if (r->b) x->XGBoosterFree(r->b);
  r->b = b;
  b = NULL;
  r->rounds = rounds;
  r->ncols = ncols;
out:
  if (b) x->XGBoosterFree(b);
  x->XGDMatrixFree(d);
  return rc;
}

int cwm_ranker_boost(cwm_ranker *r, const float *X, int nrows, int ncols, const float *labels,
                     const int *group_sizes, int ngroups, int rounds, cwm_err *err) {
  if (!r->b) return cwm_ranker_train(r, X, nrows, ncols, labels, group_sizes, ngroups, rounds, err);
  if (rounds <= 0) rounds = r->p.rounds / 4 > 0 ? r->p.rounds / 4 : 1;
  if (rounds > MAX_ROUNDS - r->rounds)
    return cwm_fail(err, CWM_EINTERNAL, "ranker: %d more rounds is too many", rounds);
  if (ncols != r->ncols)
    return cwm_fail(err, CWM_EMODEL, "ranker: trained on %d features per row, boosting with %d", r->ncols,
                    ncols);
  const cwm_xgb_api *x = r->x;
  cwm_xgb_dmatrix d = NULL;
  int rc = make_train_matrix(r, X, nrows, ncols, labels, group_sizes, ngroups, &d, err);
  if (rc) return rc;
  for (int i = 0; i < rounds; i++) {
    /* iter numbers continue the ensemble's: XGBoost seeds LambdaMART's pair sampling with it */
    if (x->XGBoosterUpdateOneIter(r->b, r->rounds, d) != 0) {
      rc = cwm_xgb_fail(x, err, "boosting further");
      break;
    }
    r->rounds++;
  }
  x->XGDMatrixFree(d);
  return rc;
}

int cwm_ranker_predict(cwm_ranker *r, const float *X, int nrows, int ncols, double *out, cwm_err *err) {
  if (!r->b) return cwm_fail(err, CWM_EMODEL, "ranker: not trained yet");
  if (ncols != r->ncols)
    return cwm_fail(err, CWM_EMODEL, "ranker: trained on %d features per row, asked about %d", r->ncols, ncols);
  if (nrows < 0) return cwm_fail(err, CWM_EINTERNAL, "ranker: %d rows", nrows);
  if (nrows == 0) return CWM_OK;
  const cwm_xgb_api *x = r->x;
  cwm_xgb_dmatrix d = NULL;
  int rc = CWM_OK;
  const cwm_xgb_ulong *shape = NULL;
  cwm_xgb_ulong dim = 0;
  const float *pred = NULL;
  /* type 1: the raw margin, which is what rank:ndcg predicts anyway; all trees */
  const char *cfg = "{\"type\": 1, \"training\": false, \"iteration_begin\": 0, \"iteration_end\": 0, "
                    "\"strict_shape\": false}";
  if (x->XGDMatrixCreateFromMat(X, (cwm_xgb_ulong)nrows, (cwm_xgb_ulong)ncols, NAN, &d) != 0)
    rc = cwm_xgb_fail(x, err, "creating the prediction matrix");
  else if ((rc = set_margin(r, d, X, nrows, ncols, err)) != CWM_OK)
    ;
  else if (x->XGBoosterPredictFromDMatrix(r->b, d, cfg, &shape, &dim, &pred) != 0)
    rc = cwm_xgb_fail(x, err, "predicting");
  else if (dim < 1 || shape[0] != (cwm_xgb_ulong)nrows || (dim == 2 && shape[1] != 1))
    rc = cwm_fail(err, CWM_EINTERNAL, "ranker: XGBoost answered %llu predictions for %d rows",
                  (unsigned long long)shape[0], nrows);
  else
    for (int i = 0; i < nrows; i++) out[i] = pred[i];
  if (d) x->XGDMatrixFree(d);
  return rc;
}

/* ------------------------------------------------------------------ bytes */

typedef struct {
  unsigned char *p;
  size_t len, cap;
} bytes;

static void put(bytes *b, const void *src, size_t n) {
  if (b->len + n > b->cap) {
    while (b->len + n > b->cap) b->cap = b->cap ? 2 * b->cap : 256;
    b->p = cwm_xrealloc(b->p, b->cap);
  }
  if (n) memcpy(b->p + b->len, src, n);
  b->len += n;
}
static void put_u32(bytes *b, uint32_t v) {
  unsigned char c[4];
  for (int i = 0; i < 4; i++) c[i] = (unsigned char)(v >> (8 * i));
  put(b, c, 4);
}
static void put_u64(bytes *b, uint64_t v) {
  unsigned char c[8];
  for (int i = 0; i < 8; i++) c[i] = (unsigned char)(v >> (8 * i));
  put(b, c, 8);
}
static void put_f64(bytes *b, double f) {
  uint64_t v;
  memcpy(&v, &f, 8);
  put_u64(b, v);
}

int cwm_ranker_save(const cwm_ranker *r, void **data, size_t *len, cwm_err *err) {
  *data = NULL;
  *len = 0;
  const char *bbuf = NULL;
  cwm_xgb_ulong blen = 0;
  if (r->b && r->x->XGBoosterSaveModelToBuffer(r->b, "{\"format\": \"ubj\"}", &blen, &bbuf) != 0)
    return cwm_xgb_fail(r->x, err, "serialising the ranker");
  bytes b = {0};
  put(&b, MAGIC, 8);
  put_u32(&b, VERSION);
  put_u32(&b, (uint32_t)r->ncols);
  put_u32(&b, (uint32_t)r->rounds);
  put_u32(&b, (uint32_t)r->p.max_depth);
  put_f64(&b, r->p.eta);
  put_f64(&b, r->p.min_child_weight);
  put_u64(&b, r->p.seed);
  put_u32(&b, (uint32_t)r->p.nthread);
  put_u32(&b, (uint32_t)r->p.rounds);
  put_u64(&b, (uint64_t)blen);
  put(&b, bbuf, (size_t)blen);
  put_u64(&b, cwm_hash64(b.p, b.len));
  *data = b.p;
  *len = b.len;
  return CWM_OK;
}

cwm_ranker *cwm_ranker_load(const void *data, size_t len, cwm_err *err) {
  const unsigned char *d = data;
  if (!d || len < HDR_BYTES + 8) {
    cwm_fail(err, CWM_EMODEL, "ranker: truncated (%zu bytes)", len);
    return NULL;
  }
  if (memcmp(d, MAGIC, 8) != 0) {
    cwm_fail(err, CWM_EMODEL, "ranker: not a ranker (bad magic)");
    return NULL;
  }
  uint32_t version = cwm_get_le32(d + 8);
  if (version != VERSION) {
    cwm_fail(err, CWM_EMODEL, "ranker: version %u, this build reads version %u", version, VERSION);
    return NULL;
  }
  uint64_t blen = cwm_get_le64(d + 56);
  if (blen != len - HDR_BYTES - 8) {
    cwm_fail(err, CWM_EMODEL, "ranker: truncated or corrupt (%zu bytes do not match its header)", len);
    return NULL;
  }
  if (cwm_hash64(d, len - 8) != cwm_get_le64(d + len - 8)) {
    cwm_fail(err, CWM_EMODEL, "ranker: checksum mismatch (the bytes were altered or damaged)");
    return NULL;
  }
  uint32_t ncols = cwm_get_le32(d + 12), rounds = cwm_get_le32(d + 16);
  cwm_ranker_params p;
  cwm_ranker_params_default(&p);
  p.max_depth = (int)cwm_get_le32(d + 20);
  p.eta = cwm_get_lef64(d + 24);
  p.min_child_weight = cwm_get_lef64(d + 32);
  p.seed = cwm_get_le64(d + 40);
  p.nthread = (int)cwm_get_le32(d + 48);
  p.rounds = (int)cwm_get_le32(d + 52);
  cwm_err pe = {0};
  if (check_params(&p, &pe) || ncols > MAX_COLS || rounds > MAX_ROUNDS ||
      (rounds == 0) != (blen == 0) || (ncols == 0) != (rounds == 0)) {
    cwm_fail(err, CWM_EMODEL, "ranker: corrupt header (%u features, %u rounds, %llu booster bytes%s%s)", ncols,
             rounds, (unsigned long long)blen, pe.code ? "; " : "", pe.code ? pe.msg : "");
    return NULL;
  }
  /* XGBoost trusts the lengths and tree indices it reads (a changed child index crashes it), and
   * a checksum only catches accidents: the booster is checked first */
  char why[256];
  if (blen && cwm_xgb_booster_check(d + HDR_BYTES, (size_t)blen, (int)ncols, why, sizeof why) != 0) {
    cwm_fail(err, CWM_EMODEL, "ranker: the booster is not one this ranker writes: %s", why);
    return NULL;
  }
  cwm_ranker *r = cwm_ranker_new(&p, err);
  if (!r) return NULL;
  if (!blen) return r;
  const cwm_xgb_api *x = r->x;
  cwm_xgb_booster b = NULL;
  int got = -1;
  if (x->XGBoosterCreate(NULL, 0, &b) != 0) {
    cwm_xgb_fail(x, err, "creating a booster");
    goto fail;
  }
  if (x->XGBoosterLoadModelFromBuffer(b, d + HDR_BYTES, (cwm_xgb_ulong)blen) != 0) {
    cwm_err xe = {0};
    cwm_xgb_fail(x, &xe, "loading");
    cwm_fail(err, CWM_EMODEL, "ranker: the booster does not load (%s)", xe.msg);
    goto fail;
  }
  if (x->XGBoosterBoostedRounds(b, &got) != 0 || got != (int)rounds) {
    cwm_fail(err, CWM_EMODEL, "ranker: the booster holds %d rounds, the header says %u", got, rounds);
    goto fail;
  }
  if (set_params(r, b, err)) goto fail;
  r->b = b;
  r->rounds = (int)rounds;
  r->ncols = (int)ncols;
  return r;
fail:
  if (b) x->XGBoosterFree(b);
  cwm_ranker_free(r);
  return NULL;
}

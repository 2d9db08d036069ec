/* ansor.c: Ansor's cost model: gradient-boosted trees (XGBoost's C API) on the per-store feature
 * rows of cwm_ansor_features, trained with the pack-sum squared error (a program's score is the
 * sum of its rows' predictions), plus the model file (training rows, labels, booster). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/costmodel.h"
#include "cwm/xgb.h"

#define NF CWM_ANSOR_NFEAT
#define MAX_ROUNDS 10000       /* Ansor's num_boost_round */
#define EARLY_STOP 50          /* rounds without improvement of the training pack-sum RMSE */
#define RMSE_TOL 1e-6          /* an improvement smaller than this does not count */

#define FILE_MAGIC "CWMANSOR"
#define FILE_VERSION 1u
#define HDR_BYTES 48
#define PROG_BYTES 40

typedef struct {
  char key[17];
  double cost;     /* median seconds; CWM_FAILED_COST for failures */
  int error;       /* failed or unusable cost: label 0 */
  long row0;
  int nrows;       /* 0 if the state could not be featurized */
} prog_t;

typedef struct {
  cwm_costmodel base;
  uint64_t seed;
  cwm_rng rng;
  prog_t *prog;
  long nprog, capprog;
  float *rows;
  long nrows, caprows;
  long last_train; /* programs in the set at the last training; 0: never trained */
  const cwm_xgb_api *x; /* XGBoost, opened at creation */
  cwm_xgb_booster bst;
} ansor_model;

/* XGBoost threads: see cwm_xgb_nthread. */
static const char *nthread(void) {
  return cwm_xgb_nthread() == 1 ? "1" : "2";
}

static int set_train_params(const cwm_xgb_api *x, cwm_xgb_booster b, uint64_t seed, cwm_err *err) {
  char sd[32];
  snprintf(sd, sizeof sd, "%d", (int)(seed % 2147483647u));
  const char *kv[][2] = {
      {"objective", "reg:squarederror"}, /* the gradients come from us; this only fixes the link */
      {"base_score", "0.5"},             /* the 1.x default Ansor ran with, pinned */
      {"max_depth", "10"},
      {"gamma", "0.001"},
      {"min_child_weight", "0"},
      {"eta", "0.2"},
      {"seed", sd},
      {"nthread", nthread()},
      {"verbosity", "0"},
      {"disable_default_eval_metric", "1"},
  };
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
    if (x->XGBoosterSetParam(b, kv[i][0], kv[i][1]) != 0) return cwm_xgb_fail(x, err, "setting parameters");
  return CWM_OK;
}

static int set_run_params(const cwm_xgb_api *x, cwm_xgb_booster b, cwm_err *err) {
  if (x->XGBoosterSetParam(b, "nthread", nthread()) != 0 || x->XGBoosterSetParam(b, "verbosity", "0") != 0)
    return cwm_xgb_fail(x, err, "setting parameters");
  return CWM_OK;
}

/* ------------------------------------------------------------------ data */

static void add_prog(ansor_model *m, const char *key, double cost, int error, const float *rows, int nrows) {
  if (m->nprog == m->capprog) {
    m->capprog = m->capprog ? m->capprog * 2 : 256;
    m->prog = cwm_xrealloc(m->prog, sizeof *m->prog * (size_t)m->capprog);
  }
  if (m->nrows + nrows > m->caprows) {
    while (m->nrows + nrows > m->caprows) m->caprows = m->caprows ? m->caprows * 2 : 1024;
    m->rows = cwm_xrealloc(m->rows, sizeof(float) * NF * (size_t)m->caprows);
  }
  prog_t *p = &m->prog[m->nprog++];
  memset(p, 0, sizeof *p);
  snprintf(p->key, sizeof p->key, "%s", key);
  p->cost = cost;
  p->error = error;
  p->row0 = m->nrows;
  p->nrows = nrows;
  if (nrows) memcpy(m->rows + (size_t)m->nrows * NF, rows, sizeof(float) * NF * (size_t)nrows);
  m->nrows += nrows;
}

typedef struct {
  const char *key;
  long i;
} keyidx;

static int cmp_keyidx(const void *a, const void *b) {
  const keyidx *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* y = min cost of the workload / cost; failures 0. */
static void compute_labels(const ansor_model *m, float *y) {
  long n = m->nprog;
  keyidx *k = cwm_xmalloc(sizeof *k * (size_t)(n ? n : 1));
  for (long i = 0; i < n; i++) {
    k[i].key = m->prog[i].key;
    k[i].i = i;
  }
  qsort(k, (size_t)n, sizeof *k, cmp_keyidx);
  for (long a = 0; a < n;) {
    long b = a;
    double best = INFINITY;
    while (b < n && !strcmp(k[b].key, k[a].key)) {
      const prog_t *p = &m->prog[k[b].i];
      if (!p->error && p->cost < best) best = p->cost;
      b++;
    }
    for (long j = a; j < b; j++) {
      const prog_t *p = &m->prog[k[j].i];
      y[k[j].i] = p->error || !isfinite(best) ? 0.0f : (float)(best / p->cost);
    }
    a = b;
  }
  free(k);
}

/* ------------------------------------------------------------------ training */

static int train(ansor_model *m, cwm_err *err) {
  if (m->nrows == 0) return CWM_OK;
  long n = m->nrows;
  float *y = cwm_xmalloc(sizeof(float) * (size_t)m->nprog);
  compute_labels(m, y);
  float *lab = cwm_xmalloc(sizeof(float) * (size_t)n), *wt = cwm_xmalloc(sizeof(float) * (size_t)n);
  float *grad = cwm_xmalloc(sizeof(float) * (size_t)n), *hess = cwm_xmalloc(sizeof(float) * (size_t)n);
  for (long p = 0; p < m->nprog; p++)
    for (int r = 0; r < m->prog[p].nrows; r++) {
      lab[m->prog[p].row0 + r] = y[p];
      wt[m->prog[p].row0 + r] = y[p]; /* sample weight = normalised throughput, as Ansor */
    }
  const cwm_xgb_api *x = m->x;
  cwm_xgb_dmatrix d = NULL;
  cwm_xgb_booster b = NULL;
  int rc = CWM_OK;
  if (x->XGDMatrixCreateFromMat(m->rows, (cwm_xgb_ulong)n, NF, NAN, &d) != 0) {
    rc = cwm_xgb_fail(x, err, "creating the training matrix");
    goto out;
  }
  if (x->XGDMatrixSetFloatInfo(d, "label", lab, (cwm_xgb_ulong)n) != 0 ||
      x->XGDMatrixSetFloatInfo(d, "weight", wt, (cwm_xgb_ulong)n) != 0) {
    rc = cwm_xgb_fail(x, err, "setting labels");
    goto out;
  }
  if (x->XGBoosterCreate(&d, 1, &b) != 0) {
    rc = cwm_xgb_fail(x, err, "creating a booster");
    goto out;
  }
  if ((rc = set_train_params(x, b, m->seed, err))) goto out;
  /* pack-sum squared error as a custom objective: every row of a program gets the gradient of
   * (sum of the program's predictions - y)^2 / 2, weighted by y */
  const char *cfg = "{\"type\": 1, \"training\": true, \"iteration_begin\": 0, \"iteration_end\": 0, "
                    "\"strict_shape\": false}";
  double best = INFINITY;
  int best_it = 0;
  for (int it = 0; it < MAX_ROUNDS; it++) {
    cwm_xgb_ulong const *shape;
    cwm_xgb_ulong dim;
    const float *pred;
    if (x->XGBoosterPredictFromDMatrix(b, d, cfg, &shape, &dim, &pred) != 0) {
      rc = cwm_xgb_fail(x, err, "predicting during training");
      goto out;
    }
    double se = 0;
    long np = 0;
    for (long p = 0; p < m->nprog; p++) {
      const prog_t *pp = &m->prog[p];
      if (!pp->nrows) continue;
      double s = 0;
      for (int r = 0; r < pp->nrows; r++) s += pred[pp->row0 + r];
      double g = s - y[p];
      for (int r = 0; r < pp->nrows; r++) {
        grad[pp->row0 + r] = (float)(g * y[p]);
        hess[pp->row0 + r] = y[p];
      }
      se += g * g;
      np++;
    }
    if (it > 0) { /* the training pack-sum RMSE after `it` trees (Ansor's tr-p-rmse) */
      double rmse = sqrt(se / (double)(np ? np : 1));
      if (rmse < best - RMSE_TOL) {
        best = rmse;
        best_it = it;
      } else if (it - best_it >= EARLY_STOP) {
        break;
      }
    }
    if (x->XGBoosterBoostOneIter(b, d, grad, hess, (cwm_xgb_ulong)n) != 0) {
      rc = cwm_xgb_fail(x, err, "boosting");
      goto out;
    }
  }
  if (m->bst) x->XGBoosterFree(m->bst);
  m->bst = b;
  b = NULL;
  m->last_train = m->nprog;
out:
  if (b) x->XGBoosterFree(b);
  if (d) x->XGDMatrixFree(d);
  free(y);
  free(lab);
  free(wt);
  free(grad);
  free(hess);
  return rc;
}

/* ------------------------------------------------------------------ interface */

static int ansor_update(cwm_costmodel *cm, cwm_state *const *states, const cwm_record *recs, int n, cwm_err *err) {
  ansor_model *m = (ansor_model *)cm;
  for (int i = 0; i < n; i++) {
    double cost = cwm_record_cost(&recs[i]);
    int error = recs[i].error != 0 || !(cost > 0 && cost < CWM_FAILED_COST && isfinite(cost));
    float *rows = NULL;
    int nr = 0;
    cwm_err e = {0};
    if (!states[i] || cwm_ansor_features(states[i], &rows, &nr, &e) != 0) nr = 0;
    add_prog(m, recs[i].key, cost, error, rows, nr);
    free(rows);
  }
  /* retrain from scratch once the set grew by a fifth since the last training */
  if (m->nprog > CWM_ANSOR_WARMUP && 5 * (m->nprog - m->last_train) >= m->last_train)
    return train(m, err);
  return CWM_OK;
}

static int ansor_predict(cwm_costmodel *cm, cwm_state *const *states, int n, double *scores, cwm_err *err) {
  ansor_model *m = (ansor_model *)cm;
  if (!m->bst || m->nprog <= CWM_ANSOR_WARMUP) {
    for (int i = 0; i < n; i++) {
      double u = cwm_rng_unit(&m->rng);
      scores[i] = states[i] && cwm_state_is_complete(states[i]) ? u : CWM_SCORE_INVALID;
    }
    return CWM_OK;
  }
  int *cnt = cwm_xcalloc((size_t)n, sizeof(int));
  long total = 0, cap = 0;
  float *all = NULL;
  for (int i = 0; i < n; i++) {
    float *rows = NULL;
    int nr = 0;
    cwm_err e = {0};
    if (!states[i] || cwm_ansor_features(states[i], &rows, &nr, &e) != 0) nr = 0;
    if (total + nr > cap) {
      while (total + nr > cap) cap = cap ? cap * 2 : 4096;
      all = cwm_xrealloc(all, sizeof(float) * NF * (size_t)cap);
    }
    if (nr) memcpy(all + (size_t)total * NF, rows, sizeof(float) * NF * (size_t)nr);
    total += nr;
    cnt[i] = nr;
    free(rows);
  }
  int rc = CWM_OK;
  const float *pred = NULL;
  const cwm_xgb_api *x = m->x;
  cwm_xgb_dmatrix d = NULL;
  if (total > 0) {
    cwm_xgb_ulong const *shape;
    cwm_xgb_ulong dim;
    const char *cfg = "{\"type\": 0, \"training\": false, \"iteration_begin\": 0, \"iteration_end\": 0, "
                      "\"strict_shape\": false}";
    if (x->XGDMatrixCreateFromMat(all, (cwm_xgb_ulong)total, NF, NAN, &d) != 0) {
      rc = cwm_xgb_fail(x, err, "creating the prediction matrix");
      goto out;
    }
    if (x->XGBoosterPredictFromDMatrix(m->bst, d, cfg, &shape, &dim, &pred) != 0) {
      rc = cwm_xgb_fail(x, err, "predicting");
      goto out;
    }
  }
  long r = 0;
  for (int i = 0; i < n; i++) {
    if (!cnt[i]) {
      scores[i] = CWM_SCORE_INVALID;
      continue;
    }
    double s = 0;
    for (int k = 0; k < cnt[i]; k++) s += pred[r + k];
    r += cnt[i];
    scores[i] = s;
  }
out:
  if (d) x->XGDMatrixFree(d);
  free(all);
  free(cnt);
  return rc;
}

/* ------------------------------------------------------------------ model file
 * Little-endian: header (magic, version, nfeat, nprog, nrows, last_train, booster bytes), one
 * 40-byte entry per program (key, cost, label, error, rows), the rows as float32, XGBoost's UBJSON
 * booster, then the FNV-1a hash of everything before it. */

static void put_u32(cwm_buf *b, uint32_t v) {
  for (int i = 0; i < 4; i++) cwm_buf_putc(b, (char)(v >> (8 * i) & 0xff));
}
static void put_u64(cwm_buf *b, uint64_t v) {
  for (int i = 0; i < 8; i++) cwm_buf_putc(b, (char)(v >> (8 * i) & 0xff));
}
static void put_f32(cwm_buf *b, float f) {
  uint32_t v;
  memcpy(&v, &f, 4);
  put_u32(b, v);
}
static void put_f64(cwm_buf *b, double f) {
  uint64_t v;
  memcpy(&v, &f, 8);
  put_u64(b, v);
}
static void put_bytes(cwm_buf *b, const void *p, size_t n) {
  const char *c = p;
  for (size_t i = 0; i < n; i++) cwm_buf_putc(b, c[i]);
}

static int ansor_save(cwm_costmodel *cm, const char *path, cwm_err *err) {
  ansor_model *m = (ansor_model *)cm;
  const char *bbuf = NULL;
  cwm_xgb_ulong blen = 0;
  if (m->bst && m->x->XGBoosterSaveModelToBuffer(m->bst, "{\"format\": \"ubj\"}", &blen, &bbuf) != 0)
    return cwm_xgb_fail(m->x, err, "serialising the booster");
  float *y = cwm_xmalloc(sizeof(float) * (size_t)(m->nprog ? m->nprog : 1));
  compute_labels(m, y);
  cwm_buf b;
  cwm_buf_init(&b);
  put_bytes(&b, FILE_MAGIC, 8);
  put_u32(&b, FILE_VERSION);
  put_u32(&b, NF);
  put_u64(&b, (uint64_t)m->nprog);
  put_u64(&b, (uint64_t)m->nrows);
  put_u64(&b, (uint64_t)m->last_train);
  put_u64(&b, (uint64_t)blen);
  for (long i = 0; i < m->nprog; i++) {
    const prog_t *p = &m->prog[i];
    char key[16];
    memset(key, '0', sizeof key);
    memcpy(key, p->key, strlen(p->key) < 16 ? strlen(p->key) : 16);
    put_bytes(&b, key, 16);
    put_f64(&b, p->cost);
    put_f32(&b, y[i]);
    put_u32(&b, (uint32_t)p->error);
    put_u32(&b, (uint32_t)p->nrows);
    put_u32(&b, 0);
  }
  free(y);
  for (long i = 0; i < m->nrows * NF; i++) put_f32(&b, m->rows[i]);
  if (blen) put_bytes(&b, bbuf, (size_t)blen);
  put_u64(&b, cwm_hash64(b.s, b.len));
  int rc = cwm_write_file_atomic(path, b.s, b.len, err);
  cwm_buf_free(&b);
  return rc;
}

static int is_hex_key(const unsigned char *k) {
  for (int i = 0; i < 16; i++)
    if (!((k[i] >= '0' && k[i] <= '9') || (k[i] >= 'a' && k[i] <= 'f'))) return 0;
  return 1;
}

/* Parses a whole model file held in memory (path only names it in messages); every field is
 * checked before anything is committed to m, so a bad file leaves m as it was. */
static int load_buffer(ansor_model *m, const unsigned char *data, size_t len, const char *path, cwm_err *err) {
  int rc = CWM_OK;
  const cwm_xgb_api *x = m->x;
  cwm_xgb_booster bst = NULL;
  if (len < HDR_BYTES + 8) {
    rc = cwm_fail(err, CWM_EMODEL, "model file %s: truncated (%zu bytes)", path, len);
    goto out;
  }
  if (memcmp(data, FILE_MAGIC, 8) != 0) {
    rc = cwm_fail(err, CWM_EMODEL, "model file %s: not an Ansor cost model file (bad magic)", path);
    goto out;
  }
  uint32_t version = cwm_get_le32(data + 8), nfeat = cwm_get_le32(data + 12);
  uint64_t nprog = cwm_get_le64(data + 16), nrows = cwm_get_le64(data + 24), last = cwm_get_le64(data + 32),
           blen = cwm_get_le64(data + 40);
  if (version != FILE_VERSION) {
    rc = cwm_fail(err, CWM_EMODEL, "model file %s: version %u, this build reads version %u", path, version,
                  FILE_VERSION);
    goto out;
  }
  if (nfeat != NF) {
    rc = cwm_fail(err, CWM_EMODEL, "model file %s: %u features per row, expected %d", path, nfeat, NF);
    goto out;
  }
  /* sizes, guarded against overflow: each part must fit in the file */
  uint64_t avail = len - HDR_BYTES - 8;
  if (nprog > avail / PROG_BYTES || nrows > avail / (NF * 4) || blen > avail ||
      nprog * PROG_BYTES + nrows * NF * 4 + blen != avail) {
    rc = cwm_fail(err, CWM_EMODEL, "model file %s: truncated or corrupt (%zu bytes do not match its header)",
                  path, len);
    goto out;
  }
  if (cwm_hash64(data, len - 8) != cwm_get_le64(data + len - 8)) {
    rc = cwm_fail(err, CWM_EMODEL, "model file %s: checksum mismatch (the file was altered or damaged)", path);
    goto out;
  }
  if (last > nprog) {
    rc = cwm_fail(err, CWM_EMODEL, "model file %s: corrupt header (trained on %llu of %llu programs)", path,
                  (unsigned long long)last, (unsigned long long)nprog);
    goto out;
  }
  const unsigned char *pp = data + HDR_BYTES, *rp = pp + nprog * PROG_BYTES, *bp = rp + nrows * NF * 4;
  uint64_t rsum = 0;
  for (uint64_t i = 0; i < nprog; i++) {
    const unsigned char *q = pp + i * PROG_BYTES;
    double cost = cwm_get_lef64(q + 16);
    uint32_t error = cwm_get_le32(q + 28), nr = cwm_get_le32(q + 32);
    if (!is_hex_key(q) || !(cost >= 0) || error > 1 || nr > nrows - rsum) {
      rc = cwm_fail(err, CWM_EMODEL, "model file %s: program %llu is corrupt", path, (unsigned long long)i);
      goto out;
    }
    rsum += nr;
  }
  if (rsum != nrows) {
    rc = cwm_fail(err, CWM_EMODEL, "model file %s: the programs hold %llu rows, the header says %llu", path,
                  (unsigned long long)rsum, (unsigned long long)nrows);
    goto out;
  }
  for (uint64_t i = 0; i < nrows * NF; i++)
    if (!isfinite(cwm_get_lef32(rp + 4 * i))) {
      rc = cwm_fail(err, CWM_EMODEL, "model file %s: feature row %llu is not finite", path,
                    (unsigned long long)(i / NF));
      goto out;
    }
  char why[160];
  if (blen && cwm_xgb_booster_check(bp, (size_t)blen, NF, why, sizeof why) != 0) {
    rc = cwm_fail(err, CWM_EMODEL, "model file %s: the booster is not one this model writes: %s", path, why);
    goto out;
  }
  if (blen) {
    if (x->XGBoosterCreate(NULL, 0, &bst) != 0) {
      rc = cwm_xgb_fail(x, err, "creating a booster");
      goto out;
    }
    if (x->XGBoosterLoadModelFromBuffer(bst, bp, (cwm_xgb_ulong)blen) != 0) {
      const char *xm = x->XGBGetLastError();
      rc = cwm_fail(err, CWM_EMODEL, "model file %s: the booster does not load: %s", path, xm ? xm : "");
      goto out;
    }
    if ((rc = set_run_params(x, bst, err))) goto out;
  }
  /* commit */
  float *row = cwm_xmalloc(sizeof(float) * NF * 64);
  for (uint64_t i = 0; i < nprog; i++) {
    const unsigned char *q = pp + i * PROG_BYTES;
    char key[17];
    memcpy(key, q, 16);
    key[16] = 0;
    uint32_t nr = cwm_get_le32(q + 32);
    row = cwm_xrealloc(row, sizeof(float) * NF * (nr ? nr : 1));
    for (uint64_t k = 0; k < (uint64_t)nr * NF; k++) row[k] = cwm_get_lef32(rp + 4 * k);
    rp += (size_t)nr * NF * 4;
    add_prog(m, key, cwm_get_lef64(q + 16), (int)cwm_get_le32(q + 28), row, (int)nr);
  }
  free(row);
  m->last_train = (long)last;
  if (m->bst) x->XGBoosterFree(m->bst);
  m->bst = bst;
  bst = NULL;
out:
  if (bst) x->XGBoosterFree(bst);
  return rc;
}

static int load_file(ansor_model *m, const char *path, cwm_err *err) {
  size_t len = 0;
  cwm_err e = {0};
  unsigned char *data = (unsigned char *)cwm_read_file_max(path, (size_t)512 << 20, &len, &e);
  if (!data) return cwm_fail(err, CWM_EMODEL, "model file %s: %s", path, e.msg);
  int rc = load_buffer(m, data, len, path, err);
  free(data);
  return rc;
}

static void ansor_free(cwm_costmodel *cm) {
  ansor_model *m = (ansor_model *)cm;
  if (!m) return;
  if (m->bst) m->x->XGBoosterFree(m->bst);
  free(m->prog);
  free(m->rows);
  free(m);
}

cwm_costmodel *cwm_costmodel_ansor(uint64_t seed, const char *pretrained, cwm_err *err) {
  /* XGBoost must answer before we rely on it: a missing library is CWM_EDEP here, not later */
  const cwm_xgb_api *x = cwm_xgb(err);
  if (!x) return NULL;
  cwm_xgb_booster probe = NULL;
  if (x->XGBoosterCreate(NULL, 0, &probe) != 0) {
    cwm_xgb_fail(x, err, "cannot initialise");
    return NULL;
  }
  x->XGBoosterFree(probe);
  ansor_model *m = cwm_xcalloc(1, sizeof *m);
  m->x = x;
  m->base = (cwm_costmodel){.name = "ansor", .update = ansor_update, .predict = ansor_predict, .save = ansor_save,
                            .free = ansor_free};
  m->seed = seed;
  cwm_rng_seed(&m->rng, seed);
  if (pretrained && load_file(m, pretrained, err) != 0) {
    ansor_free(&m->base);
    return NULL;
  }
  return &m->base;
}

cwm_costmodel *cwm_costmodel_ansor_from_buffer(uint64_t seed, const void *data, size_t len, cwm_err *err) {
  cwm_costmodel *cm = cwm_costmodel_ansor(seed, NULL, err);
  if (!cm) return NULL;
  if (load_buffer((ansor_model *)cm, data, len, "(in memory)", err) != 0) {
    ansor_free(cm);
    return NULL;
  }
  return cm;
}

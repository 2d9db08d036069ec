/* world.c: the world model as one object (vocabulary, encoder, transition, ranker), inference
 * (encode, roll out, feature rows) and the cost model the search calls; its model file is
 * world_file.c. */
#include "world_internal.h"

#include "cwm/modelfile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cwm_world_config_default(cwm_world_config *c) {
  memset(c, 0, sizeof *c);
  c->enc.width = 128;
  c->enc.heads = 4;
  c->enc.layers = 2;
  c->enc.window = 128;
  c->enc.overlap = 32;
  c->margin = 0.1f;
  c->act_round = 1;
}

static void world_caches_init(cwm_world *w) {
  wm_map_init(&w->act_cache, 2 * w->D);
  wm_map_init(&w->z0_cache, w->D);
  wm_map_init(&w->zs_cache, w->D);
}

cwm_world *cwm_world_new(const cwm_world_config *c, cwm_vocab *vocab, uint64_t seed, cwm_err *err) {
  int rc = cwm_blas_init(err);
  if (rc) {
    cwm_vocab_free(vocab);
    return NULL;
  }
  cwm_world *w = cwm_xcalloc(1, sizeof *w);
  w->cfg = *c;
  w->cfg.enc.vocab = cwm_vocab_size(vocab);
  w->vocab = vocab;
  w->enc = cwm_encoder_new(&w->cfg.enc, seed, err);
  if (!w->enc) {
    cwm_vocab_free(vocab);
    free(w);
    return NULL;
  }
  w->cfg.enc = *cwm_encoder_config(w->enc);
  w->D = w->cfg.enc.width;
  wm_transition_params(&w->tp, w->D);
  wm_transition_init(&w->tp, seed);
  world_caches_init(w);
  return w;
}

void cwm_world_free(cwm_world *w) {
  if (!w) return;
  cwm_vocab_free(w->vocab);
  cwm_encoder_free(w->enc);
  cwm_params_free(&w->tp);
  cwm_ranker_free(w->ranker);
  wm_map_free(&w->act_cache);
  wm_map_free(&w->z0_cache);
  wm_map_free(&w->zs_cache);
  free(w->notes);
  free(w);
}

const cwm_world_config *cwm_world_get_config(const cwm_world *w) { return &w->cfg; }
int cwm_world_width(const cwm_world *w) { return w->D; }
const cwm_vocab *cwm_world_vocab(const cwm_world *w) { return w->vocab; }
cwm_encoder *cwm_world_encoder(cwm_world *w) { return w->enc; }
cwm_ranker *cwm_world_ranker(cwm_world *w) { return w->ranker; }
void cwm_world_set_ranker(cwm_world *w, cwm_ranker *r) {
  if (w->ranker != r) cwm_ranker_free(w->ranker);
  w->ranker = r;
  if (r) cwm_ranker_set_margin_col(r, w->D); /* the trees boost from the value head's score */
}
void cwm_world_set_no_transition(cwm_world *w, int on) {
  w->cfg.no_transition = on;
  if (on) w->cfg.static_final = 0;
}

void cwm_world_set_mode(cwm_world *w, int mode) {
  w->cfg.no_transition = mode == CWM_MODE_NO_TRANSITION;
  w->cfg.static_final = mode == CWM_MODE_STATIC;
  w->cfg.ranker_z0 = mode == CWM_MODE_VALUE;
  w->cfg.paper = mode == CWM_MODE_PAPER;
}

int cwm_world_mode(const cwm_world *w) {
  return w->cfg.no_transition ? CWM_MODE_NO_TRANSITION
         : w->cfg.static_final ? CWM_MODE_STATIC
         : w->cfg.ranker_z0    ? CWM_MODE_VALUE
         : w->cfg.paper        ? CWM_MODE_PAPER
                               : CWM_MODE_ROLLOUT;
}

void cwm_world_set_paper_margin(cwm_world *w, int on) { w->cfg.paper_margin = on != 0; }

static const char *const MODE_NAMES[] = {"rollout", "no-transition", "static", "value", "paper"};
#define NMODES ((int)(sizeof MODE_NAMES / sizeof MODE_NAMES[0]))

int cwm_world_mode_parse(const char *s) {
  for (int m = 0; s && m < NMODES; m++)
    if (!strcmp(s, MODE_NAMES[m])) return m;
  return -1;
}

const char *cwm_world_mode_name(int mode) { return MODE_NAMES[mode >= 0 && mode < NMODES ? mode : 0]; }

void cwm_world_set_notes(cwm_world *w, const char *notes) {
  free(w->notes);
  w->notes = notes ? cwm_xstrdup(notes) : NULL;
}
const char *cwm_world_notes(const cwm_world *w) { return w->notes ? w->notes : ""; }

/* ---- inference ------------------------------------------------------------------------------ */

int wm_encode_texts(cwm_world *w, const char *const *texts, int n, float *out, int keep, cwm_err *err) {
  int **ids = cwm_xcalloc((size_t)(n ? n : 1), sizeof *ids);
  int *lens = cwm_xcalloc((size_t)(n ? n : 1), sizeof *lens);
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) rc = cwm_tokenize(w->vocab, texts[i], &ids[i], &lens[i], err);
  if (!rc) rc = cwm_encoder_forward(w->enc, (const int *const *)ids, lens, n, out, keep, err);
  for (int i = 0; i < n; i++) free(ids[i]);
  free(ids);
  free(lens);
  return rc;
}

int cwm_world_encode(cwm_world *w, const char *const *texts, int n, float *out, cwm_err *err) {
  enum { CHUNK = 16 };
  for (int i = 0; i < n; i += CHUNK) {
    int m = n - i < CHUNK ? n - i : CHUNK;
    int rc = wm_encode_texts(w, texts + i, m, out + (size_t)i * w->D, 0, err);
    if (rc) return rc;
  }
  return 0;
}

static uint64_t action_key(const cwm_world *w, const cwm_step *s) {
  int ids[CWM_ACT_MAXF];
  int n = cwm_action_ids(s, w->cfg.act_round, ids);
  return cwm_hash64(ids, sizeof(int) * (size_t)n) ^ (uint64_t)n;
}

/* The cached row of an action: [w = u/|u| | d]. */
static void fill_wd(float *row, const float *u, const float *d, int D) {
  double nn = 0;
  for (int j = 0; j < D; j++) nn += (double)u[j] * u[j];
  float inv = nn > 0 ? (float)(1.0 / sqrt(nn)) : 0.0f;
  for (int j = 0; j < D; j++) {
    row[j] = u[j] * inv;
    row[D + j] = d[j];
  }
}

/* [w | d] of one step, from the cache or computed once. */
static const float *action_wd(cwm_world *w, const cwm_step *s) {
  uint64_t key = action_key(w, s);
  float *row = wm_map_get(&w->act_cache, key);
  if (row) return row;
  wm_act_batch b = {0};
  const cwm_step *one[1] = {s};
  wm_act_forward(w, one, 1, &b);
  row = wm_map_put(&w->act_cache, key);
  fill_wd(row, b.u, b.d, w->D);
  wm_act_batch_free(&b);
  return row;
}

/* Computes the actions of a batch of candidates that are not cached yet in one batched forward
 * (one call per action is mostly call overhead). */
void wm_prefetch_actions(cwm_world *w, cwm_state *const *states, int n) {
  wm_map seen;
  wm_map_init(&seen, 1);
  const cwm_step **miss = NULL;
  uint64_t *keys = NULL;
  int nm = 0, cap = 0;
  for (int i = 0; i < n; i++)
    for (int t = 0; t < states[i]->nsteps; t++) {
      const cwm_step *st = &states[i]->steps[t];
      uint64_t key = action_key(w, st);
      if (wm_map_get(&w->act_cache, key) || wm_map_get(&seen, key)) continue;
      wm_map_put(&seen, key);
      if (nm == cap) {
        cap = cap ? cap * 2 : 256;
        miss = cwm_xrealloc(miss, sizeof *miss * (size_t)cap);
        keys = cwm_xrealloc(keys, sizeof *keys * (size_t)cap);
      }
      miss[nm] = st;
      keys[nm++] = key;
    }
  if (nm > 0) {
    wm_act_batch b = {0};
    wm_act_forward(w, miss, nm, &b);
    for (int k = 0; k < nm; k++)
      fill_wd(wm_map_put(&w->act_cache, keys[k]), b.u + (size_t)k * w->D, b.d + (size_t)k * w->D, w->D);
    wm_act_batch_free(&b);
  }
  wm_map_free(&seen);
  free(miss);
  free(keys);
}

int cwm_world_rollout(cwm_world *w, const float *z0, const cwm_step *steps, int n, float *zT, float *trace) {
  int D = w->D;
  float *z = cwm_xmalloc(sizeof(float) * (size_t)D);
  memcpy(z, z0, sizeof(float) * (size_t)D);
  for (int t = 0; t < n; t++) {
    const float *wd = action_wd(w, &steps[t]);
    double dot = 0;
    for (int j = 0; j < D; j++) dot += (double)wd[j] * z[j];
    for (int j = 0; j < D; j++) z[j] = z[j] - (float)dot * wd[j] + wd[D + j];
    if (trace) memcpy(trace + (size_t)t * D, z, sizeof(float) * (size_t)D);
  }
  memcpy(zT, z, sizeof(float) * (size_t)D);
  free(z);
  return 0;
}

int cwm_world_nfeat(const cwm_world *w) { return w->D + 1 + CWM_ACT_NFEAT; }

int wm_row_mode(const cwm_world *w) {
  int m = cwm_world_mode(w);
  return m == CWM_MODE_STATIC ? CWM_MODE_ROLLOUT : m; /* the static ablation's z_T is E(s_T) */
}

/* The value head's score of the change z_T - z_0 (NaN where z_T is). */
static float row_value(cwm_world *w, const float *z0, const float *zT) {
  int D = w->D, nan = 0;
  float *x = cwm_xmalloc(sizeof(float) * (size_t)D);
  for (int j = 0; j < D; j++) {
    x[j] = zT[j] - z0[j];
    nan |= isnan(x[j]);
  }
  float pre[WM_VALUE_HIDDEN], act[WM_VALUE_HIDDEN], v = NAN;
  if (!nan) wm_value_forward(w, x, 1, pre, act, &v);
  free(x);
  return v;
}

/* The row without its value column when with_value is 0 (the caller fills it, batched: see
 * wm_rows_value for what the latent columns hold until then). */
void wm_row_fill(cwm_world *w, const float *z0, const float *zT, int mode, const cwm_step *steps, int n,
                 const cwm_state *final, const cwm_hwinfo *hw, float *row, int with_value) {
  int D = w->D;
  float v = with_value && mode != CWM_MODE_NO_TRANSITION ? row_value(w, z0, zT) : NAN;
  if (mode == CWM_MODE_NO_TRANSITION) {
    memcpy(row, z0, sizeof(float) * (size_t)D);
    row[D] = 0;
  } else if (mode == CWM_MODE_PAPER) {
    memcpy(row, zT, sizeof(float) * (size_t)D);
    row[D] = w->cfg.paper_margin ? v : NAN;
    final = NULL; /* nothing of the final program: the (state) columns stay missing */
  } else {
    for (int j = 0; j < D; j++) row[j] = zT[j] - z0[j];
    row[D] = v;
    /* the value mode: the rollout stays behind the value head; without with_value, wm_rows_value
     * reads z_T - z_0 first and puts z_0 in its place */
    if (with_value && mode == CWM_MODE_VALUE) memcpy(row, z0, sizeof(float) * (size_t)D);
  }
  cwm_action_features(steps, n, final, hw, row + D + 1);
}

void cwm_world_row(cwm_world *w, const float *z0, const float *zT, int mode, const cwm_step *steps, int n,
                   const cwm_state *final, const cwm_hwinfo *hw, float *row) {
  wm_row_fill(w, z0, zT, mode, steps, n, final, hw, row, 1);
}

/* The value column of n rows of the model's layout in one batched pass over z_T - z_0: the
 * latent columns hold z_T - z_0 (rollout, value) or z_T (paper, with row i of z0s [n, width] the
 * workload's z_0); in the value mode they then take z0s's row. */
void wm_rows_value(cwm_world *w, float *rows, int n, const float *z0s) {
  int D = w->D, nf = cwm_world_nfeat(w), H = WM_VALUE_HIDDEN, mode = wm_row_mode(w);
  if (mode == CWM_MODE_PAPER && !w->cfg.paper_margin) return; /* no value column: it stays NaN */
  float *x = cwm_xmalloc(sizeof(float) * (size_t)n * D), *pre = cwm_xmalloc(sizeof(float) * (size_t)n * H);
  float *act = cwm_xmalloc(sizeof(float) * (size_t)n * H), *v = cwm_xmalloc(sizeof(float) * (size_t)n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < D; j++) {
      float c = rows[(size_t)i * nf + j];
      x[(size_t)i * D + j] = mode == CWM_MODE_PAPER ? c - z0s[(size_t)i * D + j] : c;
    }
  wm_value_forward(w, x, n, pre, act, v);
  for (int i = 0; i < n; i++) {
    int nan = 0;
    for (int j = 0; j < D; j++) nan |= isnan(x[(size_t)i * D + j]);
    rows[(size_t)i * nf + D] = nan ? NAN : v[i];
    if (mode == CWM_MODE_VALUE && z0s) memcpy(rows + (size_t)i * nf, z0s + (size_t)i * D, sizeof(float) * (size_t)D);
  }
  free(x);
  free(pre);
  free(act);
  free(v);
}

/* z0 of the workload a dag holds (E of its initial state), cached by workload key. */
const float *wm_z0(cwm_world *w, const cwm_dag *d, cwm_err *err) {
  uint64_t h = cwm_hash64(cwm_dag_key(d), 16);
  float *z = wm_map_get(&w->z0_cache, h);
  if (z) return z;
  cwm_state *s0 = cwm_state_init(d);
  char *text = cwm_state_print(s0);
  cwm_state_free(s0);
  float *tmp = cwm_xmalloc(sizeof(float) * (size_t)w->D);
  const char *t1[1] = {text};
  int rc = cwm_world_encode(w, t1, 1, tmp, err);
  free(text);
  if (rc) {
    free(tmp);
    return NULL;
  }
  z = wm_map_put(&w->z0_cache, h);
  memcpy(z, tmp, sizeof(float) * (size_t)w->D);
  free(tmp);
  return z;
}

/* The hardware of record i (targets as in cwm_world_record_rows): NULL (this machine) unless the
 * model's hardware columns follow the records' targets. */
static const cwm_hwinfo *record_hw(const cwm_world *w, const char *const *targets, int i, cwm_hwinfo *buf) {
  if (!w->cfg.hw_target) return NULL;
  cwm_hwinfo_of_target(buf, targets ? targets[i] : NULL);
  return buf;
}

int cwm_world_record_rows(cwm_world *w, const cwm_dag *d, const cwm_step *const *steps, const int *nsteps,
                          const char *const *targets, int n, int mode, float *rows, cwm_err *err) {
  const float *z0 = wm_z0(w, d, err);
  if (!z0) return err ? err->code : CWM_EMODEL;
  int D = w->D, nf = cwm_world_nfeat(w);
  if (mode == 0) mode = cwm_world_mode(w); /* the model's own mode */
  int layout = mode == CWM_MODE_NO_TRANSITION ? mode : wm_row_mode(w);
  /* the paper mode's rows read no final program, so none is built (unless it is encoded) */
  int need_final = layout != CWM_MODE_PAPER || mode == CWM_MODE_STATIC;
  float *z = cwm_xmalloc(sizeof(float) * (size_t)D);
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    cwm_state *fin = NULL;
    cwm_err e = {0};
    if (need_final && cwm_state_replay(d, steps[i], nsteps[i], &fin, NULL, &e)) fin = NULL;
    if (mode == CWM_MODE_NO_TRANSITION) {
      memcpy(z, z0, sizeof(float) * (size_t)D);
    } else if (mode == CWM_MODE_STATIC) {
      if (!fin) {
        for (int j = 0; j < D; j++) z[j] = NAN;
      } else {
        char *text = cwm_state_print(fin);
        const char *t1[1] = {text};
        rc = cwm_world_encode(w, t1, 1, z, err);
        free(text);
      }
    } else {
      cwm_world_rollout(w, z0, steps[i], nsteps[i], z, NULL);
    }
    cwm_hwinfo hw;
    cwm_world_row(w, z0, z, layout, steps[i], nsteps[i], fin, record_hw(w, targets, i, &hw), rows + (size_t)i * nf);
    cwm_state_free(fin);
  }
  free(z);
  return rc;
}

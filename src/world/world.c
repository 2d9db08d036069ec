/* world.c: the world model as one object (vocabulary, encoder, transition, ranker), its model
 * file, inference (encode, roll out, feature rows) and the cost model the search calls.
 * The model file is the container of modelfile.h with sections "world.config" (key=value text),
 * "vocab", one tensor per parameter ("enc.<name>", "act.<name>"), "ranker" (optional) and
 * "notes". */
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
}

int cwm_world_mode(const cwm_world *w) {
  return w->cfg.no_transition ? CWM_MODE_NO_TRANSITION
         : w->cfg.static_final ? CWM_MODE_STATIC
         : w->cfg.ranker_z0    ? CWM_MODE_VALUE
                               : CWM_MODE_ROLLOUT;
}

int cwm_world_mode_parse(const char *s) {
  if (!s) return -1;
  if (!strcmp(s, "rollout")) return CWM_MODE_ROLLOUT;
  if (!strcmp(s, "no-transition")) return CWM_MODE_NO_TRANSITION;
  if (!strcmp(s, "static")) return CWM_MODE_STATIC;
  if (!strcmp(s, "value")) return CWM_MODE_VALUE;
  return -1;
}

const char *cwm_world_mode_name(int mode) {
  return mode == CWM_MODE_NO_TRANSITION ? "no-transition"
         : mode == CWM_MODE_STATIC      ? "static"
         : mode == CWM_MODE_VALUE       ? "value"
                                        : "rollout";
}
void cwm_world_set_notes(cwm_world *w, const char *notes) {
  free(w->notes);
  w->notes = notes ? cwm_xstrdup(notes) : NULL;
}
const char *cwm_world_notes(const cwm_world *w) { return w->notes ? w->notes : ""; }

/* ---- the model file ----------------------------------------------------------------------- */

int cwm_world_save(cwm_world *w, const char *path, cwm_err *err) {
  cwm_mfile_writer *mw = cwm_mfile_writer_new();
  cwm_buf cfg;
  cwm_buf_init(&cfg);
  const cwm_enc_config *e = &w->cfg.enc;
  cwm_buf_printf(&cfg,
                 "world_version=%d\nvocab=%d\nwidth=%d\nheads=%d\nlayers=%d\nff=%d\nwindow=%d\noverlap=%d\n"
                 "margin=%.9g\nno_transition=%d\nstatic_final=%d\naction_vocab=%d\nact_round=%d\nranker_z0=%d\n",
                 CWM_WORLD_VERSION, e->vocab, e->width, e->heads, e->layers, e->ff, e->window, e->overlap,
                 (double)w->cfg.margin, w->cfg.no_transition, w->cfg.static_final, cwm_action_vocab(), w->cfg.act_round,
                 w->cfg.ranker_z0);
  int rc = cwm_mfile_add_text(mw, "world.config", cfg.s, err);
  cwm_buf_free(&cfg);
  cwm_buf vb;
  cwm_buf_init(&vb);
  if (!rc) rc = cwm_vocab_save(w->vocab, &vb, err);
  if (!rc) rc = cwm_mfile_add_bytes(mw, "vocab", vb.s, vb.len, err);
  cwm_buf_free(&vb);
  for (int i = 0; !rc && i < cwm_encoder_nparams(w->enc); i++) {
    cwm_param *p = cwm_encoder_param(w->enc, i);
    char name[96];
    snprintf(name, sizeof name, "enc.%s", p->name);
    rc = cwm_mfile_add_tensor(mw, name, p->w, p->ndim, p->shape, err);
  }
  for (int i = 0; !rc && i < w->tp.n; i++)
    rc = cwm_mfile_add_tensor(mw, w->tp.p[i].name, w->tp.p[i].w, w->tp.p[i].ndim, w->tp.p[i].shape, err);
  if (!rc && w->ranker && cwm_ranker_rounds(w->ranker) > 0) {
    void *data = NULL;
    size_t len = 0;
    rc = cwm_ranker_save(w->ranker, &data, &len, err);
    if (!rc) rc = cwm_mfile_add_bytes(mw, "ranker", data, len, err);
    free(data);
  }
  if (!rc && w->notes) rc = cwm_mfile_add_text(mw, "notes", w->notes, err);
  if (!rc) rc = cwm_mfile_write(mw, path, err);
  cwm_mfile_writer_free(mw);
  return rc;
}

static int cfg_int(const char *text, const char *key, int *out) {
  size_t kl = strlen(key);
  for (const char *p = text; p && *p;) {
    if (!strncmp(p, key, kl) && p[kl] == '=') {
      char *end;
      long v = strtol(p + kl + 1, &end, 10);
      if (end == p + kl + 1 || v < -1000000000L || v > 1000000000L) return 0;
      *out = (int)v;
      return 1;
    }
    p = strchr(p, '\n');
    if (p) p++;
  }
  return 0;
}

static int load_params(const cwm_mfile *f, const char *path, const char *prefix, cwm_param *p, cwm_err *err) {
  char name[96];
  snprintf(name, sizeof name, "%s%s", prefix, p->name);
  cwm_err e = {0};
  if (cwm_mfile_need_tensor(f, name, p->ndim, p->shape, &e))
    return cwm_fail(err, CWM_EMODEL, "model file %s: %.400s", path, e.msg);
  int shape[CWM_MFILE_MAX_DIMS], nd = 0;
  const float *data = cwm_mfile_tensor(f, name, shape, &nd);
  if (!data) return cwm_fail(err, CWM_EMODEL, "model file %s: tensor '%s' missing", path, name);
  for (size_t i = 0; i < p->n; i++)
    if (!isfinite(data[i]))
      return cwm_fail(err, CWM_EMODEL, "model file %s: tensor '%s' holds a non-finite value at %zu", path, name, i);
  memcpy(p->w, data, sizeof(float) * p->n);
  return 0;
}

cwm_world *cwm_world_load(const char *path, cwm_err *err) {
  cwm_mfile *f = cwm_mfile_load(path, err);
  if (!f) return NULL;
  cwm_world *w = NULL;
  cwm_vocab *vocab = NULL;
  const char *cfg = cwm_mfile_text(f, "world.config");
  if (!cfg) {
    cwm_fail(err, CWM_EMODEL, "model file %s: no world.config section (not a world model file?)", path);
    goto out;
  }
  int ver = 0;
  if (!cfg_int(cfg, "world_version", &ver)) {
    cwm_fail(err, CWM_EMODEL, "model file %s: world.config has no world_version", path);
    goto out;
  }
  if (ver < 1 || ver > CWM_WORLD_VERSION) {
    cwm_fail(err, CWM_EMODEL, "model file %s: world model version %d; this cwm reads version %d (retrain with cwm train)",
             path, ver, CWM_WORLD_VERSION);
    goto out;
  }
  cwm_world_config c;
  cwm_world_config_default(&c);
  int av = 0, margin_milli = 0;
  (void)margin_milli;
  if (!cfg_int(cfg, "width", &c.enc.width) || !cfg_int(cfg, "heads", &c.enc.heads) ||
      !cfg_int(cfg, "layers", &c.enc.layers) || !cfg_int(cfg, "ff", &c.enc.ff) ||
      !cfg_int(cfg, "window", &c.enc.window) || !cfg_int(cfg, "overlap", &c.enc.overlap) ||
      !cfg_int(cfg, "action_vocab", &av)) {
    cwm_fail(err, CWM_EMODEL, "model file %s: world.config lacks a field (width, heads, layers, ff, window, overlap, action_vocab)", path);
    goto out;
  }
  if (av != cwm_action_vocab()) {
    cwm_fail(err, CWM_EMODEL, "model file %s: action vocabulary of %d ids; this cwm has %d", path, av, cwm_action_vocab());
    goto out;
  }
  if (c.enc.width < 4 || c.enc.width > 4096 || c.enc.layers < 1 || c.enc.layers > 64 || c.enc.window < 2 ||
      c.enc.window > 8192 || c.enc.heads < 1 || c.enc.ff < 1 || c.enc.ff > 65536) {
    cwm_fail(err, CWM_EMODEL, "model file %s: world.config sizes out of range", path);
    goto out;
  }
  const char *mline = strstr(cfg, "margin=");
  if (mline) c.margin = strtof(mline + 7, NULL);
  cfg_int(cfg, "no_transition", &c.no_transition);
  cfg_int(cfg, "static_final", &c.static_final); /* absent in older files: 0 */
  c.act_round = 0; /* absent before version 5: floor buckets */
  cfg_int(cfg, "act_round", &c.act_round);
  c.ranker_z0 = 0; /* absent before the value mode */
  cfg_int(cfg, "ranker_z0", &c.ranker_z0);
  if (c.no_transition) c.static_final = 0;
  if (c.no_transition || c.static_final) c.ranker_z0 = 0;
  size_t vn = 0;
  const void *vb = cwm_mfile_bytes(f, "vocab", &vn);
  if (!vb) {
    cwm_fail(err, CWM_EMODEL, "model file %s: no vocab section", path);
    goto out;
  }
  vocab = cwm_vocab_load(vb, vn, err);
  if (!vocab) {
    if (err) {
      char m[sizeof err->msg];
      snprintf(m, sizeof m, "%s", err->msg);
      cwm_fail(err, CWM_EMODEL, "model file %s: vocab: %.400s", path, m);
    }
    goto out;
  }
  w = cwm_world_new(&c, vocab, 0, err);
  vocab = NULL;
  if (!w) goto out;
  for (int i = 0; i < cwm_encoder_nparams(w->enc); i++)
    if (load_params(f, path, "enc.", cwm_encoder_param(w->enc, i), err)) goto fail;
  for (int i = 0; i < w->tp.n; i++) {
    if (ver == 1 && i >= TP_V_W1) break; /* version 1 has no value head */
    if (load_params(f, path, "", &w->tp.p[i], err)) goto fail;
  }
  if (ver == 1) wm_value_init(&w->tp, 1);
  size_t rn = 0;
  /* a ranker of an earlier version read rows of another layout: it is left out (train the ranker
   * again: cwm train ranker --model-file OLD --records LOG --out NEW) */
  const void *rb = ver < 4 ? NULL : cwm_mfile_bytes(f, "ranker", &rn); /* 5 changed no row */
  if (rb) {
    w->ranker = cwm_ranker_load(rb, rn, err);
    if (!w->ranker) goto fail;
    cwm_ranker_set_margin_col(w->ranker, w->D);
  }
  const char *notes = cwm_mfile_text(f, "notes");
  if (notes) w->notes = cwm_xstrdup(notes);
  goto out;
fail:
  cwm_world_free(w);
  w = NULL;
out:
  cwm_vocab_free(vocab);
  cwm_mfile_free(f);
  return w;
}

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
static void prefetch_actions(cwm_world *w, cwm_state *const *states, int n) {
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

/* The row without its value column when with_value is 0 (the caller fills it, batched). */
static void row_fill(cwm_world *w, const float *z0, const float *zT, int no_transition, const cwm_step *steps, int n,
                     const cwm_state *final, float *row, int with_value) {
  int D = w->D;
  if (no_transition) {
    memcpy(row, z0, sizeof(float) * (size_t)D);
    row[D] = 0;
  } else {
    int nan = 0;
    for (int j = 0; j < D; j++) {
      row[j] = zT[j] - z0[j];
      nan |= isnan(row[j]);
    }
    float pre[WM_VALUE_HIDDEN], act[WM_VALUE_HIDDEN], v = NAN;
    if (!nan && with_value) wm_value_forward(w, row, 1, pre, act, &v);
    row[D] = v;
    /* the value mode: the rollout stays behind the value head; without with_value, rows_value
     * reads z_T - z_0 first and puts z_0 in its place */
    if (with_value && w->cfg.ranker_z0) memcpy(row, z0, sizeof(float) * (size_t)D);
  }
  cwm_action_features(steps, n, final, NULL, row + D + 1);
}

void cwm_world_row(cwm_world *w, const float *z0, const float *zT, int no_transition, const cwm_step *steps, int n,
                   const cwm_state *final, float *row) {
  row_fill(w, z0, zT, no_transition, steps, n, final, row, 1);
}

/* The value column of n rows in one batched pass over their z_T - z_0 columns; in the value
 * mode those columns then take row i of z0s [n, width] (the workload's z_0). */
static void rows_value(cwm_world *w, float *rows, int n, const float *z0s) {
  int D = w->D, nf = cwm_world_nfeat(w), H = WM_VALUE_HIDDEN;
  float *x = cwm_xmalloc(sizeof(float) * (size_t)n * D), *pre = cwm_xmalloc(sizeof(float) * (size_t)n * H);
  float *act = cwm_xmalloc(sizeof(float) * (size_t)n * H), *v = cwm_xmalloc(sizeof(float) * (size_t)n);
  for (int i = 0; i < n; i++) memcpy(x + (size_t)i * D, rows + (size_t)i * nf, sizeof(float) * (size_t)D);
  wm_value_forward(w, x, n, pre, act, v);
  for (int i = 0; i < n; i++) {
    int nan = 0;
    for (int j = 0; j < D; j++) nan |= isnan(x[(size_t)i * D + j]);
    rows[(size_t)i * nf + D] = nan ? NAN : v[i];
    if (w->cfg.ranker_z0 && z0s) memcpy(rows + (size_t)i * nf, z0s + (size_t)i * D, sizeof(float) * (size_t)D);
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

int cwm_world_record_rows(cwm_world *w, const cwm_dag *d, const cwm_step *const *steps, const int *nsteps,
                          int n, int mode, float *rows, cwm_err *err) {
  const float *z0 = wm_z0(w, d, err);
  if (!z0) return err ? err->code : CWM_EMODEL;
  int D = w->D, nf = cwm_world_nfeat(w);
  if (mode == 0) mode = cwm_world_mode(w); /* the model's own mode */
  float *z = cwm_xmalloc(sizeof(float) * (size_t)D);
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    cwm_state *fin = NULL;
    cwm_err e = {0};
    if (cwm_state_replay(d, steps[i], nsteps[i], &fin, NULL, &e)) fin = NULL;
    if (mode == 1) {
      memcpy(z, z0, sizeof(float) * (size_t)D);
    } else if (mode == 2) {
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
    cwm_world_row(w, z0, z, mode == 1, steps[i], nsteps[i], fin,
                  rows + (size_t)i * nf);
    cwm_state_free(fin);
  }
  free(z);
  return rc;
}

/* ---- the cost model ----------------------------------------------------------------------- */

typedef struct {
  uint64_t key;
  float *rows;
  double *costs;
  int n, cap;
  uint64_t *fam; /* the measured programs' families (cwm_state_family) and how many of each */
  int *fcount;
  int nfam, capfam;
} wm_group;

static int family_count(const wm_group *g, uint64_t f) {
  for (int i = 0; i < g->nfam; i++)
    if (g->fam[i] == f) return g->fcount[i];
  return 0;
}

static void family_add(wm_group *g, uint64_t f) {
  for (int i = 0; i < g->nfam; i++)
    if (g->fam[i] == f) {
      g->fcount[i]++;
      return;
    }
  if (g->nfam == g->capfam) {
    g->capfam = g->capfam ? 2 * g->capfam : 16;
    g->fam = cwm_xrealloc(g->fam, sizeof *g->fam * (size_t)g->capfam);
    g->fcount = cwm_xrealloc(g->fcount, sizeof *g->fcount * (size_t)g->capfam);
  }
  g->fam[g->nfam] = f;
  g->fcount[g->nfam++] = 1;
}

/* The hand-off. The world model's strength is what it knows before a workload's first
 * measurement; once hundreds are in, a model trained on them alone, over features of the whole
 * program, orders that workload's candidates better than the world model boosted on its narrow
 * per-candidate row (without the hand-off, at 1,000 trials Ansor's search beat world's on dense_qkv and
 * bmm_qk, re-measured 693 against 716 us and 130 against 140 us). So a world cost model also
 * trains Ansor's model from scratch on everything measured, and once a workload has
 * HANDOFF_MIN records its candidates' score is a blend of the two models' ranks, Ansor's
 * weighted n / (n + HANDOFF_HALF). At 64 trials (one round) nothing changes.
 * CWM_WORLD_HANDOFF=0 turns it off. */
#define HANDOFF_MIN 128
#define HANDOFF_HALF 256.0
/* Ansor's model knows only what was measured: a candidate of a family (cwm_state_family) with
 * few measured programs is one it extrapolates to, where the world model's prior ranks better
 * (measured: trained on world's 1,000 conv_s1_3x3 records, Ansor's model put none of the 331
 * programs under 1,100 us of Ansor's own 4,192 among its top 64, the world model alone 39). So
 * its weight is also scaled by nf / (nf + FAMILY_HALF), nf the candidate's family's records. */
#define FAMILY_HALF 32.0
/* The search's family quota for this model (cwm_tune_opts.family_quota): the world model's
 * prior and the hand-off's trust in measured families make its picks crowd the incumbent's
 * family; a quarter of a round at most goes to one family, the rest to the best of others. */
#define WORLD_FAMILY_QUOTA 0.25

typedef struct {
  cwm_costmodel base;
  cwm_world *w;
  wm_group *groups;
  int ngroups;
  float *rowbuf;
  size_t rowcap;
  cwm_costmodel *online; /* Ansor's model from scratch (the hand-off); NULL when off */
} world_cm;

static float *row_buffer(world_cm *m, int n) {
  size_t need = (size_t)n * (size_t)cwm_world_nfeat(m->w);
  if (need > m->rowcap) {
    m->rowcap = need * 2;
    m->rowbuf = cwm_xrealloc(m->rowbuf, sizeof(float) * m->rowcap);
  }
  return m->rowbuf;
}

/* The static-final ablation: z_T = E(printed final state) of every candidate. The evolution scores
 * the same candidates again in later generations and rounds, so encodings are kept by the hash of
 * the printed text and only the new texts are encoded, in one batch. */
static int rows_static(cwm_world *w, cwm_state *const *states, int n, float *rows, cwm_err *err) {
  int D = w->D, nf = cwm_world_nfeat(w);
  char **texts = cwm_xmalloc(sizeof(char *) * (size_t)n);
  uint64_t *keys = cwm_xmalloc(sizeof(uint64_t) * (size_t)n);
  int *miss = cwm_xmalloc(sizeof(int) * (size_t)n), nmiss = 0;
  wm_map seen; /* the same text twice in one batch is encoded once */
  wm_map_init(&seen, 1);
  for (int i = 0; i < n; i++) {
    texts[i] = cwm_state_print(states[i]);
    keys[i] = cwm_hash64(texts[i], strlen(texts[i]));
    if (wm_map_get(&w->zs_cache, keys[i]) || wm_map_get(&seen, keys[i])) continue;
    wm_map_put(&seen, keys[i]);
    miss[nmiss++] = i;
  }
  wm_map_free(&seen);
  int rc = 0;
  if (nmiss > 0) {
    const char **mt = cwm_xmalloc(sizeof(char *) * (size_t)nmiss);
    for (int k = 0; k < nmiss; k++) mt[k] = texts[miss[k]];
    float *z = cwm_xmalloc(sizeof(float) * (size_t)nmiss * (size_t)D);
    rc = cwm_world_encode(w, mt, nmiss, z, err);
    for (int k = 0; k < nmiss && !rc; k++)
      memcpy(wm_map_put(&w->zs_cache, keys[miss[k]]), z + (size_t)k * D, sizeof(float) * (size_t)D);
    free(z);
    free(mt);
  }
  for (int i = 0; i < n && !rc; i++) {
    const float *z0 = wm_z0(w, states[i]->dag, err);
    if (!z0) {
      rc = err ? err->code : CWM_EMODEL;
      break;
    }
    row_fill(w, z0, wm_map_get(&w->zs_cache, keys[i]), 0, states[i]->steps, states[i]->nsteps, states[i], rows + (size_t)i * nf, 0);
  }
  for (int i = 0; i < n; i++) free(texts[i]);
  free(texts);
  free(keys);
  free(miss);
  if (!rc && n > 0) rows_value(w, rows, n, NULL);
  return rc;
}

static int rows_of_states(cwm_world *w, cwm_state *const *states, int n, float *rows, cwm_err *err) {
  int D = w->D, nf = cwm_world_nfeat(w);
  if (w->cfg.static_final && !w->cfg.no_transition) return rows_static(w, states, n, rows, err);
  if (!w->cfg.no_transition) prefetch_actions(w, states, n);
  float *z = cwm_xmalloc(sizeof(float) * (size_t)D);
  /* the value mode's z_0 columns: copies, since a later workload's z_0 may move the cache's rows */
  float *z0s = w->cfg.ranker_z0 ? cwm_xmalloc(sizeof(float) * (size_t)(n > 0 ? n : 1) * (size_t)D) : NULL;
  for (int i = 0; i < n; i++) {
    const float *z0 = wm_z0(w, states[i]->dag, err);
    if (!z0) {
      free(z);
      free(z0s);
      return err ? err->code : CWM_EMODEL;
    }
    if (z0s) memcpy(z0s + (size_t)i * D, z0, sizeof(float) * (size_t)D);
    if (w->cfg.no_transition) memcpy(z, z0, sizeof(float) * (size_t)D);
    else cwm_world_rollout(w, z0, states[i]->steps, states[i]->nsteps, z, NULL);
    row_fill(w, z0, z, w->cfg.no_transition, states[i]->steps, states[i]->nsteps, states[i], rows + (size_t)i * nf,
             0);
  }
  free(z);
  if (!w->cfg.no_transition && n > 0) rows_value(w, rows, n, z0s);
  free(z0s);
  return 0;
}

static int score_rows(cwm_world *w, cwm_state *const *states, int n, float *rows, double *scores, cwm_err *err) {
  int rc = rows_of_states(w, states, n, rows, err);
  if (rc) return rc;
  rc = cwm_ranker_predict(w->ranker, rows, n, cwm_world_nfeat(w), scores, err);
  if (rc) return rc;
  for (int i = 0; i < n; i++)
    if (!cwm_state_is_complete(states[i])) scores[i] = CWM_SCORE_INVALID;
  return 0;
}

int wm_score_states(cwm_world *w, cwm_state *const *states, int n, double *scores, cwm_err *err) {
  if (n <= 0) return 0;
  if (!w->ranker) return cwm_fail(err, CWM_EMODEL, "world model: no trained ranker");
  float *rows = cwm_xmalloc(sizeof(float) * (size_t)n * (size_t)cwm_world_nfeat(w));
  int rc = score_rows(w, states, n, rows, scores, err);
  free(rows);
  return rc;
}

typedef struct {
  double v;
  int i;
} wm_scored;

static int cmp_scored(const void *a, const void *b) {
  const wm_scored *x = a, *y = b;
  return (x->v > y->v) - (x->v < y->v);
}

/* Replaces the valid entries of v by their rank among them, 0 (worst) to 1 (best). */
static void to_ranks(double *v, int n) {
  wm_scored *s = cwm_xmalloc(sizeof *s * (size_t)(n ? n : 1));
  int m = 0;
  for (int i = 0; i < n; i++)
    if (v[i] > CWM_SCORE_INVALID) s[m].v = v[i], s[m++].i = i;
  qsort(s, (size_t)m, sizeof *s, cmp_scored); /* a search batch: thousands of candidates */
  for (int r = 0; r < m; r++) v[s[r].i] = m > 1 ? (double)r / (m - 1) : 1.0;
  free(s);
}

static const wm_group *group_find(const world_cm *m, uint64_t key) {
  for (int g = 0; g < m->ngroups; g++)
    if (m->groups[g].key == key) return &m->groups[g];
  return NULL;
}

static int world_predict(cwm_costmodel *base, cwm_state *const *states, int n, double *scores, cwm_err *err) {
  world_cm *m = (world_cm *)base;
  if (n <= 0) return 0;
  int rc = score_rows(m->w, states, n, row_buffer(m, n), scores, err);
  if (rc || !m->online || !states[0]) return rc;
  const wm_group *g = group_find(m, cwm_hash64(cwm_dag_key(states[0]->dag), 16));
  if (!g || g->n < HANDOFF_MIN) return 0;
  double *on = cwm_xmalloc(sizeof(double) * (size_t)n);
  rc = cwm_costmodel_predict(m->online, states, n, on, err);
  if (!rc) {
    double a0 = g->n / (g->n + HANDOFF_HALF);
    to_ranks(scores, n);
    to_ranks(on, n);
    for (int i = 0; i < n; i++) {
      if (!(scores[i] > CWM_SCORE_INVALID)) continue;
      int nf = states[i] ? family_count(g, cwm_state_family(states[i])) : 0;
      double a = a0 * nf / (nf + FAMILY_HALF);
      scores[i] = on[i] > CWM_SCORE_INVALID ? (1 - a) * scores[i] + a * on[i] : 0;
    }
  }
  free(on);
  return rc;
}

static wm_group *group_of(world_cm *m, uint64_t key) {
  for (int g = 0; g < m->ngroups; g++)
    if (m->groups[g].key == key) return &m->groups[g];
  m->groups = cwm_xrealloc(m->groups, sizeof *m->groups * (size_t)(m->ngroups + 1));
  wm_group *g = &m->groups[m->ngroups++];
  memset(g, 0, sizeof *g);
  g->key = key;
  return g;
}

/* Boosts the ranker with everything measured so far for each workload touched (one query group
 * each): a few trees per round, so the pre-trained ensemble is refined, not replaced. */
static int world_update(cwm_costmodel *base, cwm_state *const *states, const cwm_record *recs, int n, cwm_err *err) {
  world_cm *m = (world_cm *)base;
  if (n <= 0) return 0;
  int nf = cwm_world_nfeat(m->w);
  float *rows = cwm_xmalloc(sizeof(float) * (size_t)n * (size_t)nf);
  int rc = rows_of_states(m->w, states, n, rows, err);
  int *touched = cwm_xcalloc((size_t)n, sizeof *touched);
  int ntouched = 0;
  for (int i = 0; i < n && !rc; i++) {
    uint64_t key = cwm_hash64(recs[i].key, 16);
    wm_group *g = group_of(m, key);
    if (g->n == g->cap) {
      g->cap = g->cap ? g->cap * 2 : 64;
      g->rows = cwm_xrealloc(g->rows, sizeof(float) * (size_t)g->cap * (size_t)nf);
      g->costs = cwm_xrealloc(g->costs, sizeof(double) * (size_t)g->cap);
    }
    memcpy(g->rows + (size_t)g->n * nf, rows + (size_t)i * nf, sizeof(float) * (size_t)nf);
    g->costs[g->n++] = cwm_record_cost(&recs[i]);
    if (states[i]) family_add(g, cwm_state_family(states[i]));
    int gi = (int)(g - m->groups), seen = 0;
    for (int k = 0; k < ntouched; k++) seen |= touched[k] == gi;
    if (!seen) touched[ntouched++] = gi;
  }
  for (int k = 0; k < ntouched && !rc; k++) {
    wm_group *g = &m->groups[touched[k]];
    int valid = 0;
    for (int i = 0; i < g->n; i++) valid += cwm_cost_valid(g->costs[i]);
    if (g->n < 8 || valid < 2) continue; /* nothing to order yet */
    float *labels = cwm_xmalloc(sizeof(float) * (size_t)g->n);
    cwm_relevance_grades(g->costs, g->n, CWM_RANKER_GRADES, labels);
    int sizes[1] = {g->n};
    rc = cwm_ranker_boost(m->w->ranker, g->rows, g->n, nf, labels, sizes, 1, 10, err);
    free(labels);
  }
  free(touched);
  free(rows);
  if (!rc && m->online) rc = cwm_costmodel_update(m->online, states, recs, n, err);
  return rc;
}

static int world_save(cwm_costmodel *base, const char *path, cwm_err *err) {
  world_cm *m = (world_cm *)base;
  return cwm_world_save(m->w, path, err);
}

static void world_free(cwm_costmodel *base) {
  world_cm *m = (world_cm *)base;
  for (int g = 0; g < m->ngroups; g++) {
    free(m->groups[g].rows);
    free(m->groups[g].costs);
    free(m->groups[g].fam);
    free(m->groups[g].fcount);
  }
  free(m->groups);
  free(m->rowbuf);
  cwm_costmodel_free(m->online);
  cwm_world_free(m->w);
  free(m);
}

void cwm_world_cm_opts_default(cwm_world_cm_opts *o) { o->handoff = 1; }

cwm_costmodel *cwm_costmodel_world(cwm_world *w, const cwm_world_cm_opts *o, cwm_err *err) {
  if (!w) {
    cwm_fail(err, CWM_EMODEL, "world cost model: no model");
    return NULL;
  }
  if (!w->ranker || cwm_ranker_rounds(w->ranker) == 0) {
    cwm_fail(err, CWM_EMODEL, "world cost model: the model has no trained ranker (cwm train ranker)");
    cwm_world_free(w);
    return NULL;
  }
  world_cm *m = cwm_xcalloc(1, sizeof *m);
  m->base.name = "world";
  m->base.update = world_update;
  m->base.predict = world_predict;
  m->base.save = world_save;
  m->base.free = world_free;
  m->base.family_quota = WORLD_FAMILY_QUOTA;
  m->w = w;
  if (!o || o->handoff) {
    m->online = cwm_costmodel_ansor(1, NULL, err);
    if (!m->online) {
      world_free(&m->base);
      return NULL;
    }
  }
  return &m->base;
}

/* The caller's choice of default model, copied so the caller's string need not outlive the call. */
static char g_model_path[4096];

void cwm_world_set_default_path(const char *path) {
  snprintf(g_model_path, sizeof g_model_path, "%s", path ? path : "");
}

const char *cwm_world_default_path(void) {
  static char path[4096];
  if (g_model_path[0]) return g_model_path;
#ifdef CWM_SOURCE_DIR
  snprintf(path, sizeof path, "%s/models/default.cwm", CWM_SOURCE_DIR);
  if (access(path, R_OK) == 0) return path;
#endif
  snprintf(path, sizeof path, "/usr/local/share/cwm/default.cwm");
  if (access(path, R_OK) == 0) return path;
  return NULL;
}

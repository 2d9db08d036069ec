/* world_cm.c: the world model as the search's cost model: scores candidates by rolling their
 * steps forward from the workload's z_0 and ranking the predicted states, boosts the ranker with
 * each round's measurements (one query group per workload), and finds the default model file. */
#include "world_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
  int threads;           /* cwm_world_cm_opts.threads */
} world_cm;

/* The machine of the search's rows: NULL (this machine) unless the model's hardware columns
 * follow the target, then this machine with the search's threads as its cores; the vector width
 * is read at each call, as the target may set it after the model is made. */
static const cwm_hwinfo *search_hw(const world_cm *m, cwm_hwinfo *buf) {
  if (!m->w->cfg.hw_target) return NULL;
  *buf = *cwm_hwinfo_host();
  if (m->threads > 0) buf->cores = m->threads;
  return buf;
}

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
static int rows_static(cwm_world *w, cwm_state *const *states, int n, const cwm_hwinfo *hw, float *rows,
                       cwm_err *err) {
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
    wm_row_fill(w, z0, wm_map_get(&w->zs_cache, keys[i]), CWM_MODE_ROLLOUT, states[i]->steps, states[i]->nsteps,
                states[i], hw, rows + (size_t)i * nf, 0);
  }
  for (int i = 0; i < n; i++) free(texts[i]);
  free(texts);
  free(keys);
  free(miss);
  if (!rc && n > 0) wm_rows_value(w, rows, n, NULL);
  return rc;
}

/* The rows of candidates (the hardware columns hw's, NULL: this machine's), their value columns
 * in one batched pass. */
static int rows_of_states(cwm_world *w, cwm_state *const *states, int n, const cwm_hwinfo *hw, float *rows,
                          cwm_err *err) {
  int D = w->D, nf = cwm_world_nfeat(w), mode = wm_row_mode(w);
  if (w->cfg.static_final && !w->cfg.no_transition) return rows_static(w, states, n, hw, rows, err);
  if (!w->cfg.no_transition) wm_prefetch_actions(w, states, n);
  float *z = cwm_xmalloc(sizeof(float) * (size_t)D);
  /* the value and paper modes' z_0 of every row: copies, since a later workload's z_0 may move
   * the cache's rows */
  int keep_z0 = mode == CWM_MODE_VALUE || mode == CWM_MODE_PAPER;
  float *z0s = keep_z0 ? cwm_xmalloc(sizeof(float) * (size_t)(n > 0 ? n : 1) * (size_t)D) : NULL;
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
    wm_row_fill(w, z0, z, mode, states[i]->steps, states[i]->nsteps, states[i], hw, rows + (size_t)i * nf, 0);
  }
  free(z);
  if (!w->cfg.no_transition && n > 0) wm_rows_value(w, rows, n, z0s);
  free(z0s);
  return 0;
}

static int score_rows(cwm_world *w, cwm_state *const *states, int n, const cwm_hwinfo *hw, float *rows,
                      double *scores, cwm_err *err) {
  int rc = rows_of_states(w, states, n, hw, rows, err);
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
  int rc = score_rows(w, states, n, NULL, rows, scores, err);
  free(rows);
  return rc;
}

/* Replaces the valid entries of v by their rank among them, 0 (worst) to 1 (best). */
static void to_ranks(double *v, int n) {
  double *val = cwm_xmalloc(sizeof *val * (size_t)(n ? n : 1));
  int *at = cwm_xmalloc(sizeof *at * (size_t)(n ? n : 1)), *ord = cwm_xmalloc(sizeof *ord * (size_t)(n ? n : 1));
  int m = 0;
  for (int i = 0; i < n; i++)
    if (v[i] > CWM_SCORE_INVALID) val[m] = v[i], at[m++] = i;
  cwm_argsort(val, m, 0, ord); /* a search batch: thousands of candidates */
  for (int r = 0; r < m; r++) v[at[ord[r]]] = m > 1 ? (double)r / (m - 1) : 1.0;
  free(val);
  free(at);
  free(ord);
}

static const wm_group *group_find(const world_cm *m, uint64_t key) {
  for (int g = 0; g < m->ngroups; g++)
    if (m->groups[g].key == key) return &m->groups[g];
  return NULL;
}

static int world_predict(cwm_costmodel *base, cwm_state *const *states, int n, double *scores, cwm_err *err) {
  world_cm *m = (world_cm *)base;
  if (n <= 0) return 0;
  cwm_hwinfo hw;
  int rc = score_rows(m->w, states, n, search_hw(m, &hw), row_buffer(m, n), scores, err);
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
  cwm_hwinfo hw;
  int rc = rows_of_states(m->w, states, n, search_hw(m, &hw), rows, err);
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

void cwm_world_cm_opts_default(cwm_world_cm_opts *o) { *o = (cwm_world_cm_opts){.handoff = 1}; }

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
  m->base = (cwm_costmodel){.name = "world", .update = world_update, .predict = world_predict, .save = world_save,
                            .free = world_free, .family_quota = WORLD_FAMILY_QUOTA};
  m->w = w;
  m->threads = o ? o->threads : 0;
  if (!o || o->handoff) {
    m->online = cwm_costmodel_ansor(1, NULL, err);
    if (!m->online) {
      world_free(&m->base);
      return NULL;
    }
  }
  return &m->base;
}

/* The caller's choice of default model, else the shipped one. */
static cwm_data_default g_model = CWM_DATA_DEFAULT("default.cwm", "models/default.cwm");

void cwm_world_set_default_path(const char *path) { cwm_data_default_set(&g_model, path); }

const char *cwm_world_default_path(void) { return cwm_data_default_path(&g_model); }

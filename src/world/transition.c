/* transition.c: the action embedding and the TransH transition of the world model.
 * A step's fields (kind, stage, iterator, extent, split lengths, annotation, pragma value,
 * compute-at target, fuse/reorder lists, ...) become ids into one embedding table; their sum e
 * goes through one GELU layer to h, and two linear heads give the raw hyperplane normal u and
 * the translation d of the TransH step z' = z - (w.z) w + d, w = u/|u| (nn.c has the step).
 * Numbers enter as log2 buckets, so the same kind of decision at another size lands nearby.
 * The value head (wm_value_*) reads how fast a rolled-out state runs from z_T - z_0. */
#include "world_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Id ranges of the action vocabulary. */
enum {
  A_KIND = 0,                       /* CWM_S__COUNT (14) */
  A_STAGE = A_KIND + 16,            /* 16 */
  A_ITER = A_STAGE + 16,            /* 32 */
  A_EXT = A_ITER + 32,              /* 32 log2 buckets */
  A_LEN = A_EXT + 32,               /* 6 positions x 16 buckets */
  A_ANN = A_LEN + 6 * 16,           /* 4 */
  A_UNROLL = A_ANN + 4,             /* 16 buckets */
  A_TSTAGE = A_UNROLL + 16,         /* 16 */
  A_TITER = A_TSTAGE + 16,          /* 32 */
  A_NLIST = A_TITER + 32,           /* 25: list length (fuse, reorder, readers) */
  A_ORDER = A_NLIST + 25,           /* 24 positions x 32 iterators */
  A_SRC = A_ORDER + 24 * 32,        /* 64: FSP/FFSP source step */
  A_LEVEL = A_SRC + 64,             /* 8 */
  A_SCOPE = A_LEVEL + 8,            /* 3 */
  A_I2O = A_SCOPE + 3,              /* 2 */
  A_FUSEID = A_I2O + 2,             /* 32 */
  A_FACTOR = A_FUSEID + 32,         /* 32: RF factor iterator / SA factor bucket */
  A__COUNT = A_FACTOR + 32
};

int cwm_action_vocab(void) { return A__COUNT; }

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }
/* floor(log2 v) + 1, or round(log2 v) + 1 (up when v^2 >= 2^(2b + 1)); 0 for v <= 0 */
static int lg_bucket(long v, int nb, int round) {
  if (v <= 0) return 0;
  int b = 63 - __builtin_clzll((unsigned long long)v);
  if (round && (unsigned __int128)v * (unsigned long long)v >= ((unsigned __int128)1 << (2 * b + 1))) b++;
  return clampi(b + 1, 1, nb - 1);
}

int cwm_action_ids(const cwm_step *s, int round, int *ids) {
  int n = 0;
  ids[n++] = A_KIND + clampi(s->kind, 0, 15);
  ids[n++] = A_STAGE + clampi(s->stage, 0, 15);
  switch (s->kind) {
    case CWM_S_AN:
      ids[n++] = A_ITER + clampi(s->iter, 0, 31);
      ids[n++] = A_ANN + clampi(s->a, 0, 3);
      break;
    case CWM_S_PR:
      ids[n++] = A_ITER + clampi(s->iter, 0, 31);
      ids[n++] = A_UNROLL + lg_bucket(s->a, 16, round);
      break;
    case CWM_S_SP:
      ids[n++] = A_ITER + clampi(s->iter, 0, 31);
      ids[n++] = A_EXT + lg_bucket(s->extent, 32, round);
      ids[n++] = A_I2O + (s->inner_to_outer ? 1 : 0);
      ids[n++] = A_NLIST + clampi(s->n, 0, 24);
      for (int i = 0; i < s->n && i < 6; i++) ids[n++] = A_LEN + i * 16 + lg_bucket(s->v[i], 16, round);
      break;
    case CWM_S_FU:
      ids[n++] = A_NLIST + clampi(s->n, 0, 24);
      for (int i = 0; i < s->n && n < CWM_ACT_MAXF; i++) ids[n++] = A_FUSEID + clampi(s->v[i], 0, 31);
      break;
    case CWM_S_RE:
      ids[n++] = A_NLIST + clampi(s->n, 0, 24);
      for (int i = 0; i < s->n && i < 24 && n < CWM_ACT_MAXF; i++) ids[n++] = A_ORDER + i * 32 + clampi(s->v[i], 0, 31);
      break;
    case CWM_S_FSP:
      ids[n++] = A_ITER + clampi(s->iter, 0, 31);
      ids[n++] = A_SRC + clampi(s->a, 0, 63);
      ids[n++] = A_LEVEL + clampi(s->b, 0, 7);
      break;
    case CWM_S_FFSP:
      ids[n++] = A_ITER + clampi(s->iter, 0, 31);
      ids[n++] = A_LEVEL + clampi(s->a, 0, 7);
      for (int i = 0; i < s->n && n < CWM_ACT_MAXF; i++) ids[n++] = A_SRC + clampi(s->v[i], 0, 63);
      break;
    case CWM_S_SA:
      ids[n++] = A_ITER + clampi(s->iter, 0, 31);
      ids[n++] = A_FACTOR + lg_bucket(s->a, 32, round);
      break;
    case CWM_S_CA:
      ids[n++] = A_TSTAGE + clampi(s->a, 0, 15);
      ids[n++] = A_TITER + clampi(s->b, 0, 31);
      break;
    case CWM_S_CI:
    case CWM_S_CR: break;
    case CWM_S_CHR:
    case CWM_S_CHW:
      ids[n++] = A_SCOPE + (!strcmp(s->scope, "local") ? 0 : !strcmp(s->scope, "global") ? 1 : 2);
      if (s->kind == CWM_S_CHR) {
        ids[n++] = A_NLIST + clampi(s->n, 0, 24);
        for (int i = 0; i < s->n && n < CWM_ACT_MAXF; i++) ids[n++] = A_TSTAGE + clampi(s->v[i], 0, 15);
      }
      break;
    case CWM_S_RF:
      ids[n++] = A_ITER + clampi(s->iter, 0, 31);
      ids[n++] = A_FACTOR + clampi(s->a, 0, 31);
      break;
    default: break;
  }
  return n;
}

void wm_transition_params(cwm_params *tp, int D) {
  cwm_params_init(tp);
  int emb[2] = {A__COUNT, D}, sq[2] = {D, D}, vec[1] = {D};
  cwm_params_add(tp, "act.emb", 2, emb, 1);
  cwm_params_add(tp, "act.fc.w", 2, sq, 1);
  cwm_params_add(tp, "act.fc.b", 1, vec, 0);
  cwm_params_add(tp, "act.u.w", 2, sq, 1);
  cwm_params_add(tp, "act.u.b", 1, vec, 0);
  cwm_params_add(tp, "act.d.w", 2, sq, 1);
  cwm_params_add(tp, "act.d.b", 1, vec, 0);
  int vw1[2] = {WM_VALUE_HIDDEN, D}, vb1[1] = {WM_VALUE_HIDDEN}, vw2[2] = {1, WM_VALUE_HIDDEN};
  cwm_params_add(tp, "val.w1", 2, vw1, 1);
  cwm_params_add(tp, "val.b1", 1, vb1, 0);
  cwm_params_add(tp, "val.w2", 2, vw2, 1);
  cwm_params_alloc(tp);
}

void wm_transition_init(cwm_params *tp, uint64_t seed) {
  cwm_rng r;
  cwm_rng_seed(&r, seed ^ 0x7a3b5c1d9e2f4a6bULL);
  int D = tp->p[TP_FC_W].shape[0];
  cwm_param_init_normal(&tp->p[TP_EMB], &r, 0.3f);
  cwm_param_init_normal(&tp->p[TP_FC_W], &r, 1.0f / sqrtf((float)D));
  cwm_param_init_const(&tp->p[TP_FC_B], 0);
  cwm_param_init_normal(&tp->p[TP_U_W], &r, 1.0f / sqrtf((float)D));
  /* a nonzero normal from the start: w = u/|u| needs |u| > 0 */
  cwm_param_init_normal(&tp->p[TP_U_B], &r, 1.0f);
  /* small translations at first: the step starts close to a projection */
  cwm_param_init_normal(&tp->p[TP_D_W], &r, 0.1f / sqrtf((float)D));
  cwm_param_init_const(&tp->p[TP_D_B], 0);
  wm_value_init(tp, seed);
}

void wm_value_init(cwm_params *tp, uint64_t seed) {
  cwm_rng r;
  cwm_rng_seed(&r, seed ^ 0x5a1ce0ffee11ULL);
  int D = tp->p[TP_V_W1].shape[1];
  cwm_param_init_normal(&tp->p[TP_V_W1], &r, 1.0f / sqrtf((float)D));
  cwm_param_init_const(&tp->p[TP_V_B1], 0);
  cwm_param_init_normal(&tp->p[TP_V_W2], &r, 1.0f / sqrtf((float)WM_VALUE_HIDDEN));
}

void wm_value_forward(const cwm_world *w, const float *x, int N, float *pre, float *act, float *s) {
  int D = w->D, H = WM_VALUE_HIDDEN;
  cwm_linear_forward(pre, x, w->tp.p[TP_V_W1].w, w->tp.p[TP_V_B1].w, N, D, H, 0);
  cwm_gelu_forward(act, pre, (size_t)N * H);
  cwm_linear_forward(s, act, w->tp.p[TP_V_W2].w, NULL, N, H, 1, 0);
}

void wm_value_backward(cwm_world *w, const float *x, const float *pre, const float *act, const float *ds, int N,
                       float *dx) {
  int D = w->D, H = WM_VALUE_HIDDEN;
  size_t m = (size_t)N * H;
  float *dact = cwm_xcalloc(m, sizeof(float)), *dpre = cwm_xcalloc(m, sizeof(float));
  cwm_linear_backward(dact, w->tp.p[TP_V_W2].g, NULL, ds, act, w->tp.p[TP_V_W2].w, N, H, 1);
  cwm_gelu_backward(dpre, pre, dact, m);
  cwm_linear_backward(dx, w->tp.p[TP_V_W1].g, w->tp.p[TP_V_B1].g, dpre, x, w->tp.p[TP_V_W1].w, N, D, H);
  free(dact);
  free(dpre);
}

void wm_act_batch_free(wm_act_batch *b) {
  free(b->e);
  free(b->pre);
  free(b->h);
  free(b->u);
  free(b->d);
  free(b->ids);
  free(b->nids);
  memset(b, 0, sizeof *b);
}

void wm_act_forward(cwm_world *w, const cwm_step *const *steps, int N, wm_act_batch *b) {
  int D = w->D;
  if (N > b->cap || D != b->D) {
    wm_act_batch_free(b);
    b->cap = N > 16 ? N : 16;
    size_t m = (size_t)b->cap * (size_t)D;
    b->e = cwm_xmalloc(m * sizeof(float));
    b->pre = cwm_xmalloc(m * sizeof(float));
    b->h = cwm_xmalloc(m * sizeof(float));
    b->u = cwm_xmalloc(m * sizeof(float));
    b->d = cwm_xmalloc(m * sizeof(float));
    b->ids = cwm_xmalloc((size_t)b->cap * CWM_ACT_MAXF * sizeof(int));
    b->nids = cwm_xmalloc((size_t)b->cap * sizeof(int));
  }
  b->N = N;
  b->D = D;
  const float *emb = w->tp.p[TP_EMB].w;
  for (int i = 0; i < N; i++) {
    int *ids = b->ids + (size_t)i * CWM_ACT_MAXF;
    b->nids[i] = cwm_action_ids(steps[i], w->cfg.act_round, ids);
    float *e = b->e + (size_t)i * D;
    memset(e, 0, sizeof(float) * (size_t)D);
    for (int k = 0; k < b->nids[i]; k++) {
      const float *row = emb + (size_t)ids[k] * D;
      for (int j = 0; j < D; j++) e[j] += row[j];
    }
  }
  cwm_linear_forward(b->pre, b->e, w->tp.p[TP_FC_W].w, w->tp.p[TP_FC_B].w, N, D, D, 0);
  cwm_gelu_forward(b->h, b->pre, (size_t)N * D);
  cwm_linear_forward(b->u, b->h, w->tp.p[TP_U_W].w, w->tp.p[TP_U_B].w, N, D, D, 0);
  cwm_linear_forward(b->d, b->h, w->tp.p[TP_D_W].w, w->tp.p[TP_D_B].w, N, D, D, 0);
}

void wm_act_backward(cwm_world *w, const wm_act_batch *b, const float *du, const float *dd) {
  int N = b->N, D = b->D;
  size_t m = (size_t)N * D;
  float *dh = cwm_xcalloc(m, sizeof(float));
  float *dpre = cwm_xcalloc(m, sizeof(float));
  float *de = cwm_xcalloc(m, sizeof(float));
  cwm_linear_backward(dh, w->tp.p[TP_U_W].g, w->tp.p[TP_U_B].g, du, b->h, w->tp.p[TP_U_W].w, N, D, D);
  cwm_linear_backward(dh, w->tp.p[TP_D_W].g, w->tp.p[TP_D_B].g, dd, b->h, w->tp.p[TP_D_W].w, N, D, D);
  cwm_gelu_backward(dpre, b->pre, dh, m);
  cwm_linear_backward(de, w->tp.p[TP_FC_W].g, w->tp.p[TP_FC_B].g, dpre, b->e, w->tp.p[TP_FC_W].w, N, D, D);
  float *gemb = w->tp.p[TP_EMB].g;
  for (int i = 0; i < N; i++) {
    const int *ids = b->ids + (size_t)i * CWM_ACT_MAXF;
    const float *g = de + (size_t)i * D;
    for (int k = 0; k < b->nids[i]; k++) {
      float *row = gemb + (size_t)ids[k] * D;
      for (int j = 0; j < D; j++) row[j] += g[j];
    }
  }
  free(dh);
  free(dpre);
  free(de);
}

/* ---- the map ---------------------------------------------------------------------------------- */

void wm_map_init(wm_map *m, int width) {
  memset(m, 0, sizeof *m);
  m->width = width;
}

void wm_map_free(wm_map *m) {
  free(m->slots);
  free(m->rows);
  int w = m->width;
  memset(m, 0, sizeof *m);
  m->width = w;
}

void wm_map_clear(wm_map *m) { wm_map_free(m); }

static int map_find(const wm_map *m, uint64_t key) {
  if (!m->cap) return -1;
  size_t mask = (size_t)m->cap - 1, i = (size_t)(key * 0x9e3779b97f4a7c15ULL >> 17) & mask;
  for (;;) {
    if (m->slots[i].slot < 0) return -(int)i - 2;
    if (m->slots[i].key == key) return (int)i;
    i = (i + 1) & mask;
  }
}

float *wm_map_get(wm_map *m, uint64_t key) {
  int i = map_find(m, key);
  return i >= 0 ? m->rows + (size_t)m->slots[i].slot * m->width : NULL;
}

float *wm_map_put(wm_map *m, uint64_t key) {
  float *r = wm_map_get(m, key);
  if (r) return r;
  if ((m->n + 1) * 2 > m->cap) {
    int ncap = m->cap ? m->cap * 2 : 1024;
    wm_slot *old = m->slots;
    int ocap = m->cap;
    m->slots = cwm_xmalloc(sizeof *m->slots * (size_t)ncap);
    for (int i = 0; i < ncap; i++) m->slots[i].slot = -1;
    m->cap = ncap;
    for (int i = 0; i < ocap; i++)
      if (old[i].slot >= 0) {
        int j = -map_find(m, old[i].key) - 2;
        m->slots[j] = old[i];
      }
    free(old);
  }
  if (m->n == m->rows_cap) {
    m->rows_cap = m->rows_cap ? m->rows_cap * 2 : 512;
    m->rows = cwm_xrealloc(m->rows, sizeof(float) * (size_t)m->rows_cap * (size_t)m->width);
  }
  int j = -map_find(m, key) - 2;
  m->slots[j].key = key;
  m->slots[j].slot = m->n++;
  return m->rows + (size_t)(m->n - 1) * m->width;
}

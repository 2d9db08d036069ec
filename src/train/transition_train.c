/* transition_train.c: the transition's multi-step rollout loss (state matching and margin
 * ranking) with the encoder frozen and its targets cached on disk, and the value head trained on
 * measured records through every TransH step. */
#include "train_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- transition: rollout loss with cached encoder targets ------------------------------------ */

typedef struct {
  int n;          /* trajectories */
  int *off;       /* first state row of each trajectory; its T+1 rows are states 0..T */
  int *len;       /* T */
  const cwm_step **steps;
  float *Y;       /* encoder targets */
} tcache;

static void tcache_free(tcache *c) {
  free(c->off);
  free(c->len);
  free(c->steps);
  free(c->Y);
  memset(c, 0, sizeof *c);
}

/* The encoder targets of a trajectory list can be kept in a file (--targets-cache): its key
 * is a hash of the encoder's weights and of every trajectory's key, steps and final hash, so a
 * cache of another encoder or other trajectories is recomputed, never used. */
static uint64_t targets_key(cwm_world *w, const cwm_traj *tr, int n, const cwm_train_opts *o) {
  uint64_t h = 0x7a76e75ULL ^ (uint64_t)n;
  if (o->target_states > 0) h = h * 0x100000001b3ULL ^ ((uint64_t)o->target_states << 32 ^ o->seed);
  for (int i = 0; i < cwm_encoder_nparams(w->enc); i++) {
    const cwm_param *p = cwm_encoder_param(w->enc, i);
    h = h * 0x100000001b3ULL ^ cwm_hash64(p->w, sizeof(float) * p->n);
  }
  for (int i = 0; i < n; i++) {
    h = h * 0x100000001b3ULL ^ cwm_hash64(tr[i].key, strlen(tr[i].key));
    h = h * 0x100000001b3ULL ^ cwm_hash64(tr[i].steps, sizeof(cwm_step) * (size_t)tr[i].nsteps);
    h = h * 0x100000001b3ULL ^ cwm_hash64(tr[i].final, strlen(tr[i].final));
  }
  return h;
}

#define TC_MAGIC "cwm-targets-1\n"

static int targets_load(const char *path, uint64_t key, cwm_traj *tr, int n, int D, tcache *c) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  char magic[sizeof TC_MAGIC];
  uint64_t k = 0;
  int32_t hdr[3] = {0, 0, 0}; /* cached trajectories, rows, width */
  int ok = fread(magic, 1, sizeof TC_MAGIC - 1, f) == sizeof TC_MAGIC - 1 && !memcmp(magic, TC_MAGIC, sizeof TC_MAGIC - 1) &&
           fread(&k, sizeof k, 1, f) == 1 && k == key && fread(hdr, sizeof hdr, 1, f) == 1 && hdr[0] >= 0 &&
           hdr[0] <= n && hdr[1] >= 0 && hdr[2] == D;
  if (ok) {
    memset(c, 0, sizeof *c);
    c->n = hdr[0];
    c->off = cwm_xmalloc(sizeof(int) * (size_t)(c->n ? c->n : 1));
    c->len = cwm_xmalloc(sizeof(int) * (size_t)(c->n ? c->n : 1));
    c->steps = cwm_xmalloc(sizeof(*c->steps) * (size_t)(c->n ? c->n : 1));
    c->Y = cwm_xmalloc(sizeof(float) * (size_t)(hdr[1] ? hdr[1] : 1) * D);
    int rows = 0;
    for (int i = 0; ok && i < c->n; i++) {
      int32_t idx;
      ok = fread(&idx, sizeof idx, 1, f) == 1 && idx >= 0 && idx < n && rows + tr[idx].nsteps + 1 <= hdr[1];
      if (!ok) break;
      c->off[i] = rows;
      c->len[i] = tr[idx].nsteps;
      c->steps[i] = tr[idx].steps;
      rows += tr[idx].nsteps + 1;
    }
    ok = ok && rows == hdr[1] && fread(c->Y, sizeof(float) * (size_t)D, (size_t)rows, f) == (size_t)rows;
    if (!ok) tcache_free(c);
  }
  fclose(f);
  return ok ? 0 : -1;
}

static void targets_save(const char *path, uint64_t key, const tcache *c, const int *idx, int D) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return; /* a cache only: training goes on without it */
  int rows = c->n ? c->off[c->n - 1] + c->len[c->n - 1] + 1 : 0;
  int32_t hdr[3] = {c->n, rows, D};
  int ok = fwrite(TC_MAGIC, 1, sizeof TC_MAGIC - 1, f) == sizeof TC_MAGIC - 1 && fwrite(&key, sizeof key, 1, f) == 1 &&
           fwrite(hdr, sizeof hdr, 1, f) == 1;
  for (int i = 0; ok && i < c->n; i++) {
    int32_t v = idx[i];
    ok = fwrite(&v, sizeof v, 1, f) == 1;
  }
  ok = ok && fwrite(c->Y, sizeof(float) * (size_t)D, (size_t)rows, f) == (size_t)rows;
  if (fclose(f) || !ok || rename(tmp, path)) remove(tmp);
}

/* The states of a T-step trajectory (number i of its part) whose encodings are targets: all T+1,
 * or with target_states K (>= 2) the first (the rollout starts from it), the last and K - 2 drawn
 * between them, the same for the same seed. Writes them in increasing order; returns how many. */
static int pick_states(int T, const cwm_train_opts *o, int i, int *pick) {
  int K = o->target_states;
  if (K <= 0 || K >= T + 1) {
    for (int t = 0; t <= T; t++) pick[t] = t;
    return T + 1;
  }
  if (K < 2) K = 2;
  /* Floyd's sampling of K - 2 of the T - 1 inner states, then sorted */
  cwm_rng r;
  cwm_rng_seed(&r, o->seed * 0x9e3779b97f4a7c15ULL ^ (uint64_t)i);
  unsigned char *in = cwm_xcalloc((size_t)T + 1, 1);
  for (int j = T - 1 - (K - 2); j < T - 1; j++) {
    int x = 1 + cwm_rng_int(&r, j + 1);
    in[in[x] ? j + 1 : x] = 1;
  }
  int n = 0;
  pick[n++] = 0;
  for (int t = 1; t < T; t++)
    if (in[t]) pick[n++] = t;
  pick[n++] = T;
  free(in);
  return n;
}

/* Encodes every state of every trajectory once, or those pick_states draws (the encoder is
 * frozen here). */
static int build_targets(cwm_world *w, cwm_traj *tr, int n, tcache *c, const cwm_train_opts *o, const char *what,
                         cwm_err *err) {
  char path[4096];
  uint64_t key = 0;
  if (o->targets_cache) {
    snprintf(path, sizeof path, "%s.%s", o->targets_cache, what);
    key = targets_key(w, tr, n, o);
    if (targets_load(path, key, tr, n, w->D, c) == 0) {
      say(o, "transition: %s targets of %d trajectories read from %s", what, c->n, path);
      return 0;
    }
  }
  int *idx = cwm_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
  memset(c, 0, sizeof *c);
  c->off = cwm_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
  c->len = cwm_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
  c->steps = cwm_xmalloc(sizeof(*c->steps) * (size_t)(n ? n : 1));
  cwm_dag_cache *dc = cwm_dag_cache_new();
  int rows = 0, cap = 0, rc = 0, D = w->D;
  long encoded = 0;
  double t0 = cwm_now();
  for (int i = 0; i < n && !rc && !stopped(o); i++) {
    cwm_err e = {0};
    const cwm_dag *d = cwm_dag_cache_get(dc, &tr[i], &e);
    cwm_state **trace = NULL, *fin = NULL;
    if (!d || cwm_state_replay(d, tr[i].steps, tr[i].nsteps, &fin, &trace, &e)) continue;
    int T = tr[i].nsteps;
    /* trace holds T+1 states: the initial one, then the state after each step; those not
     * encoded (target_states) get a row of NaN, which the rollout loss skips */
    int *pick = cwm_xmalloc(sizeof(int) * (size_t)(T + 1)), np = pick_states(T, o, i, pick);
    char **texts = cwm_xmalloc(sizeof(char *) * (size_t)(T + 1));
    for (int k = 0; k < np; k++) texts[k] = cwm_state_print(trace[pick[k]]);
    if (rows + T + 1 > cap) {
      cap = (rows + T + 1) * 2;
      c->Y = cwm_xrealloc(c->Y, sizeof(float) * (size_t)cap * D);
    }
    float *Yt = c->Y + (size_t)rows * D, *enc = cwm_xmalloc(sizeof(float) * (size_t)np * D);
    rc = cwm_world_encode(w, (const char *const *)texts, np, enc, err);
    for (size_t k = 0; k < (size_t)(T + 1) * D; k++) Yt[k] = NAN;
    for (int k = 0; k < np; k++) memcpy(Yt + (size_t)pick[k] * D, enc + (size_t)k * D, sizeof(float) * (size_t)D);
    encoded += np;
    for (int k = 0; k < np; k++) free(texts[k]);
    free(texts);
    free(enc);
    free(pick);
    for (int t = 0; t <= T; t++) cwm_state_free(trace[t]);
    free(trace);
    cwm_state_free(fin);
    if (rc) break;
    c->off[c->n] = rows;
    c->len[c->n] = T;
    c->steps[c->n] = tr[i].steps;
    idx[c->n] = i;
    c->n++;
    rows += T + 1;
    if ((i + 1) % 200 == 0 || i + 1 == n) {
      double el = cwm_now() - t0;
      say(o, "transition: encoding %s states: %d/%d trajectories, %ld of their %d states, %.0f s, ETA %.0f s", what,
          i + 1, n, encoded, rows, el, el / (i + 1) * (n - i - 1));
    }
  }
  cwm_dag_cache_free(dc);
  if (!rc && o->targets_cache && !stopped(o)) targets_save(path, key, c, idx, w->D);
  free(idx);
  return rc;
}

/* Rollout loss of trajectories idx[0..B) (the state-matching mean and the margin term); with
 * train set, gradients into w->tp. match_only_out: the mean matching term alone (per step,
 * divided by width), for validation; base_out the same for z_0 held still (no transition). */
static float rollout_batch(cwm_world *w, const tcache *c, const int *idx, int B, int train, double *match_out,
                           double *base_out, long *matched_out) {
  int D = w->D;
  int N = 0, NM = 0; /* steps, and steps with a target (an unencoded state's row is NaN) */
  for (int b = 0; b < B; b++) {
    N += c->len[idx[b]];
    for (int t = 1; t <= c->len[idx[b]]; t++) NM += !isnan(c->Y[(size_t)(c->off[idx[b]] + t) * D]);
  }
  if (matched_out) *matched_out += NM;
  if (!N || !NM) return 0;
  const cwm_step **st = cwm_xmalloc(sizeof(*st) * (size_t)N);
  for (int b = 0, k = 0; b < B; b++)
    for (int t = 0; t < c->len[idx[b]]; t++) st[k++] = &c->steps[idx[b]][t];
  wm_act_batch ab = {0};
  wm_act_forward(w, st, N, &ab);
  float *Z = cwm_xmalloc(sizeof(float) * (size_t)(N + B) * D); /* z_0..z_T per trajectory */
  float *dZ = cwm_xcalloc((size_t)(N + B) * D, sizeof(float));
  float *du = cwm_xcalloc((size_t)N * D, sizeof(float)), *dd = cwm_xcalloc((size_t)N * D, sizeof(float));
  float gamma = w->cfg.margin * (float)D, scale = 1.0f / ((float)D * (float)NM);
  double loss = 0, match = 0, base = 0;
  for (int b = 0, k = 0, zr = 0; b < B; b++) {
    int i = idx[b], T = c->len[i];
    int neg = idx[(b + 1) % B];
    const float *Y = c->Y + (size_t)c->off[i] * D;
    const float *Yn = c->Y + (size_t)c->off[neg] * D;
    float *z = Z + (size_t)zr * D;
    memcpy(z, Y, sizeof(float) * (size_t)D);
    for (int t = 1; t <= T; t++) {
      cwm_transh_forward(z + (size_t)t * D, z + (size_t)(t - 1) * D, ab.u + (size_t)(k + t - 1) * D,
                         ab.d + (size_t)(k + t - 1) * D, 1, D);
      float *dzt = dZ + (size_t)(zr + t) * D;
      if (isnan(Y[(size_t)t * D])) continue; /* no target at this step: the rollout goes on through it */
      float m = cwm_sqdist(z + (size_t)t * D, Y + (size_t)t * D, D, scale, dzt, NULL);
      match += m / D;
      base += cwm_sqdist(Y, Y + (size_t)t * D, D, 0, NULL, NULL) / D;
      loss += m * scale;
      int tn = t < c->len[neg] ? t : c->len[neg];
      if (neg != i && !isnan(Yn[(size_t)tn * D])) {
        loss += cwm_margin_rank(z + (size_t)t * D, Y + (size_t)t * D, Yn + (size_t)tn * D, D, gamma, scale, dzt, NULL,
                                NULL) * scale;
      }
    }
    if (train)
      for (int t = T; t >= 1; t--)
        cwm_transh_backward(dZ + (size_t)(zr + t - 1) * D, du + (size_t)(k + t - 1) * D, dd + (size_t)(k + t - 1) * D,
                            dZ + (size_t)(zr + t) * D, z + (size_t)(t - 1) * D, ab.u + (size_t)(k + t - 1) * D, 1, D);
    k += T;
    zr += T + 1;
  }
  if (train) wm_act_backward(w, &ab, du, dd);
  if (match_out) *match_out += match;
  if (base_out) *base_out += base;
  wm_act_batch_free(&ab);
  free(st);
  free(Z);
  free(dZ);
  free(du);
  free(dd);
  return (float)loss;
}

/* ---- value head: pairwise ranking of measured records, through the rollout ------------------ */

/* Measured records of one part grouped by workload (groups with fewer than 2 valid costs left
 * out), with each workload's z_0. */
typedef struct {
  cwm_traj *t;
  int nt;
  int ng, nrec;
  int *gstart, *gsize; /* into rec */
  int *rec;            /* trajectory index per record, groups consecutive */
  double *cost;        /* [nrec] */
  float *z0;           /* [ng, D] */
} vdata;

static void vdata_free(vdata *v) {
  cwm_trajs_free(v->t, v->nt);
  free(v->gstart);
  free(v->gsize);
  free(v->rec);
  free(v->cost);
  free(v->z0);
  memset(v, 0, sizeof *v);
}

/* The training workloads' records are split once more for early stopping: those whose split
 * hash falls in [vf, vf + STOP_FRACTION (1 - vf)) are the stopping set (sub = 1), the rest are
 * fitted (sub = 0); sub = -1 takes the whole part. */
#define STOP_FRACTION 0.15
static int vdata_load(cwm_world *w, const char *path, double vf, int part, int sub, vdata *v, cwm_err *err) {
  memset(v, 0, sizeof *v);
  int rc = train_load_trajs(path, vf, part, 0, &v->t, &v->nt, err);
  if (rc) return rc;
  int n = v->nt, D = w->D;
  int *gid = cwm_xmalloc(sizeof(int) * (size_t)(n ? n : 1)), *first = cwm_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
  unsigned char *skip = cwm_xmalloc((size_t)(n ? n : 1));
  double vs = vf + STOP_FRACTION * (1 - vf);
  for (int i = 0; i < n; i++)
    skip[i] = !v->t[i].measured || (sub >= 0 && (cwm_split_part(v->t[i].key, vs) == CWM_SPLIT_VALID) != sub);
  int ng = cwm_traj_group_by_key(v->t, n, skip, gid, first);
  free(skip);
  v->gstart = cwm_xmalloc(sizeof(int) * (size_t)(ng ? ng : 1));
  v->gsize = cwm_xmalloc(sizeof(int) * (size_t)(ng ? ng : 1));
  v->rec = cwm_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
  v->cost = cwm_xmalloc(sizeof(double) * (size_t)(n ? n : 1));
  v->z0 = cwm_xmalloc(sizeof(float) * (size_t)(ng ? ng : 1) * D);
  cwm_dag_cache *dc = cwm_dag_cache_new();
  for (int g = 0; g < ng && !rc; g++) {
    int valid = 0;
    for (int i = first[g]; i < n; i++) valid += gid[i] == g && cwm_cost_valid(v->t[i].cost);
    cwm_err e = {0};
    const cwm_dag *d = valid >= 2 ? cwm_dag_cache_get(dc, &v->t[first[g]], &e) : NULL;
    if (!d) continue;
    const float *z0 = wm_z0(w, d, err);
    if (!z0) {
      rc = err ? err->code : CWM_EMODEL;
      break;
    }
    memcpy(v->z0 + (size_t)v->ng * D, z0, sizeof(float) * (size_t)D);
    v->gstart[v->ng] = v->nrec;
    for (int i = first[g]; i < n; i++)
      if (gid[i] == g) {
        v->rec[v->nrec] = i;
        v->cost[v->nrec++] = cwm_cost_valid(v->t[i].cost) ? v->t[i].cost : INFINITY;
      }
    v->gsize[v->ng] = v->nrec - v->gstart[v->ng];
    v->ng++;
  }
  cwm_dag_cache_free(dc);
  free(gid);
  free(first);
  if (rc) vdata_free(v);
  return rc;
}

/* The value loss of groups gidx[0..G) (mean over groups of the pairwise logistic loss of the value
 * head's scores of the rolled-out z_T); with train set, gradients into w->tp (value head, then
 * back through every TransH step into the action network). top1_sum: the sum over groups of
 * best cost / cost of the record the head ranks first. */
static float value_batch(cwm_world *w, const vdata *v, const int *gidx, int G, int train, float gap,
                         double *top1_sum) {
  int D = w->D, H = WM_VALUE_HIDDEN;
  int R = 0, N = 0;
  for (int b = 0; b < G; b++) {
    R += v->gsize[gidx[b]];
    for (int k = 0; k < v->gsize[gidx[b]]; k++) N += v->t[v->rec[v->gstart[gidx[b]] + k]].nsteps;
  }
  if (!R) return 0;
  const cwm_step **st = cwm_xmalloc(sizeof(*st) * (size_t)(N ? N : 1));
  for (int b = 0, k = 0; b < G; b++)
    for (int r = 0; r < v->gsize[gidx[b]]; r++) {
      const cwm_traj *t = &v->t[v->rec[v->gstart[gidx[b]] + r]];
      for (int j = 0; j < t->nsteps; j++) st[k++] = &t->steps[j];
    }
  wm_act_batch ab = {0};
  if (N) wm_act_forward(w, st, N, &ab);
  float *Z = cwm_xmalloc(sizeof(float) * (size_t)(N + R) * D);
  float *X = cwm_xmalloc(sizeof(float) * (size_t)R * D), *dX = cwm_xcalloc((size_t)R * D, sizeof(float));
  float *pre = cwm_xmalloc(sizeof(float) * (size_t)R * H), *act = cwm_xmalloc(sizeof(float) * (size_t)R * H);
  float *s = cwm_xmalloc(sizeof(float) * (size_t)R), *ds = cwm_xcalloc((size_t)R, sizeof(float));
  double *cost = cwm_xmalloc(sizeof(double) * (size_t)R);
  /* forward: every record's rollout from its workload's z_0 */
  for (int b = 0, k = 0, zr = 0, r = 0; b < G; b++) {
    int g = gidx[b];
    const float *z0 = v->z0 + (size_t)g * D;
    for (int q = 0; q < v->gsize[g]; q++, r++) {
      const cwm_traj *t = &v->t[v->rec[v->gstart[g] + q]];
      float *z = Z + (size_t)zr * D;
      memcpy(z, z0, sizeof(float) * (size_t)D);
      for (int j = 1; j <= t->nsteps; j++)
        cwm_transh_forward(z + (size_t)j * D, z + (size_t)(j - 1) * D, ab.u + (size_t)(k + j - 1) * D,
                           ab.d + (size_t)(k + j - 1) * D, 1, D);
      for (int c = 0; c < D; c++) X[(size_t)r * D + c] = z[(size_t)t->nsteps * D + c] - z0[c];
      cost[r] = v->cost[v->gstart[g] + q];
      k += t->nsteps;
      zr += t->nsteps + 1;
    }
  }
  wm_value_forward(w, X, R, pre, act, s);
  double loss = 0;
  for (int b = 0, r = 0; b < G; b++) {
    int m = v->gsize[gidx[b]];
    loss += cwm_pair_logistic(s + r, cost + r, m, gap, 1.0f / (float)G, ds + r, NULL) / G;
    if (top1_sum) {
      int bi = -1;
      double best = INFINITY;
      for (int q = 0; q < m; q++) {
        if (cost[r + q] < best) best = cost[r + q];
        /* ties go to the worse program, as in cwm_rank_metrics_eval */
        if (bi < 0 || s[r + q] > s[r + bi] || (s[r + q] == s[r + bi] && !(cost[r + q] <= cost[r + bi]))) bi = q;
      }
      *top1_sum += isfinite(cost[r + bi]) ? best / cost[r + bi] : 0.0;
    }
    r += m;
  }
  if (train) {
    wm_value_backward(w, X, pre, act, ds, R, dX);
    float *dZ = cwm_xcalloc((size_t)(N + R) * D, sizeof(float));
    float *du = cwm_xcalloc((size_t)(N ? N : 1) * D, sizeof(float)), *dd = cwm_xcalloc((size_t)(N ? N : 1) * D, sizeof(float));
    for (int b = 0, k = 0, zr = 0, r = 0; b < G; b++) {
      int g = gidx[b];
      for (int q = 0; q < v->gsize[g]; q++, r++) {
        const cwm_traj *t = &v->t[v->rec[v->gstart[g] + q]];
        int T = t->nsteps;
        memcpy(dZ + (size_t)(zr + T) * D, dX + (size_t)r * D, sizeof(float) * (size_t)D);
        for (int j = T; j >= 1; j--)
          cwm_transh_backward(dZ + (size_t)(zr + j - 1) * D, du + (size_t)(k + j - 1) * D,
                              dd + (size_t)(k + j - 1) * D, dZ + (size_t)(zr + j) * D, Z + (size_t)(zr + j - 1) * D,
                              ab.u + (size_t)(k + j - 1) * D, 1, D);
        k += T;
        zr += T + 1;
      }
    }
    if (N) wm_act_backward(w, &ab, du, dd);
    free(dZ);
    free(du);
    free(dd);
  }
  wm_act_batch_free(&ab);
  free(st);
  free(Z);
  free(X);
  free(dX);
  free(pre);
  free(act);
  free(s);
  free(ds);
  free(cost);
  return (float)loss;
}

/* Mean value loss and top-1 score of the value head over every group of v (no training). */
static void value_eval(cwm_world *w, const vdata *v, float gap, double *loss, double *top1) {
  *loss = *top1 = 0;
  if (!v->ng) return;
  double t1 = 0, l = 0;
  for (int g = 0; g < v->ng; g++) l += value_batch(w, v, &g, 1, 0, gap, &t1);
  *loss = l / v->ng;
  *top1 = t1 / v->ng;
}

int cwm_world_train_transition(cwm_world *w, const cwm_train_opts *o, cwm_err *err) {
  cwm_traj *tr = NULL, *va = NULL;
  int ntr = 0, nva = 0;
  int rc = train_load_split(o, &tr, &ntr, &va, &nva, err);
  if (rc) return rc;
  tcache ct, cv;
  rc = build_targets(w, tr, ntr, &ct, o, "training", err);
  if (!rc) rc = build_targets(w, va, nva, &cv, o, "validation", err);
  if (!rc && ct.n < 2) rc = cwm_fail(err, CWM_EIO, "%s: fewer than 2 usable training trajectories", o->traj_path);
  /* measured records: the value head's ranking loss through the rollout (training workloads),
   * and its top-1 score on the held-out ones, for the log only */
  vdata vt = {0}, vs = {0}, vv = {0};
  if (!rc && o->log_path) {
    rc = vdata_load(w, o->log_path, o->valid_fraction, CWM_SPLIT_TRAIN, 0, &vt, err);
    if (!rc) rc = vdata_load(w, o->log_path, o->valid_fraction, CWM_SPLIT_TRAIN, 1, &vs, err);
    if (!rc) rc = vdata_load(w, o->log_path, o->valid_fraction, CWM_SPLIT_VALID, -1, &vv, err);
    if (!rc)
      say(o, "value head: %d measured records of %d training workloads fitted, %d of %d for early stopping (%d "
             "records of %d held-out workloads, reported only)", vt.nrec, vt.ng, vs.nrec, vs.ng, vv.nrec, vv.ng);
  }
  /* with the value head the weights overfit the fitted workloads within a few epochs, and the
   * epoch-to-epoch ranking on unseen workloads is noisy: the model kept is the average of the
   * weights at the end of each epoch of the second half (stochastic weight averaging); the
   * stopping set shows how it generalizes */
  float *avg_w = vt.ng ? cwm_xcalloc(w->tp.total, sizeof(float)) : NULL;
  int navg = 0;
  int B = o->batch < 2 ? 2 : o->batch;
  cwm_adamw opt = cwm_adamw_default();
  opt.lr = o->lr;
  opt.weight_decay = o->weight_decay;
  cwm_rng r;
  cwm_rng_seed(&r, o->seed ^ 0x7ea5171eULL);
  int *perm = cwm_xmalloc(sizeof(int) * (size_t)(ct.n ? ct.n : 1));
  int *gperm = cwm_xmalloc(sizeof(int) * (size_t)(vt.ng ? vt.ng : 1));
  int epochs = o->epochs * 4; /* transition batches are cheap once the targets are cached */
  double t0 = cwm_now();
  for (int ep = 0; ep < epochs && !rc && !stopped(o); ep++) {
    for (int i = 0; i < ct.n; i++) perm[i] = i;
    for (int i = ct.n - 1; i > 0; i--) {
      int j = cwm_rng_int(&r, i + 1), x = perm[i];
      perm[i] = perm[j];
      perm[j] = x;
    }
    double lsum = 0;
    int nb = 0;
    for (int s = 0; s + B <= ct.n && !stopped(o); s += B) {
      cwm_params_zero_grad(&w->tp);
      lsum += rollout_batch(w, &ct, perm + s, B, 1, NULL, NULL, NULL);
      cwm_params_clip_grad(&w->tp, 1.0f);
      cwm_adamw_step(&w->tp, &opt);
      nb++;
    }
    /* the value head: batches of 4 training workloads' records */
    double vl = 0, vtop = 0;
    int vnb = 0;
    for (int i = 0; i < vt.ng; i++) gperm[i] = i;
    for (int i = vt.ng - 1; i > 0; i--) {
      int j = cwm_rng_int(&r, i + 1), x = gperm[i];
      gperm[i] = gperm[j];
      gperm[j] = x;
    }
    for (int s = 0; s < vt.ng && !stopped(o); s += 4) {
      int G = vt.ng - s < 4 ? vt.ng - s : 4;
      cwm_params_zero_grad(&w->tp);
      vl += value_batch(w, &vt, gperm + s, G, 1, o->value_gap, &vtop);
      cwm_params_clip_grad(&w->tp, 1.0f);
      cwm_adamw_step(&w->tp, &opt);
      vnb++;
    }
    if (vnb) {
      double sl, st, hl, ht;
      value_eval(w, &vs, o->value_gap, &sl, &st);
      value_eval(w, &vv, o->value_gap, &hl, &ht);
      say(o, "transition epoch %d/%d: value head: training loss %.4f, top-1 %.3f; stopping set loss %.4f, top-1 "
             "%.3f; held-out loss %.4f, top-1 %.3f",
          ep + 1, epochs, vl / vnb, vtop / vt.ng, sl, st, hl, ht);
    }
    if (avg_w && ep >= epochs / 2) {
      navg++;
      for (size_t k = 0; k < w->tp.total; k++) avg_w[k] += (w->tp.block[k] - avg_w[k]) / (float)navg;
    }
    double vm = 0, vbase = 0;
    long vsteps = 0;
    int *vidx = cwm_xmalloc(sizeof(int) * (size_t)(cv.n ? cv.n : 1));
    for (int i = 0; i < cv.n; i++) vidx[i] = i;
    int VB = cv.n < B ? cv.n : B;
    for (int s = 0; VB >= 2 && s + VB <= cv.n; s += VB) {
      rollout_batch(w, &cv, vidx + s, VB, 0, &vm, &vbase, &vsteps);
    }
    free(vidx);
    say(o, "transition epoch %d/%d: train loss %.4f; validation state matching %.4f per step (z_0 held still: %.4f); %.0f s",
        ep + 1, epochs, nb ? lsum / nb : 0.0, vsteps ? vm / vsteps : 0.0, vsteps ? vbase / vsteps : 0.0,
        cwm_now() - t0);
  }
  if (!rc && navg > 0) {
    memcpy(w->tp.block, avg_w, sizeof(float) * w->tp.total);
    wm_map_clear(&w->act_cache);
    double sl, st, hl, ht;
    value_eval(w, &vs, o->value_gap, &sl, &st);
    value_eval(w, &vv, o->value_gap, &hl, &ht);
    say(o, "transition: kept the average of the last %d epochs' weights: value head stopping set loss %.4f, top-1 "
           "%.3f; held-out loss %.4f, top-1 %.3f", navg, sl, st, hl, ht);
  }
  free(avg_w);
  free(perm);
  free(gperm);
  vdata_free(&vt);
  vdata_free(&vs);
  vdata_free(&vv);
  tcache_free(&ct);
  tcache_free(&cv);
  cwm_trajs_free(tr, ntr);
  cwm_trajs_free(va, nva);
  wm_map_clear(&w->act_cache);
  return rc;
}

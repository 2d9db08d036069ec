/* train.c: training the world model from the data set: the vocabulary, the encoder
 * (contrastive, InfoNCE over noise pairs), the transition (multi-step rollout loss with the
 * encoder frozen and its targets cached) and the ranker (LambdaMART on measured records).
 * Everything splits by workload key (cwm_split_part), never by record, so validation and
 * evaluation workloads are never trained on. */
#include "world_internal.h"

#include "cwm/dataset.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cwm_train_opts_default(cwm_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->valid_fraction = 0.1;
  o->epochs = 2;
  o->batch = 32;
  o->lr = 1e-3f;
  o->temperature = 0.1f;
  o->ranker_rounds = 300;
  o->seed = 1;
  o->value_gap = 0.05f;
  o->weight_decay = 0.01f;
}

#define say(o, ...) cwm_progressf((o)->progress, (o)->progress_ud, __VA_ARGS__)

static int stopped(const cwm_train_opts *o) { return o->stop && *o->stop; }

/* Trajectories of one part of the split, in memory (at most max, 0 = all). */
static int load_trajs(const char *path, double vf, int part, int max, cwm_traj **out, int *n, cwm_err *err) {
  *out = NULL;
  *n = 0;
  cwm_traj_iter *it = cwm_traj_iter_open(path, err);
  if (!it) return err ? err->code : CWM_EIO;
  if (part != CWM_SPLIT_ALL) cwm_traj_iter_set_split(it, vf, part);
  int cap = 0, rc = 0;
  cwm_traj t;
  while ((max <= 0 || *n < max) && (rc = cwm_traj_iter_next(it, &t, err)) == 1) {
    if (*n == cap) {
      cap = cap ? cap * 2 : 256;
      *out = cwm_xrealloc(*out, sizeof **out * (size_t)cap);
    }
    (*out)[(*n)++] = t;
  }
  if (max > 0 && *n >= max) rc = 0;
  cwm_traj_iter_close(it);
  if (rc < 0) {
    cwm_trajs_free(*out, *n);
    *out = NULL;
    *n = 0;
    return err ? err->code : CWM_EIO;
  }
  return 0;
}

/* ---- vocabulary ----------------------------------------------------------------------------- */

int cwm_world_build_vocab(const char *traj_path, int max_traj, int min_count, cwm_vocab **out, cwm_err *err) {
  *out = NULL;
  cwm_traj *tr = NULL;
  int n = 0;
  int rc = load_trajs(traj_path, 0, CWM_SPLIT_ALL, max_traj, &tr, &n, err);
  if (rc) return rc;
  if (!n) {
    cwm_trajs_free(tr, n);
    return cwm_fail(err, CWM_EIO, "%s: no trajectories", traj_path);
  }
  cwm_dag_cache *dc = cwm_dag_cache_new();
  cwm_vocab *v = cwm_vocab_new_builder();
  for (int i = 0; i < n && !rc; i++) {
    cwm_err e = {0};
    const cwm_dag *d = cwm_dag_cache_get(dc, &tr[i], &e);
    if (!d) continue;
    cwm_state **trace = NULL, *fin = NULL;
    if (cwm_state_replay(d, tr[i].steps, tr[i].nsteps, &fin, &trace, &e)) continue;
    /* the initial state, a middle one and the final one */
    /* trace[0] is the initial state, trace[t] the state after step t */
    const cwm_state *pick[3] = {trace[0], tr[i].nsteps > 1 ? trace[tr[i].nsteps / 2] : NULL, fin};
    for (int k = 0; k < 3 && !rc; k++) {
      if (!pick[k]) continue;
      char *text = cwm_state_print(pick[k]);
      rc = cwm_vocab_add_text(v, text, err);
      free(text);
    }
    for (int k = 0; k <= tr[i].nsteps; k++) cwm_state_free(trace[k]);
    free(trace);
    cwm_state_free(fin);
  }
  if (!rc) rc = cwm_vocab_finish(v, min_count, err);
  cwm_dag_cache_free(dc);
  cwm_trajs_free(tr, n);
  if (rc) {
    cwm_vocab_free(v);
    return rc;
  }
  *out = v;
  return 0;
}

/* ---- encoder: InfoNCE over noise pairs ------------------------------------------------------- */

/* A positive pair for trajectory t: the state after a random prefix of its steps, and the same
 * computation written differently (noise kind 0, 1 or 2). */
static int make_pair(cwm_dag_cache *dc, const cwm_traj *t, cwm_rng *r, char **a, char **b) {
  cwm_err e = {0};
  const cwm_dag *d = cwm_dag_cache_get(dc, t, &e);
  if (!d || t->nsteps < 1) return -1;
  int n = t->nsteps;
  if (cwm_rng_int(r, 2)) n = 1 + cwm_rng_int(r, t->nsteps); /* half the time an intermediate state */
  int kind = cwm_rng_int(r, 3);
  *a = *b = NULL;
  if (cwm_noise_pair(d, t->steps, n, kind, r, a, b, &e)) {
    /* a prefix may not survive a shape change: fall back to the full list */
    if (cwm_noise_pair(d, t->steps, t->nsteps, kind, r, a, b, &e)) return -1;
  }
  return 0;
}

/* InfoNCE loss and retrieval accuracy of one batch; with train set, a backward + AdamW step. */
static int encoder_batch(cwm_world *w, char **ta, char **tb, int B, float temp, int train, const cwm_adamw *opt,
                         float *loss_out, float *acc_out, cwm_err *err) {
  int D = w->D;
  const char **texts = cwm_xmalloc(sizeof(char *) * (size_t)(2 * B));
  for (int i = 0; i < B; i++) {
    texts[i] = ta[i];
    texts[B + i] = tb[i];
  }
  float *z = cwm_xmalloc(sizeof(float) * (size_t)(2 * B) * D);
  float *dz = cwm_xcalloc((size_t)(2 * B) * D, sizeof(float));
  int rc = wm_encode_texts(w, texts, 2 * B, z, train, err);
  if (!rc) {
    float loss = cwm_infonce(z, z + (size_t)B * D, NULL, B, D, temp, 1, 1.0f, train ? dz : NULL,
                             train ? dz + (size_t)B * D : NULL);
    /* retrieval: is each anchor's nearest positive (cosine) its own? */
    int hit = 0;
    for (int i = 0; i < B; i++) {
      const float *x = z + (size_t)i * D;
      double best = -2;
      int arg = -1;
      for (int j = 0; j < B; j++) {
        const float *y = z + (size_t)(B + j) * D;
        double xy = 0, xx = 0, yy = 0;
        for (int k = 0; k < D; k++) {
          xy += (double)x[k] * y[k];
          xx += (double)x[k] * x[k];
          yy += (double)y[k] * y[k];
        }
        double c = xy / (sqrt(xx * yy) + 1e-12);
        if (c > best) best = c, arg = j;
      }
      hit += arg == i;
    }
    *loss_out = loss;
    *acc_out = (float)hit / (float)B;
    if (train) {
      cwm_encoder_zero_grad(w->enc);
      rc = cwm_encoder_backward(w->enc, dz, err);
      if (!rc) {
        cwm_params_clip_grad(cwm_encoder_params(w->enc), 1.0f);
        cwm_adamw_step(cwm_encoder_params(w->enc), opt);
      }
    }
  }
  free(texts);
  free(z);
  free(dz);
  return rc;
}

static void free_texts(char **t, int n) {
  for (int i = 0; i < n; i++) free(t[i]);
}

int cwm_world_train_encoder(cwm_world *w, const cwm_train_opts *o, cwm_err *err) {
  cwm_traj *tr = NULL, *va = NULL;
  int ntr = 0, nva = 0;
  int rc = load_trajs(o->traj_path, o->valid_fraction, CWM_SPLIT_TRAIN, o->max_traj, &tr, &ntr, err);
  if (!rc) rc = load_trajs(o->traj_path, o->valid_fraction, CWM_SPLIT_VALID, o->max_traj > 0 ? o->max_traj / 4 + 1 : 0,
                           &va, &nva, err);
  if (rc) return rc;
  if (ntr < 2) {
    cwm_trajs_free(tr, ntr);
    cwm_trajs_free(va, nva);
    return cwm_fail(err, CWM_EIO, "%s: fewer than 2 training trajectories", o->traj_path);
  }
  int B = o->batch < 2 ? 2 : o->batch;
  cwm_adamw opt = cwm_adamw_default();
  opt.lr = o->lr;
  cwm_rng r;
  cwm_rng_seed(&r, o->seed ^ 0x51ed270b2794ULL);
  cwm_dag_cache *dc = cwm_dag_cache_new();
  char **ta = cwm_xcalloc((size_t)B, sizeof *ta), **tb = cwm_xcalloc((size_t)B, sizeof *tb);
  int *perm = cwm_xmalloc(sizeof(int) * (size_t)ntr);
  /* trajectories by workload: gof[i] its group, gidx[gstart[g] .. + gsize[g]) the members */
  int *gof = cwm_xmalloc(sizeof(int) * (size_t)ntr), *gidx = cwm_xmalloc(sizeof(int) * (size_t)ntr);
  int *gstart = cwm_xcalloc((size_t)ntr, sizeof(int)), *gsize = cwm_xcalloc((size_t)ntr, sizeof(int));
  int ng = cwm_traj_group_by_key(tr, ntr, NULL, gof, NULL);
  for (int i = 0; i < ntr; i++) gsize[gof[i]]++;
  /* counting sort into gidx */
  for (int g = 0, off = 0; g < ng; off += gsize[g++]) gstart[g] = off;
  {
    int *fill = cwm_xcalloc((size_t)(ng ? ng : 1), sizeof(int));
    for (int i = 0; i < ntr; i++) gidx[gstart[gof[i]] + fill[gof[i]]++] = i;
    free(fill);
  }
  double t0 = cwm_now();
  int steps_per_epoch = ntr / B;
  for (int ep = 0; ep < o->epochs && !rc && !stopped(o); ep++) {
    for (int i = 0; i < ntr; i++) perm[i] = i;
    for (int i = ntr - 1; i > 0; i--) {
      int j = cwm_rng_int(&r, i + 1), x = perm[i];
      perm[i] = perm[j];
      perm[j] = x;
    }
    double lsum = 0, asum = 0;
    int nb = 0;
    for (int s = 0; s < steps_per_epoch && !rc && !stopped(o); s++) {
      /* a batch of B/4 workloads with 4 trajectories each: other schedules of the same workload
       * are the hard negatives that make z tell schedules apart, not only workloads */
      int m = 0;
      for (int k = 0; k < B && m < B; k += 4) {
        int g = gof[perm[(s * B + k) % ntr]];
        for (int q = 0; q < 4 && m < B; q++) {
          int j = gidx[gstart[g] + (gsize[g] >= 4 ? (q + cwm_rng_int(&r, gsize[g])) % gsize[g] : cwm_rng_int(&r, gsize[g]))];
          if (make_pair(dc, &tr[j], &r, &ta[m], &tb[m]) == 0) m++;
        }
      }
      if (m >= 2) {
        float l, a;
        rc = encoder_batch(w, ta, tb, m, o->temperature, 1, &opt, &l, &a, err);
        lsum += l;
        asum += a;
        nb++;
      }
      free_texts(ta, m);
      free_texts(tb, m);
      if ((s + 1) % 20 == 0 || s + 1 == steps_per_epoch) {
        double el = cwm_now() - t0, done = ep * steps_per_epoch + s + 1, all = (double)o->epochs * steps_per_epoch;
        say(o, "encoder epoch %d/%d step %d/%d: train InfoNCE %.4f, retrieval %.1f%%; %.0f s, ETA %.0f s", ep + 1,
            o->epochs, s + 1, steps_per_epoch, nb ? lsum / nb : 0.0, nb ? 100 * asum / nb : 0.0, el,
            el / done * (all - done));
      }
    }
    /* validation on held-out workloads, fixed pairs */
    cwm_rng vr;
    cwm_rng_seed(&vr, o->seed ^ 0xa11da7eULL);
    double vl = 0, vacc = 0;
    int vb = 0;
    int VB = nva < B ? nva : B;
    for (int s = 0; VB >= 2 && s + VB <= nva && !rc && vb < 8; s += VB) {
      int m = 0;
      for (int k = 0; k < VB; k++)
        if (make_pair(dc, &va[s + k], &vr, &ta[m], &tb[m]) == 0) m++;
      if (m >= 2) {
        float l, a;
        rc = encoder_batch(w, ta, tb, m, o->temperature, 0, &opt, &l, &a, err);
        vl += l;
        vacc += a;
        vb++;
      }
      free_texts(ta, m);
      free_texts(tb, m);
    }
    if (vb)
      say(o, "encoder epoch %d/%d: validation InfoNCE %.4f, retrieval %.1f%% (%d batches of held-out workloads)",
          ep + 1, o->epochs, vl / vb, 100 * vacc / vb, vb);
  }
  free(perm);
  free(gof);
  free(gidx);
  free(gstart);
  free(gsize);
  free(ta);
  free(tb);
  cwm_dag_cache_free(dc);
  cwm_trajs_free(tr, ntr);
  cwm_trajs_free(va, nva);
  wm_map_clear(&w->z0_cache);
  wm_map_clear(&w->zs_cache);
  return rc;
}

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
static uint64_t targets_key(cwm_world *w, const cwm_traj *tr, int n) {
  uint64_t h = 0x7a76e75ULL ^ (uint64_t)n;
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

/* Encodes every state of every trajectory once (the encoder is frozen here). */
static int build_targets(cwm_world *w, cwm_traj *tr, int n, tcache *c, const cwm_train_opts *o, const char *what,
                         cwm_err *err) {
  char path[4096];
  uint64_t key = 0;
  if (o->targets_cache) {
    snprintf(path, sizeof path, "%s.%s", o->targets_cache, what);
    key = targets_key(w, tr, n);
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
  double t0 = cwm_now();
  for (int i = 0; i < n && !rc && !stopped(o); i++) {
    cwm_err e = {0};
    const cwm_dag *d = cwm_dag_cache_get(dc, &tr[i], &e);
    cwm_state **trace = NULL, *fin = NULL;
    if (!d || cwm_state_replay(d, tr[i].steps, tr[i].nsteps, &fin, &trace, &e)) continue;
    int T = tr[i].nsteps;
    /* trace holds T+1 states: the initial one, then the state after each step */
    char **texts = cwm_xmalloc(sizeof(char *) * (size_t)(T + 1));
    for (int t = 0; t <= T; t++) texts[t] = cwm_state_print(trace[t]);
    if (rows + T + 1 > cap) {
      cap = (rows + T + 1) * 2;
      c->Y = cwm_xrealloc(c->Y, sizeof(float) * (size_t)cap * D);
    }
    rc = cwm_world_encode(w, (const char *const *)texts, T + 1, c->Y + (size_t)rows * D, err);
    for (int t = 0; t <= T; t++) free(texts[t]);
    free(texts);
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
      say(o, "transition: encoding %s states: %d/%d trajectories, %d states, %.0f s, ETA %.0f s", what, i + 1, n, rows,
          el, el / (i + 1) * (n - i - 1));
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
                           double *base_out) {
  int D = w->D;
  int N = 0;
  for (int b = 0; b < B; b++) N += c->len[idx[b]];
  if (!N) return 0;
  const cwm_step **st = cwm_xmalloc(sizeof(*st) * (size_t)N);
  for (int b = 0, k = 0; b < B; b++)
    for (int t = 0; t < c->len[idx[b]]; t++) st[k++] = &c->steps[idx[b]][t];
  wm_act_batch ab = {0};
  wm_act_forward(w, st, N, &ab);
  float *Z = cwm_xmalloc(sizeof(float) * (size_t)(N + B) * D); /* z_0..z_T per trajectory */
  float *dZ = cwm_xcalloc((size_t)(N + B) * D, sizeof(float));
  float *du = cwm_xcalloc((size_t)N * D, sizeof(float)), *dd = cwm_xcalloc((size_t)N * D, sizeof(float));
  float gamma = w->cfg.margin * (float)D, scale = 1.0f / ((float)D * (float)N);
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
      float m = cwm_sqdist(z + (size_t)t * D, Y + (size_t)t * D, D, scale, dzt, NULL);
      match += m / D;
      base += cwm_sqdist(Y, Y + (size_t)t * D, D, 0, NULL, NULL) / D;
      loss += m * scale;
      if (neg != i) {
        int tn = t < c->len[neg] ? t : c->len[neg];
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
  int rc = load_trajs(path, vf, part, 0, &v->t, &v->nt, err);
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
  int rc = load_trajs(o->traj_path, o->valid_fraction, CWM_SPLIT_TRAIN, o->max_traj, &tr, &ntr, err);
  if (!rc) rc = load_trajs(o->traj_path, o->valid_fraction, CWM_SPLIT_VALID, o->max_traj > 0 ? o->max_traj / 4 + 1 : 0,
                           &va, &nva, err);
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
      lsum += rollout_batch(w, &ct, perm + s, B, 1, NULL, NULL);
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
      rollout_batch(w, &cv, vidx + s, VB, 0, &vm, &vbase);
      for (int b = 0; b < VB; b++) vsteps += cv.len[s + b];
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

/* ---- ranker --------------------------------------------------------------------------------- */

int cwm_world_record_groups(cwm_world *w, const char *log_path, double vf, int part, int mode, float **rows_out,
                     double **costs_out, int **sizes_out, int *ngroups_out, int *nrows_out, char (**keys_out)[17],
                     const cwm_train_opts *o, cwm_err *err) {
  cwm_traj *tr = NULL;
  int n = 0;
  int rc = load_trajs(log_path, vf, part, 0, &tr, &n, err);
  if (rc) return rc;
  /* group order: first appearance; records of a key collected together */
  int *order = cwm_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
  int *gid = cwm_xmalloc(sizeof(int) * (size_t)(n ? n : 1)), *gfirst = cwm_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
  int ng = cwm_traj_group_by_key(tr, n, NULL, gid, gfirst);
  int nf = cwm_world_nfeat(w);
  float *rows = cwm_xmalloc(sizeof(float) * (size_t)(n ? n : 1) * nf);
  double *costs = cwm_xmalloc(sizeof(double) * (size_t)(n ? n : 1));
  int *sizes = cwm_xcalloc((size_t)(ng ? ng : 1), sizeof(int));
  char(*gkeys)[17] = cwm_xcalloc((size_t)(ng ? ng : 1), 17);
  cwm_dag_cache *dc = cwm_dag_cache_new();
  int nrows = 0, ngo = 0;
  double t0 = cwm_now();
  for (int g = 0; g < ng && !rc && !stopped(o); g++) {
    int m = 0, first = -1;
    for (int i = 0; i < n; i++)
      if (gid[i] == g) {
        if (first < 0) first = i;
        order[m++] = i;
      }
    cwm_err e = {0};
    const cwm_dag *d = cwm_dag_cache_get(dc, &tr[first], &e);
    if (!d) continue;
    int valid = 0;
    for (int k = 0; k < m; k++) valid += cwm_cost_valid(tr[order[k]].cost);
    if (valid < 2) continue;
    const cwm_step **st = cwm_xmalloc(sizeof(*st) * (size_t)m);
    int *ns = cwm_xmalloc(sizeof(int) * (size_t)m);
    for (int k = 0; k < m; k++) {
      st[k] = tr[order[k]].steps;
      ns[k] = tr[order[k]].nsteps;
      costs[nrows + k] = tr[order[k]].cost;
    }
    rc = cwm_world_record_rows(w, d, st, ns, m, mode, rows + (size_t)nrows * nf, err);
    free(st);
    free(ns);
    if (rc) break;
    sizes[ngo] = m;
    memcpy(gkeys[ngo], tr[gfirst[g]].key, 17);
    ngo++;
    nrows += m;
    if (o && ((g + 1) % 10 == 0 || g + 1 == ng))
      say(o, "ranker: feature rows of %d/%d workloads (%d records), %.0f s", g + 1, ng, nrows, cwm_now() - t0);
  }
  cwm_dag_cache_free(dc);
  cwm_trajs_free(tr, n);
  free(order);
  free(gid);
  free(gfirst);
  if (rc) {
    free(rows);
    free(costs);
    free(sizes);
    free(gkeys);
    return rc;
  }
  *rows_out = rows;
  *costs_out = costs;
  *sizes_out = sizes;
  *ngroups_out = ngo;
  *nrows_out = nrows;
  if (keys_out) *keys_out = gkeys;
  else free(gkeys);
  return 0;
}

int cwm_world_train_ranker(cwm_world *w, const cwm_train_opts *o, cwm_err *err) {
  if (!o->log_path) return cwm_fail(err, CWM_EUSAGE, "train ranker: no measured records (--records)");
  float *rows = NULL;
  double *costs = NULL;
  int *sizes = NULL, ng = 0, nr = 0;
  int rc = cwm_world_record_groups(w, o->log_path, o->valid_fraction, CWM_SPLIT_TRAIN, 0, &rows, &costs, &sizes, &ng, &nr,
                            NULL, o, err);
  if (rc) return rc;
  if (ng < 1) {
    free(rows);
    free(costs);
    free(sizes);
    return cwm_fail(err, CWM_EIO, "%s: no training workload with at least 2 valid measured records", o->log_path);
  }
  float *labels = cwm_xmalloc(sizeof(float) * (size_t)nr);
  for (int g = 0, off = 0; g < ng; off += sizes[g++]) cwm_relevance_grades(costs + off, sizes[g], CWM_RANKER_GRADES, labels + off);
  cwm_ranker_params p;
  cwm_ranker_params_default(&p);
  p.seed = o->seed;
  cwm_ranker *r = cwm_ranker_new(&p, err);
  if (!r) rc = err ? err->code : CWM_EDEP;
  else cwm_ranker_set_margin_col(r, w->D); /* boosted from the value head's score */
  double t0 = cwm_now();
  if (!rc) rc = cwm_ranker_train(r, rows, nr, cwm_world_nfeat(w), labels, sizes, ng, o->ranker_rounds, err);
  if (!rc) {
    cwm_world_set_ranker(w, r);
    say(o, "ranker: %d trees on %d records of %d training workloads in %.1f s", cwm_ranker_rounds(r), nr, ng,
        cwm_now() - t0);
  } else {
    cwm_ranker_free(r);
  }
  free(labels);
  free(rows);
  free(costs);
  free(sizes);
  return rc;
}

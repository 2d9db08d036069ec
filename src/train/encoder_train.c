/* encoder_train.c: the options of training, the trajectories of a split in memory, the
 * vocabulary and the encoder's contrastive training (InfoNCE over noise pairs and same-workload
 * states). Everything splits by workload key (cwm_split_part), never by record, so validation and
 * evaluation workloads are never trained on. */
#include "train_internal.h"

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

/* Trajectories of one part of the split, in memory (at most max, 0 = all). */
int train_load_trajs(const char *path, double vf, int part, int max, cwm_traj **out, int *n, cwm_err *err) {
  *out = NULL;
  *n = 0;
  cwm_traj_iter *it = cwm_traj_iter_open(path, err);
  if (!it) return err ? err->code : CWM_EIO;
  if (part != CWM_SPLIT_ALL) cwm_traj_iter_set_split(it, vf, part);
  size_t cap = 0;
  int rc = 0;
  cwm_traj t;
  while ((max <= 0 || *n < max) && (rc = cwm_traj_iter_next(it, &t, err)) == 1) {
    *out = cwm_grow(*out, (size_t)*n, &cap, sizeof **out);
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
  int rc = train_load_trajs(traj_path, 0, CWM_SPLIT_ALL, max_traj, &tr, &n, err);
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

typedef struct {
  double loss, acc; /* sums over the batches */
  int n;            /* batches */
} batch_sums;

/* One InfoNCE batch of the m pairs (training or, train 0, evaluating) when there are two or more,
 * added to the sums; the pairs' texts are freed. */
static int batch_of_pairs(cwm_world *w, char **ta, char **tb, int m, float temp, int train, const cwm_adamw *opt,
                          batch_sums *sum, cwm_err *err) {
  int rc = 0;
  if (m >= 2) {
    float l = 0, a = 0;
    rc = encoder_batch(w, ta, tb, m, temp, train, opt, &l, &a, err);
    sum->loss += l;
    sum->acc += a;
    sum->n++;
  }
  free_texts(ta, m);
  free_texts(tb, m);
  return rc;
}

int train_load_split(const cwm_train_opts *o, cwm_traj **tr, int *ntr, cwm_traj **va, int *nva, cwm_err *err) {
  *tr = *va = NULL;
  *ntr = *nva = 0;
  int rc = train_load_trajs(o->traj_path, o->valid_fraction, CWM_SPLIT_TRAIN, o->max_traj, tr, ntr, err);
  if (rc) return rc;
  rc = train_load_trajs(o->traj_path, o->valid_fraction, CWM_SPLIT_VALID, o->max_traj > 0 ? o->max_traj / 4 + 1 : 0, va,
                        nva, err);
  if (rc) {
    cwm_trajs_free(*tr, *ntr);
    *tr = NULL;
    *ntr = 0;
  }
  return rc;
}


int cwm_world_train_encoder(cwm_world *w, const cwm_train_opts *o, cwm_err *err) {
  cwm_traj *tr = NULL, *va = NULL;
  int ntr = 0, nva = 0;
  int rc = train_load_split(o, &tr, &ntr, &va, &nva, err);
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
    batch_sums tsum = {0};
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
      rc = batch_of_pairs(w, ta, tb, m, o->temperature, 1, &opt, &tsum, err);
      if ((s + 1) % 20 == 0 || s + 1 == steps_per_epoch) {
        double el = cwm_now() - t0, done = ep * steps_per_epoch + s + 1, all = (double)o->epochs * steps_per_epoch;
        say(o, "encoder epoch %d/%d step %d/%d: train InfoNCE %.4f, retrieval %.1f%%; %.0f s, ETA %.0f s", ep + 1,
            o->epochs, s + 1, steps_per_epoch, tsum.n ? tsum.loss / tsum.n : 0.0, tsum.n ? 100 * tsum.acc / tsum.n : 0.0, el,
            el / done * (all - done));
      }
    }
    /* validation on held-out workloads, fixed pairs */
    cwm_rng vr;
    cwm_rng_seed(&vr, o->seed ^ 0xa11da7eULL);
    batch_sums vsum = {0};
    int VB = nva < B ? nva : B;
    for (int s = 0; VB >= 2 && s + VB <= nva && !rc && vsum.n < 8; s += VB) {
      int m = 0;
      for (int k = 0; k < VB; k++)
        if (make_pair(dc, &va[s + k], &vr, &ta[m], &tb[m]) == 0) m++;
      rc = batch_of_pairs(w, ta, tb, m, o->temperature, 0, &opt, &vsum, err);
    }
    if (vsum.n)
      say(o, "encoder epoch %d/%d: validation InfoNCE %.4f, retrieval %.1f%% (%d batches of held-out workloads)",
          ep + 1, o->epochs, vsum.loss / vsum.n, 100 * vsum.acc / vsum.n, vsum.n);
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

/* eval.c: offline evaluation of the world model's ranking on held-out workloads:
 * the records are split by workload key; the training part trains the baselines (ansor) and
 * the ablation rankers, the held-out part is scored by every method and summarised with
 * TenSet's top-k scores, NDCG and Kendall's tau; plus the scoring speed of world against ansor
 * on the same candidates and the embedding similarity of noise pairs. */
#include "train_internal.h"

#include "cwm/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define say(o, ...) cwm_progressf((o)->progress, (o)->progress_ud, __VA_ARGS__)

/* The records of one part, grouped by workload (order of first appearance), groups with fewer
 * than 2 valid records dropped; states replayed. */
typedef struct {
  cwm_traj *t;
  int n;
  int ng, nrows;
  int *gsize;        /* [ng] */
  int *idx;          /* [nrows] trajectory index per row, groups consecutive */
  const cwm_dag **gdag;
  cwm_state **st;    /* [nrows] final states (NULL when the replay failed) */
  double *cost;      /* [nrows] */
  cwm_dag_cache *dc;
} part_data;

static void part_free(part_data *p) {
  for (int i = 0; i < p->nrows; i++) cwm_state_free(p->st[i]);
  free(p->st);
  free(p->cost);
  free(p->gsize);
  free(p->idx);
  free(p->gdag);
  cwm_trajs_free(p->t, p->n);
  if (p->dc) cwm_dag_cache_free(p->dc);
  memset(p, 0, sizeof *p);
}

static int load_part(const char *path, double vf, int part, part_data *p, cwm_err *err) {
  memset(p, 0, sizeof *p);
  cwm_traj_iter *it = cwm_traj_iter_open(path, err);
  if (!it) return err ? err->code : CWM_EIO;
  cwm_traj_iter_set_split(it, vf, part);
  size_t cap = 0;
  int rc;
  cwm_traj t;
  while ((rc = cwm_traj_iter_next(it, &t, err)) == 1) {
    if (!t.measured) {
      cwm_traj_free(&t);
      continue;
    }
    p->t = cwm_grow(p->t, (size_t)p->n, &cap, sizeof *p->t);
    p->t[p->n++] = t;
  }
  cwm_traj_iter_close(it);
  if (rc < 0) {
    part_free(p);
    return err ? err->code : CWM_EIO;
  }
  int n = p->n;
  int *gid = cwm_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
  int ng = cwm_traj_group_by_key(p->t, n, NULL, gid, NULL);
  p->dc = cwm_dag_cache_new();
  p->gsize = cwm_xcalloc((size_t)(ng ? ng : 1), sizeof(int));
  p->gdag = cwm_xcalloc((size_t)(ng ? ng : 1), sizeof *p->gdag);
  p->idx = cwm_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
  p->st = cwm_xcalloc((size_t)(n ? n : 1), sizeof *p->st);
  p->cost = cwm_xmalloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int g = 0; g < ng; g++) {
    int first = -1, m = 0, valid = 0;
    for (int i = 0; i < n; i++)
      if (gid[i] == g) {
        if (first < 0) first = i;
        m++;
        valid += cwm_cost_valid(p->t[i].cost);
      }
    cwm_err e = {0};
    const cwm_dag *d = cwm_dag_cache_get(p->dc, &p->t[first], &e);
    if (!d || valid < 2) continue;
    int base = p->nrows;
    for (int i = 0; i < n; i++) {
      if (gid[i] != g) continue;
      int r = p->nrows++;
      p->idx[r] = i;
      p->cost[r] = p->t[i].cost;
      if (cwm_state_replay(d, p->t[i].steps, p->t[i].nsteps, &p->st[r], NULL, &e)) p->st[r] = NULL;
    }
    p->gdag[p->ng] = d;
    p->gsize[p->ng++] = p->nrows - base;
  }
  free(gid);
  return 0;
}

/* Ansor's cost model trained on every replayed record of a part (one update: one training). */
static cwm_costmodel *ansor_on_part(const part_data *tr, uint64_t seed, void (*progress)(void *, const char *),
                                    void *ud, cwm_err *err) {
  cwm_costmodel *am = cwm_costmodel_ansor(seed, NULL, err);
  if (!am) return NULL;
  cwm_state **ts = cwm_xmalloc(sizeof(*ts) * (size_t)(tr->nrows ? tr->nrows : 1));
  cwm_record *recs = cwm_xcalloc((size_t)(tr->nrows ? tr->nrows : 1), sizeof *recs);
  int m = 0;
  for (int i = 0; i < tr->nrows; i++) {
    if (!tr->st[i]) continue;
    ts[m] = tr->st[i];
    cwm_record_init(&recs[m]);
    memcpy(recs[m].key, tr->t[tr->idx[i]].key, 17);
    if (cwm_cost_valid(tr->cost[i])) {
      recs[m].ncosts = 1;
      recs[m].costs[0] = tr->cost[i];
    } else {
      recs[m].error = tr->t[tr->idx[i]].error ? tr->t[tr->idx[i]].error : 1;
    }
    m++;
  }
  double t0 = cwm_now();
  int rc = cwm_costmodel_update(am, ts, recs, m, err);
  cwm_progressf(progress, ud, "ansor trained on %d records of %d workloads in %.1f s", m, tr->ng, cwm_now() - t0);
  for (int i = 0; i < m; i++) cwm_record_free(&recs[i]);
  free(recs);
  free(ts);
  if (rc) {
    cwm_costmodel_free(am);
    return NULL;
  }
  return am;
}

int cwm_ansor_pretrain(const char *records, double vf, uint64_t seed, const char *out,
                       void (*progress)(void *, const char *), void *ud, cwm_err *err) {
  part_data tr;
  int rc = load_part(records, vf, vf > 0 ? CWM_SPLIT_TRAIN : CWM_SPLIT_ALL, &tr, err);
  if (rc) return rc;
  if (tr.ng < 1) {
    part_free(&tr);
    return cwm_fail(err, CWM_EIO, "%s: no workload with at least 2 valid measured records", records);
  }
  cwm_costmodel *am = ansor_on_part(&tr, seed, progress, ud, err);
  if (!am) rc = err && err->code ? err->code : CWM_EDEP;
  if (!rc) rc = am->save(am, out, err);
  cwm_costmodel_free(am);
  part_free(&tr);
  return rc;
}

/* World feature rows of every row of a part in a mode (see cwm_world_record_rows). */
static int part_rows(cwm_world *w, const part_data *p, int mode, float *rows, cwm_err *err) {
  int nf = cwm_world_nfeat(w);
  for (int g = 0, off = 0; g < p->ng; off += p->gsize[g++]) {
    int m = p->gsize[g];
    const cwm_step **st = cwm_xmalloc(sizeof(*st) * (size_t)m);
    const char **tg = cwm_xmalloc(sizeof(*tg) * (size_t)m);
    int *ns = cwm_xmalloc(sizeof(int) * (size_t)m);
    for (int k = 0; k < m; k++) {
      st[k] = p->t[p->idx[off + k]].steps;
      ns[k] = p->t[p->idx[off + k]].nsteps;
      tg[k] = p->t[p->idx[off + k]].target;
    }
    int rc = cwm_world_record_rows(w, p->gdag[g], st, ns, tg, m, mode, rows + (size_t)off * nf, err);
    free(st);
    free(tg);
    free(ns);
    if (rc) return rc;
  }
  return 0;
}

/* Trains a ranker on the training part's rows of a mode and scores the held-out rows. */
static int ranker_scores(cwm_world *w, const part_data *tr, const part_data *va, int mode, uint64_t seed, int rounds,
                         double *scores, cwm_err *err) {
  int nf = cwm_world_nfeat(w);
  float *rt = cwm_xmalloc(sizeof(float) * (size_t)(tr->nrows ? tr->nrows : 1) * nf);
  float *rv = cwm_xmalloc(sizeof(float) * (size_t)(va->nrows ? va->nrows : 1) * nf);
  float *lab = cwm_xmalloc(sizeof(float) * (size_t)(tr->nrows ? tr->nrows : 1));
  int rc = part_rows(w, tr, mode, rt, err);
  if (!rc) rc = part_rows(w, va, mode, rv, err);
  for (int g = 0, off = 0; !rc && g < tr->ng; off += tr->gsize[g++])
    cwm_relevance_grades(tr->cost + off, tr->gsize[g], CWM_RANKER_GRADES, lab + off);
  cwm_ranker_params p;
  cwm_ranker_params_default(&p);
  p.seed = seed;
  cwm_ranker *r = rc ? NULL : cwm_ranker_new(&p, err);
  if (!rc && !r) rc = err ? err->code : CWM_EDEP;
  if (r) cwm_ranker_set_margin_col(r, w->D); /* as the world model's own ranker: from the value column */
  if (!rc) rc = cwm_ranker_train(r, rt, tr->nrows, nf, lab, tr->gsize, tr->ng, rounds, err);
  if (!rc) rc = cwm_ranker_predict(r, rv, va->nrows, nf, scores, err);
  cwm_ranker_free(r);
  free(rt);
  free(rv);
  free(lab);
  return rc;
}

/* One line per record of both parts: part, group, cost, ansor's score (held-out), z_T and the
 * action features (mode 0), E(s_T) (mode 2), z_0 (mode 1), the steps' action ids. */
static int dump_part(cwm_world *w, FILE *f, const part_data *p, int part, const double *ansor, cwm_err *err) {
  int nf = cwm_world_nfeat(w), D = w->D, N = p->nrows;
  float *r[3];
  int rc = 0;
  for (int m = 0; m < 3; m++) {
    r[m] = cwm_xmalloc(sizeof(float) * (size_t)(N ? N : 1) * nf);
    if (!rc) rc = part_rows(w, p, m, r[m], err);
  }
  for (int g = 0, off = 0; !rc && g < p->ng; off += p->gsize[g++])
    for (int i = off; i < off + p->gsize[g]; i++) {
      fprintf(f, "%d\t%d\t%.9g\t%.9g", part, g, p->cost[i], ansor ? ansor[i] : 0.0);
      for (int k = 0; k < nf; k++) fprintf(f, "\t%.7g", r[0][(size_t)i * nf + k]);
      for (int k = 0; k < D; k++) fprintf(f, "\t%.7g", r[2][(size_t)i * nf + k]);
      for (int k = 0; k < D; k++) fprintf(f, "\t%.7g", r[1][(size_t)i * nf + k]);
      /* the action ids of every step (the transition's input): steps split by ';' */
      const cwm_traj *t = &p->t[p->idx[i]];
      fputc('\t', f);
      for (int j = 0; j < t->nsteps; j++) {
        int ids[CWM_ACT_MAXF], n = cwm_action_ids(&t->steps[j], w->cfg.act_round, ids);
        if (j) fputc(';', f);
        for (int k = 0; k < n; k++) fprintf(f, k ? ",%d" : "%d", ids[k]);
      }
      fputc('\n', f);
    }
  for (int m = 0; m < 3; m++) free(r[m]);
  return rc;
}

static int dump_rows(cwm_world *w, const part_data *tr, const part_data *va, const double *ansor, const char *path,
                     cwm_err *err) {
  FILE *f = fopen(path, "w");
  if (!f) return cwm_fail(err, CWM_EIO, "%s: cannot write: %s", path, strerror(errno));
  int rc = dump_part(w, f, tr, 0, NULL, err);
  if (!rc) rc = dump_part(w, f, va, 1, ansor, err);
  if (fclose(f) && !rc) rc = cwm_fail(err, CWM_EIO, "%s: write failed", path);
  return rc;
}

static void add_row(cwm_buf *out, const char *name, const double *costs, const double *scores, const part_data *va) {
  cwm_rank_metrics m;
  cwm_rank_metrics_eval(costs, scores, va->gsize, va->ng, NULL, 0, &m);
  cwm_buf_printf(out, "| %s | %.4f | %.4f | %.4f | %.4f | %.4f |\n", name, m.top1, m.top5, m.ndcg10, m.tau,
                 m.tenset_top1);
}

static double median3(const double *v) {
  double a = v[0], b = v[1], c = v[2];
  return a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
}

static double cosine(const float *a, const float *b, int D) {
  double ab = 0, aa = 0, bb = 0;
  for (int k = 0; k < D; k++) {
    ab += (double)a[k] * b[k];
    aa += (double)a[k] * a[k];
    bb += (double)b[k] * b[k];
  }
  return ab / (sqrt(aa * bb) + 1e-12);
}

/* scores of the ranker of another model file (the no-contrastive-pre-training ablation) */
static int ablation_scores(const char *path, part_data *va, double *score, cwm_err *err) {
  int N = va->nrows, rc = 0;
  cwm_world *wa = cwm_world_load(path, err);
  if (!wa) return err ? err->code : CWM_EMODEL;
  float *ra = cwm_xmalloc(sizeof(float) * (size_t)N * cwm_world_nfeat(wa));
  if (!wa->ranker) rc = cwm_fail(err, CWM_EMODEL, "%s: no ranker", path);
  if (!rc) rc = part_rows(wa, va, 0, ra, err);
  if (!rc) rc = cwm_ranker_predict(wa->ranker, ra, N, cwm_world_nfeat(wa), score, err);
  free(ra);
  cwm_world_free(wa);
  return rc;
}

/* Ansor's model and a random model over the held-out states (a failed replay gets the lowest score) */
static int baseline_scores(cwm_costmodel *am, part_data *va, uint64_t seed, double *s_ansor, double *s_rand,
                           cwm_err *err) {
  int N = va->nrows, m = 0, rc;
  cwm_state **vs = cwm_xmalloc(sizeof(*vs) * (size_t)(N ? N : 1));
  int *map = cwm_xmalloc(sizeof(int) * (size_t)(N ? N : 1));
  for (int i = 0; i < N; i++) {
    s_ansor[i] = s_rand[i] = CWM_SCORE_INVALID;
    if (va->st[i]) {
      vs[m] = va->st[i];
      map[m++] = i;
    }
  }
  double *tmp = cwm_xmalloc(sizeof(double) * (size_t)(m ? m : 1));
  rc = cwm_costmodel_predict(am, vs, m, tmp, err);
  for (int i = 0; i < m && !rc; i++) s_ansor[map[i]] = tmp[i];
  cwm_costmodel *rm = cwm_costmodel_random(seed);
  if (!rc) rc = cwm_costmodel_predict(rm, vs, m, tmp, err);
  for (int i = 0; i < m && !rc; i++) s_rand[map[i]] = tmp[i];
  cwm_costmodel_free(rm);
  free(tmp);
  free(vs);
  free(map);
  return rc;
}

typedef struct {
  int n;                                    /* candidates timed */
  double world_cold, world_warm, ansor; /* candidates per second */
} speed_result;

/* Scoring speed on the same candidates: what the search scores, sampled candidates of the held-out
 * workloads (up to 8 workloads x 500); world from cold caches (z_0 and every action computed within
 * the timed call) and warm (as in the search after its first generation). Each timing 3 times,
 * alternating, and the medians: the machine is shared and noisy. */
static int scoring_speed(cwm_world *w, cwm_costmodel *am, part_data *va, uint64_t seed, speed_result *sr,
                         cwm_err *err) {
  int nw = va->ng < 8 ? va->ng : 8, ns = 0, rc = 0;
  cwm_state **ss = NULL;
  cwm_space_opts so;
  cwm_space_opts_default(&so);
  memset(sr, 0, sizeof *sr);
  for (int g = 0; g < nw; g++) {
    cwm_traj *tj = NULL;
    int nt = 0;
    cwm_err e2 = {0};
    if (cwm_traj_sample(va->gdag[g], &so, seed + (uint64_t)g, 500, &tj, &nt, &e2)) continue;
    ss = cwm_xrealloc(ss, sizeof *ss * (size_t)(ns + nt + 1));
    for (int k = 0; k < nt; k++)
      if (cwm_state_replay(va->gdag[g], tj[k].steps, tj[k].nsteps, &ss[ns], NULL, &e2) == 0) ns++;
    cwm_trajs_free(tj, nt);
  }
  sr->n = ns;
  if (ns > 0) {
    double *sp = cwm_xmalloc(sizeof(double) * (size_t)ns);
    double tw[3], tww[3], ta[3], t0;
    for (int rep = 0; rep < 3 && !rc; rep++) {
      wm_map_clear(&w->act_cache);
      wm_map_clear(&w->z0_cache);
      wm_map_clear(&w->zs_cache);
      t0 = cwm_now();
      rc = wm_score_states(w, ss, ns, sp, err);
      tw[rep] = cwm_now() - t0;
      t0 = cwm_now();
      if (!rc) rc = wm_score_states(w, ss, ns, sp, err);
      tww[rep] = cwm_now() - t0;
      t0 = cwm_now();
      if (!rc) rc = cwm_costmodel_predict(am, ss, ns, sp, err);
      ta[rep] = cwm_now() - t0;
    }
    if (!rc) {
      double mw = median3(tw), mww = median3(tww), ma = median3(ta);
      sr->world_cold = ns / (mw > 1e-9 ? mw : 1e-9);
      sr->world_warm = ns / (mww > 1e-9 ? mww : 1e-9);
      sr->ansor = ns / (ma > 1e-9 ? ma : 1e-9);
    }
    free(sp);
  }
  for (int k = 0; k < ns; k++) cwm_state_free(ss[k]);
  free(ss);
  return rc;
}

/* embedding cosine similarity of noise pairs (shape +-1, the 1024/1023 case) against random pairs */
static int noise_similarity(cwm_world *w, part_data *va, uint64_t seed, cwm_buf *out, cwm_err *err) {
  cwm_rng r;
  cwm_rng_seed(&r, seed ^ 0xc05e11eULL);
  int D = w->D, npair = 0, nrand = 0, rc;
  double csum = 0, rsum = 0;
  int lim = va->nrows < 200 ? va->nrows : 200;
  char **ta = cwm_xcalloc((size_t)(lim ? lim : 1), sizeof *ta), **tb = cwm_xcalloc((size_t)(lim ? lim : 1), sizeof *tb);
  const cwm_dag **dd = cwm_xcalloc((size_t)(lim ? lim : 1), sizeof *dd);
  for (int i = 0, g = 0, off = 0; i < lim; i++) {
    int row = (int)((long)i * va->nrows / lim);
    while (g < va->ng && row >= off + va->gsize[g]) off += va->gsize[g++];
    const cwm_traj *t = &va->t[va->idx[row]];
    cwm_err e = {0};
    if (cwm_noise_pair(va->gdag[g], t->steps, t->nsteps, 0, &r, &ta[npair], &tb[npair], &e) == 0) dd[npair++] = va->gdag[g];
  }
  float *za = cwm_xmalloc(sizeof(float) * (size_t)(npair ? npair : 1) * D);
  float *zb = cwm_xmalloc(sizeof(float) * (size_t)(npair ? npair : 1) * D);
  rc = cwm_world_encode(w, (const char *const *)ta, npair, za, err);
  if (!rc) rc = cwm_world_encode(w, (const char *const *)tb, npair, zb, err);
  for (int i = 0; i < npair && !rc; i++) {
    csum += cosine(za + (size_t)i * D, zb + (size_t)i * D, D);
    int j = (i + npair / 2 + 1) % npair;
    if (j != i && dd[j] != dd[i]) {
      rsum += cosine(za + (size_t)i * D, za + (size_t)j * D, D);
      nrand++;
    }
  }
  if (!rc)
    cwm_buf_printf(out,
                   "Embedding cosine similarity: shape +-1 noise pairs (the 1024/1023 case) %.4f over %d pairs; "
                   "random pairs of different workloads %.4f over %d pairs.\n",
                   npair ? csum / npair : 0.0, npair, nrand ? rsum / nrand : 0.0, nrand);
  for (int i = 0; i < npair; i++) {
    free(ta[i]);
    free(tb[i]);
  }
  free(ta);
  free(tb);
  free(dd);
  free(za);
  free(zb);
  return rc;
}

enum { S_WORLD, S_VALUE, S_NOT, S_STATIC, S_ABL, S_ANSOR, S_RAND, S_N };

static void write_table(cwm_buf *out, const cwm_eval_opts *o, part_data *tr, part_data *va, double *const sc[S_N],
                        int have_abl, const speed_result *sr) {
  cwm_buf_printf(out,
                 "Held-out workloads: %d (%d measured records); training workloads: %d (%d records); split by "
                 "workload key, valid fraction %.2f.\n\n",
                 va->ng, va->nrows, tr->ng, tr->nrows, o->valid_fraction);
  cwm_buf_printf(out, "| model | top-1 | top-5 | NDCG@10 | Kendall tau | TenSet top-1 (pooled) |\n|---|---|---|---|---|---|\n");
  add_row(out, "world", va->cost, sc[S_WORLD], va);
  add_row(out, "world, value head alone (no trees)", va->cost, sc[S_VALUE], va);
  add_row(out, "world, no transition (z_0 + action features)", va->cost, sc[S_NOT], va);
  add_row(out, "world, static final state (E(s_T))", va->cost, sc[S_STATIC], va);
  if (have_abl) add_row(out, "world, no contrastive pre-training", va->cost, sc[S_ABL], va);
  add_row(out, "ansor (same training records)", va->cost, sc[S_ANSOR], va);
  add_row(out, "random", va->cost, sc[S_RAND], va);
  double a = sr->ansor;
  cwm_buf_printf(out,
                 "\nScoring speed on %d sampled candidates of the held-out workloads (8 workloads x 500; medians of 3 "
                 "timings): world "
                 "%.0f candidates/s with cold caches (z_0 encodings and action embeddings computed in the timed "
                 "call), %.0f with them warm (as in the search after its first generation); ansor %.0f "
                 "candidates/s: %.1fx cold, %.1fx warm.\n",
                 sr->n, sr->world_cold, sr->world_warm, a, a > 0 ? sr->world_cold / a : 0.0,
                 a > 0 ? sr->world_warm / a : 0.0);
}

int cwm_world_eval_ranking(cwm_world *w, const cwm_eval_opts *o, cwm_buf *out, cwm_err *err) {
  if (!w->ranker || cwm_ranker_rounds(w->ranker) == 0)
    return cwm_fail(err, CWM_EMODEL, "eval ranking: the model has no trained ranker");
  part_data tr, va;
  int rc = load_part(o->records, o->valid_fraction, CWM_SPLIT_TRAIN, &tr, err);
  if (rc) return rc;
  rc = load_part(o->records, o->valid_fraction, CWM_SPLIT_VALID, &va, err);
  if (rc) {
    part_free(&tr);
    return rc;
  }
  say(o, "records: %d training workloads (%d records), %d held-out workloads (%d records)", tr.ng, tr.nrows, va.ng,
      va.nrows);
  if (va.ng < 1 || tr.ng < 1) {
    rc = cwm_fail(err, CWM_EIO, "%s: need measured records of training and held-out workloads (have %d and %d)",
                  o->records, tr.ng, va.ng);
    part_free(&tr);
    part_free(&va);
    return rc;
  }
  int nf = cwm_world_nfeat(w), N = va.nrows, have_abl = 0;
  double *sc[S_N];
  for (int k = 0; k < S_N; k++) sc[k] = cwm_xmalloc(sizeof(double) * (size_t)N);
  float *rows = cwm_xmalloc(sizeof(float) * (size_t)N * nf);
  /* world: the model's own ranker on rolled-out states */
  rc = part_rows(w, &va, 0, rows, err);
  if (!rc) rc = cwm_ranker_predict(w->ranker, rows, N, nf, sc[S_WORLD], err);
  /* the value head alone (column D of the rows): the rollout's own score, no trees */
  for (int i = 0; i < N; i++) {
    float v = rows[(size_t)i * nf + w->D];
    sc[S_VALUE][i] = isnan(v) ? CWM_SCORE_INVALID : v;
  }
  say(o, "world scored");
  if (!rc) rc = ranker_scores(w, &tr, &va, 1, o->seed, 300, sc[S_NOT], err);
  say(o, "ablation no-transition scored");
  if (!rc) rc = ranker_scores(w, &tr, &va, 2, o->seed, 300, sc[S_STATIC], err);
  say(o, "ablation static-final-state scored");
  if (!rc && o->ablation_model) have_abl = !(rc = ablation_scores(o->ablation_model, &va, sc[S_ABL], err));
  /* ansor trained on the training part of the same records */
  cwm_costmodel *am = rc ? NULL : ansor_on_part(&tr, o->seed, o->progress, o->progress_ud, err);
  if (!rc && !am) rc = err ? err->code : CWM_EDEP;
  speed_result sr = {0};
  if (!rc) rc = baseline_scores(am, &va, o->seed, sc[S_ANSOR], sc[S_RAND], err);
  if (!rc) rc = scoring_speed(w, am, &va, o->seed, &sr, err);
  cwm_costmodel_free(am);
  if (!rc && o->dump_rows) rc = dump_rows(w, &tr, &va, sc[S_ANSOR], o->dump_rows, err);
  if (!rc) write_table(out, o, &tr, &va, sc, have_abl, &sr);
  if (!rc) rc = noise_similarity(w, &va, o->seed, out, err);
  for (int k = 0; k < S_N; k++) free(sc[k]);
  free(rows);
  part_free(&tr);
  part_free(&va);
  return rc;
}

/* ------------------------------------------------------------------ eval score */

/* Updates m with the first `count` measured records of LOG (all when count <= 0), in file order,
 * `per_round` at a time, as a tuning run that measured them would have. */
int cwm_eval_train(cwm_costmodel *m, const char *log, int count, int per_round, cwm_err *err) {
  part_data p;
  int rc = load_part(log, 0, CWM_SPLIT_ALL, &p, err);
  if (rc) return rc;
  if (per_round <= 0) per_round = 64;
  int *row = cwm_xmalloc(sizeof(int) * (size_t)(p.n ? p.n : 1)), n = 0;
  int *ord = cwm_xmalloc(sizeof(int) * (size_t)(p.nrows ? p.nrows : 1));
  for (int i = 0; i < p.n; i++) row[i] = -1;
  for (int r = 0; r < p.nrows; r++) row[p.idx[r]] = r;
  for (int i = 0; i < p.n && (count <= 0 || i < count); i++) /* rows in the log's order */
    if (row[i] >= 0 && p.st[row[i]]) ord[n++] = row[i];
  free(row);
  cwm_state **ss = cwm_xmalloc(sizeof *ss * (size_t)per_round);
  cwm_record *rs = cwm_xcalloc((size_t)per_round, sizeof *rs);
  for (int b = 0; b < n && !rc; b += per_round) {
    int k = n - b < per_round ? n - b : per_round;
    for (int j = 0; j < k; j++) {
      const cwm_traj *t = &p.t[p.idx[ord[b + j]]];
      cwm_record_init(&rs[j]);
      memcpy(rs[j].key, t->key, sizeof rs[j].key);
      rs[j].error = t->error;
      rs[j].ncosts = 1;
      rs[j].costs[0] = t->cost;
      ss[j] = p.st[ord[b + j]];
    }
    rc = cwm_costmodel_update(m, ss, rs, k, err);
    for (int j = 0; j < k; j++) cwm_record_free(&rs[j]);
  }
  free(rs);
  free(ss);
  free(ord);
  part_free(&p);
  return rc;
}

int cwm_eval_score(cwm_costmodel *m, const char *records, int list, cwm_buf *out, cwm_err *err) {
  part_data p;
  int rc = load_part(records, 0, CWM_SPLIT_ALL, &p, err);
  if (rc) return rc;
  if (p.ng < 1) {
    part_free(&p);
    return cwm_fail(err, CWM_EIO, "%s: no workload with at least 2 valid measured records", records);
  }
  int N = p.nrows;
  double *sc = cwm_xmalloc(sizeof(double) * (size_t)N);
  /* one batch per workload, as the search scores a population: a model may score relative to
   * the batch (the world model's hand-off blends ranks) */
  cwm_state **bs = cwm_xmalloc(sizeof *bs * (size_t)N);
  double *bv = cwm_xmalloc(sizeof(double) * (size_t)N);
  for (int g = 0, off = 0; g < p.ng && !rc; off += p.gsize[g++]) {
    int nb = 0;
    for (int i = off; i < off + p.gsize[g]; i++) {
      sc[i] = CWM_SCORE_INVALID;
      if (p.st[i]) bs[nb++] = p.st[i];
    }
    if (nb) rc = cwm_costmodel_predict(m, bs, nb, bv, err);
    for (int i = off, k = 0; i < off + p.gsize[g] && !rc; i++)
      if (p.st[i]) sc[i] = bv[k++];
  }
  free(bs);
  free(bv);
  cwm_buf_printf(out, "| workload | records | best (us) | model's top-1 (us) | best of its top 8 (us) | top-1 | top-5 | "
                      "NDCG@10 | Kendall tau |\n|---|---|---|---|---|---|---|---|---|\n");
  int *ord = cwm_xmalloc(sizeof(int) * (size_t)(N ? N : 1));
  for (int g = 0, off = 0; !rc && g < p.ng; off += p.gsize[g++]) {
    int n = p.gsize[g];
    cwm_rank_metrics mt;
    cwm_rank_metrics_eval(p.cost + off, sc + off, &n, 1, NULL, 0, &mt);
    cwm_argsort(sc + off, n, 1, ord);
    double best = INFINITY, top8 = INFINITY;
    for (int k = 0; k < n; k++) {
      double c = cwm_cost_valid(p.cost[off + k]) ? p.cost[off + k] : INFINITY;
      if (c < best) best = c;
    }
    for (int k = 0; k < n && k < 8; k++) {
      double c = cwm_cost_valid(p.cost[off + ord[k]]) ? p.cost[off + ord[k]] : INFINITY;
      if (c < top8) top8 = c;
    }
    double first = cwm_cost_valid(p.cost[off + ord[0]]) ? p.cost[off + ord[0]] : INFINITY;
    cwm_buf_printf(out, "| %s | %d | %.1f | %.1f | %.1f | %.4f | %.4f | %.4f | %.4f |\n", p.t[p.idx[off]].key, n,
                   best * 1e6, first * 1e6, top8 * 1e6, mt.top1, mt.top5, mt.ndcg10, mt.tau);
    if (!list) continue;
    cwm_buf_printf(out, "\n| rank by score | score | latency (us) | measured record # in %s |\n|---|---|---|---|\n", records);
    for (int k = 0; k < n; k++) {
      int r = off + ord[k];
      cwm_buf_printf(out, "| %d | %.6g | %.1f | %d |\n", k + 1, sc[r],
                     cwm_cost_valid(p.cost[r]) ? p.cost[r] * 1e6 : INFINITY, p.idx[r] + 1);
    }
    cwm_buf_printf(out, "\n");
  }
  free(ord);
  free(sc);
  part_free(&p);
  return rc;
}

/* ---- syntactic noise by scores alone ----------------------------------------------------------- */

static int top_overlap(const double *x, const double *y, int n, int k) {
  int *ix = cwm_xmalloc(sizeof(int) * (size_t)n), *iy = cwm_xmalloc(sizeof(int) * (size_t)n);
  for (int i = 0; i < n; i++) ix[i] = iy[i] = i;
  /* partial selection sorts, descending; ties by index so that equal scores agree */
  for (int t = 0; t < k && t < n; t++)
    for (int j = t + 1; j < n; j++) {
      if (x[ix[j]] > x[ix[t]] || (x[ix[j]] == x[ix[t]] && ix[j] < ix[t])) {
        int q = ix[t];
        ix[t] = ix[j];
        ix[j] = q;
      }
      if (y[iy[j]] > y[iy[t]] || (y[iy[j]] == y[iy[t]] && iy[j] < iy[t])) {
        int q = iy[t];
        iy[t] = iy[j];
        iy[j] = q;
      }
    }
  int c = 0;
  for (int a = 0; a < k && a < n; a++)
    for (int b = 0; b < k && b < n; b++) c += ix[a] == iy[b];
  free(ix);
  free(iy);
  return c;
}

/* The schedules of the records of log that belong to workload d (by key) and replay on it. */
static int log_states(const cwm_dag *d, const char *log, cwm_state ***out, int *n, cwm_err *err) {
  cwm_record *recs = NULL;
  int nr = 0;
  *out = NULL;
  *n = 0;
  int rc = cwm_log_read(log, &recs, &nr, NULL, err);
  if (rc) return rc;
  *out = cwm_xcalloc((size_t)(nr ? nr : 1), sizeof **out);
  int other = 0;
  for (int i = 0; i < nr; i++) {
    cwm_err e2 = {0};
    if (strcmp(recs[i].key, cwm_dag_key(d))) {
      other++;
      continue;
    }
    if (cwm_state_replay(d, recs[i].steps, recs[i].nsteps, &(*out)[*n], NULL, &e2) == 0) (*n)++;
  }
  cwm_records_free(recs, nr);
  if (!*n)
    rc = cwm_fail(err, CWM_ENOSCHED, "noise: %s holds no schedule of %s (%d records of other workloads)", log,
                  cwm_dag_workload(d)->name, other);
  return rc;
}

int cwm_eval_noise(cwm_costmodel *m, const cwm_workload *a, const cwm_workload *b, int count, uint64_t seed,
                   const char *candidates, cwm_buf *out, double *tau, cwm_err *err) {
  if (tau) *tau = NAN;
  cwm_dag *da = cwm_dag_new(a, err);
  if (!da) return err ? err->code : CWM_EPARSE;
  cwm_dag *db = cwm_dag_new(b, err);
  if (!db) {
    cwm_dag_free(da);
    return err ? err->code : CWM_EPARSE;
  }
  cwm_state **sa = NULL;
  int n = 0, rc;
  if (candidates) {
    rc = log_states(da, candidates, &sa, &n, err);
  } else {
    cwm_space_opts so;
    cwm_space_opts_default(&so);
    cwm_rng r;
    cwm_rng_seed(&r, seed);
    rc = cwm_sample_initial(da, &so, &r, count, &sa, &n, err);
  }
  cwm_state **pa = cwm_xcalloc((size_t)(n ? n : 1), sizeof *pa), **pb = cwm_xcalloc((size_t)(n ? n : 1), sizeof *pb);
  int k = 0;
  for (int i = 0; i < n && !rc; i++) {
    cwm_state *y = NULL;
    cwm_err e2 = {0};
    int bad = candidates ? cwm_replay_retarget(db, sa[i]->steps, sa[i]->nsteps, &y, &e2)
                        : cwm_replay_fit(db, sa[i]->steps, sa[i]->nsteps, &y, &e2);
    if (bad) continue; /* does not fit b */
    pa[k] = sa[i];
    pb[k++] = y;
  }
  double *xa = cwm_xcalloc((size_t)(k ? k : 1), sizeof(double)), *xb = cwm_xcalloc((size_t)(k ? k : 1), sizeof(double));
  if (!rc && k < 3) rc = cwm_fail(err, CWM_ENOSCHED, "noise: %d of %d candidates of %s fit %s; need 3", k, n, a->name, b->name);
  if (!rc) rc = cwm_costmodel_predict(m, pa, k, xa, err);
  if (!rc) rc = cwm_costmodel_predict(m, pb, k, xb, err);
  if (!rc) {
    double t = cwm_kendall_tau_b(xa, xb, k);
    int ov = top_overlap(xa, xb, k, 8);
    if (tau) *tau = t;
    cwm_buf_printf(out, "| %s | %s | %s | %d of %d | %.3f | %d/%d |\n", m->name, a->name, b->name, k, n, t, ov,
                   k < 8 ? k : 8);
  }
  for (int i = 0; i < k; i++) cwm_state_free(pb[i]);
  for (int i = 0; i < n; i++) cwm_state_free(sa[i]);
  free(sa);
  free(pa);
  free(pb);
  free(xa);
  free(xb);
  cwm_dag_free(da);
  cwm_dag_free(db);
  return rc;
}

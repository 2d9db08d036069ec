/* tune.c: Ansor's search policy on our states, and the tuning loop around it. A round samples
 * an initial population from the sketches, adds the best measured programs, evolves it for a few
 * generations under the cost model (roulette selection, mutation), picks the best unmeasured
 * candidates plus a few random ones (epsilon-greedy), measures them, appends their records to
 * the log and updates the model. A log that already holds records of the workload is resumed:
 * those programs teach the model and are never measured again. The tuner (cwm_tuner_*) runs one
 * round at a time so that the task scheduler can share trials among tasks; cwm_tune is the loop
 * over rounds for a single workload. */
#include "cwm/search.h"
#include "cwm/costmodel.h"
#include "cwm/sketch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A candidate whose warm-up calls all took over this many times the best so far is not timed
 * further (cwm_task_set_slow_cutoff). At 2x a third to a half of a late round's candidates were
 * still timed in full; 1.5x cut-off also those at 1.5 to 2x, a quarter to two fifths of a
 * 1,000-trial run's candidates (bench/heldout.sh logs, 1 thread). */
#define SLOW_CUTOFF 1.5

void cwm_tune_opts_default(cwm_tune_opts *o) {
  *o = (cwm_tune_opts){.trials = 64, .per_round = 64, .population = 2048, .generations = 4, .mutation_prob = 0.85,
                        .eps_greedy = 0.05, .family_quota = -1, .init_min_population = 50, .confirm_rounds = 3, .seed = 1};
  cwm_space_opts_default(&o->space);
}

static uint64_t state_hash(const cwm_state *s) {
  char *t = cwm_state_print(s);
  uint64_t h = cwm_hash64(t, strlen(t));
  free(t);
  return h ? h : 1;
}

/* ---- the tuner ---- */

typedef struct {
  cwm_state *s;
  double cost;
} measured_t;

struct cwm_tuner {
  cwm_task *task;
  cwm_costmodel *model;
  cwm_tune_opts opts;
  const cwm_tune_opts *o; /* &opts */
  cwm_rng rng;
  cwm_hset seen;    /* measured programs */
  measured_t *meas; /* measured programs that ran, kept for seeding the population */
  int nmeas, capmeas;
  double best_cost;
  double best_logged; /* the best's own logged figure (best_cost unless confirmed) */
  int confirmed;      /* programs timed again by cwm_tuner_confirm */
  cwm_step best_steps[CWM_MAX_STEPS];
  int best_n;
  cwm_log *log;
  int own_log;      /* log opened here (from log_path) rather than lent by cwm_tuner_set_log */
  char key[17];
  double t0;
  cwm_tune_result st; /* counters; best_* are filled only by cwm_tuner_result */
  int round;          /* rounds done: each round's random stream is seeded from (seed, round) */
  /* a resumed log's last, unfinished round: its records wait for the round to be searched again,
   * so that the picks are those of an uninterrupted run and only the missing ones are measured */
  cwm_state **pend;
  cwm_record *pend_recs;
  uint64_t *pend_h;
  int npend;
  cwm_tune_result *res; /* &st */
};

static void note(struct cwm_tuner *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct cwm_tuner *t, const char *fmt, ...) {
  if (!t->o->progress) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  t->o->progress(t->o->progress_ud, buf);
}

static void keep_measured(struct cwm_tuner *t, cwm_state *s, const cwm_record *r) {
  if (r->error) {
    cwm_state_free(s);
    return;
  }
  double c = cwm_record_cost(r);
  if (c < t->best_cost) {
    t->best_cost = t->best_logged = c;
    t->best_n = s->nsteps;
    memcpy(t->best_steps, s->steps, sizeof(cwm_step) * (size_t)s->nsteps);
  }
  if (t->nmeas == t->capmeas) {
    t->capmeas = t->capmeas ? t->capmeas * 2 : 256;
    t->meas = cwm_xrealloc(t->meas, sizeof *t->meas * (size_t)t->capmeas);
  }
  t->meas[t->nmeas].s = s;
  t->meas[t->nmeas].cost = c;
  t->nmeas++;
}

static int cmp_meas(const void *a, const void *b) {
  double x = ((const measured_t *)a)->cost, y = ((const measured_t *)b)->cost;
  return x < y ? -1 : x > y;
}

/* Takes measured programs (states[i] is the program of recs[i], both owned by the caller's
 * arrays; the states pass to the tuner): they count as measured and train the model. */
static int resume_apply(struct cwm_tuner *t, cwm_state **states, cwm_record *recs, int n, cwm_err *err) {
  for (int i = 0; i < n; i++) {
    cwm_hset_add(&t->seen, state_hash(states[i]));
    if (recs[i].error) t->res->errors++;
  }
  int rc = n ? cwm_costmodel_update(t->model, states, recs, n, err) : 0;
  for (int i = 0; i < n; i++) {
    if (rc) cwm_state_free(states[i]);
    else keep_measured(t, states[i], &recs[i]);
  }
  if (!rc) t->res->resumed += n;
  return rc;
}

typedef struct {
  cwm_state **states;
  cwm_record *recs;
  int n, cap;
} resume_buf;

/* Replays one record of this workload into the buffer (taking the record); a record whose steps
 * no longer fit the workload is skipped and counted. */
static void resume_add(struct cwm_tuner *t, resume_buf *b, cwm_record *r) {
  cwm_state *s = NULL;
  cwm_err e = {0};
  if (cwm_state_replay(cwm_task_dag(t->task), r->steps, r->nsteps, &s, NULL, &e)) {
    cwm_record_free(r);
    t->res->skipped++;
    return;
  }
  if (b->n == b->cap) {
    b->cap = b->cap ? b->cap * 2 : 64;
    b->states = cwm_xrealloc(b->states, sizeof *b->states * (size_t)b->cap);
    b->recs = cwm_xrealloc(b->recs, sizeof *b->recs * (size_t)b->cap);
  }
  b->states[b->n] = s;
  b->recs[b->n] = *r;
  cwm_record_init(r);
  b->n++;
}

static int resume_finish(struct cwm_tuner *t, resume_buf *b, int rc, cwm_err *err) {
  if (!rc) rc = resume_apply(t, b->states, b->recs, b->n, err);
  else
    for (int i = 0; i < b->n; i++) cwm_state_free(b->states[i]);
  for (int i = 0; i < b->n; i++) cwm_record_free(&b->recs[i]);
  free(b->states);
  free(b->recs);
  return rc;
}

/* Loads the log's records of this workload. A log that does not exist yet holds none. */
/* A record resumes a run only if it was measured the way this run measures (same threads, vector
 * width, compiler and flags). */
static int same_target(const struct cwm_tuner *t, const cwm_record *r) {
  return cwm_record_same_target(r, cwm_task_target(t->task));
}

/* ... though it may come from another CPU model (cores of one name can differ twofold): counted,
 * and the tuner says so */
static void count_other_cpu(struct cwm_tuner *t, const cwm_record *r) {
  char mine[24], theirs[24];
  if (cwm_target_string_field(cwm_task_target(t->task), "cpuid", mine, sizeof mine) &&
      cwm_target_string_field(r->target, "cpuid", theirs, sizeof theirs) && strcmp(mine, theirs)) {
    if (!t->res->other_cpu) snprintf(t->res->other_cpuid, sizeof t->res->other_cpuid, "%s", theirs);
    t->res->other_cpu++;
  }
}

static int resume_file(struct cwm_tuner *t, const char *path, cwm_err *err) {
  cwm_log_iter *it = cwm_log_iter_open(path, err);
  if (!it) return 0; /* no log yet */
  cwm_record r;
  cwm_record_init(&r);
  resume_buf b = {0};
  int rc;
  while ((rc = cwm_log_iter_next(it, &r, err)) == 1) {
    if (strcmp(r.key, t->key) || !same_target(t, &r)) {
      t->res->other_target += !strcmp(r.key, t->key);
      cwm_record_free(&r);
      continue;
    }
    count_other_cpu(t, &r);
    resume_add(t, &b, &r);
  }
  t->res->corrupt_lines += cwm_log_iter_nbad(it);
  cwm_log_iter_close(it);
  if (rc >= 0 && t->o->per_round > 0 && b.n % t->o->per_round && !t->o->resume_whole) {
    /* the records after the last whole round wait for that round to be searched again */
    int whole = b.n - b.n % t->o->per_round;
    t->npend = b.n - whole;
    t->pend = cwm_xmalloc(sizeof *t->pend * (size_t)t->npend);
    t->pend_recs = cwm_xmalloc(sizeof *t->pend_recs * (size_t)t->npend);
    t->pend_h = cwm_xmalloc(sizeof *t->pend_h * (size_t)t->npend);
    for (int i = 0; i < t->npend; i++) {
      t->pend[i] = b.states[whole + i];
      t->pend_recs[i] = b.recs[whole + i];
      t->pend_h[i] = state_hash(t->pend[i]);
    }
    b.n = whole;
    t->res->resumed += t->npend;
  }
  if (t->o->per_round > 0) t->round = (b.n + t->o->per_round - 1) / t->o->per_round; /* whole rounds, or a fresh one */
  return resume_finish(t, &b, rc < 0 ? err->code : 0, err);
}

int cwm_tuner_resume(cwm_tuner *t, const cwm_record *recs, int n, cwm_err *err) {
  resume_buf b = {0};
  for (int i = 0; i < n; i++) {
    if (strcmp(recs[i].key, t->key)) continue;
    if (!same_target(t, &recs[i])) {
      t->res->other_target++;
      continue;
    }
    count_other_cpu(t, &recs[i]);
    cwm_record r;
    cwm_record_copy(&r, &recs[i]);
    resume_add(t, &b, &r);
  }
  return resume_finish(t, &b, 0, err);
}

typedef struct {
  cwm_state *s;
  double score;
  uint64_t h;
} cand_t;

static int cmp_cand(const void *a, const void *b) {
  double x = ((const cand_t *)a)->score, y = ((const cand_t *)b)->score;
  return x > y ? -1 : x < y;
}

/* Keeps the best `cap` unmeasured unique candidates seen over the generations. */
typedef struct {
  cand_t *c;
  int n, cap;
  cwm_hset in;
} best_t;

static void best_offer(best_t *b, const cand_t *c) {
  if (cwm_hset_has(&b->in, c->h)) return;
  if (b->n < b->cap) {
    b->c[b->n] = *c;
    b->c[b->n].s = cwm_state_clone(c->s);
    b->n++;
    cwm_hset_add(&b->in, c->h);
    return;
  }
  int worst = 0;
  for (int i = 1; i < b->n; i++)
    if (b->c[i].score < b->c[worst].score) worst = i;
  if (c->score <= b->c[worst].score) return;
  cwm_state_free(b->c[worst].s);
  b->c[worst] = *c;
  b->c[worst].s = cwm_state_clone(c->s);
  cwm_hset_add(&b->in, c->h);
}

static int score_all(struct cwm_tuner *t, cand_t *pop, int n, cwm_err *err) {
  cwm_state **ss = cwm_xmalloc(sizeof *ss * (size_t)(n ? n : 1));
  double *sc = cwm_xmalloc(sizeof *sc * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) ss[i] = pop[i].s;
  int rc = cwm_costmodel_predict(t->model, ss, n, sc, err);
  for (int i = 0; i < n && !rc; i++) pop[i].score = isfinite(sc[i]) ? sc[i] : -1e30;
  free(ss);
  free(sc);
  return rc;
}

/* Beyond Ansor: in the first round of a model with a family quota (world), the model's best
 * candidate of each sketch whose family (cwm_state_family) no greedy pick has joins the picks
 * (up to room of them) or replaces the lowest-ranked greedy pick, at most cap of them. The initial samples are deduplicated, so a
 * sketch with few distinct programs is nearly absent from the population (the untiled dot
 * product of decode-time attention: 4 of 2,048 samples), and a model trained on other workloads
 * can rank it low where it wins (gpt2_dec_bmm_qk: 15.6 us untiled, 28 us the best of 64 tiled
 * picks). SKETCH_DRAWS samples of each sketch are scored. */
#define SKETCH_DRAWS 8
static int sketch_picks(struct cwm_tuner *t, int cap, cwm_state **out, int *nout, int room, cwm_hset *chosen,
                        cwm_err *err) {
  cwm_state **sk = NULL;
  int nsk = 0, rc = cwm_sketches(cwm_task_dag(t->task), &sk, &nsk, err);
  if (rc) return rc;
  cand_t *c = cwm_xcalloc((size_t)nsk * SKETCH_DRAWS + 1, sizeof *c);
  int *of = cwm_xcalloc((size_t)nsk * SKETCH_DRAWS + 1, sizeof *of), n = 0;
  for (int k = 0; k < nsk; k++)
    for (int j = 0; j < SKETCH_DRAWS; j++) {
      cwm_err e = {0};
      if (cwm_annotate(sk[k], &t->o->space, &t->rng, &c[n].s, &e)) continue;
      c[n].h = state_hash(c[n].s);
      of[n++] = k;
    }
  rc = score_all(t, c, n, err);
  /* the best unmeasured candidate of each sketch, moved to the front, then ordered by score */
  int nb = 0;
  for (int k = 0; k < nsk && !rc; k++) {
    int b = -1;
    for (int i = nb; i < n; i++)
      if (of[i] == k && !cwm_hset_has(&t->seen, c[i].h) && (b < 0 || c[i].score > c[b].score)) b = i;
    if (b < 0) continue;
    cand_t tmp = c[nb];
    c[nb] = c[b];
    c[b] = tmp;
    of[b] = of[nb];
    of[nb++] = k;
  }
  qsort(c, (size_t)nb, sizeof *c, cmp_cand);
  cwm_hset fams = {0};
  for (int i = 0; i < *nout; i++) cwm_hset_add(&fams, cwm_state_family(out[i]));
  for (int i = 0, last = *nout - 1; i < nb && cap > 0 && (*nout < room || last >= 0); i++) {
    uint64_t f = cwm_state_family(c[i].s);
    if (cwm_hset_has(&fams, f) || cwm_hset_has(chosen, c[i].h)) continue;
    cwm_hset_add(&fams, f);
    cwm_hset_add(chosen, c[i].h);
    if (*nout < room) { /* a round the greedy picks did not fill */
      out[(*nout)++] = c[i].s;
    } else {
      cwm_state_free(out[last]);
      out[last--] = c[i].s;
    }
    c[i].s = NULL;
    cap--;
  }
  free(fams.h);
  for (int i = 0; i < n; i++) cwm_state_free(c[i].s);
  free(c);
  free(of);
  cwm_states_free(sk, nsk);
  return rc;
}

/* One round's picks: up to `want` unmeasured programs, best predicted first, the last few random. */
static int search_round(struct cwm_tuner *t, int want, cwm_state ***picks, int *npicks, cwm_err *err) {
  const cwm_tune_opts *o = t->o;
  const cwm_dag *d = cwm_task_dag(t->task);
  cwm_state **init = NULL;
  int ninit = 0;
  /* each round's stream from (seed, round): a resumed run repeats the interrupted round */
  cwm_rng_seed(&t->rng, o->seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(t->round + 1)));
  int nwant = o->init_population > 0 ? o->init_population : o->population;
  if (nwant < o->init_min_population) nwant = o->init_min_population;
  int rc = cwm_sample_initial(d, &o->space, &t->rng, nwant, &init, &ninit, err);
  if (rc) return rc;
  /* population: the random samples plus the best measured programs (not for a model that
   * ignores measurements: seeding by measured time would make the picks depend on timings) */
  int nbest = t->nmeas < (int)(0.2 * o->population) ? t->nmeas : (int)(0.2 * o->population);
  if (t->model->ignores_measurements) nbest = 0;
  if (t->nmeas) qsort(t->meas, (size_t)t->nmeas, sizeof *t->meas, cmp_meas);
  int cap = o->population > ninit + nbest ? o->population : ninit + nbest;
  cand_t *pop = cwm_xcalloc((size_t)cap, sizeof *pop);
  int npop = 0;
  for (int i = 0; i < ninit; i++) pop[npop++].s = cwm_state_clone(init[i]);
  for (int i = 0; i < nbest; i++) pop[npop++].s = cwm_state_clone(t->meas[i].s);
  for (int i = 0; i < npop; i++) pop[i].h = state_hash(pop[i].s);
  /* the family quota: once measured programs seed the population, the evolution crowds around
   * the incumbent's family; at most quota of the greedy picks may share a family, so that the
   * model's best candidates of other families are measured too */
  double fq = o->family_quota < 0 ? t->model->family_quota : o->family_quota;
  int quota = t->nmeas && fq > 0 ? (int)(fq * want + 0.999) : 0;
  best_t best = {.cap = want * (quota ? 8 : 2)};
  best.c = cwm_xcalloc((size_t)best.cap, sizeof *best.c);
  for (int g = 0; g <= o->generations && rc == 0; g++) {
    if ((rc = score_all(t, pop, npop, err))) break;
    for (int i = 0; i < npop; i++)
      if (!cwm_hset_has(&t->seen, pop[i].h)) best_offer(&best, &pop[i]);
    if (g == o->generations || (o->stop && *o->stop)) break;
    /* next generation: roulette on max(score, 0) plus a floor so that every state has a chance */
    double minsc = 1e300, total = 0;
    for (int i = 0; i < npop; i++) minsc = pop[i].score < minsc ? pop[i].score : minsc;
    double *w = cwm_xmalloc(sizeof *w * (size_t)npop);
    for (int i = 0; i < npop; i++) {
      w[i] = pop[i].score - minsc + 1e-9;
      total += w[i];
    }
    cand_t *next = cwm_xcalloc((size_t)o->population, sizeof *next);
    int nnext = 0, tries = 0;
    while (nnext < o->population && tries < o->population * 4) {
      tries++;
      double x = cwm_rng_unit(&t->rng) * total;
      int k = 0;
      while (k < npop - 1 && x > w[k]) x -= w[k++];
      cwm_state *child = NULL;
      if (cwm_rng_unit(&t->rng) < o->mutation_prob) {
        cwm_err e = {0};
        if (cwm_mutate(pop[k].s, &o->space, &t->rng, &child, &e)) continue;
      } else {
        child = cwm_state_clone(pop[k].s);
      }
      next[nnext].s = child;
      next[nnext].h = state_hash(child);
      nnext++;
    }
    free(w);
    for (int i = 0; i < npop; i++) cwm_state_free(pop[i].s);
    free(pop);
    pop = next;
    npop = nnext;
  }
  for (int i = 0; i < npop; i++) cwm_state_free(pop[i].s);
  free(pop);
  qsort(best.c, (size_t)best.n, sizeof *best.c, cmp_cand);
  /* epsilon-greedy: the last picks come from the random initial samples */
  int nrand = (int)(o->eps_greedy * want + 0.5);
  cwm_state **out = cwm_xcalloc((size_t)(want ? want : 1), sizeof *out);
  int nout = 0;
  cwm_hset chosen = {0};
  if (quota) {
    uint64_t *fam = cwm_xmalloc(sizeof *fam * (size_t)(best.n ? best.n : 1));
    int *fcount = cwm_xcalloc((size_t)(best.n ? best.n : 1), sizeof *fcount), nfam = 0;
    for (int i = 0; i < best.n && nout < want - nrand; i++) {
      uint64_t f = cwm_state_family(best.c[i].s);
      int k = 0;
      while (k < nfam && fam[k] != f) k++;
      if (k == nfam) fam[nfam++] = f;
      if (fcount[k] >= quota) continue;
      fcount[k]++;
      out[nout++] = best.c[i].s;
      cwm_hset_add(&chosen, best.c[i].h);
      best.c[i].s = NULL;
    }
    free(fam);
    free(fcount);
  }
  /* the greedy picks in score order (after the quota's: what is left, if too few families) */
  for (int i = 0; i < best.n && nout < want - nrand; i++) {
    if (!best.c[i].s) continue;
    out[nout++] = best.c[i].s;
    cwm_hset_add(&chosen, best.c[i].h);
    best.c[i].s = NULL;
  }
  if (!t->nmeas && fq > 0 && rc == 0) rc = sketch_picks(t, (int)(fq * want / 4 + 0.999), out, &nout, want - nrand, &chosen, err);
  for (int tries = 0; tries < ninit * 2 && nout < want; tries++) {
    cwm_state *s = init[cwm_rng_int(&t->rng, ninit)];
    uint64_t h = state_hash(s);
    if (cwm_hset_has(&t->seen, h) || cwm_hset_has(&chosen, h)) continue;
    cwm_hset_add(&chosen, h);
    out[nout++] = cwm_state_clone(s);
  }
  for (int i = 0; i < best.n; i++) cwm_state_free(best.c[i].s);
  free(best.c);
  free(best.in.h);
  free(chosen.h);
  cwm_states_free(init, ninit);
  *picks = out;
  *npicks = nout;
  return rc;
}

cwm_tuner *cwm_tuner_new(cwm_task *task, cwm_costmodel *model, const cwm_tune_opts *o, cwm_err *err) {
  cwm_tuner *t = cwm_xcalloc(1, sizeof *t);
  t->task = task;
  t->model = model;
  t->opts = *o;
  t->o = &t->opts;
  t->res = &t->st;
  t->best_cost = t->best_logged = 1e10;
  t->t0 = cwm_now();
  cwm_rng_seed(&t->rng, o->seed);
  cwm_workload_key(cwm_dag_workload(cwm_task_dag(task)), t->key);
  if (o->log_path) {
    if (resume_file(t, o->log_path, err) || !(t->log = cwm_log_open(o->log_path, err))) {
      cwm_tuner_free(t);
      return NULL;
    }
    t->own_log = 1;
  }
  return t;
}

void cwm_tuner_set_log(cwm_tuner *t, cwm_log *log) {
  if (t->own_log) cwm_log_close(t->log);
  t->log = log;
  t->own_log = 0;
}

int cwm_tuner_propose(cwm_tuner *t, int want, cwm_state ***picks, int *npicks, cwm_err *err) {
  *picks = NULL;
  *npicks = 0;
  if (want <= 0) return 0;
  return search_round(t, want, picks, npicks, err);
}

int cwm_tuner_round(cwm_tuner *t, int want, int *nmeasured, cwm_err *err) {
  const cwm_tune_opts *o = t->o;
  cwm_tune_result *res = t->res;
  *nmeasured = 0;
  if (want <= 0 || (o->stop && *o->stop)) return 0;
  cwm_state **picks;
  int np;
  int rc = search_round(t, want, &picks, &np, err);
  if (rc) return rc;
  /* picks already measured before an interruption come first, with their logged records */
  cwm_record *recs = cwm_xcalloc((size_t)(np + t->npend + 1), sizeof *recs);
  int nold = 0;
  for (int i = 0; i < np && t->npend; i++) {
    uint64_t h = state_hash(picks[i]);
    for (int k = 0; k < t->npend; k++) {
      if (!t->pend[k] || t->pend_h[k] != h) continue;
      cwm_state *x = picks[i];
      picks[i] = picks[nold];
      picks[nold] = t->pend[k];
      cwm_state_free(x);
      recs[nold] = t->pend_recs[k];
      t->pend[k] = NULL;
      nold++;
      break;
    }
  }
  for (int i = 0; i < nold; i++) cwm_hset_add(&t->seen, state_hash(picks[i]));
  /* measure in chunks so that an interrupt ends the round soon, keeping what was measured */
  int nm = 0;
  cwm_state **mp = picks + nold;
  cwm_record *mr = recs + nold;
  int nmp = np - nold;
  double best_now = t->best_cost;
  for (int c0 = 0; c0 < nmp && !(o->stop && *o->stop); c0 += 16) {
    int cn = nmp - c0 < 16 ? nmp - c0 : 16;
    /* a candidate SLOW_CUTOFF times slower than the best so far (this round's chunks included)
     * is timed by its warm-up calls alone, the fastest of them its cost: their fastest is at most
     * their median, so such a candidate is at least that much slower and cannot be the best */
    cwm_task_set_slow_cutoff(t->task, best_now < 1e9 ? SLOW_CUTOFF * best_now : 0);
    if ((rc = cwm_task_measure(t->task, mp + c0, cn, mr + c0, err))) break;
    for (int i = c0; i < c0 + cn; i++) {
      if (t->log && (rc = cwm_log_append(t->log, &mr[i], err))) break;
      cwm_hset_add(&t->seen, state_hash(mp[i]));
      if (mr[i].error) res->errors++;
      else if (cwm_record_cost(&mr[i]) < best_now) best_now = cwm_record_cost(&mr[i]);
    }
    nm = c0 + cn;
    if (rc) break;
  }
  /* pending records the round did not pick again (a model whose picks depend on timings) join
   * the round as they are */
  int nall = nold + nm;
  cwm_state **all = picks;
  if (t->npend) {
    int extra = 0;
    for (int k = 0; k < t->npend; k++) extra += t->pend[k] != NULL;
    if (extra) {
      all = cwm_xmalloc(sizeof *all * (size_t)(np + extra));
      memcpy(all, picks, sizeof *all * (size_t)nall);
      int j = nall;
      for (int k = 0; k < t->npend; k++)
        if (t->pend[k]) {
          all[j] = t->pend[k];
          recs[j] = t->pend_recs[k];
          cwm_hset_add(&t->seen, t->pend_h[k]);
          t->pend[k] = NULL;
          j++;
        }
      /* the unmeasured rest of picks after them, to be freed */
      memcpy(all + j, picks + nall, sizeof *all * (size_t)(np - nall));
      nall = j;
      np = j + (np - (nold + nm));
      free(picks);
      picks = all;
    }
    free(t->pend);
    free(t->pend_recs);
    free(t->pend_h);
    t->pend = NULL;
    t->pend_recs = NULL;
    t->pend_h = NULL;
    t->npend = 0;
  }
  if (!rc && nall) rc = cwm_costmodel_update(t->model, picks, recs, nall, err);
  for (int i = 0; i < np; i++) {
    if (i < nall) {
      keep_measured(t, picks[i], &recs[i]);
      cwm_record_free(&recs[i]);
    } else {
      cwm_state_free(picks[i]);
    }
  }
  free(recs);
  free(picks);
  res->measured += nm;
  t->round++;
  *nmeasured = nall; /* the round's records: measured now, or logged before an interruption */
  return rc;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* On a shared machine the speed drifts over seconds to minutes, so the lowest logged figure is
 * partly the window it was timed in: the k best programs are timed again here, one after another,
 * `rounds` times, and the lowest median of those in-turn timings is the result. Nothing is logged:
 * the log holds each program's tuning-time record once. */
int cwm_tuner_confirm(cwm_tuner *t, int k, int rounds, cwm_err *err) {
  if (k < 2 || t->nmeas < 2) return 0;
  rounds = rounds < 1 ? 1 : rounds > 16 ? 16 : rounds;
  int n = k < t->nmeas ? k : t->nmeas;
  measured_t *top = cwm_xmalloc(sizeof *top * (size_t)t->nmeas);
  memcpy(top, t->meas, sizeof *top * (size_t)t->nmeas);
  qsort(top, (size_t)t->nmeas, sizeof *top, cmp_meas);
  cwm_state **ss = cwm_xmalloc(sizeof *ss * (size_t)n);
  cwm_record *recs = cwm_xcalloc((size_t)n, sizeof *recs);
  double *tm = cwm_xcalloc((size_t)(n * rounds), sizeof *tm);
  for (int i = 0; i < n; i++) ss[i] = top[i].s;
  int rc = 0, done = 0;
  for (int r = 0; r < rounds && !rc && !(t->o->stop && *t->o->stop); r++, done++) {
    if ((rc = cwm_task_measure(t->task, ss, n, recs, err))) break;
    for (int i = 0; i < n; i++) {
      double c = recs[i].error ? 1e10 : cwm_record_cost(&recs[i]);
      tm[i * rounds + r] = c;
      cwm_record_free(&recs[i]);
    }
  }
  int win = -1;
  double wmed = 1e10;
  for (int i = 0; i < n && done > 0 && !rc; i++) {
    qsort(tm + i * rounds, (size_t)done, sizeof *tm, cmp_dbl);
    double *v = tm + i * rounds, med = done % 2 ? v[done / 2] : 0.5 * (v[done / 2 - 1] + v[done / 2]);
    if (med < wmed) wmed = med, win = i;
  }
  if (win >= 0 && wmed < 1e9) {
    note(t, "confirmed: the %d best programs timed again in turn %d times; the best median %.2f us is "
            "rank %d of the log (logged %.2f us; the log's best %.2f us, now %.2f us)",
         n, done, wmed * 1e6, win + 1, top[win].cost * 1e6, top[0].cost * 1e6,
         (done % 2 ? tm[done / 2] : 0.5 * (tm[done / 2 - 1] + tm[done / 2])) * 1e6);
    t->best_cost = wmed;
    t->best_logged = top[win].cost;
    t->best_n = ss[win]->nsteps;
    memcpy(t->best_steps, ss[win]->steps, sizeof(cwm_step) * (size_t)ss[win]->nsteps);
    t->confirmed = n;
  }
  free(top);
  free(ss);
  free(recs);
  free(tm);
  return rc;
}

double cwm_tuner_best(const cwm_tuner *t) { return t->best_cost; }

int cwm_tuner_best_steps(const cwm_tuner *t, const cwm_step **steps) {
  *steps = t->best_steps;
  return t->best_n;
}

int cwm_tuner_trials(const cwm_tuner *t) { return t->st.resumed + t->st.measured; }

cwm_task *cwm_tuner_task(const cwm_tuner *t) { return t->task; }

void cwm_tuner_result(const cwm_tuner *t, cwm_tune_result *res) {
  *res = t->st;
  res->best_cost = t->best_cost;
  res->best_logged = t->confirmed ? t->best_logged : t->best_cost;
  res->confirmed = t->confirmed;
  res->best_nsteps = t->best_n;
  res->best_steps = NULL;
  if (t->best_n) {
    res->best_steps = cwm_xmalloc(sizeof(cwm_step) * (size_t)t->best_n);
    memcpy(res->best_steps, t->best_steps, sizeof(cwm_step) * (size_t)t->best_n);
  }
  res->seconds = cwm_now() - t->t0;
}

void cwm_tuner_free(cwm_tuner *t) {
  if (!t) return;
  if (t->own_log) cwm_log_close(t->log);
  for (int i = 0; i < t->nmeas; i++) cwm_state_free(t->meas[i].s);
  free(t->meas);
  for (int i = 0; i < t->npend; i++) {
    cwm_state_free(t->pend[i]);
    if (t->pend[i]) cwm_record_free(&t->pend_recs[i]);
  }
  free(t->pend);
  free(t->pend_recs);
  free(t->pend_h);
  free(t->seen.h);
  free(t);
}

int cwm_tune(cwm_task *task, cwm_costmodel *model, const cwm_tune_opts *o, cwm_tune_result *res,
             cwm_err *err) {
  memset(res, 0, sizeof *res);
  res->best_cost = 1e10;
  double t0 = cwm_now();
  cwm_tuner *t = cwm_tuner_new(task, model, o, err);
  if (!t) {
    res->seconds = cwm_now() - t0;
    return err->code;
  }
  if (t->st.other_target)
    note(t, "%d records of this workload in the log were measured with other threads, vector width, compiler or "
            "flags: not resumed", t->st.other_target);
  if (t->st.resumed)
    note(t, "resumed %d records of this workload from %s (%d corrupt lines skipped)", t->st.resumed, o->log_path,
         t->st.corrupt_lines);
  if (t->st.other_cpu)
    note(t, "%d of them were measured on another CPU model (cpuid %s): their latencies are that CPU's", t->st.other_cpu,
         t->st.other_cpuid);
  double flops = cwm_task_flops(task);
  /* an interrupted round's records count when that round is searched again */
  int done_trials = t->st.resumed - t->npend, round = 0, stalls = 0, rc = 0;
  while (done_trials < o->trials && !(o->stop && *o->stop)) {
    int want = o->per_round < o->trials - done_trials ? o->per_round : o->trials - done_trials;
    double rs = cwm_now();
    int nm = 0;
    if ((rc = cwm_tuner_round(t, want, &nm, err))) break;
    if (nm == 0) {
      if (o->stop && *o->stop) break;
      if (++stalls >= 3) {
        note(t, "the search space is exhausted: no new candidates");
        break;
      }
      continue;
    }
    done_trials += nm;
    round++;
    double el = cwm_now() - t0, per = (cwm_now() - rs) / nm, bs, ms;
    cwm_measure_seconds(&bs, &ms);
    note(t,
         "round %d: %d/%d trials, best %.2f us (%.2f GFLOP/s), %d errors, %.0f s elapsed (build %.0f, run %.0f), "
         "ETA %.0f s",
         round, done_trials, o->trials, t->best_cost < 1e9 ? t->best_cost * 1e6 : 0.0,
         t->best_cost < 1e9 ? flops / t->best_cost * 1e-9 : 0.0, t->st.errors, el, bs, ms,
         per * (o->trials - done_trials));
  }
  if (!rc && o->confirm > 1 && !(o->stop && *o->stop)) rc = cwm_tuner_confirm(t, o->confirm, o->confirm_rounds, err);
  cwm_tuner_result(t, res);
  res->seconds = cwm_now() - t0;
  cwm_tuner_free(t);
  if (!rc && res->measured + res->resumed == 0 && !(o->stop && *o->stop))
    return cwm_fail(err, CWM_ENOSCHED, "the search cannot schedule this workload: no candidate could be generated");
  if (!rc && res->best_cost >= 1e9 && res->measured + res->resumed > 0)
    return cwm_fail(err, CWM_ENOSCHED, "every measured candidate failed (%d errors); see the log for the kinds",
                    res->errors);
  return rc;
}

void cwm_tune_result_free(cwm_tune_result *r) {
  free(r->best_steps);
  r->best_steps = NULL;
}

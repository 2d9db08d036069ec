/* scheduler.c: Ansor's task scheduler (gradient strategy) and the loop that tunes a network with
 * it. The choice (cwm_sched_*) is kept apart from measuring so that it can be checked on made-up
 * histories; cwm_tune_network runs one cwm_tuner per subgraph, all sharing one cost model and one
 * log, and asks the choice which of them gets the next round. */
#include "cwm/scheduler.h"
#include "cwm/costmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE 1e10 /* a best latency of nothing that ran, as the tuner reports it */

void cwm_sched_opts_default(cwm_sched_opts *o) {
  *o = (cwm_sched_opts){.alpha = 0.2, .beta = 2, .backward_window = 3, .eps_greedy = 0.05, .early_stopping = 0,
                        .error_rounds = 3, .seed = 1};
}

typedef struct {
  double weight, flops, lower;
  int group;      /* -1 = none (or left its group) */
  int rounds;     /* Ansor's task_cts */
  int best_round; /* Ansor's task_best_cts: the round of the last improvement */
  double best;
  double *hist;   /* best after each round, rounds long */
  int cap;
  int dry;        /* a round found no new candidate */
} stask;

struct cwm_sched {
  int n;
  stask *t;
  cwm_sched_opts o;
  cwm_rng rng;
};

cwm_sched *cwm_sched_new(int n, const double *weight, const double *flops, const int *group,
                         const cwm_sched_opts *o) {
  cwm_sched *s = cwm_xcalloc(1, sizeof *s);
  s->n = n;
  s->t = cwm_xcalloc((size_t)(n ? n : 1), sizeof *s->t);
  if (o) s->o = *o;
  else cwm_sched_opts_default(&s->o);
  cwm_rng_seed(&s->rng, s->o.seed);
  for (int i = 0; i < n; i++) {
    s->t[i].weight = weight[i];
    s->t[i].flops = flops[i];
    s->t[i].group = group ? group[i] : -1;
    s->t[i].best = NONE;
  }
  return s;
}

void cwm_sched_free(cwm_sched *s) {
  if (!s) return;
  for (int i = 0; i < s->n; i++) free(s->t[i].hist);
  free(s->t);
  free(s);
}

void cwm_sched_set_lower_bound(cwm_sched *s, int i, double seconds) { s->t[i].lower = seconds; }

static void push_hist(stask *t, double best) {
  if (t->rounds == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 16;
    t->hist = cwm_xrealloc(t->hist, sizeof *t->hist * (size_t)t->cap);
  }
  t->hist[t->rounds++] = best;
}

static int group_size(const cwm_sched *s, int g) {
  int k = 0;
  for (int j = 0; g >= 0 && j < s->n; j++) k += s->t[j].group == g;
  return k;
}

/* The best throughput (FLOP per second) among the tasks of group g. */
static double group_best_speed(const cwm_sched *s, int g) {
  double b = 0;
  for (int j = 0; j < s->n; j++)
    if (s->t[j].group == g && s->t[j].flops / s->t[j].best > b) b = s->t[j].flops / s->t[j].best;
  return b;
}

/* Ansor's _adjust_similarity_group: a task tuned many more rounds than the rest of its group
 * that is still far slower than the group's best is not really similar to it. */
static void adjust_group(cwm_sched *s, int i) {
  stask *t = &s->t[i];
  if (t->group < 0 || group_size(s, t->group) <= 1) return;
  double best_speed = group_best_speed(s, t->group), cur = t->flops / t->best;
  int max_other = 0;
  for (int j = 0; j < s->n; j++)
    if (j != i && s->t[j].group == t->group && s->t[j].rounds > max_other) max_other = s->t[j].rounds;
  if (cur < best_speed / s->o.beta && t->rounds > 5 + max_other) t->group = -1;
}

void cwm_sched_update(cwm_sched *s, int i, double best, int measured) {
  stask *t = &s->t[i];
  if (best < t->best) {
    t->best = best;
    t->best_round = t->rounds + 1;
  }
  push_hist(t, t->best);
  if (measured == 0) t->dry = 1;
  adjust_group(s, i);
}

void cwm_sched_restore(cwm_sched *s, int i, const double *history, int rounds) {
  stask *t = &s->t[i];
  t->rounds = 0;
  t->best = NONE;
  t->best_round = 0;
  for (int r = 0; r < rounds; r++) {
    if (history[r] < t->best) {
      t->best = history[r];
      t->best_round = r + 1;
    }
    push_hist(t, t->best);
  }
}

int cwm_sched_done(const cwm_sched *s, int i) {
  const stask *t = &s->t[i];
  if (t->dry) return 1;
  /* tuned again and again, and nothing of it ever ran */
  if (t->rounds > 0 && t->rounds >= s->o.error_rounds && t->best >= NONE) return 1;
  if (t->lower > 0 && t->best <= t->lower) return 1;
  if (s->o.early_stopping > 0 && t->rounds - t->best_round > s->o.early_stopping) return 1;
  return 0;
}

int cwm_sched_rounds(const cwm_sched *s, int i) { return s->t[i].rounds; }
double cwm_sched_best(const cwm_sched *s, int i) { return s->t[i].best; }

double cwm_sched_gradient(const cwm_sched *s, int i) {
  const stask *t = &s->t[i];
  if (t->rounds == 0 || cwm_sched_done(s, i)) return 0;
  int r = t->rounds, w = s->o.backward_window;
  /* the objective is linear: d(sum w_j g_j)/d g_i = w_i */
  double chain = t->weight;
  double backward = 0;
  if (w > 0 && r - 1 - w >= 0) backward = (t->hist[r - 1] - t->hist[r - 1 - w]) / w;
  double g_next1 = t->best - t->best / r;
  double g_next2 = s->o.beta * 1e30;
  if (t->group >= 0 && group_size(s, t->group) > 1)
    g_next2 = s->o.beta * t->flops / group_best_speed(s, t->group);
  double g_next = g_next1 < g_next2 ? g_next1 : g_next2;
  double forward = g_next - t->best;
  return chain * (s->o.alpha * backward + (1 - s->o.alpha) * forward);
}

int cwm_sched_next(cwm_sched *s) {
  int nlive = 0;
  for (int i = 0; i < s->n; i++) {
    if (cwm_sched_done(s, i)) continue;
    if (s->t[i].rounds == 0) return i; /* warm-up: every task once, in order */
    nlive++;
  }
  if (nlive == 0) return -1;
  int pick = -1;
  if (s->o.eps_greedy > 0 && cwm_rng_unit(&s->rng) < s->o.eps_greedy) {
    pick = cwm_rng_int(&s->rng, nlive);
  } else {
    double gmin = INFINITY, gmax = -INFINITY;
    int arg = -1;
    for (int i = 0; i < s->n; i++) {
      if (cwm_sched_done(s, i)) continue;
      double g = cwm_sched_gradient(s, i);
      if (g < gmin) gmin = g, arg = i;
      if (g > gmax) gmax = g;
    }
    if (gmin < gmax) return arg;
    pick = cwm_rng_int(&s->rng, nlive);
  }
  for (int i = 0; i < s->n; i++)
    if (!cwm_sched_done(s, i) && pick-- == 0) return i;
  return -1;
}

double cwm_sched_objective(const cwm_sched *s, int *missing) {
  double f = 0;
  int m = 0;
  for (int i = 0; i < s->n; i++) {
    if (s->t[i].best >= NONE) m++;
    else f += s->t[i].weight * s->t[i].best;
  }
  if (missing) *missing = m;
  return f;
}

/* ------------------------------------------------------------------ tuning a network */

void cwm_net_opts_default(cwm_net_opts *o) {
  *o = (cwm_net_opts){.trials = 1000, .per_round = 64};
  cwm_sched_opts_default(&o->sched);
  cwm_tune_opts_default(&o->tune);
}

#define net_note(o, ...) cwm_progressf((o)->note, (o)->ud, __VA_ARGS__)

typedef struct {
  cwm_record *r;
  int n, cap;
} recvec;

/* Reads the log once and hands each task its records (in log order); the rest are left out. */
static int read_log(const char *path, const cwm_network *net, char (*keys)[17], recvec *per, int *corrupt,
                    cwm_err *err) {
  cwm_err e = {0};
  cwm_log_iter *it = cwm_log_iter_open(path, &e);
  if (!it) return 0; /* no log yet */
  cwm_record r;
  cwm_record_init(&r);
  int rc;
  while ((rc = cwm_log_iter_next(it, &r, err)) == 1) {
    int k = -1;
    for (int i = 0; i < net->n && k < 0; i++)
      if (!strcmp(r.key, keys[i])) k = i;
    if (k < 0) {
      cwm_record_free(&r);
      continue;
    }
    recvec *v = &per[k];
    if (v->n == v->cap) {
      v->cap = v->cap ? v->cap * 2 : 64;
      v->r = cwm_xrealloc(v->r, sizeof *v->r * (size_t)v->cap);
    }
    v->r[v->n++] = r;
    cwm_record_init(&r);
  }
  *corrupt = cwm_log_iter_nbad(it);
  cwm_log_iter_close(it);
  return rc < 0 ? err->code : 0;
}

/* The history a task would have had tuning its logged records in rounds of per_round. */
static void restore_history(cwm_sched *s, int i, const recvec *v, int per_round) {
  int rounds = (v->n + per_round - 1) / per_round;
  double *h = cwm_xcalloc((size_t)(rounds ? rounds : 1), sizeof *h), best = NONE;
  for (int k = 0; k < v->n; k++) {
    double c = cwm_record_cost(&v->r[k]);
    if (!v->r[k].error && c < best) best = c;
    h[k / per_round] = best;
  }
  cwm_sched_restore(s, i, h, rounds);
  free(h);
}

/* the result rows, one per subgraph, before any tuning */
static void init_results(const cwm_network *net, cwm_net_result *res) {
  memset(res, 0, sizeof *res);
  res->ntasks = net->n;
  res->tasks = cwm_xcalloc((size_t)net->n, sizeof *res->tasks);
  for (int i = 0; i < net->n; i++) {
    cwm_net_task_result *tr = &res->tasks[i];
    snprintf(tr->name, sizeof tr->name, "%s", net->sub[i].name);
    cwm_workload_key(net->sub[i].w, tr->key);
    tr->weight = net->sub[i].weight;
    tr->flops = cwm_workload_flops(net->sub[i].w);
    tr->best_cost = NONE;
  }
}

/* the task scheduler over the subgraphs; similarity groups are one per op kind */
static cwm_sched *net_sched(const cwm_network *net, const cwm_net_result *res, const cwm_net_opts *o) {
  int n = net->n;
  double *weight = cwm_xcalloc((size_t)n, sizeof *weight), *flops = cwm_xcalloc((size_t)n, sizeof *flops);
  int *group = cwm_xcalloc((size_t)n, sizeof *group);
  for (int i = 0; i < n; i++) {
    weight[i] = net->sub[i].weight;
    flops[i] = res->tasks[i].flops;
    group[i] = i;
    for (int j = 0; j < i; j++)
      if (!strcmp(net->sub[j].op, net->sub[i].op)) {
        group[i] = group[j];
        break;
      }
  }
  cwm_sched *s = cwm_sched_new(n, weight, flops, group, &o->sched);
  if (o->peak_gflops > 0)
    for (int i = 0; i < n; i++) cwm_sched_set_lower_bound(s, i, flops[i] / (o->peak_gflops * 1e9));
  free(weight);
  free(flops);
  free(group);
  return s;
}

/* one subgraph's tuner result into its row and the totals */
static void task_result(cwm_net_result *res, int i, cwm_tuner *tu, int done) {
  cwm_net_task_result *tr = &res->tasks[i];
  cwm_tune_result r;
  cwm_tuner_result(tu, &r);
  tr->best_cost = r.best_cost;
  tr->best_steps = r.best_steps;
  tr->best_nsteps = r.best_nsteps;
  tr->measured = r.measured;
  tr->resumed = r.resumed;
  tr->errors = r.errors;
  tr->trials = r.measured + r.resumed;
  tr->done = done;
  res->trials += tr->trials;
  res->measured += r.measured;
  res->errors += r.errors;
}

int cwm_tune_network(const cwm_network *net, cwm_costmodel *m, const cwm_measure_opts *mo, const cwm_net_opts *o,
                     cwm_net_result *res, cwm_err *err) {
  double t0 = cwm_now();
  int n = net->n, rc = 0;
  init_results(net, res);
  int per = o->per_round < o->trials / n ? o->per_round : o->trials / n;
  if (per < 1)
    return cwm_fail(err, CWM_EUSAGE, "%d trials are fewer than one per subgraph (%d subgraphs)", o->trials, n);
  cwm_sched *s = net_sched(net, res, o);

  cwm_task **tasks = cwm_xcalloc((size_t)n, sizeof *tasks);
  cwm_tuner **tu = cwm_xcalloc((size_t)n, sizeof *tu);
  recvec *per_task = cwm_xcalloc((size_t)n, sizeof *per_task);
  char(*keys)[17] = cwm_xcalloc((size_t)n, sizeof *keys);
  cwm_log *log = NULL;
  for (int i = 0; i < n; i++) memcpy(keys[i], res->tasks[i].key, 17);
  if (o->log_path && (rc = read_log(o->log_path, net, keys, per_task, &res->corrupt_lines, err))) goto done;
  cwm_tune_opts to = o->tune;
  to.log_path = NULL;
  to.stop = o->stop;
  to.progress = NULL;
  for (int i = 0; i < n; i++) {
    if (!(tasks[i] = cwm_task_new(net->sub[i].w, mo, err))) {
      rc = err->code;
      goto done;
    }
    /* each task its own stream, the same whatever the order of the file */
    to.seed = o->tune.seed ^ cwm_hash64(keys[i], 16);
    if (!(tu[i] = cwm_tuner_new(tasks[i], m, &to, err))) {
      rc = err->code;
      goto done;
    }
    /* records measured another way (threads, compiler, flags) neither resume nor shape the history */
    int kept = 0;
    for (int j = 0; j < per_task[i].n; j++) {
      if (cwm_record_same_target(&per_task[i].r[j], cwm_task_target(tasks[i]))) per_task[i].r[kept++] = per_task[i].r[j];
      else cwm_record_free(&per_task[i].r[j]);
    }
    per_task[i].n = kept;
    if (per_task[i].n) {
      if ((rc = cwm_tuner_resume(tu[i], per_task[i].r, per_task[i].n, err))) goto done;
      restore_history(s, i, &per_task[i], per);
      res->tasks[i].rounds = cwm_sched_rounds(s, i);
    }
    cwm_records_free(per_task[i].r, per_task[i].n);
    per_task[i].r = NULL;
  }
  if (o->log_path) {
    if (!(log = cwm_log_open(o->log_path, err))) {
      rc = err->code;
      goto done;
    }
    for (int i = 0; i < n; i++) cwm_tuner_set_log(tu[i], log);
  }
  int total = 0, resumed_tasks = 0;
  for (int i = 0; i < n; i++) {
    total += cwm_tuner_trials(tu[i]);
    resumed_tasks += cwm_tuner_trials(tu[i]) > 0;
  }
  res->resumed = total;
  if (total)
    net_note(o, "resumed %d records of %d of the %d subgraphs from %s (%d corrupt lines skipped)", total,
             resumed_tasks, n, o->log_path, res->corrupt_lines);

  int round = 0, measured_now = 0;
  while (total < o->trials && !(o->stop && *o->stop)) {
    int warm = 0;
    for (int i = 0; i < n; i++) warm |= cwm_sched_rounds(s, i) == 0 && !cwm_sched_done(s, i);
    int i = cwm_sched_next(s);
    if (i < 0) {
      net_note(o, "every subgraph is done (search space exhausted, only errors, or at its bound)");
      break;
    }
    int want = per < o->trials - total ? per : o->trials - total, nm = 0;
    if ((rc = cwm_tuner_round(tu[i], want, &nm, err))) break;
    if (nm == 0 && o->stop && *o->stop) break;
    cwm_sched_update(s, i, cwm_tuner_best(tu[i]), nm);
    res->tasks[i].rounds = cwm_sched_rounds(s, i);
    if (nm == 0) net_note(o, "%s: the search space is exhausted: no new candidates", net->sub[i].name);
    total += nm;
    measured_now += nm;
    round++;
    if (o->progress) {
      cwm_net_progress p = {.round = round, .warmup = warm, .task = i, .name = net->sub[i].name, .measured = nm,
                            .trials = total, .budget = o->trials, .task_best = cwm_tuner_best(tu[i]), .ntasks = n};
      p.est_latency = cwm_sched_objective(s, &p.missing);
      p.elapsed = cwm_now() - t0;
      p.eta = measured_now ? p.elapsed / measured_now * (o->trials - total) : 0;
      o->progress(o->ud, &p);
    }
  }
  res->rounds = round;

done:
  for (int i = 0; i < n; i++) {
    if (tu[i]) task_result(res, i, tu[i], cwm_sched_done(s, i));
    cwm_tuner_free(tu[i]);
    cwm_task_free(tasks[i]);
    cwm_records_free(per_task[i].r, per_task[i].n);
  }
  res->est_latency = cwm_sched_objective(s, &res->missing);
  if (log) cwm_log_close(log);
  free(tu);
  free(tasks);
  free(per_task);
  free(keys);
  cwm_sched_free(s);
  res->seconds = cwm_now() - t0;
  if (!rc && res->missing == n && res->trials > 0)
    return cwm_fail(err, CWM_ENOSCHED, "every measured candidate of every subgraph failed (%d errors); see the log",
                    res->errors);
  return rc;
}

void cwm_net_result_free(cwm_net_result *r) {
  for (int i = 0; i < r->ntasks; i++) free(r->tasks[i].best_steps);
  free(r->tasks);
  r->tasks = NULL;
  r->ntasks = 0;
}

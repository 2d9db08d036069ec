/* collect.c: the measured data set. For each training workload, candidates drawn the TenSet way
 * (random sketch samples plus a short evolution under the random model, deduplicated against the
 * log) are measured with the runner's protocol and appended to one log; a rerun skips the
 * workloads already complete and continues a partial one. */
#include "cwm/costmodel.h"
#include "cwm/train.h"
#include "cwm/search.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cwm_collect_opts_default(cwm_collect_opts *o) {
  *o = (cwm_collect_opts){.per_workload = 64, .seed = 1, .population = 512, .generations = 2};
  cwm_measure_opts_default(&o->measure);
  o->measure.threads = 1;
  o->measure.run_timeout_s = 3; /* time-outs dominated collection at 10 s (11% of candidates) */
}

typedef struct {
  char key[17];
  int n;
} key_count;

#define say(o, ...) cwm_progressf((o)->progress, (o)->progress_ud, __VA_ARGS__)

#define say_remeasure(o, ...) cwm_progressf((o)->progress, (o)->progress_ud, __VA_ARGS__)

typedef struct {
  const cwm_collect_opts *o;
  const char *id;
  int index, total;
} fwd_ctx;

static void forward(void *ud, const char *line) {
  const fwd_ctx *c = ud;
  say(c->o, "[%d/%d] %s: %s", c->index, c->total, c->id, line);
}

/* Records per workload key already in the log (a missing log holds none). */
static int count_log(const char *path, key_count **out, int *n, int *nbad, cwm_err *err) {
  *out = NULL;
  *n = 0;
  *nbad = 0;
  if (access(path, F_OK) != 0) return 0;
  cwm_log_iter *it = cwm_log_iter_open(path, err);
  if (!it) return err ? err->code : CWM_EIO;
  key_count *v = NULL;
  int cnt = 0, rc, last = -1;
  size_t cap = 0;
  cwm_record r;
  while ((rc = cwm_log_iter_next(it, &r, err)) == 1) {
    int k = last >= 0 && !strcmp(v[last].key, r.key) ? last : -1;
    for (int i = 0; i < cnt && k < 0; i++)
      if (!strcmp(v[i].key, r.key)) k = i;
    if (k < 0) {
      v = cwm_grow(v, (size_t)cnt, &cap, sizeof *v);
      k = cnt++;
      memcpy(v[k].key, r.key, 17);
      v[k].n = 0;
    }
    v[k].n++;
    last = k;
    cwm_record_free(&r);
  }
  *nbad = cwm_log_iter_nbad(it);
  cwm_log_iter_close(it);
  if (rc < 0) {
    free(v);
    return err ? err->code : CWM_EIO;
  }
  *out = v;
  *n = cnt;
  return 0;
}

static int have_of(const key_count *v, int n, const char *key) {
  for (int i = 0; i < n; i++)
    if (!strcmp(v[i].key, key)) return v[i].n;
  return 0;
}

int cwm_dataset_measure(const cwm_wl_entry *wl, int n, const cwm_collect_opts *o, cwm_collect_result *res,
                        cwm_err *err) {
  memset(res, 0, sizeof *res);
  if (!o->log_path) return cwm_fail(err, CWM_EUSAGE, "dataset measure: no log path");
  if (o->per_workload < 1) return cwm_fail(err, CWM_EUSAGE, "dataset measure: per_workload must be positive");
  double t0 = cwm_now();
  key_count *have = NULL;
  int nhave = 0, nbad = 0;
  int rc = count_log(o->log_path, &have, &nhave, &nbad, err);
  if (rc) return rc;
  /* what is left to measure, for the ETA */
  char (*keys)[17] = cwm_xcalloc((size_t)(n ? n : 1), sizeof *keys);
  long left = 0;
  for (int i = 0; i < n; i++) {
    cwm_err e = {0};
    cwm_workload *w = cwm_wl_entry_workload(&wl[i], &e);
    if (!w) {
      rc = cwm_fail(err, e.code, "%s", e.msg);
      goto done;
    }
    cwm_workload_key(w, keys[i]);
    cwm_workload_free(w);
    int h = have_of(have, nhave, keys[i]);
    if (h < o->per_workload) left += o->per_workload - h;
  }
  say(o, "%d workloads, %d records each; the log %s holds %d workloads' records (%d corrupt lines); %ld to measure",
      n, o->per_workload, o->log_path, nhave, nbad, left);
  long measured_now = 0;
  for (int i = 0; i < n && !(o->stop && *o->stop); i++) {
    int h = have_of(have, nhave, keys[i]);
    if (h >= o->per_workload) {
      res->skipped++;
      continue;
    }
    cwm_err e = {0};
    cwm_workload *w = cwm_wl_entry_workload(&wl[i], &e);
    cwm_task *t = w ? cwm_task_new(w, &o->measure, &e) : NULL;
    if (!t) {
      cwm_workload_free(w);
      rc = cwm_fail(err, e.code, "%s", e.msg);
      goto done;
    }
    uint64_t wseed = o->seed ^ cwm_hash64(keys[i], 16);
    cwm_costmodel *m = cwm_costmodel_random(wseed);
    cwm_tune_opts to;
    cwm_tune_opts_default(&to);
    to.trials = o->per_workload;
    to.per_round = o->per_workload;
    to.resume_whole = 1; /* raising N measures the N - h missing ones, not a whole round again */
    to.population = o->population;
    to.generations = o->generations;
    /* the data set's draw: 50 random samples evolved (as the shipped records were collected), not the
     * tuner's population-sized initial sample */
    to.init_population = to.init_min_population;
    to.seed = wseed;
    to.space.cores = o->measure.threads > 0 ? o->measure.threads : 1;
    to.log_path = o->log_path;
    to.stop = o->stop;
    fwd_ctx fc = {o, wl[i].id, i + 1, n};
    to.progress = o->progress ? forward : NULL;
    to.progress_ud = &fc;
    cwm_tune_result tr;
    double ws = cwm_now();
    int trc = cwm_tune(t, m, &to, &tr, &e);
    res->measured += tr.measured;
    res->errors += tr.errors;
    res->resumed += tr.resumed;
    measured_now += tr.measured;
    left -= o->per_workload - h;
    if (trc == CWM_ENOSCHED) {
      res->failed++;
      if (!res->first_failure[0]) snprintf(res->first_failure, sizeof res->first_failure, "%.60s: %.180s", wl[i].id, e.msg);
      say(o, "[%d/%d] %s: failed: %s", i + 1, n, wl[i].id, e.msg);
    } else if (trc) {
      rc = cwm_fail(err, e.code, "%s: %s", wl[i].id, e.msg);
    } else {
      res->done++;
      double el = cwm_now() - t0, rate = measured_now / (el > 1e-9 ? el : 1e-9);
      say(o, "[%d/%d] %s: %d measured (%d resumed, %d errors) in %.0f s, best %.2f us; %ld measured this run, "
             "%.1f/min, ETA %.0f s",
          i + 1, n, wl[i].id, tr.measured, tr.resumed, tr.errors, cwm_now() - ws,
          tr.best_cost < 1e9 ? tr.best_cost * 1e6 : 0.0, measured_now, rate * 60, rate > 0 ? left / rate : 0.0);
    }
    cwm_tune_result_free(&tr);
    cwm_costmodel_free(m);
    cwm_task_free(t);
    cwm_workload_free(w);
    if (rc) goto done;
  }
done:
  res->seconds = cwm_now() - t0;
  free(keys);
  free(have);
  return rc;
}

/* ---- label noise: re-measuring a random fraction of a log ------------------------------------ */

void cwm_remeasure_opts_default(cwm_remeasure_opts *o) {
  *o = (cwm_remeasure_opts){.fraction = 0.02, .seed = 1};
  cwm_measure_opts_default(&o->measure);
  o->measure.threads = 1;
  o->measure.run_timeout_s = 3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median_of(double *v, int n) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
  long ts;
  double ratio;
} noise_pair;

static int cmp_pair_ts(const void *a, const void *b) {
  long x = ((const noise_pair *)a)->ts, y = ((const noise_pair *)b)->ts;
  return x < y ? -1 : x > y;
}

/* Fills res's noise figures from the pairs (t2 / t1 and the original's timestamp): the relative
 * difference |t2 - t1| / t1 = |t2/t1 - 1| (median, 90th percentile), the median t2/t1, and both
 * per stretch; sorts the pairs by timestamp. */
static void remeasure_figures(noise_pair *p, int n, cwm_remeasure_result *res) {
  double *v = cwm_xmalloc(sizeof(double) * (size_t)(n ? n : 1));
  res->compared = n;
  for (int i = 0; i < n; i++) v[i] = fabs(p[i].ratio - 1);
  res->median_rel_diff = median_of(v, n);
  res->p90_rel_diff = n ? v[(int)(0.9 * (n - 1))] : 0;
  for (int i = 0; i < n; i++) v[i] = p[i].ratio;
  res->median_ratio = median_of(v, n);
  qsort(p, (size_t)n, sizeof *p, cmp_pair_ts);
  for (int i = 0; i < n;) {
    int j = i + 1;
    if (res->nstretch == CWM_REMEASURE_MAX_STRETCH - 1) j = n;
    while (j < n && p[j].ts - p[j - 1].ts <= 3600) j++;
    cwm_remeasure_stretch *s = &res->stretch[res->nstretch++];
    s->first = p[i].ts;
    s->last = p[j - 1].ts;
    s->n = j - i;
    for (int k = i; k < j; k++) v[k - i] = p[k].ratio;
    s->median_ratio = median_of(v, j - i);
    for (int k = i; k < j; k++) v[k - i] = fabs(p[k].ratio - 1);
    s->median_rel_diff = median_of(v, j - i);
    i = j;
  }
  free(v);
}

/* The identity of a record's program: workload key + printed steps. */
static uint64_t rec_id(const cwm_record *r) {
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_puts(&b, r->key);
  cwm_steps_print(r->steps, r->nsteps, &b);
  uint64_t h = cwm_hash64(b.s, b.len);
  cwm_buf_free(&b);
  return h;
}

int cwm_dataset_remeasure(const cwm_remeasure_opts *o, cwm_remeasure_result *res, cwm_err *err) {
  memset(res, 0, sizeof *res);
  if (!o->log_path || !o->out_path) return cwm_fail(err, CWM_EUSAGE, "remeasure: log and out paths needed");
  cwm_record *recs = NULL, *done = NULL;
  int n = 0, nbad = 0, nd = 0, nbad2 = 0;
  int rc = cwm_log_read(o->log_path, &recs, &n, &nbad, err);
  if (rc) return rc;
  if (access(o->out_path, F_OK) == 0 && (rc = cwm_log_read(o->out_path, &done, &nd, &nbad2, err))) {
    cwm_records_free(recs, n);
    return rc;
  }
  /* the sample: good records whose seeded hash falls under the fraction */
  int *pick = cwm_xmalloc(sizeof(int) * (size_t)(n ? n : 1)), np = 0;
  uint64_t *ids = cwm_xmalloc(sizeof(uint64_t) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) {
    ids[i] = rec_id(&recs[i]);
    uint64_t h = ids[i] ^ (o->seed * 0x9e3779b97f4a7c15ULL);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    if (recs[i].error == 0 && (double)(h % 1000000) < o->fraction * 1e6) pick[np++] = i;
  }
  uint64_t *dids = cwm_xmalloc(sizeof(uint64_t) * (size_t)(nd ? nd : 1));
  for (int i = 0; i < nd; i++) dids[i] = rec_id(&done[i]);
  noise_pair *pairs = cwm_xmalloc(sizeof *pairs * (size_t)(np ? np : 1));
  int nrel = 0;
  res->selected = np;
  cwm_log *out = cwm_log_open(o->out_path, err);
  if (!out) rc = err ? err->code : CWM_EIO;
  double t0 = cwm_now();
  cwm_workload *w = NULL;
  cwm_task *t = NULL;
  char tkey[17] = "";
  for (int k = 0; k < np && !rc && !(o->stop && *o->stop); k++) {
    int i = pick[k];
    int j = -1;
    for (int q = 0; q < nd && j < 0; q++)
      if (dids[q] == ids[i]) j = q;
    cwm_record nr;
    cwm_record_init(&nr);
    int have = 0;
    if (j >= 0) {
      cwm_record_copy(&nr, &done[j]);
      have = 1;
      res->resumed++;
    } else {
      cwm_err e = {0};
      if (!t || strcmp(tkey, recs[i].key)) { /* a task per workload: its reference is computed once */
        cwm_task_free(t);
        cwm_workload_free(w);
        w = recs[i].workload ? cwm_workload_parse(recs[i].workload, &e) : NULL;
        t = w ? cwm_task_new(w, &o->measure, &e) : NULL;
        memcpy(tkey, recs[i].key, 17);
      }
      cwm_state *s = NULL;
      if (t && cwm_state_replay(cwm_task_dag(t), recs[i].steps, recs[i].nsteps, &s, NULL, &e) == 0) {
        cwm_state *one[1] = {s};
        rc = cwm_task_measure(t, one, 1, &nr, &e);
        if (rc) cwm_fail(err, e.code, "%s", e.msg);
        else {
          rc = cwm_log_append(out, &nr, err);
          have = !rc;
          res->measured++;
        }
      } else {
        res->skipped++;
      }
      cwm_state_free(s);
    }
    if (have && nr.error == 0) {
      pairs[nrel].ts = recs[i].timestamp;
      pairs[nrel++].ratio = cwm_record_cost(&nr) / cwm_record_cost(&recs[i]);
    } else if (have) {
      res->failed_now++;
    }
    cwm_record_free(&nr);
    if (o->progress && ((k + 1) % 10 == 0 || k + 1 == np)) {
      double el = cwm_now() - t0;
      say_remeasure(o, "%d/%d re-measured, %.0f s, ETA %.0f s", k + 1, np, el, el / (k + 1) * (np - k - 1));
    }
  }
  res->seconds = cwm_now() - t0;
  cwm_task_free(t);
  cwm_workload_free(w);
  if (out) cwm_log_close(out);
  remeasure_figures(pairs, nrel, res);
  free(pairs);
  free(pick);
  free(ids);
  free(dids);
  cwm_records_free(recs, n);
  cwm_records_free(done, nd);
  return rc;
}

/* metrics.c: ranking quality per workload (TenSet's top-k score, NDCG@k, Kendall's tau-b), their
 * means over workloads, and relevance grades from latencies. Pessimistic about ties in the
 * model's scores (see metrics.h), so a constant scorer is never rewarded by the input order. */
#include "cwm/metrics.h"

#include <math.h>
#include <stdlib.h>

#include "cwm/util.h"

#define FAIL_LATENCY 1e10 /* TenSet's (and Ansor's) cost of a failed program */

int cwm_cost_valid(double cost) { return isfinite(cost) && cost > 0 && cost < CWM_METRIC_FAILED; }

static double latency(double cost) { return cwm_cost_valid(cost) ? cost : FAIL_LATENCY; }

static double best_cost(const double *costs, int n) {
  double best = INFINITY;
  for (int i = 0; i < n; i++)
    if (cwm_cost_valid(costs[i]) && costs[i] < best) best = costs[i];
  return best;
}

void cwm_relevance_grades(const double *costs, int n, int ngrades, float *grades) {
  if (ngrades < 2) ngrades = 2;
  if (ngrades > 31) ngrades = 31;
  double best = best_cost(costs, n);
  for (int i = 0; i < n; i++) {
    if (!cwm_cost_valid(costs[i]) || !isfinite(best)) {
      grades[i] = 0;
      continue;
    }
    double g = round((ngrades - 1) * (best / costs[i]));
    grades[i] = (float)(g < 0 ? 0 : g > ngrades - 1 ? ngrades - 1 : g);
  }
}

/* ------------------------------------------------------------------ the model's order */

typedef struct {
  double score; /* NaN mapped to -inf */
  double worse; /* the tie-breaker: larger = truly worse, goes first among equal scores */
  int i;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  if (x->worse != y->worse) return x->worse > y->worse ? -1 : 1;
  return (x->i > y->i) - (x->i < y->i);
}

/* idx[0..n) = candidates in the model's order, ties broken against the model. */
static ranked *model_order(const double *scores, const double *worse, int n) {
  ranked *r = cwm_xmalloc(sizeof *r * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++) {
    r[i].score = isnan(scores[i]) ? -INFINITY : scores[i];
    r[i].worse = worse[i];
    r[i].i = i;
  }
  qsort(r, (size_t)n, sizeof *r, cmp_ranked);
  return r;
}

static int clamp_k(int k, int n) { return k < 1 ? 1 : k > n ? n : k; }

/* The best latency among the model's top k of one group (failures 1e10). */
static double topk_latency(const double *costs, const double *scores, int n, int k) {
  double *lat = cwm_xmalloc(sizeof *lat * (size_t)n);
  for (int i = 0; i < n; i++) lat[i] = latency(costs[i]);
  ranked *r = model_order(scores, lat, n);
  k = clamp_k(k, n);
  double top = INFINITY;
  for (int j = 0; j < k; j++)
    if (lat[r[j].i] < top) top = lat[r[j].i];
  free(r);
  free(lat);
  return top;
}

double cwm_topk_score(const double *costs, const double *scores, int n, int k) {
  double best = best_cost(costs, n);
  if (n <= 0 || !isfinite(best)) return NAN;
  return best / topk_latency(costs, scores, n, k);
}

static double gain(float g) { return g > 0 ? exp2((double)g) - 1.0 : 0.0; }

static int cmp_float_desc(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x < y) - (x > y);
}

double cwm_ndcg_at_k(const float *grades, const double *scores, int n, int k) {
  if (n <= 0) return NAN;
  k = clamp_k(k, n);
  float *ideal = cwm_xmalloc(sizeof *ideal * (size_t)n);
  double *worse = cwm_xmalloc(sizeof *worse * (size_t)n);
  for (int i = 0; i < n; i++) {
    ideal[i] = grades[i];
    worse[i] = -(double)grades[i];
  }
  qsort(ideal, (size_t)n, sizeof *ideal, cmp_float_desc);
  double idcg = 0, dcg = 0;
  for (int j = 0; j < k; j++) idcg += gain(ideal[j]) / log2(j + 2.0);
  ranked *r = model_order(scores, worse, n);
  for (int j = 0; j < k; j++) dcg += gain(grades[r[j].i]) / log2(j + 2.0);
  free(r);
  free(worse);
  free(ideal);
  return idcg > 0 ? dcg / idcg : NAN;
}

static int sgn(double a, double b) { return (a > b) - (a < b); }

double cwm_kendall_tau_b(const double *x, const double *y, int n) {
  if (n < 2) return NAN;
  /* concordant minus discordant, and pairs tied in x, in y */
  double s = 0, tx = 0, ty = 0;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      int a = sgn(x[i], x[j]), b = sgn(y[i], y[j]);
      if (!a) tx++;
      if (!b) ty++;
      s += a * b;
    }
  double n0 = (double)n * (n - 1) / 2;
  double den = sqrt((n0 - tx) * (n0 - ty));
  return den > 0 ? s / den : NAN;
}

double cwm_rank_tau(const double *costs, const double *scores, int n) {
  if (n < 2) return NAN;
  double *thr = cwm_xmalloc(sizeof *thr * (size_t)n), *sc = cwm_xmalloc(sizeof *sc * (size_t)n);
  for (int i = 0; i < n; i++) {
    thr[i] = cwm_cost_valid(costs[i]) ? 1.0 / costs[i] : 0.0;
    sc[i] = isnan(scores[i]) ? -INFINITY : scores[i];
  }
  double t = cwm_kendall_tau_b(sc, thr, n);
  free(thr);
  free(sc);
  return t;
}

/* ------------------------------------------------------------------ over groups */

typedef struct {
  double sum;
  int n;
} mean_acc;

static void acc(mean_acc *m, double v) {
  if (isnan(v)) return;
  m->sum += v;
  m->n++;
}

static double mean(const mean_acc *m) { return m->n ? m->sum / m->n : NAN; }

int cwm_rank_metrics_eval(const double *costs, const double *scores, const int *group_sizes, int ngroups,
                          const double *weights, int ngrades, cwm_rank_metrics *out) {
  *out = (cwm_rank_metrics){0};
  for (int g = 0; g < ngroups; g++)
    if (group_sizes[g] < 0) return -1;
  if (ngrades <= 0) ngrades = CWM_RANKER_GRADES;
  mean_acc t1 = {0}, t5 = {0}, n1 = {0}, n10 = {0}, tau = {0};
  double best_sum = 0, top1_sum = 0, top5_sum = 0;
  float *grades = NULL;
  int cap = 0;
  long off = 0;
  out->ngroups = ngroups;
  for (int g = 0; g < ngroups; g++) {
    int n = group_sizes[g];
    const double *c = costs + off, *s = scores + off;
    off += n;
    double best = best_cost(c, n);
    if (!isfinite(best)) continue;
    out->nvalid++;
    double w = weights ? weights[g] : 1.0;
    double l1 = topk_latency(c, s, n, 1), l5 = topk_latency(c, s, n, 5);
    acc(&t1, best / l1);
    acc(&t5, best / l5);
    best_sum += w * best;
    top1_sum += w * l1;
    top5_sum += w * l5;
    if (n > cap) {
      cap = n;
      grades = cwm_xrealloc(grades, sizeof *grades * (size_t)cap);
    }
    cwm_relevance_grades(c, n, ngrades, grades);
    acc(&n1, cwm_ndcg_at_k(grades, s, n, 1));
    acc(&n10, cwm_ndcg_at_k(grades, s, n, 10));
    acc(&tau, cwm_rank_tau(c, s, n));
  }
  free(grades);
  out->top1 = mean(&t1);
  out->top5 = mean(&t5);
  out->tenset_top1 = top1_sum > 0 ? best_sum / top1_sum : NAN;
  out->tenset_top5 = top5_sum > 0 ? best_sum / top5_sum : NAN;
  out->ndcg1 = mean(&n1);
  out->ndcg10 = mean(&n10);
  out->tau = mean(&tau);
  return 0;
}

/* metrics.h: how well a model ranks the candidates of one workload (a group), and relevance
 * grades from measured latencies. Used to evaluate the world model's ranker on held-out
 * workloads and to label its training data. Needs nothing but libm.
 *
 * Conventions shared by every function here:
 *  - costs are true latencies in seconds; a cost that is not finite and > 0 (0, negative, inf,
 *    NaN, and Ansor's 1e10 failure cost included, see CWM_METRIC_FAILED) marks a failed
 *    candidate: the slowest possible, throughput 0.
 *  - scores are the model's predictions, higher = predicted faster; a NaN score is the lowest.
 *  - ties in the predicted scores count against the model: among equal scores the truly worse
 *    candidate is taken to come first. A scorer that cannot tell candidates apart gets no
 *    credit from the order in which they were handed to it.
 *  - a metric that is undefined for a group (no valid candidate, all grades 0, all scores equal
 *    for Kendall's tau) is NaN, and the means over groups skip it. */
#ifndef CWM_METRICS_H
#define CWM_METRICS_H

/* Costs at or above this are failures (Ansor and TenSet write 1e10 for failed records). */
#define CWM_METRIC_FAILED 1e9

/* 1 if cost is a real measurement. */
int cwm_cost_valid(double cost);

/* Relevance grades for one group, for LambdaMART and NDCG: grade = round((ngrades-1) * t) with
 * t = best cost of the group / cost, the candidate's throughput relative to the group's fastest.
 * So the fastest candidate gets ngrades-1, one at half its speed about (ngrades-1)/2, and failed
 * candidates 0. Relative throughput (not rank) keeps grades comparable across workloads whose
 * absolute latencies differ by orders of magnitude, and keeps near-ties (measurement noise) in
 * the same or adjacent grades; the linear scale spends the grades on the fast end, which is
 * what the search picks from, and lumps everything under 1/(2(ngrades-1)) of the best speed
 * with the failures. ngrades is clamped to [2, 31] (XGBoost's NDCG gain is 2^grade - 1).
 * Grades are whole numbers stored as floats. With no valid candidate every grade is 0. */
void cwm_relevance_grades(const double *costs, int n, int ngrades, float *grades);
#define CWM_RANKER_GRADES 16 /* the default number of grades */

/* TenSet's top-k score of one group: (best true latency of the group) / (best true latency among
 * the k candidates the model ranks highest), in [0, 1]; 1 when the model's top k hold the best.
 * k is clamped to [1, n]. Failed candidates count as 1e10 s slow (TenSet's failure cost), so a
 * top k of failures scores ~0. NaN when the group has no valid candidate. */
double cwm_topk_score(const double *costs, const double *scores, int n, int k);

/* NDCG@k with graded relevance: DCG = sum over the model's top k of (2^grade - 1) / log2(pos+2)
 * (pos from 0), divided by the DCG of the ideal order. k clamped to [1, n]; NaN when every grade
 * is 0 (no order is better than another). */
double cwm_ndcg_at_k(const float *grades, const double *scores, int n, int k);

/* Kendall's tau-b between x and y (ties in either handled as in tau-b); in [-1, 1]. NaN when
 * n < 2 or either side is all ties. O(n^2). */
double cwm_kendall_tau_b(const double *x, const double *y, int n);

/* Kendall's tau-b between scores and true throughput (1 / cost, 0 for failures). */
double cwm_rank_tau(const double *costs, const double *scores, int n);

/* The metrics over groups: rows of group g are the group_sizes[g] consecutive entries after
 * those of groups 0..g-1. */
typedef struct {
  int ngroups;            /* groups given */
  int nvalid;             /* groups with at least one valid candidate */
  double top1, top5;      /* mean per-group top-k score */
  double tenset_top1;     /* TenSet's form: sum_g w_g best_g / sum_g w_g best-of-top-k_g */
  double tenset_top5;
  double ndcg1, ndcg10;   /* mean NDCG@k on cwm_relevance_grades(ngrades) */
  double tau;             /* mean Kendall tau-b against throughput */
} cwm_rank_metrics;

/* weights: per group (TenSet's w_t: how often the task occurs), NULL for all 1; they enter only
 * the tenset_* figures. ngrades: as for cwm_relevance_grades (0: CWM_RANKER_GRADES).
 * Returns 0, or -1 if a group size is negative (out is then zeroed). */
int cwm_rank_metrics_eval(const double *costs, const double *scores, const int *group_sizes, int ngroups,
                          const double *weights, int ngrades, cwm_rank_metrics *out);

#endif

/* ranker_train.c: the ranker's feature rows of measured records grouped by workload, and its
 * LambdaMART training on the training part of the split. */
#include "train_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- ranker --------------------------------------------------------------------------------- */

int cwm_world_record_groups(cwm_world *w, const char *log_path, double vf, int part, int mode, float **rows_out,
                     double **costs_out, int **sizes_out, int *ngroups_out, int *nrows_out, char (**keys_out)[17],
                     const cwm_train_opts *o, cwm_err *err) {
  cwm_traj *tr = NULL;
  int n = 0;
  int rc = train_load_trajs(log_path, vf, part, 0, &tr, &n, err);
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
    const char **tg = cwm_xmalloc(sizeof(*tg) * (size_t)m);
    int *ns = cwm_xmalloc(sizeof(int) * (size_t)m);
    for (int k = 0; k < m; k++) {
      st[k] = tr[order[k]].steps;
      ns[k] = tr[order[k]].nsteps;
      tg[k] = tr[order[k]].target;
      costs[nrows + k] = tr[order[k]].cost;
    }
    rc = cwm_world_record_rows(w, d, st, ns, tg, m, mode, rows + (size_t)nrows * nf, err);
    free(st);
    free(tg);
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
  /* a ranker trained here reads each record's machine in its hardware columns (older files'
   * rankers read this machine's, and keep doing so) */
  w->cfg.hw_target = 1;
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

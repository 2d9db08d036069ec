/* task.c: a workload under measurement. Turns states into records: C code, build, check
 * against the reference output (computed once per workload and cached), timing. */
#include "cwm/search.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The code generator's kernel and the runner's candidate meet here, above both layers. */
void cwm_kernel_candidate(const cwm_kernel *k, cwm_candidate *c) {
  memset(c, 0, sizeof *c);
  c->body = k->body;
  c->entry = k->entry;
  c->nargs = k->nargs;
  for (int i = 0; i < k->nargs; i++) {
    c->arg_len[i] = k->arg_len[i];
    c->src_len[i] = k->src_len[i];
  }
  c->pack_entry = k->npacked ? k->pack_entry : NULL;
}

struct cwm_task {
  cwm_workload *w;
  cwm_dag *dag;
  cwm_measure_opts opts;
  double run_timeout_s; /* the caller's, before a slow cutoff shortened it */
  cwm_reference *ref;
  cwm_target target;
  char target_str[1024];
  char key[17];
  char *text;
};

cwm_task *cwm_task_new(const cwm_workload *w, const cwm_measure_opts *o, cwm_err *err) {
  cwm_task *t = cwm_xcalloc(1, sizeof *t);
  t->dag = cwm_dag_new(w, err);
  if (!t->dag) {
    free(t);
    return NULL;
  }
  if (o) t->opts = *o;
  else cwm_measure_opts_default(&t->opts);
  t->run_timeout_s = t->opts.run_timeout_s;
  /* the machine that times: this one, or the farm's workers' */
  if (t->opts.measurer && t->opts.measurer->target) t->target = *t->opts.measurer->target;
  else cwm_target_detect(&t->target, t->opts.threads, t->opts.cc, t->opts.cflags);
  cwm_target_string(&t->target, t->target_str, sizeof t->target_str);
  cwm_workload_key(w, t->key);
  t->text = cwm_workload_print(w);
  return t;
}

void cwm_task_free(cwm_task *t) {
  if (!t) return;
  cwm_reference_free(t->ref);
  cwm_dag_free(t->dag);
  free(t->text);
  free(t);
}

const cwm_dag *cwm_task_dag(const cwm_task *t) { return t->dag; }
const char *cwm_task_target(const cwm_task *t) { return t->target_str; }

const cwm_measure_opts *cwm_task_opts(const cwm_task *t) { return &t->opts; }
void cwm_task_set_slow_cutoff(cwm_task *t, double seconds) {
  t->opts.slow_cutoff_s = seconds > 0 ? seconds : 0;
  /* a kernel 5x over the cutoff is stopped as a time-out: 2 s at least, never later than the
   * caller's time-out */
  double to = t->run_timeout_s > 0 ? t->run_timeout_s : 10;
  if (seconds > 0 && 5 * seconds < to) to = 5 * seconds > 2 ? 5 * seconds : 2;
  t->opts.run_timeout_s = to;
}
double cwm_task_flops(const cwm_task *t) { return cwm_workload_flops(cwm_dag_workload(t->dag)); }

int cwm_task_reference(cwm_task *t, cwm_err *err) {
  if (t->ref || !t->opts.check) return 0;
  cwm_state *s0 = cwm_state_init(t->dag);
  cwm_kernel k;
  cwm_codegen_opts co = {.reference = 1};
  int rc = cwm_codegen(s0, &co, &k, err);
  cwm_state_free(s0);
  if (rc) return rc;
  cwm_candidate c;
  cwm_kernel_candidate(&k, &c);
  rc = cwm_reference_compute(&t->opts, &c, k.red_len, &t->ref, err);
  cwm_kernel_free(&k);
  return rc;
}

int cwm_task_measure(cwm_task *t, cwm_state *const *states, int n, cwm_record *recs, cwm_err *err) {
  int rc = cwm_task_reference(t, err);
  if (rc) return rc;
  cwm_kernel *ks = cwm_xcalloc((size_t)(n ? n : 1), sizeof *ks);
  cwm_candidate *cs = cwm_xcalloc((size_t)(n ? n : 1), sizeof *cs);
  cwm_result *res = cwm_xcalloc((size_t)(n ? n : 1), sizeof *res);
  for (int i = 0; i < n; i++) {
    cwm_err e = {0};
    if (cwm_codegen(states[i], NULL, &ks[i], &e)) {
      res[i].error = CWM_MERR_INSTANTIATION;
      snprintf(res[i].msg, sizeof res[i].msg, "%.200s", e.msg);
      continue;
    }
    cwm_kernel_candidate(&ks[i], &cs[i]);
  }
  /* measure only those that generated */
  int *idx = cwm_xcalloc((size_t)(n ? n : 1), sizeof *idx), m = 0;
  for (int i = 0; i < n; i++)
    if (ks[i].body) idx[m++] = i;
  cwm_candidate *mc = cwm_xcalloc((size_t)(m ? m : 1), sizeof *mc);
  cwm_result *mr = cwm_xcalloc((size_t)(m ? m : 1), sizeof *mr);
  for (int j = 0; j < m; j++) mc[j] = cs[idx[j]];
  rc = m ? cwm_measure(&t->opts, mc, m, t->ref, mr, err) : 0;
  for (int j = 0; j < m; j++) res[idx[j]] = mr[j];
  for (int i = 0; i < n && rc == 0; i++) {
    cwm_record *r = &recs[i];
    cwm_record_init(r);
    memcpy(r->key, t->key, sizeof r->key);
    snprintf(r->name, sizeof r->name, "%s", cwm_dag_workload(t->dag)->name);
    r->workload = cwm_xstrdup(t->text);
    cwm_record_set_target(r, res[i].target ? res[i].target : &t->target);
    snprintf(r->host, sizeof r->host, "%s", res[i].host);
    cwm_record_set_steps(r, states[i]->steps, states[i]->nsteps);
    r->error = res[i].error;
    r->ncosts = res[i].error ? 0 : res[i].ncosts;
    for (int k = 0; k < r->ncosts && k < CWM_MAX_COSTS; k++) r->costs[k] = res[i].costs[k];
    r->all_cost = res[i].build_s + res[i].run_s;
    r->timestamp = (long)time(NULL);
    snprintf(r->msg, sizeof r->msg, "%s", res[i].msg);
  }
  for (int i = 0; i < n; i++) cwm_kernel_free(&ks[i]);
  free(ks);
  free(cs);
  free(res);
  free(idx);
  free(mc);
  free(mr);
  return rc;
}

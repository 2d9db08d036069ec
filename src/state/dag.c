/* dag.c: the tensor table of a workload. The workload's ops come first; steps that create
 * tensors (cache write/read, rfactor) add ops here, memoised by what created them so that
 * thousands of candidates doing the same CHW share one table entry. Thread safe. */
#include "state_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TENSORS 512

typedef struct {
  int kind, a, b, c, d;
  int tid;
} memo_entry;

struct cwm_dag {
  cwm_workload w;
  int ntensors;
  cwm_op *tensors[MAX_TENSORS];
  int nmemo;
  memo_entry memo[MAX_TENSORS];
  pthread_mutex_t mu;
  char key[17]; /* the workload key, computed once (it prints the workload) */
};

cwm_dag *cwm_dag_new(const cwm_workload *w, cwm_err *err) {
  if (w->nops <= 0 || w->nops > CWM_MAX_OPS) {
    cwm_fail(err, CWM_EPARSE, "workload has %d ops", w->nops);
    return NULL;
  }
  /* every tensor is a stage of the initial state, whose stage table is smaller than ops[] */
  if (w->nops > CWM_MAX_STAGES) {
    cwm_fail(err, CWM_EPARSE, "workload has %d tensors; a schedule holds at most %d stages", w->nops,
             CWM_MAX_STAGES);
    return NULL;
  }
  cwm_dag *d = cwm_xcalloc(1, sizeof *d);
  d->w = *w;
  for (int i = 0; i < w->nops; i++) {
    d->w.ops[i].body = w->ops[i].body ? cwm_expr_clone(w->ops[i].body) : NULL;
    d->tensors[i] = &d->w.ops[i];
  }
  d->ntensors = w->nops;
  pthread_mutex_init(&d->mu, NULL);
  cwm_workload_key(&d->w, d->key);
  return d;
}

const char *cwm_dag_key(const cwm_dag *d) { return d->key; }

void cwm_dag_free(cwm_dag *d) {
  if (!d) return;
  for (int i = 0; i < d->w.nops; i++) cwm_expr_free(d->w.ops[i].body);
  for (int i = d->w.nops; i < d->ntensors; i++) {
    cwm_expr_free(d->tensors[i]->body);
    free(d->tensors[i]);
  }
  pthread_mutex_destroy(&d->mu);
  free(d);
}

const cwm_workload *cwm_dag_workload(const cwm_dag *d) { return &d->w; }
int cwm_dag_ntensors(const cwm_dag *d) { return d->ntensors; }
const cwm_op *cwm_dag_tensor(const cwm_dag *d, int tid) {
  return tid >= 0 && tid < d->ntensors ? d->tensors[tid] : NULL;
}

/* Returns the tid memoised under key, or builds the op with make() and stores it. */
int dag_memo(const cwm_dag *cd, int kind, int a, int b, int c, int e,
             cwm_op *(*make)(const cwm_dag *, const void *), const void *ctx, cwm_err *err) {
  cwm_dag *d = (cwm_dag *)cd;
  pthread_mutex_lock(&d->mu);
  for (int i = 0; i < d->nmemo; i++) {
    memo_entry *m = &d->memo[i];
    if (m->kind == kind && m->a == a && m->b == b && m->c == c && m->d == e) {
      int tid = m->tid;
      pthread_mutex_unlock(&d->mu);
      return tid;
    }
  }
  if (d->ntensors >= MAX_TENSORS || d->nmemo >= MAX_TENSORS) {
    pthread_mutex_unlock(&d->mu);
    return -cwm_fail(err, CWM_ESTEP, "too many derived tensors in this workload");
  }
  cwm_op *op = make(d, ctx);
  int tid = d->ntensors++;
  d->tensors[tid] = op;
  d->memo[d->nmemo++] = (memo_entry){kind, a, b, c, e, tid};
  pthread_mutex_unlock(&d->mu);
  return tid;
}

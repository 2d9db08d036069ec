/* plan.c: where each tensor of a compiled network lives. Schedules come from the log (the
 * fastest record of each task that still replays); every value read or written at run time gets
 * a place: the caller's input or output array, the weights file, or an offset in one arena, planned
 * greedily by size over the values' lifetimes in step order, so that two tensors share bytes only
 * when no step sees both. Reshapes are views of their input. */
#define _POSIX_C_SOURCE 200809L
#include "netc_internal.h"

#include "cwm/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- schedules from a log ---------------------------------------------------------------------- */

int cwm_netc_schedules(const cwm_partition *p, const char *log_path, cwm_netc_sched *sched, int *nbad, cwm_err *err) {
  memset(sched, 0, sizeof *sched * (size_t)p->ntasks);
  if (nbad) *nbad = 0;
  if (!log_path) return 0;
  cwm_dag **dags = calloc((size_t)p->ntasks + 1, sizeof *dags);
  cwm_log_iter *it = cwm_log_iter_open(log_path, err);
  if (!it) {
    free(dags);
    return err ? err->code : CWM_EIO;
  }
  int rc = 0;
  cwm_record r;
  for (;;) {
    int got = cwm_log_iter_next(it, &r, err);
    if (got < 0) {
      rc = err ? err->code : CWM_EIO;
      break;
    }
    if (got == 0) break;
    double cost = r.error ? CWM_FAILED_COST : cwm_record_cost(&r);
    for (int t = 0; t < p->ntasks && cost < CWM_FAILED_COST; t++) {
      if (strcmp(r.key, p->tasks[t].key) || (sched[t].from_log && sched[t].cost <= cost)) continue;
      /* the record must still replay on this workload (a log of another version may not) */
      cwm_err e = {0};
      if (!dags[t]) dags[t] = cwm_dag_new(p->tasks[t].w, &e);
      cwm_state *s = NULL;
      if (!dags[t] || cwm_state_replay(dags[t], r.steps, r.nsteps, &s, NULL, &e) || !cwm_state_is_complete(s)) {
        cwm_state_free(s);
        continue;
      }
      cwm_state_free(s);
      free(sched[t].steps);
      sched[t].steps = cwm_xmalloc(sizeof(cwm_step) * (size_t)(r.nsteps ? r.nsteps : 1));
      memcpy(sched[t].steps, r.steps, sizeof(cwm_step) * (size_t)r.nsteps);
      sched[t].nsteps = r.nsteps;
      sched[t].cost = cost;
      sched[t].from_log = 1;
    }
    cwm_record_free(&r);
  }
  if (nbad) *nbad = cwm_log_iter_nbad(it);
  cwm_log_iter_close(it);
  for (int t = 0; t < p->ntasks; t++) cwm_dag_free(dags[t]);
  free(dags);
  return rc;
}

void cwm_netc_schedules_free(cwm_netc_sched *sched, int n) {
  for (int i = 0; sched && i < n; i++) free(sched[i].steps);
}

/* ---- storage ------------------------------------------------------------------------------------- */



int netc_is_view(const char *op) {
  return !strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze");
}

int netc_esize(int dtype) { return dtype == CWM_DT_INT64 ? 8 : 4; }

long long netc_vbytes(const cwm_graph *g, int v) {
  return (long long)cwm_value_numel(&g->values[v]) * netc_esize(g->values[v].dtype);
}

/* Inputs and outputs of a step, as value lists. */
static int step_io(const plan *pl, const cwm_gstep *s, int *in, int *nin, int *out, int *nout) {
  *nin = *nout = 0;
  if (s->kind == CWM_GS_NODE) {
    const cwm_gnode *nd = &pl->g->nodes[s->node];
    for (int i = 0; i < nd->nin; i++)
      if (nd->in[i] >= 0 && *nin < 64) in[(*nin)++] = nd->in[i];
    for (int i = 0; i < nd->nout && *nout < 16; i++)
      if (nd->out[i] >= 0) out[(*nout)++] = nd->out[i];
    return 0;
  }
  for (int i = 0; i < s->nargs - 1; i++) in[(*nin)++] = s->args[i];
  out[(*nout)++] = s->args[s->nargs - 1];
  return 0;
}

int netc_plan_storage(plan *pl) {
  const cwm_graph *g = pl->g;
  const cwm_partition *p = pl->p;
  int nv = g->nvalues;
  pl->root = malloc(sizeof(int) * (size_t)nv);
  pl->loc = calloc((size_t)nv, sizeof(int));
  pl->slot = calloc((size_t)nv, sizeof(int));
  pl->off = calloc((size_t)nv, sizeof(long long));
  pl->def = malloc(sizeof(int) * (size_t)nv);
  pl->last = malloc(sizeof(int) * (size_t)nv);
  pl->used = calloc((size_t)nv, sizeof(int));
  for (int v = 0; v < nv; v++) pl->root[v] = v, pl->def[v] = -1, pl->last[v] = -1;
  int in[64], out[16], nin, nout;
  /* views: the output of a reshape is its input's bytes */
  for (int s = 0; s < p->nsteps; s++) {
    const cwm_gstep *st = &p->steps[s];
    if (st->kind == CWM_GS_NODE && netc_is_view(g->nodes[st->node].op_type)) {
      const cwm_gnode *nd = &g->nodes[st->node];
      pl->root[nd->out[0]] = pl->root[nd->in[0]];
    }
  }
  for (int i = 0; i < g->ninputs; i++) pl->loc[g->inputs[i]] = LOC_INPUT, pl->slot[g->inputs[i]] = i;
  for (int s = 0; s < p->nsteps; s++) {
    step_io(pl, &p->steps[s], in, &nin, out, &nout);
    for (int i = 0; i < nin; i++) {
      int r = pl->root[in[i]];
      pl->used[in[i]] = pl->used[r] = 1;
      if (s > pl->last[r]) pl->last[r] = s;
    }
    for (int i = 0; i < nout; i++) {
      int r = pl->root[out[i]];
      pl->used[out[i]] = pl->used[r] = 1;
      if (pl->def[r] < 0) pl->def[r] = s;
      if (s > pl->last[r]) pl->last[r] = s;
    }
  }
  /* a graph output written by a step (not a view, not listed twice) is written in place */
  for (int i = 0; i < g->noutputs; i++) {
    int v = g->outputs[i];
    int twice = 0;
    for (int j = 0; j < i; j++) twice |= g->outputs[j] == v;
    pl->used[pl->root[v]] = 1;
    if (pl->root[v] == v && g->values[v].kind == CWM_VAL_ACT && !twice && pl->loc[v] == LOC_NONE)
      pl->loc[v] = LOC_OUTPUT, pl->slot[v] = i;
    else if (pl->last[pl->root[v]] < p->nsteps) /* read by the final copy */
      pl->last[pl->root[v]] = p->nsteps;
  }
  /* constants into the weights file, 64-byte aligned */
  cwm_buf_init(&pl->w);
  for (int v = 0; v < nv; v++) {
    if (!pl->used[v] || pl->root[v] != v || g->values[v].kind != CWM_VAL_CONST) continue;
    static const char zeros[64];
    cwm_buf_append(&pl->w, zeros, (64 - pl->w.len % 64) % 64);
    pl->loc[v] = LOC_CONST;
    pl->off[v] = (long long)pl->w.len;
    int64_t n = cwm_value_numel(&g->values[v]);
    if (g->values[v].dtype == CWM_DT_FLOAT || g->values[v].dtype == CWM_DT_INT64) {
      cwm_buf_append(&pl->w, g->values[v].data, (size_t)(n * netc_esize(g->values[v].dtype)));
    } else { /* bool (and int32, already int64 at import) as the runtime stores it: float */
      const uint8_t *d = g->values[v].data;
      for (int64_t i = 0; i < n; i++) {
        float f = d[i] ? 1.0f : 0.0f;
        cwm_buf_append(&pl->w, &f, 4);
      }
    }
  }
  /* the arena: largest first, each at the lowest offset clear of every placed value it overlaps
   * in time */
  int *order = malloc(sizeof(int) * (size_t)nv), na = 0;
  for (int v = 0; v < nv; v++)
    if (pl->used[v] && pl->root[v] == v && pl->loc[v] == LOC_NONE) {
      if (pl->def[v] < 0)
        return cwm_fail(pl->err, CWM_EINTERNAL, "value '%s' is read but no step writes it", g->values[v].name);
      pl->loc[v] = LOC_ARENA;
      order[na++] = v;
    }
  for (int i = 1; i < na; i++) /* by size, then by first use: stable and deterministic */
    for (int j = i; j > 0; j--) {
      long long a = netc_vbytes(g, order[j - 1]), b = netc_vbytes(g, order[j]);
      if (a > b || (a == b && pl->def[order[j - 1]] <= pl->def[order[j]])) break;
      int t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  pl->arena = 0;
  for (int i = 0; i < na; i++) {
    int v = order[i];
    long long size = (netc_vbytes(g, v) + 63) / 64 * 64, at = 0;
    for (int moved = 1; moved;) {
      moved = 0;
      for (int j = 0; j < i; j++) {
        int u = order[j];
        if (pl->last[u] < pl->def[v] || pl->last[v] < pl->def[u]) continue;
        long long us = (netc_vbytes(g, u) + 63) / 64 * 64;
        if (at < pl->off[u] + us && pl->off[u] < at + size) at = pl->off[u] + us, moved = 1;
      }
    }
    pl->off[v] = at;
    if (at + size > pl->arena) pl->arena = at + size;
  }
  free(order);
  return 0;
}

/* A pointer expression for value v, of C type ty. */
void netc_vptr(const plan *pl, int v, const char *ty, cwm_buf *b) {
  int r = pl->root[v];
  switch (pl->loc[r]) {
  case LOC_INPUT: cwm_buf_printf(b, "((%s *)in[%d])", ty, pl->slot[r]); break;
  case LOC_OUTPUT: cwm_buf_printf(b, "((%s *)out[%d])", ty, pl->slot[r]); break;
  case LOC_CONST: cwm_buf_printf(b, "((%s *)(m->w + %lld))", ty, pl->off[r]); break;
  default: cwm_buf_printf(b, "((%s *)(m->arena + %lld))", ty, pl->off[r]); break;
  }
}

/* ---- glue ---------------------------------------------------------------------------------------- */

void netc_ints(cwm_buf *b, const int64_t *x, int n) {
  cwm_buf_puts(b, "(const int64_t[]){");
  for (int i = 0; i < n; i++) cwm_buf_printf(b, "%s%lld", i ? ", " : "", (long long)x[i]);
  if (!n) cwm_buf_puts(b, "0");
  cwm_buf_puts(b, "}");
}

/* Strides of input value v read over the output shape (numpy broadcasting: 0 on broadcast dims). */
void netc_bstrides(const cwm_value *v, const cwm_value *o, int64_t *st) {
  int64_t s = 1;
  for (int d = o->ndim - 1; d >= 0; d--) {
    int vd = d - (o->ndim - v->ndim);
    if (vd < 0) {
      st[d] = 0;
      continue;
    }
    st[d] = v->shape[vd] == 1 && o->shape[d] != 1 ? 0 : s;
    if (v->shape[vd] == 1) st[d] = 0;
    s *= v->shape[vd];
  }
}

int64_t netc_prod(const int64_t *x, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++) p *= x[i];
  return p;
}

int netc_node_fail(plan *pl, int n, const char *why) {
  const cwm_gnode *nd = &pl->g->nodes[n];
  return cwm_fail(pl->err, CWM_EPARSE, "node '%s' (%s): %s", nd->name, nd->op_type, why);
}

const int64_t *netc_const_ints(const plan *pl, int v, int *n) {
  if (v < 0 || pl->g->values[v].kind != CWM_VAL_CONST || pl->g->values[v].dtype != CWM_DT_INT64) return NULL;
  *n = (int)cwm_value_numel(&pl->g->values[v]);
  return pl->g->values[v].data;
}

int netc_const_float(const plan *pl, int v, float *x) {
  if (v < 0 || pl->g->values[v].kind != CWM_VAL_CONST || pl->g->values[v].dtype != CWM_DT_FLOAT ||
      cwm_value_numel(&pl->g->values[v]) != 1)
    return 0;
  *x = ((const float *)pl->g->values[v].data)[0];
  return 1;
}

int netc_norm_axis(int64_t a, int nd) { return (int)(a < 0 ? a + nd : a); }



void netc_plan_free(plan *pl) {
  cwm_buf_free(&pl->w);
  free(pl->root);
  free(pl->loc);
  free(pl->slot);
  free(pl->off);
  free(pl->def);
  free(pl->last);
  free(pl->used);
}

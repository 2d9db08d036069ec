/* stage.c: a stage of a state: its ops, its name, its loops' positions, the reset to the
 * untransformed loops and the recomputation of extents after a change, and node names. */
#include "state_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const cwm_op *cwm_stage_op(const cwm_state *s, int stage) {
  return cwm_dag_tensor(s->dag, s->stages[stage].tid);
}
const cwm_op *cwm_stage_body_op(const cwm_state *s, int stage) {
  return cwm_dag_tensor(s->dag, s->stages[stage].body_tid);
}
const char *cwm_stage_name(const cwm_state *s, int stage) { return cwm_stage_op(s, stage)->name; }
int cwm_stage_is_placeholder(const cwm_state *s, int stage) {
  return cwm_stage_body_op(s, stage)->is_input;
}

int state_stage_of_tid(const cwm_state *s, int tid) {
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i].tid == tid) return i;
  return -1;
}
int stage_iter_pos(const cwm_stage *st, int node) {
  for (int i = 0; i < st->niters; i++)
    if (st->iters[i] == node) return i;
  return -1;
}

/* Fresh iterator graph of a stage from its body op: one root node per axis. */
void stage_reset(cwm_stage *st, const cwm_op *body) {
  st->nnodes = 0;
  st->niters = 0;
  st->nout = 0;
  if (body->is_input) return;
  int nroot = body->ndim + body->nred;
  for (int r = 0; r < nroot; r++) {
    cwm_node *n = &st->nodes[st->nnodes];
    memset(n, 0, sizeof *n);
    n->root = r;
    n->parent = -1;
    n->fused = -1;
    n->kind = r < body->ndim ? CWM_IT_SPATIAL : CWM_IT_REDUCE;
    n->extent = r < body->ndim ? body->shape[r] : body->red_extent[r - body->ndim];
    st->domain[r] = n->extent;
    st->iters[st->niters++] = st->nnodes;
    st->nnodes++;
  }
  for (int d = 0; d < body->ndim; d++) st->out_node[st->nout++] = d;
}

void cwm_stage_extents(cwm_stage *st, int tight) {
  for (int i = 0; i < st->nnodes; i++) {
    cwm_node *n = &st->nodes[i];
    if (n->root >= 0) {
      n->extent = st->domain[n->root];
    } else if (n->is_fuse) {
      long e = 1;
      for (int k = 0; k < n->nsub; k++) e *= st->nodes[n->sub[k]].extent;
      n->extent = e > (1 << 30) ? (1 << 30) : (int)e;
    } else if (n->parent >= 0 && tight) {
      const cwm_node *p = &st->nodes[n->parent];
      long rest = p->extent;
      for (int k = p->nparts - 1; k >= 0 && p->parts[k] != i; k--) {
        long f = st->nodes[p->parts[k]].factor;
        if (f > 0) rest = (rest + f - 1) / f;
      }
      if (rest < 1) rest = 1;
      n->extent = (int)(n->factor > 0 && n->factor < rest ? n->factor : rest);
    } else if (n->parent >= 0) {
      const cwm_node *p = &st->nodes[n->parent];
      if (n->factor > 0) {
        n->extent = n->factor;
      } else {
        long prod = 1;
        for (int k = 0; k < p->nparts; k++)
          if (st->nodes[p->parts[k]].factor > 0) prod *= st->nodes[p->parts[k]].factor;
        if (prod < 1) prod = 1;
        n->extent = (int)((p->extent + prod - 1) / prod);
      }
    }
  }
}

const char *cwm_node_name(const cwm_state *s, int stage, int node, char *buf, size_t n) {
  const cwm_stage *st = &s->stages[stage];
  const cwm_op *body = cwm_stage_body_op(s, stage);
  const cwm_node *nd = &st->nodes[node];
  if (n == 0) return buf;
  buf[0] = 0;
  if (nd->root >= 0) {
    snprintf(buf, n, "%s", nd->root < body->ndim ? body->axis[nd->root] : body->red_axis[nd->root - body->ndim]);
  } else if (nd->is_fuse) {
    size_t len = 0;
    for (int k = 0; k < nd->nsub && len + 1 < n; k++) {
      char tmp[256];
      cwm_node_name(s, stage, nd->sub[k], tmp, sizeof tmp);
      int w = snprintf(buf + len, n - len, "%s%s", k ? "@" : "", tmp);
      if (w < 0) break;
      len += (size_t)w;
      if (len >= n) { len = n - 1; break; }
    }
  } else {
    char tmp[256];
    cwm_node_name(s, stage, nd->parent, tmp, sizeof tmp);
    snprintf(buf, n, "%s.%d", tmp, nd->part);
  }
  return buf;
}

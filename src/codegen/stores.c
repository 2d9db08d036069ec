/* stores.c: while a nest is lowered in collect mode, each store with its enclosing loops and the
 * accesses of its statement (strides per loop, buffer sizes, operation counts): what
 * Ansor-style program features and the work estimate are computed from (analysis.c). */
#include "lower_internal.h"

#include <stdlib.h>
#include <string.h>

static void add_access(ctx_t *c, cwm_store *so, int tid, const lin_t *idx, const long *dims, int nidx,
                       int is_write) {
  if (so->nacc >= CWM_STORE_MAX_ACC) return;
  int q = state_stage_of_tid(c->s, tid);
  cwm_access *a = &so->acc[so->nacc++];
  memset(a, 0, sizeof *a);
  a->tid = tid;
  a->is_local = q >= 0 && c->L[q].local;
  a->is_write = is_write;
  a->is_read = !is_write;
  a->elems = 1;
  for (int d = 0; d < nidx; d++) a->elems *= dims[d];
  for (int l = 0; l < so->nloops; l++) {
    long total = 0, stride = 1;
    int unknown = 0;
    for (int d = nidx - 1; d >= 0; d--) {
      if (!idx[d].ok) unknown = 1;
      for (int k = 0; k < idx[d].n && !unknown; k++) {
        const atom_t *at = &idx[d].a[k];
        if (at->stage == c->loop[l].stage && at->node == c->loop[l].node) {
          if (at->mod || at->div != 1) total += 0; /* fused component: counts as invariant */
          else total += stride * idx[d].coef[k];
        }
      }
      stride *= dims[d];
    }
    a->stride[l] = unknown ? -1 : total;
  }
}

static void count_expr(ctx_t *c, cwm_store *so, const cwm_expr *e, const lin_t *env, int depth) {
  if (!e || depth > 32) return;
  switch (e->kind) {
  case CWM_X_READ: {
    lin_t idx[RW_MAX_DIMS];
    long dims[RW_MAX_DIMS];
    int q = state_stage_of_tid(c->s, e->tensor);
    if (q >= 0 && c->s->stages[q].loc == CWM_LOC_INLINE) {
      for (int i = 0; i < e->nargs && i < CWM_MAX_DIMS; i++) idx[i] = lower_expr_lin(c, e->args[i], env);
      count_expr(c, so, body_op(c, q)->body, idx, depth + 1);
    } else {
      int n = lower_read_index(c, so->stage, e, env, idx, dims);
      add_access(c, so, e->tensor, idx, dims, n, 0);
    }
    return; /* index arithmetic is not counted as float work */
  }
  case CWM_X_BIN:
    if (e->is_int) so->int_ops++;
    else if (e->op == '+' || e->op == '-') so->fadd++;
    else if (e->op == '*') so->fmul++;
    else so->fdiv++;
    break;
  case CWM_X_NEG: so->fadd++; break;
  case CWM_X_CALL:
    if (e->op == CWM_FN_MAX || e->op == CWM_FN_MIN || e->op == CWM_FN_RELU) so->fcmp++;
    else so->fmath++;
    break;
  case CWM_X_SELECT: so->select++; break;
  case CWM_X_CMP: case CWM_X_AND: case CWM_X_OR: case CWM_X_NOT: so->bool_ops++; break;
  default: break;
  }
  for (int i = 0; i < e->nargs; i++) count_expr(c, so, e->args[i], env, depth);
}

void lower_collect_store(ctx_t *c, int p, int is_init) {
  if (c->nstores == c->capstores) {
    c->capstores = c->capstores ? c->capstores * 2 : 8;
    c->stores = cwm_xrealloc(c->stores, sizeof *c->stores * (size_t)c->capstores);
  }
  cwm_store *so = &c->stores[c->nstores++];
  memset(so, 0, sizeof *so);
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *b = body_op(c, p);
  so->stage = p;
  so->tid = st->tid;
  so->is_init = is_init;
  so->reduce = b->reduce;
  so->auto_unroll = st->auto_unroll;
  so->nloops = c->nloop < CWM_STORE_MAX_LOOPS ? c->nloop : CWM_STORE_MAX_LOOPS;
  for (int l = 0; l < so->nloops; l++) {
    so->extent[l] = c->loop[l].extent;
    so->ann[l] = c->loop[l].ann;
    so->unrolled[l] = c->loop[l].unroll;
    so->is_reduce[l] = c->loop[l].reduce;
  }
  lin_t tidx[CWM_MAX_DIMS];
  for (int d = 0; d < st->nout; d++) {
    int node = st->out_node[d];
    tidx[d] = c->L[p].local || st->nodes[node].root < 0 ? lower_node_lin(c, p, node, 0) : lower_root_lin(c, p, st->nodes[node].root);
  }
  long tdims[CWM_MAX_DIMS];
  for (int d = 0; d < st->nout; d++) tdims[d] = c->L[p].local ? c->L[p].dims[d] : tensor_op(c, st->tid)->shape[d];
  add_access(c, so, st->tid, tidx, tdims, st->nout, 1);
  if (is_init) return;
  if (b->reduce != CWM_RED_NONE) {
    add_access(c, so, st->tid, tidx, tdims, st->nout, 0);
    if (b->reduce == CWM_RED_SUM) so->fadd++;
    else so->fcmp++;
  }
  lin_t env[CWM_MAX_DIMS * 2];
  for (int r = 0; r < b->ndim + b->nred; r++) env[r] = lower_root_lin(c, p, r);
  count_expr(c, so, b->body, env, 0);
}


/* analysis.c: what a lowered state does, without its code: the stores with their enclosing loops
 * and accesses (cwm_lower_stores, what the Ansor-style features are computed from) and the work
 * of its loops (cwm_lower_work). */
#include "lower_internal.h"

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

/* Executions of the loops around stage p's own loops, from the lowered extents. */
static double enclosing_execs(ctx_t *c, int p, int depth) {
  const cwm_stage *st = &c->L[p].st;
  if (st->loc != CWM_LOC_ITER || depth > CWM_MAX_STAGES) return 1;
  int q = st->attach_stage;
  if (q < 0 || q >= c->s->nstages) return 1;
  const cwm_stage *sq = &c->L[q].st;
  double e = enclosing_execs(c, q, depth + 1);
  for (int k = 0; k < sq->niters; k++) {
    e *= sq->nodes[sq->iters[k]].extent;
    if (sq->iters[k] == st->attach_node) break;
  }
  return e;
}

/* A lowered context in collect mode (no code kept): the stores' or the work's analysis. */
static ctx_t *lowered_for_analysis(const cwm_state *s, cwm_buf *body, int work_only) {
  ctx_t *c = cwm_xcalloc(1, sizeof *c);
  cwm_buf_init(body);
  c->s = s;
  c->b = body;
  c->collect = 1;
  c->work_only = work_only;
  lower_all(c);
  return c;
}

/* The root axes (bit r: root r of the stage's body op) a node's value depends on. */
static unsigned node_roots(const cwm_stage *st, int node, int depth) {
  if (node < 0 || node >= st->nnodes || depth > 64) return 0;
  const cwm_node *n = &st->nodes[node];
  if (n->is_fuse) {
    unsigned m = 0;
    for (int k = 0; k < n->nsub; k++) m |= node_roots(st, n->sub[k], depth + 1);
    return m;
  }
  if (n->root >= 0) return n->root < 32 ? 1u << n->root : 0;
  return node_roots(st, n->parent, depth + 1);
}

/* The axes each tensor read of an expression indexes with, appended to vars[*n] (at most max). */
static void read_vars(const cwm_expr *x, unsigned *vars, int *n, int max, unsigned *cur, int in_read) {
  if (!x) return;
  if (x->kind == CWM_X_VAR && cur) {
    if (x->var >= 0 && x->var < 32) *cur |= 1u << x->var;
    return;
  }
  if (x->kind == CWM_X_READ && *n < max) {
    unsigned *slot = &vars[(*n)++];
    *slot = 0;
    for (int k = 0; k < x->nargs; k++) read_vars(x->args[k], vars, n, max, slot, 1);
    return;
  }
  for (int k = 0; k < x->nargs; k++) read_vars(x->args[k], vars, n, max, in_read ? cur : NULL, in_read);
}

/* The register tile of a reduction stage: per execution of its innermost reduction loop, the
 * spatial iterations inside it (accumulators) and the elements its reads touch there. */
static void register_tile(const cwm_stage *st, const cwm_op *b, double *acc, double *loads, double *red_inner) {
  int r = -1;
  for (int k = 0; k < st->niters; k++)
    if (st->nodes[st->iters[k]].kind != CWM_IT_SPATIAL) r = k;
  unsigned vars[CWM_STORE_MAX_ACC];
  int nv = 0;
  read_vars(b->body, vars, &nv, CWM_STORE_MAX_ACC, NULL, 0);
  *acc = 1;
  *loads = 0;
  *red_inner = r >= 0 ? st->nodes[st->iters[r]].extent : 1;
  unsigned roots[CWM_MAX_ITERS];
  for (int k = r + 1; k < st->niters; k++) {
    roots[k] = node_roots(st, st->iters[k], 0);
    *acc *= st->nodes[st->iters[k]].extent;
  }
  for (int v = 0; v < nv; v++) {
    double f = 1;
    for (int k = r + 1; k < st->niters; k++)
      if (roots[k] & vars[v]) f *= st->nodes[st->iters[k]].extent;
    *loads += f;
  }
}

int cwm_lower_work(const cwm_state *s, cwm_work *w) {
  memset(w, 0, sizeof *w);
  if (!cwm_state_is_complete(s)) return CWM_ESTEP;
  cwm_buf body;
  ctx_t *c = lowered_for_analysis(s, &body, 1);
  double main_execs = 0;
  for (int p = 0; p < s->nstages; p++) {
    const cwm_stage *st = &c->L[p].st;
    if (cwm_stage_is_placeholder(s, p) || st->loc == CWM_LOC_INLINE) continue;
    const cwm_op *b = body_op(c, p);
    double e = enclosing_execs(c, p, 0), m = 1;
    for (int k = 0; k < st->niters; k++) e *= st->nodes[st->iters[k]].extent;
    for (int d = 0; d < b->ndim; d++) m *= b->shape[d];
    for (int r = 0; r < b->nred; r++) m *= b->red_extent[r];
    w->execs += e;
    w->minimal += m;
    if (b->reduce != CWM_RED_NONE && st->niters > 0 && st->nodes[st->iters[st->niters - 1]].kind == CWM_IT_REDUCE)
      w->serial += e;
    if (b->reduce != CWM_RED_NONE && e > main_execs) {
      main_execs = e;
      register_tile(st, b, &w->tile_acc, &w->tile_loads, &w->red_inner);
    }
  }
  cwm_buf_free(&body);
  lower_ctx_free(c);
  return 0;
}

int cwm_lower_stores(const cwm_state *s, cwm_store **out, int *n, cwm_err *err) {
  if (!cwm_state_is_complete(s)) return cwm_fail(err, CWM_ESTEP, "the state is a sketch");
  cwm_buf body;
  ctx_t *c = lowered_for_analysis(s, &body, 0);
  for (int p = 0; p < s->nstages; p++)
    if (!cwm_stage_is_placeholder(s, p) && s->stages[p].loc == CWM_LOC_ROOT) lower_emit_stage(c, p, 1);
  *out = c->stores;
  *n = c->nstores;
  cwm_buf_free(&body);
  lower_ctx_free(c);
  return 0;
}

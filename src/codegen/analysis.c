/* analysis.c: what a lowered state does, without its code: the stores with their enclosing loops
 * and accesses (cwm_lower_stores, what the Ansor-style features are computed from) and the work
 * of its loops (cwm_lower_work). */
#include "lower_internal.h"

#include <string.h>

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

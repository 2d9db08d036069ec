/* lin.c: linear forms over the loop variables of the lowered nest (a constant plus coefficients
 * on loop variables, each possibly divided and taken modulo), what bound inference, guards and
 * index expressions are computed in; and the nest arithmetic on them: the strides of split and
 * fused loops, a node's largest value, and whether a guard can become a loop's bound. */
#include "lower_internal.h"

#include <stdlib.h>
#include <string.h>

static int atom_eq(const atom_t *x, const atom_t *y) {
  return x->stage == y->stage && x->node == y->node && x->div == y->div && x->mod == y->mod;
}

void lower_lin_addterm(lin_t *l, long coef, atom_t a) {
  if (!l->ok || coef == 0) return;
  for (int i = 0; i < l->n; i++)
    if (atom_eq(&l->a[i], &a)) {
      l->coef[i] += coef;
      if (l->coef[i] == 0) {
        l->n--;
        l->coef[i] = l->coef[l->n];
        l->a[i] = l->a[l->n];
      }
      return;
    }
  if (l->n >= LIN_MAX) { l->ok = 0; return; }
  l->coef[l->n] = coef;
  l->a[l->n] = a;
  l->n++;
}

lin_t lower_lin_add(lin_t x, const lin_t *y, long scale) {
  if (!x.ok || !y->ok) return lin_bad();
  x.c0 += scale * y->c0;
  for (int i = 0; i < y->n; i++) lower_lin_addterm(&x, scale * y->coef[i], y->a[i]);
  return x;
}

static lin_t lin_scale(lin_t x, long c) {
  if (!x.ok) return x;
  if (c == 0) return lin_const(0);
  x.c0 *= c;
  for (int i = 0; i < x.n; i++) x.coef[i] *= c;
  return x;
}

static long atom_hi(ctx_t *c, const atom_t *a) {
  long e = c->L[a->stage].st.nodes[a->node].extent;
  long hi = (e - 1) / a->div;
  if (a->mod && hi > a->mod - 1) hi = a->mod - 1;
  return hi;
}

/* Stride of part k of a split node: product of the extents of the parts inside it. */
long lower_split_stride(const cwm_stage *st, const cwm_node *n, int k) {
  long s = 1;
  for (int j = k + 1; j < n->nparts; j++) s *= st->nodes[n->parts[j]].extent;
  return s;
}

long lower_fuse_stride(const cwm_stage *st, int fused, int src) {
  const cwm_node *f = &st->nodes[fused];
  long s = 1;
  int k = 0;
  while (k < f->nsub && f->sub[k] != src) k++;
  for (int j = k + 1; j < f->nsub; j++) s *= st->nodes[f->sub[j]].extent;
  return s;
}

lin_t lower_node_lin(ctx_t *c, int p, int node, int depth) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_node *n = &st->nodes[node];
  if (depth > 64) return lin_bad();
  if (is_leaf(st, node)) {
    lin_t l = lin_const(0);
    if (n->extent > 1) lower_lin_addterm(&l, 1, (atom_t){p, node, 1, 0}); /* an extent-1 loop is 0 */
    return l;
  }
  if (n->nparts) {
    lin_t l = lin_const(0);
    for (int k = 0; k < n->nparts; k++) {
      lin_t part = lower_node_lin(c, p, n->parts[k], depth + 1);
      l = lower_lin_add(l, &part, lower_split_stride(st, n, k));
    }
    return l;
  }
  if (n->fused >= 0) {
    lin_t f = lower_node_lin(c, p, n->fused, depth + 1);
    if (f.ok && f.n == 0 && f.c0 == 0) return lin_const(0);
    if (!f.ok || f.n != 1 || f.coef[0] != 1 || f.c0 != 0) return lin_bad();
    long stride = lower_fuse_stride(st, n->fused, node), ext = n->extent;
    if (ext == 1) return lin_const(0);
    atom_t a = f.a[0];
    if (a.mod && a.mod % (stride * ext)) return lin_bad();
    a.div *= stride;
    a.mod = ext;
    lin_t l = lin_const(0);
    lower_lin_addterm(&l, 1, a);
    return l;
  }
  return lin_bad();
}

/* Global value of root r of stage p as a linear form (base + local). */
lin_t lower_root_lin(ctx_t *c, int p, int r) {
  const cwm_stage *st = &c->L[p].st;
  int node = -1;
  for (int i = 0; i < st->nnodes; i++)
    if (st->nodes[i].root == r) { node = i; break; }
  if (node < 0) return lin_bad();
  lin_t l = lower_node_lin(c, p, node, 0);
  if (c->L[p].local && r < body_op(c, p)->ndim) l = lower_lin_add(l, &c->L[p].base[r], 1);
  return l;
}

lin_t lower_expr_lin(ctx_t *c, const cwm_expr *e, const lin_t *env) {
  switch (e->kind) {
  case CWM_X_CONST: return lin_const((long)e->value);
  case CWM_X_VAR: return env[e->var];
  case CWM_X_NEG: return lin_scale(lower_expr_lin(c, e->args[0], env), -1);
  case CWM_X_BIN: {
    lin_t x = lower_expr_lin(c, e->args[0], env), y = lower_expr_lin(c, e->args[1], env);
    if (!x.ok || !y.ok) return lin_bad();
    switch (e->op) {
    case '+': return lower_lin_add(x, &y, 1);
    case '-': return lower_lin_add(x, &y, -1);
    case '*':
      if (x.n == 0) return lin_scale(y, x.c0);
      if (y.n == 0) return lin_scale(x, y.c0);
      return lin_bad();
    case '/': if (x.n == 0 && y.n == 0 && y.c0) return lin_const(x.c0 / y.c0); return lin_bad();
    case '%': if (x.n == 0 && y.n == 0 && y.c0) return lin_const(x.c0 % y.c0); return lin_bad();
    }
    return lin_bad();
  }
  default: return lin_bad();
  }
}

void lower_term_range(ctx_t *c, long coef, const atom_t *a, long *lo, long *hi) {
  long h = atom_hi(c, a);
  if (coef >= 0) { *lo += 0; *hi += coef * h; }
  else { *lo += coef * h; *hi += 0; }
}

/* floor(l / d) as a linear form: possible when the terms of l that d does not divide sum to a
 * value in [0, d) over every loop value. */
int lower_lin_div(ctx_t *c, const lin_t *l, long d, lin_t *out) {
  if (!l->ok || d <= 0) return 0;
  long q0 = l->c0 >= 0 ? l->c0 / d : -((-l->c0 + d - 1) / d);
  lin_t q = lin_const(q0);
  long lo = l->c0 - q0 * d, hi = lo;
  for (int i = 0; i < l->n; i++) {
    if (l->coef[i] % d == 0) lower_lin_addterm(&q, l->coef[i] / d, l->a[i]);
    else lower_term_range(c, l->coef[i], &l->a[i], &lo, &hi);
  }
  if (lo < 0 || hi >= d || !q.ok) return 0;
  *out = q;
  return 1;
}

/* l mod m as a linear form: possible when the terms m does not divide stay in [0, m). */
int lower_lin_mod(ctx_t *c, const lin_t *l, long m, lin_t *out) {
  if (!l->ok || m <= 0) return 0;
  long r0 = ((l->c0 % m) + m) % m;
  lin_t r = lin_const(r0);
  long lo = r0, hi = r0;
  for (int i = 0; i < l->n; i++) {
    if (l->coef[i] % m == 0) continue;
    lower_lin_addterm(&r, l->coef[i], l->a[i]);
    lower_term_range(c, l->coef[i], &l->a[i], &lo, &hi);
  }
  if (lo < 0 || hi >= m || !r.ok) return 0;
  *out = r;
  return 1;
}

long lower_node_max(const cwm_stage *st, int node, int depth) {
  const cwm_node *n = &st->nodes[node];
  if (depth > 64) return 1L << 40;
  if (is_leaf(st, node) || !n->nparts) return n->extent - 1;
  long m = 0;
  for (int k = 0; k < n->nparts; k++) m += lower_split_stride(st, n, k) * lower_node_max(st, n->parts[k], depth + 1);
  return m;
}

/* Position of the stage's first reduction loop, -1 if it has none. */
int lower_first_reduce_pos(const cwm_stage *st) {
  for (int i = 0; i < st->niters; i++)
    if (st->nodes[st->iters[i]].kind == CWM_IT_REDUCE) return i;
  return -1;
}

/* Guard g of stage p (a split guard, or CWM_MAX_NODES + r: the region guard of root r) as
 * "value < *ext" with value a linear form, and the index of the form's term on this stage's
 * innermost loop in it; -1 when that loop cannot carry the guard as its bound: the term must be
 * the plain loop variable with a positive coefficient, every other term must belong to an outer
 * loop (of this stage, or of the stages it is attached in), and a region guard's other half,
 * value >= 0, must hold by construction (no negative coefficient or constant). */
int lower_guard_bound_term(ctx_t *c, int p, int g, lin_t *l, long *ext) {
  const cwm_stage *st = &c->L[p].st;
  if (g < CWM_MAX_NODES) {
    int node = c->L[p].guard[g];
    *l = lower_node_lin(c, p, node, 0);
    *ext = st->nodes[node].root >= 0 ? st->domain[st->nodes[node].root] : st->nodes[node].extent;
  } else {
    int r = g - CWM_MAX_NODES;
    *l = lower_root_lin(c, p, r);
    *ext = body_op(c, p)->shape[r];
    if (l->ok && l->c0 < 0) return -1;
    for (int k = 0; l->ok && k < l->n; k++)
      if (l->coef[k] < 0) return -1;
  }
  if (!l->ok || l->n == 0) return -1;
  int best = -1, bpos = -1;
  for (int k = 0; k < l->n; k++) {
    if (l->a[k].stage != p) continue; /* an enclosing loop of the stage this one is attached in */
    int pos = stage_iter_pos(st, l->a[k].node);
    if (pos < 0) return -1;
    if (pos > bpos) bpos = pos, best = k;
  }
  if (best < 0 || l->a[best].div != 1 || l->a[best].mod || l->coef[best] <= 0) return -1;
  for (int k = 0; k < l->n; k++)
    if (k != best && l->a[k].stage == p && stage_iter_pos(st, l->a[k].node) == bpos) return -1;
  /* a spatial guard also guards the reduction's init, whose nest opens only the spatial loops
   * from the first reduction loop on: every variable of the bound must exist there too */
  int spatial = g >= CWM_MAX_NODES || st->nodes[c->L[p].guard[g]].kind == CWM_IT_SPATIAL;
  if (spatial && body_op(c, p)->reduce != CWM_RED_NONE) {
    int first_red = lower_first_reduce_pos(st);
    for (int k = 0; k < l->n && first_red >= 0; k++) {
      if (l->a[k].stage != p) continue;
      int pos = stage_iter_pos(st, l->a[k].node);
      if (pos >= first_red && st->nodes[st->iters[pos]].kind != CWM_IT_SPATIAL) return -1;
    }
  }
  return best;
}

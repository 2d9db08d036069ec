/* lower.c: the lowered loop nest of a state, which every back end walks. Bound inference gives
 * each attached stage the region its consumer needs per iteration (a linear form in the consumer's
 * outer loop variables plus a constant extent); splits that can overshoot get guards, and in C a
 * guard that a loop can carry becomes that loop's bound. */
#include "lower_internal.h"

#include <stdlib.h>
#include <string.h>

static int atom_eq(const atom_t *x, const atom_t *y) {
  return x->stage == y->stage && x->node == y->node && x->div == y->div && x->mod == y->mod;
}

static void lin_addterm(lin_t *l, long coef, atom_t a) {
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

static lin_t lin_add(lin_t x, const lin_t *y, long scale) {
  if (!x.ok || !y->ok) return lin_bad();
  x.c0 += scale * y->c0;
  for (int i = 0; i < y->n; i++) lin_addterm(&x, scale * y->coef[i], y->a[i]);
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
    if (n->extent > 1) lin_addterm(&l, 1, (atom_t){p, node, 1, 0}); /* an extent-1 loop is 0 */
    return l;
  }
  if (n->nparts) {
    lin_t l = lin_const(0);
    for (int k = 0; k < n->nparts; k++) {
      lin_t part = lower_node_lin(c, p, n->parts[k], depth + 1);
      l = lin_add(l, &part, lower_split_stride(st, n, k));
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
    lin_addterm(&l, 1, a);
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
  if (c->L[p].local && r < body_op(c, p)->ndim) l = lin_add(l, &c->L[p].base[r], 1);
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
    case '+': return lin_add(x, &y, 1);
    case '-': return lin_add(x, &y, -1);
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

/* The indices of the reads of one tensor, through inlined stages (at most 16 reads). */
typedef struct {
  int n;
  lin_t idx[16][CWM_MAX_DIMS];
  int overflow;
} reads_t;

static void collect_reads(ctx_t *c, const cwm_expr *e, const lin_t *env, int tid, reads_t *out, int depth) {
  if (!e || depth > CWM_MAX_STAGES) { out->overflow = 1; return; }
  if (e->kind == CWM_X_READ) {
    lin_t idx[CWM_MAX_DIMS];
    for (int i = 0; i < e->nargs && i < CWM_MAX_DIMS; i++) idx[i] = lower_expr_lin(c, e->args[i], env);
    if (e->tensor == tid) {
      if (out->n >= 16) { out->overflow = 1; return; }
      memcpy(out->idx[out->n++], idx, sizeof idx);
    } else {
      int q = state_stage_of_tid(c->s, e->tensor);
      if (q >= 0 && c->s->stages[q].loc == CWM_LOC_INLINE)
        collect_reads(c, body_op(c, q)->body, idx, tid, out, depth + 1);
    }
    return;
  }
  for (int i = 0; i < e->nargs; i++) collect_reads(c, e->args[i], env, tid, out, depth);
}

static void term_range(ctx_t *c, long coef, const atom_t *a, long *lo, long *hi) {
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
    if (l->coef[i] % d == 0) lin_addterm(&q, l->coef[i] / d, l->a[i]);
    else term_range(c, l->coef[i], &l->a[i], &lo, &hi);
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
    lin_addterm(&r, l->coef[i], l->a[i]);
    term_range(c, l->coef[i], &l->a[i], &lo, &hi);
  }
  if (lo < 0 || hi >= m || !r.ok) return 0;
  *out = r;
  return 1;
}

/* stage_recompute for a stage whose domain bound inference shrank, with TVM's tightening: a split
 * part is at most what is left of its parent after the parts inside it (min(factor, rest)), so a
 * tile's outer parts do not loop over slots a guard would reject. Values are unchanged: a part is
 * tightened only when every part outside it has extent 1. */
static void recompute_tight(cwm_stage *st) {
  for (int i = 0; i < st->nnodes; i++) {
    cwm_node *n = &st->nodes[i];
    if (n->root >= 0) {
      n->extent = st->domain[n->root];
    } else if (n->is_fuse) {
      long e = 1;
      for (int k = 0; k < n->nsub; k++) e *= st->nodes[n->sub[k]].extent;
      n->extent = e > (1 << 30) ? (1 << 30) : (int)e;
    } else if (n->parent >= 0) {
      const cwm_node *p = &st->nodes[n->parent];
      long rest = p->extent;
      for (int k = p->nparts - 1; k >= 0 && p->parts[k] != i; k--) {
        long f = st->nodes[p->parts[k]].factor;
        if (f > 0) rest = (rest + f - 1) / f;
      }
      if (rest < 1) rest = 1;
      n->extent = (int)(n->factor > 0 && n->factor < rest ? n->factor : rest);
    }
  }
}

/* Bound inference for attached stage p: its region per output dim inside target t. */
static void infer_region(ctx_t *c, int p) {
  lstage *L = &c->L[p];
  const cwm_stage *sp = &c->s->stages[p];
  int t = sp->attach_stage;
  const cwm_stage *tt = &c->L[t].st;
  int apos = stage_iter_pos(tt, sp->attach_node);
  const cwm_op *tb = body_op(c, t);
  const cwm_op *pop = tensor_op(c, sp->tid);
  lin_t env[CWM_MAX_DIMS * 2];
  for (int r = 0; r < tb->ndim + tb->nred; r++) env[r] = lower_root_lin(c, t, r);
  reads_t rd = {0};
  collect_reads(c, tb->body, env, sp->tid, &rd, 0);
  /* Ansor's common root: the other readers of p are attached in t at or inside p's loop (the
   * step checks say so); their whole regions, every loop of theirs ranging, are read too */
  int inner[CWM_MAX_STAGES], ninner = 0;
  for (int q = p + 1; q < c->s->nstages; q++) {
    /* q attached in t, directly or through a chain of attached stages */
    if (cwm_attach_in(c->s, q, t, -1) < 0) continue;
    inner[ninner++] = q; /* its loops range, whether it reads p or holds a stage that does */
    const cwm_op *qb = body_op(c, q);
    lin_t envq[CWM_MAX_DIMS * 2];
    for (int r = 0; r < qb->ndim + qb->nred; r++) envq[r] = lower_root_lin(c, q, r);
    collect_reads(c, qb->body, envq, sp->tid, &rd, 0);
  }
  for (int d = 0; d < pop->ndim; d++) {
    int full = rd.overflow || rd.n == 0;
    lin_t fixed0 = lin_const(0);
    long lo = 0, hi = 0;
    for (int i = 0; i < rd.n && !full; i++) {
      const lin_t *l = &rd.idx[i][d];
      if (!l->ok) { full = 1; break; }
      lin_t fixed = lin_const(0);
      long flo = l->c0, fhi = l->c0;
      for (int k = 0; k < l->n; k++) {
        const atom_t *a = &l->a[k];
        int is_fixed = a->stage != t || stage_iter_pos(tt, a->node) <= apos;
        for (int k2 = 0; k2 < ninner; k2++) is_fixed &= a->stage != inner[k2];
        if (is_fixed) lin_addterm(&fixed, l->coef[k], *a);
        else term_range(c, l->coef[k], a, &flo, &fhi);
      }
      if (i == 0) {
        fixed0 = fixed;
        lo = flo;
        hi = fhi;
      } else {
        lin_t diff = lin_add(fixed, &fixed0, -1);
        if (!diff.ok || diff.n) { full = 1; break; }
        if (flo < lo) lo = flo;
        if (fhi > hi) hi = fhi;
      }
    }
    if (!full && hi - lo + 1 > pop->shape[d]) full = 1;
    /* an rfactor stage's factor dim is a split part, not a root axis: it is always whole */
    int dnode = d < sp->nout ? sp->out_node[d] : -1;
    int droot = dnode >= 0 ? sp->nodes[dnode].root : -1;
    if (droot < 0) full = 1;
    if (full) {
      L->base[d] = lin_const(0);
      L->dims[d] = pop->shape[d];
      L->gguard[d] = 0;
    } else {
      fixed0.c0 = lo;
      L->base[d] = fixed0;
      L->dims[d] = (int)(hi - lo + 1);
      long glo = lo, ghi = lo;
      for (int k = 0; k < fixed0.n; k++) term_range(c, fixed0.coef[k], &fixed0.a[k], &glo, &ghi);
      ghi += L->dims[d] - 1;
      L->gguard[d] = glo < 0 || ghi > pop->shape[d] - 1;
    }
    if (droot >= 0) L->st.domain[droot] = L->dims[d];
  }
  recompute_tight(&L->st);
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

static void plan_bound(ctx_t *c, int p, int g) {
  lstage *L = &c->L[p];
  lin_t l;
  long ext;
  int k = lower_guard_bound_term(c, p, g, &l, &ext);
  if (k < 0) return;
  int pos = stage_iter_pos(&L->st, l.a[k].node);
  if (L->nbound[pos] >= 4) return;
  L->bound[pos][L->nbound[pos]++] = g;
  if (g < CWM_MAX_NODES) L->absorbed[g] = 1;
  else L->gabsorbed[g - CWM_MAX_NODES] = 1;
}

static void plan_guard_bounds(ctx_t *c, int p) {
  lstage *L = &c->L[p];
  for (int g = 0; g < L->nguard; g++) plan_bound(c, p, g);
  const cwm_op *b = body_op(c, p);
  if (L->local)
    for (int r = 0; r < b->ndim; r++)
      if (L->gguard[r]) plan_bound(c, p, CWM_MAX_NODES + r);
}

void lower_all(ctx_t *c) {
  const cwm_state *s = c->s;
  for (int p = 0; p < s->nstages; p++) {
    c->L[p].st = s->stages[p];
    c->L[p].local = s->stages[p].loc == CWM_LOC_ITER;
    const cwm_op *op = tensor_op(c, s->stages[p].tid);
    for (int d = 0; d < op->ndim; d++) {
      c->L[p].dims[d] = op->shape[d];
      c->L[p].base[d] = lin_const(0);
      c->L[p].gguard[d] = 0;
    }
  }
  for (int p = s->nstages - 1; p >= 0; p--)
    if (c->L[p].local) infer_region(c, p);
  /* Every split node whose parts can overshoot its extent needs a guard: for roots that is
   * the domain edge, for inner nodes it stops a tile from aliasing into the next one. */
  for (int p = 0; p < s->nstages; p++) {
    const cwm_stage *st = &c->L[p].st;
    c->L[p].nguard = 0;
    for (int i = 0; i < st->nnodes; i++) {
      const cwm_node *n = &st->nodes[i];
      if (!n->nparts || is_leaf(st, i)) continue;
      long ext = n->root >= 0 ? st->domain[n->root] : n->extent;
      if (lower_node_max(st, i, 0) >= ext && c->L[p].nguard < CWM_MAX_NODES) c->L[p].guard[c->L[p].nguard++] = i;
    }
    memset(c->L[p].absorbed, 0, sizeof c->L[p].absorbed);
    memset(c->L[p].gabsorbed, 0, sizeof c->L[p].gabsorbed);
    memset(c->L[p].nbound, 0, sizeof c->L[p].nbound);
    if (!c->text && !c->ref && !c->collect) plan_guard_bounds(c, p);
  }
  c->cur_stage = -1;
  if (!c->ref && !c->work_only) lower_plan_rewrites(c);
}

void lower_ctx_free(ctx_t *c) {
  for (int t = 0; t < CWM_MAX_OPS; t++) free(c->rw[t]);
  free(c);
}

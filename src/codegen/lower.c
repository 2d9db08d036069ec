/* lower.c: the lowered loop nest of a state, which every back end walks. Bound inference gives
 * each attached stage the region its consumer needs per iteration (a linear form in the consumer's
 * outer loop variables plus a constant extent); splits that can overshoot get guards, and in C a
 * guard that a loop can carry becomes that loop's bound. */
#include "lower_internal.h"

#include <stdlib.h>
#include <string.h>

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
        if (is_fixed) lower_lin_addterm(&fixed, l->coef[k], *a);
        else lower_term_range(c, l->coef[k], a, &flo, &fhi);
      }
      if (i == 0) {
        fixed0 = fixed;
        lo = flo;
        hi = fhi;
      } else {
        lin_t diff = lower_lin_add(fixed, &fixed0, -1);
        if (!diff.ok || diff.n) { full = 1; break; }
        if (flo < lo) lo = flo;
        if (fhi > hi) hi = fhi;
      }
    }
    /* a region wider than the tensor is the tensor, unless the overshoot stays within the
     * tensor rounded up to 8 elements: a padded edge tile of 8 lanes over a 7-wide output
     * computes its whole tile into the buffer (tile.c) */
    if (!full && hi - lo + 1 > pop->shape[d] && hi - lo + 1 > (pop->shape[d] + 7) / 8 * 8) full = 1;
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
      for (int k = 0; k < fixed0.n; k++) lower_term_range(c, fixed0.coef[k], &fixed0.a[k], &glo, &ghi);
      ghi += L->dims[d] - 1;
      L->gguard[d] = glo < 0 || ghi > pop->shape[d] - 1;
    }
    if (droot >= 0) L->st.domain[droot] = L->dims[d];
  }
  cwm_stage_extents(&L->st, 1);
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

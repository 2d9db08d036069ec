/* lower.c: walks a state into code. Bound inference gives each attached stage the region its
 * consumer needs per iteration (a linear form in the consumer's outer loop variables plus a
 * constant extent); the walk then emits every stage's loop nest, with attached stages at their
 * loops, reduction init nests before the first reduction loop, and guards where splits are
 * uneven. Weights (inputs marked `const`) may be read in a rewritten layout (see "layout rewrite"
 * below). Two back ends share the walk: C (cwm_codegen) and the TensorIR-like text
 * (cwm_state_print). */
#include "cwm/codegen.h"
#include "../state/state_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- linear forms over loop variables ---- */

typedef struct {
  int stage, node;
  long div, mod; /* value = (var / div) % mod; mod 0 = none */
} atom_t;

#define LIN_MAX 32
typedef struct {
  int ok;
  long c0;
  int n;
  long coef[LIN_MAX];
  atom_t a[LIN_MAX];
} lin_t;

static lin_t lin_const(long c) { lin_t l = {.ok = 1, .c0 = c}; return l; }
static lin_t lin_bad(void) { lin_t l = {.ok = 0}; return l; }

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

/* ---- lowering context ---- */

typedef struct {
  cwm_stage st;                 /* lowered copy: domain from bound inference, extents recomputed */
  int local;                    /* attached: its buffer lives at the attach point */
  int dims[CWM_MAX_DIMS];       /* storage dims of its buffer */
  lin_t base[CWM_MAX_DIMS];     /* attached: offset of the region per output dim */
  int gguard[CWM_MAX_DIMS];     /* attached: base + local may leave the tensor */
  int nguard;
  int guard[CWM_MAX_NODES];     /* split nodes whose value may exceed their extent */
  /* C code only: a guard whose innermost loop variable enters with a positive coefficient and
   * every other variable of it belongs to an outer loop bounds that loop instead of an if around
   * the statement (the loop stops where the value reaches the extent; no per-element test) */
  int absorbed[CWM_MAX_NODES];
  int gabsorbed[CWM_MAX_DIMS];  /* the same for a region guard (gguard) */
  int nbound[CWM_MAX_ITERS];
  int bound[CWM_MAX_ITERS][4];  /* guards bounding the loop at that position: g < CWM_MAX_NODES a
                                 * split guard, CWM_MAX_NODES + r the region guard of root r */
} lstage;

typedef struct {
  const cwm_state *s;
  lstage L[CWM_MAX_STAGES];
  int text, ref;
  cwm_buf *b;
  int par_depth, simd_depth;
  int nbounds; /* named loop bounds emitted so far (unique names) */
  int used_vec;  /* bit 0: 8-lane vectors, bit 1: 16-lane */
  int vw;        /* lanes of the register tile being emitted (8 or 16) */
  int max_lanes; /* widest vector the tiles may use: 16 with AVX-512, else 8 */
  int used_math; /* cwm_expf / cwm_erff: the definitions go before the kernel */
  int used_tr8;  /* cwm_tr8, the 8 x 8 transpose of runtime packs */
  struct cse_s *cse;
  /* store collection (cwm_lower_stores): the open loops and the stores seen */
  int collect, last_unroll;
  int work_only; /* cwm_lower_work: bound inference only */
  int nloop;
  struct { int stage, node, extent, ann, unroll, reduce; } loop[CWM_STORE_MAX_LOOPS];
  cwm_store *stores;
  int nstores, capstores;
  int nov, ov_stage;          /* leaves replaced by constants (register tiles) */
  int ov_node[CWM_MAX_ITERS];
  long ov_val[CWM_MAX_ITERS];
  int tmp;
  cwm_err *err;
  int failed;
  struct rewrite_s *rw[CWM_MAX_OPS]; /* constant inputs stored in the layout their reader reads */
  int cur_stage;                     /* the stage whose statement is being emitted, or -1 */
} ctx_t;

static const cwm_op *tensor_op(ctx_t *c, int tid) { return cwm_dag_tensor(c->s->dag, tid); }
static const cwm_op *body_op(ctx_t *c, int p) { return cwm_dag_tensor(c->s->dag, c->L[p].st.body_tid); }

static int is_leaf(const cwm_stage *st, int node) { return stage_iter_pos(st, node) >= 0; }

static long atom_hi(ctx_t *c, const atom_t *a) {
  long e = c->L[a->stage].st.nodes[a->node].extent;
  long hi = (e - 1) / a->div;
  if (a->mod && hi > a->mod - 1) hi = a->mod - 1;
  return hi;
}

/* Stride of part k of a split node: product of the extents of the parts inside it. */
static long split_stride(const cwm_stage *st, const cwm_node *n, int k) {
  long s = 1;
  for (int j = k + 1; j < n->nparts; j++) s *= st->nodes[n->parts[j]].extent;
  return s;
}
static long fuse_stride(const cwm_stage *st, int fused, int src) {
  const cwm_node *f = &st->nodes[fused];
  long s = 1;
  int k = 0;
  while (k < f->nsub && f->sub[k] != src) k++;
  for (int j = k + 1; j < f->nsub; j++) s *= st->nodes[f->sub[j]].extent;
  return s;
}

static lin_t node_lin(ctx_t *c, int p, int node, int depth) {
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
      lin_t part = node_lin(c, p, n->parts[k], depth + 1);
      l = lin_add(l, &part, split_stride(st, n, k));
    }
    return l;
  }
  if (n->fused >= 0) {
    lin_t f = node_lin(c, p, n->fused, depth + 1);
    if (f.ok && f.n == 0 && f.c0 == 0) return lin_const(0);
    if (!f.ok || f.n != 1 || f.coef[0] != 1 || f.c0 != 0) return lin_bad();
    long stride = fuse_stride(st, n->fused, node), ext = n->extent;
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
static lin_t root_lin(ctx_t *c, int p, int r) {
  const cwm_stage *st = &c->L[p].st;
  int node = -1;
  for (int i = 0; i < st->nnodes; i++)
    if (st->nodes[i].root == r) { node = i; break; }
  if (node < 0) return lin_bad();
  lin_t l = node_lin(c, p, node, 0);
  if (c->L[p].local && r < body_op(c, p)->ndim) l = lin_add(l, &c->L[p].base[r], 1);
  return l;
}

static lin_t expr_lin(ctx_t *c, const cwm_expr *e, const lin_t *env) {
  switch (e->kind) {
  case CWM_X_CONST: return lin_const((long)e->value);
  case CWM_X_VAR: return env[e->var];
  case CWM_X_NEG: return lin_scale(expr_lin(c, e->args[0], env), -1);
  case CWM_X_BIN: {
    lin_t x = expr_lin(c, e->args[0], env), y = expr_lin(c, e->args[1], env);
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

typedef struct {
  int n;
  lin_t idx[16][CWM_MAX_DIMS];
  int overflow;
} reads_t;

static void collect_reads(ctx_t *c, const cwm_expr *e, const lin_t *env, int tid, reads_t *out, int depth) {
  if (!e || depth > CWM_MAX_STAGES) { out->overflow = 1; return; }
  if (e->kind == CWM_X_READ) {
    lin_t idx[CWM_MAX_DIMS];
    for (int i = 0; i < e->nargs && i < CWM_MAX_DIMS; i++) idx[i] = expr_lin(c, e->args[i], env);
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
  for (int r = 0; r < tb->ndim + tb->nred; r++) env[r] = root_lin(c, t, r);
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
    for (int r = 0; r < qb->ndim + qb->nred; r++) envq[r] = root_lin(c, q, r);
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

static long node_max(const cwm_stage *st, int node, int depth) {
  const cwm_node *n = &st->nodes[node];
  if (depth > 64) return 1L << 40;
  if (is_leaf(st, node) || !n->nparts) return n->extent - 1;
  long m = 0;
  for (int k = 0; k < n->nparts; k++) m += split_stride(st, n, k) * node_max(st, n->parts[k], depth + 1);
  return m;
}

/* ---- layout rewrite of constant inputs ----
 * Ansor's layout rewrite: a weight (an input marked `const`) that one reduction stage reads with
 * plain axis variables is stored with one dimension per split part of those axes, in that stage's
 * loop order (outer to inner), each with the part's extent; parts an uneven split makes overshoot
 * hold 0. The innermost loop that indexes it then walks contiguous memory, so a vectorized spatial
 * loop reads whole vectors (and the register tile applies) where the original layout had a
 * stride. The conversion runs once, outside the kernel (<fn>_pack_<name>). The decision depends
 * on the state alone, so a logged step list always lowers to the same kernel.
 * An input that is not a weight (batch_matmul's second operand, an activation) is rewritten the
 * same way, but inside the kernel on every call ("runtime pack"), and only when the stage's
 * vectorized loop would otherwise read it with a stride: the copy costs one pass over the input,
 * which the reduction then reads many times as whole vectors instead of element by element. */

#define RW_MAX_DIMS 16
typedef struct rewrite_s {
  int stage;                    /* the only stage whose body reads the tensor */
  int ndim;
  int node[RW_MAX_DIMS];        /* terminal split parts of that stage, loop order, extent > 1 */
  long extent[RW_MAX_DIMS];     /* before bound inference: the whole tensor is converted */
  long stride[RW_MAX_DIMS];     /* row-major strides of the new layout */
  lin_t val[RW_MAX_DIMS];       /* each dim's index in the kernel, over the lowered loops */
  long size;                    /* floats of the new layout */
  int runtime;                  /* not a weight: converted inside the kernel on every call */
  int root_dim[CWM_MAX_DIMS * 2]; /* tensor dim indexed by root axis r of the stage, or -1 */
  long fixed[CWM_MAX_DIMS];       /* the position read in a dim no axis indexes */
} rewrite_t;

/* The one read of tensor t in e: *rd is set, *ok cleared if two reads index differently. */
static void find_read(const cwm_expr *e, int t, const cwm_expr **rd, int *ok) {
  if (!e) return;
  if (e->kind == CWM_X_READ && e->tensor == t) {
    if (*rd && !cwm_expr_equal(*rd, e)) *ok = 0;
    if (!*rd) *rd = e;
  }
  for (int i = 0; i < e->nargs; i++) find_read(e->args[i], t, rd, ok);
}

/* Rank of `target` among the non-fuse sources of fuse node f, in loop order; -1 if absent. */
static int fuse_rank(const cwm_stage *st, int f, int target, int *count, int depth) {
  const cwm_node *n = &st->nodes[f];
  if (depth > 16) return -1;
  for (int k = 0; k < n->nsub; k++) {
    int sub = n->sub[k];
    if (st->nodes[sub].is_fuse) {
      int r = fuse_rank(st, sub, target, count, depth + 1);
      if (r >= 0) return r;
    } else {
      if (sub == target) return *count;
      (*count)++;
    }
  }
  return -1;
}

/* floor(l / d) as a linear form: possible when the terms of l that d does not divide sum to a
 * value in [0, d) over every loop value. */
static int lin_div(ctx_t *c, const lin_t *l, long d, lin_t *out) {
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
static int lin_mod(ctx_t *c, const lin_t *l, long m, lin_t *out) {
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

/* Splits the global value v of node `node` of the stage as it was before bound inference (ust)
 * into its parts, down to the terminal ones (val[] indexed by node). */
static int decompose(ctx_t *c, const cwm_stage *ust, int node, const lin_t *v, lin_t *val, int depth) {
  const cwm_node *n = &ust->nodes[node];
  if (depth > 32) return 0;
  if (!n->nparts) {
    val[node] = *v;
    return 1;
  }
  for (int k = 0; k < n->nparts; k++) {
    lin_t q;
    if (!lin_div(c, v, split_stride(ust, n, k), &q)) return 0;
    if (k > 0 && !lin_mod(c, &q, ust->nodes[n->parts[k]].extent, &q)) return 0;
    if (!decompose(c, ust, n->parts[k], &q, val, depth + 1)) return 0;
  }
  return 1;
}

/* Flattened stride of terminal part `node` in the original layout (for the identity test). */
static long orig_stride(const cwm_stage *ust, int node, long dim_stride) {
  long s = dim_stride;
  for (int d = 0; d < 64; d++) {
    int par = ust->nodes[node].parent;
    if (par < 0) break;
    const cwm_node *pn = &ust->nodes[par];
    int k = 0;
    while (k < pn->nparts && pn->parts[k] != node) k++;
    s *= split_stride(ust, pn, k);
    node = par;
  }
  return s;
}

static void plan_rewrite(ctx_t *c, int t) {
  const cwm_state *s = c->s;
  const cwm_op *in = tensor_op(c, t);
  if (!in->is_input) return;
  int p = -1;
  for (int q = 0; q < s->nstages; q++) {
    if (cwm_stage_is_placeholder(s, q) || !cwm_expr_reads(body_op(c, q)->body, t)) continue;
    if (p >= 0) return; /* read by two stages: one layout cannot suit both */
    p = q;
  }
  if (p < 0 || s->stages[p].loc == CWM_LOC_INLINE) return;
  const cwm_op *b = body_op(c, p);
  if (b->reduce == CWM_RED_NONE) return; /* a bias or scale read elementwise gains nothing */
  const cwm_expr *rd = NULL;
  int same = 1;
  find_read(b->body, t, &rd, &same);
  if (!rd || !same || rd->nargs != in->ndim) return;
  rewrite_t rw;
  memset(&rw, 0, sizeof rw);
  rw.stage = p;
  int nroot = b->ndim + b->nred;
  for (int r = 0; r < CWM_MAX_DIMS * 2; r++) rw.root_dim[r] = -1;
  for (int d = 0; d < in->ndim; d++) {
    const cwm_expr *a = rd->args[d];
    if (a->kind == CWM_X_VAR && a->var >= 0 && a->var < nroot && rw.root_dim[a->var] < 0) rw.root_dim[a->var] = d;
    else if (a->kind == CWM_X_CONST && a->value >= 0 && a->value < in->shape[d] && a->value == (long)a->value)
      rw.fixed[d] = (long)a->value;
    else
      return; /* only plain axes (and fixed positions) have a layout to follow */
  }
  /* terminal parts of the indexing axes, ordered by the loop they end up in (and their place in
   * a fused loop) */
  const cwm_stage *ust = &s->stages[p];
  int cand[CWM_MAX_NODES], cleaf[CWM_MAX_NODES], nc = 0;
  long key[CWM_MAX_NODES];
  for (int i = 0; i < ust->nnodes; i++) {
    const cwm_node *n = &ust->nodes[i];
    if (n->nparts || n->is_fuse) continue;
    int r = cwm_node_root(ust, i);
    if (r < 0 || r >= nroot || rw.root_dim[r] < 0) continue;
    int leaf = i, rank = 0;
    if (!is_leaf(ust, i)) {
      leaf = n->fused;
      for (int d = 0; d < 16 && leaf >= 0 && !is_leaf(ust, leaf); d++) leaf = ust->nodes[leaf].fused;
      if (leaf < 0 || !is_leaf(ust, leaf)) return; /* fused, then split again */
      int count = 0;
      rank = fuse_rank(ust, leaf, i, &count, 0);
      if (rank < 0) return;
    }
    cand[nc] = i;
    cleaf[nc] = leaf;
    key[nc++] = (long)stage_iter_pos(ust, leaf) * 1024 + rank;
  }
  for (int i = 1; i < nc; i++) /* insertion sort: a handful of parts */
    for (int j = i; j > 0 && key[j - 1] > key[j]; j--) {
      long tk = key[j]; key[j] = key[j - 1]; key[j - 1] = tk;
      int tc = cand[j]; cand[j] = cand[j - 1]; cand[j - 1] = tc;
      tc = cleaf[j]; cleaf[j] = cleaf[j - 1]; cleaf[j - 1] = tc;
    }
  if (!in->is_const) {
    /* an activation: worth a copy per call only where the vectorized loop strides through it */
    int last = -1;
    for (int i = nc - 1; i >= 0 && last < 0; i--)
      if (ust->nodes[cand[i]].extent > 1) last = i;
    if (last < 0 || ust->nodes[cleaf[last]].ann != CWM_ANN_VECTORIZE) return;
    int dim = rw.root_dim[cwm_node_root(ust, cand[last])];
    long ds = 1;
    for (int e = dim + 1; e < in->ndim; e++) ds *= in->shape[e];
    /* contiguous, and every row starts on a vector boundary (or the loop is no whole number of
     * vectors): read in place. Rows of 1023 floats would make most vector loads straddle two
     * cache lines; the copy pads them into the loops' panels. */
    long vext = ust->nodes[cand[last]].extent;
    int misaligned = dim > 0 && (ds * in->shape[dim]) % 8 != 0 && vext % 8 == 0;
    if (orig_stride(ust, cand[last], ds) == 1 && !misaligned) return;
    rw.runtime = 1;
  }
  long size = 1, orig = 1;
  for (int d = 0; d < in->ndim; d++) orig *= in->shape[d];
  for (int i = 0; i < nc; i++) {
    long e = ust->nodes[cand[i]].extent;
    if (e <= 1) continue;
    if (rw.ndim == RW_MAX_DIMS) return;
    rw.node[rw.ndim] = cand[i];
    rw.extent[rw.ndim++] = e;
    size *= e;
    if (size > 8 * orig + 4096 || size > (1L << 31)) return; /* padding out of proportion */
  }
  rw.size = size;
  for (int d = rw.ndim - 1; d >= 0; d--) rw.stride[d] = d == rw.ndim - 1 ? 1 : rw.stride[d + 1] * rw.extent[d + 1];
  /* the same layout as the tensor's own (no padding, same strides): nothing to rewrite */
  if (size == orig) {
    int identity = 1;
    for (int d = 0; d < rw.ndim && identity; d++) {
      int dim = rw.root_dim[cwm_node_root(ust, rw.node[d])];
      long ds = 1;
      for (int e = dim + 1; e < in->ndim; e++) ds *= in->shape[e];
      identity = orig_stride(ust, rw.node[d], ds) == rw.stride[d];
    }
    if (identity) return;
  }
  /* each dim's index in the kernel: the part's own loop value in a root stage; in an attached
   * stage the global axis value (region base + local loops) split the way the parts divide it */
  if (!c->L[p].local) {
    for (int d = 0; d < rw.ndim; d++) {
      rw.val[d] = node_lin(c, p, rw.node[d], 0);
      if (!rw.val[d].ok) return;
    }
  } else {
    lin_t *val = cwm_xcalloc(CWM_MAX_NODES, sizeof *val);
    int ok = 1;
    for (int r = 0; r < nroot && ok; r++) {
      if (rw.root_dim[r] < 0) continue;
      int rn = -1;
      for (int i = 0; i < ust->nnodes; i++)
        if (ust->nodes[i].root == r) { rn = i; break; }
      lin_t v = root_lin(c, p, r);
      ok = rn >= 0 && v.ok && decompose(c, ust, rn, &v, val, 0);
    }
    for (int d = 0; d < rw.ndim && ok; d++) {
      rw.val[d] = val[rw.node[d]];
      ok = rw.val[d].ok;
    }
    free(val);
    if (!ok) return; /* the tile does not line up with the parts: keep the original layout */
  }
  c->rw[t] = cwm_xmalloc(sizeof rw);
  *c->rw[t] = rw;
}

static void plan_rewrites(ctx_t *c) {
  const cwm_workload *w = cwm_dag_workload(c->s->dag);
  for (int t = 0; t < w->nops && t < CWM_MAX_OPS; t++) plan_rewrite(c, t);
}

static void ctx_free(ctx_t *c) {
  for (int t = 0; t < CWM_MAX_OPS; t++) free(c->rw[t]);
  free(c);
}

/* The index of a read of e->tensor in stage p's body as linear forms over the loops, with each
 * indexed dim's extent: the new layout of a rewritten input, the region of a local buffer, or
 * the tensor's shape. env gives the stage's root values. Returns the number of dims. */
static int read_index(ctx_t *c, int p, const cwm_expr *e, const lin_t *env, lin_t *idx, long *dims) {
  const rewrite_t *rw = e->tensor >= 0 && e->tensor < CWM_MAX_OPS ? c->rw[e->tensor] : NULL;
  if (rw && rw->stage == p) {
    for (int d = 0; d < rw->ndim; d++) {
      idx[d] = rw->val[d];
      dims[d] = rw->extent[d];
    }
    return rw->ndim;
  }
  int q = state_stage_of_tid(c->s, e->tensor);
  const cwm_op *op = tensor_op(c, e->tensor);
  int local = q >= 0 && c->L[q].local;
  int n = e->nargs < CWM_MAX_DIMS ? e->nargs : CWM_MAX_DIMS;
  for (int i = 0; i < n; i++) {
    idx[i] = expr_lin(c, e->args[i], env);
    dims[i] = local ? c->L[q].dims[i] : op->shape[i];
  }
  return n;
}

static void emit_lin(ctx_t *c, const lin_t *l, cwm_buf *o);

static lin_t root_lin(ctx_t *c, int p, int r);

/* Position of the stage's first reduction loop, -1 if it has none. */
static int first_reduce_pos(const cwm_stage *st) {
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
static int guard_bound_term(ctx_t *c, int p, int g, lin_t *l, long *ext) {
  const cwm_stage *st = &c->L[p].st;
  if (g < CWM_MAX_NODES) {
    int node = c->L[p].guard[g];
    *l = node_lin(c, p, node, 0);
    *ext = st->nodes[node].root >= 0 ? st->domain[st->nodes[node].root] : st->nodes[node].extent;
  } else {
    int r = g - CWM_MAX_NODES;
    *l = root_lin(c, p, r);
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
    int first_red = first_reduce_pos(st);
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
  int k = guard_bound_term(c, p, g, &l, &ext);
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

/* The loop bound at position pos of stage p: its extent, or the smallest of the extent and what
 * the guards it absorbed allow. Owned string. */
static char *loop_bound(ctx_t *c, int p, int pos, int in_init) {
  const cwm_stage *st = &c->L[p].st;
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_printf(&b, "%d", st->nodes[st->iters[pos]].extent);
  for (int j = 0; j < c->L[p].nbound[pos]; j++) {
    int g = c->L[p].bound[pos][j];
    /* the init statement has no reduction guard (guard_cond), so its nest has no such bound */
    if (in_init && g < CWM_MAX_NODES && st->nodes[c->L[p].guard[g]].kind != CWM_IT_SPATIAL) continue;
    lin_t l;
    long ext;
    int k = guard_bound_term(c, p, g, &l, &ext);
    if (k < 0) continue; /* cannot happen: planned from the same form */
    long coef = l.coef[k];
    for (int q = k; q + 1 < l.n; q++) l.a[q] = l.a[q + 1], l.coef[q] = l.coef[q + 1];
    l.n--;
    cwm_buf r, e;
    cwm_buf_init(&r);
    cwm_buf_init(&e);
    emit_lin(c, &l, &r);
    if (coef == 1) cwm_buf_printf(&e, "(%ld - (%s))", ext, r.s);
    else cwm_buf_printf(&e, "((%ld - (%s) + %ld) / %ld)", ext, r.s, coef - 1, coef);
    char *prev = cwm_buf_take(&b);
    cwm_buf_init(&b);
    cwm_buf_printf(&b, "(%s < %s ? %s : %s)", prev, e.s, prev, e.s);
    free(prev);
    cwm_buf_free(&r);
    cwm_buf_free(&e);
  }
  return cwm_buf_take(&b);
}

static void lower_all(ctx_t *c) {
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
      if (node_max(st, i, 0) >= ext && c->L[p].nguard < CWM_MAX_NODES) c->L[p].guard[c->L[p].nguard++] = i;
    }
    memset(c->L[p].absorbed, 0, sizeof c->L[p].absorbed);
    memset(c->L[p].gabsorbed, 0, sizeof c->L[p].gabsorbed);
    memset(c->L[p].nbound, 0, sizeof c->L[p].nbound);
    if (!c->text && !c->ref && !c->collect) plan_guard_bounds(c, p);
  }
  c->cur_stage = -1;
  if (!c->ref && !c->work_only) plan_rewrites(c);
}

/* ---- names ---- */

static void sanitize(const char *in, char *out, size_t n) {
  size_t j = 0;
  for (size_t i = 0; in[i] && j + 3 < n; i++) {
    char ch = in[i];
    if (ch == '.') { out[j++] = '_'; out[j++] = '_'; }
    else if (ch == '@') out[j++] = '_';
    else out[j++] = ch;
  }
  out[j] = 0;
}

static void buf_name(ctx_t *c, int tid, char *out, size_t n) {
  const cwm_op *op = tensor_op(c, tid);
  if (c->text) snprintf(out, n, "%s", op->name);
  else sanitize(op->name, out, n);
  /* the kernel's parameter for a rewritten input holds the converted copy */
  if (!c->text && tid >= 0 && tid < CWM_MAX_OPS && c->rw[tid]) {
    size_t len = strlen(out);
    snprintf(out + len, n - len, "_packed");
  }
}

static void var_name(ctx_t *c, int p, int node, char *out, size_t n) {
  for (int i = 0; i < c->nov; i++)
    if (c->ov_stage == p && c->ov_node[i] == node) {
      snprintf(out, n, "%ld", c->ov_val[i]);
      return;
    }
  char nm[256];
  cwm_node_name(c->s, p, node, nm, sizeof nm);
  if (c->text) {
    snprintf(out, n, "%s", nm);
    return;
  }
  char san[256];
  size_t j = 0;
  for (size_t i = 0; nm[i] && j + 2 < sizeof san && j < 40; i++)
    san[j++] = (nm[i] == '.' || nm[i] == '@') ? '_' : nm[i];
  san[j] = 0;
  snprintf(out, n, "%s__%d_%d", san, p, node);
}

/* ---- expression emission ---- */

static void emit_node_value(ctx_t *c, int p, int node, cwm_buf *o, int depth) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_node *n = &st->nodes[node];
  char nm[300];
  if (depth > 64) { cwm_buf_puts(o, "0"); return; }
  if (n->extent == 1 && (is_leaf(st, node) || !n->nparts)) {
    cwm_buf_puts(o, "0"); /* a loop or fused component of extent 1 is always 0 */
  } else if (is_leaf(st, node)) {
    var_name(c, p, node, nm, sizeof nm);
    cwm_buf_puts(o, nm);
  } else if (n->nparts) {
    int first = 1;
    for (int k = 0; k < n->nparts; k++) {
      long stride = split_stride(st, n, k);
      const cwm_node *pk = &st->nodes[n->parts[k]];
      if (pk->extent == 1 && (is_leaf(st, n->parts[k]) || !pk->nparts) && k < n->nparts - 1) continue;
      if (!first) cwm_buf_puts(o, " + ");
      first = 0;
      if (stride != 1) {
        cwm_buf_puts(o, "(");
        emit_node_value(c, p, n->parts[k], o, depth + 1);
        cwm_buf_printf(o, ")*%ld", stride);
      } else {
        emit_node_value(c, p, n->parts[k], o, depth + 1);
      }
    }
  } else if (n->fused >= 0) {
    long stride = fuse_stride(st, n->fused, node);
    const cwm_node *f = &st->nodes[n->fused];
    int outermost = f->sub[0] == node;
    cwm_buf_puts(o, "((");
    emit_node_value(c, p, n->fused, o, depth + 1);
    cwm_buf_puts(o, ")");
    if (stride != 1) cwm_buf_printf(o, " / %ld", stride);
    if (!outermost) cwm_buf_printf(o, " %% %d", n->extent);
    cwm_buf_puts(o, ")");
  } else {
    cwm_buf_puts(o, "0");
  }
}

static void emit_lin(ctx_t *c, const lin_t *l, cwm_buf *o) {
  if (l->c0 || !l->n) cwm_buf_printf(o, "%ld", l->c0);
  for (int i = 0; i < l->n; i++) {
    const atom_t *a = &l->a[i];
    char nm[300];
    var_name(c, a->stage, a->node, nm, sizeof nm);
    if (i || l->c0) cwm_buf_puts(o, " + ");
    if (l->coef[i] != 1) cwm_buf_printf(o, "%ld*", l->coef[i]);
    if (a->div == 1 && !a->mod) cwm_buf_puts(o, nm);
    else {
      cwm_buf_printf(o, "(%s", nm);
      if (a->div != 1) cwm_buf_printf(o, " / %ld", a->div);
      if (a->mod) cwm_buf_printf(o, " %% %ld", a->mod);
      cwm_buf_puts(o, ")");
    }
  }
}

/* Value of root r of stage p: local part only (for local buffers) or global. */
static char *root_value(ctx_t *c, int p, int r, int global) {
  const cwm_stage *st = &c->L[p].st;
  cwm_buf o;
  cwm_buf_init(&o);
  int node = -1;
  for (int i = 0; i < st->nnodes; i++)
    if (st->nodes[i].root == r) { node = i; break; }
  int based = global && c->L[p].local && r < body_op(c, p)->ndim && (c->L[p].base[r].n || c->L[p].base[r].c0);
  if (based) {
    cwm_buf_puts(&o, "(");
    emit_lin(c, &c->L[p].base[r], &o);
    cwm_buf_puts(&o, " + ");
  }
  if (node >= 0) emit_node_value(c, p, node, &o, 0);
  else cwm_buf_puts(&o, "0");
  if (based) cwm_buf_puts(&o, ")");
  /* parenthesise compound values: they are substituted into larger index expressions */
  if (!based && strpbrk(o.s, " +*/%")) {
    cwm_buf w;
    cwm_buf_init(&w);
    cwm_buf_printf(&w, "(%s)", o.s);
    cwm_buf_free(&o);
    return cwm_buf_take(&w);
  }
  return cwm_buf_take(&o);
}

static void emit_float(ctx_t *c, double v, cwm_buf *o) {
  char t[64];
  snprintf(t, sizeof t, "%.9g", v);
  if (c->text) { cwm_buf_puts(o, t); return; }
  if (!strchr(t, '.') && !strchr(t, 'e') && !strchr(t, 'n')) strcat(t, ".0");
  if (strchr(t, 'n')) snprintf(t, sizeof t, "%s", v > 0 ? "INFINITY" : v < 0 ? "(-INFINITY)" : "NAN");
  cwm_buf_puts(o, t);
  if (!c->ref && !strchr(t, 'I') && !strchr(t, 'N')) cwm_buf_puts(o, "f");
}

static void emit_expr(ctx_t *c, const cwm_expr *e, char **env, cwm_buf *o, int depth);

static void emit_read(ctx_t *c, const cwm_expr *e, char **env, cwm_buf *o, int depth) {
  int nidx = e->nargs;
  char *idx[CWM_MAX_DIMS + 1];
  for (int i = 0; i < nidx && i <= CWM_MAX_DIMS; i++) {
    cwm_buf t;
    cwm_buf_init(&t);
    emit_expr(c, e->args[i], env, &t, depth + 1);
    idx[i] = cwm_buf_take(&t);
  }
  int q = state_stage_of_tid(c->s, e->tensor);
  if (q >= 0 && c->s->stages[q].loc == CWM_LOC_INLINE && depth < 32) {
    char *env2[CWM_MAX_DIMS * 2];
    for (int i = 0; i < nidx; i++) {
      size_t n = strlen(idx[i]) + 3;
      env2[i] = cwm_xmalloc(n);
      snprintf(env2[i], n, "(%s)", idx[i]);
    }
    cwm_buf_puts(o, "(");
    emit_expr(c, body_op(c, q)->body, env2, o, depth + 1);
    cwm_buf_puts(o, ")");
    for (int i = 0; i < nidx; i++) free(env2[i]);
  } else if (e->tensor >= 0 && e->tensor < CWM_MAX_OPS && c->rw[e->tensor]) {
    /* a rewritten input: indexed by the loops its layout follows */
    const rewrite_t *rw = c->rw[e->tensor];
    char nm[128];
    buf_name(c, e->tensor, nm, sizeof nm);
    if (rw->stage != c->cur_stage && !c->failed) {
      c->failed = 1;
      cwm_fail(c->err, CWM_EINTERNAL, "rewritten input %s read outside stage %d", nm, rw->stage);
    }
    cwm_buf_printf(o, "%s[", nm);
    for (int d = 0; d < rw->ndim; d++) {
      if (c->text) {
        cwm_buf_puts(o, d ? ", " : "");
        emit_lin(c, &rw->val[d], o);
      } else {
        cwm_buf_puts(o, d ? " + (" : "(");
        emit_lin(c, &rw->val[d], o);
        cwm_buf_puts(o, ")");
        if (rw->stride[d] != 1) cwm_buf_printf(o, "*%ld", rw->stride[d]);
      }
    }
    if (!rw->ndim) cwm_buf_puts(o, "0");
    cwm_buf_puts(o, "]");
  } else {
    char nm[128];
    buf_name(c, e->tensor, nm, sizeof nm);
    const cwm_op *op = tensor_op(c, e->tensor);
    if (c->ref && !c->text) cwm_buf_puts(o, "(double)");
    if (c->text) {
      cwm_buf_printf(o, "%s[", nm);
      for (int i = 0; i < nidx; i++) cwm_buf_printf(o, "%s%s", i ? ", " : "", idx[i]);
      cwm_buf_puts(o, "]");
    } else {
      int local = q >= 0 && c->L[q].local;
      cwm_buf_printf(o, "%s[", nm);
      for (int i = 0; i < nidx; i++) {
        long stride = 1;
        for (int j = i + 1; j < nidx; j++) stride *= local ? c->L[q].dims[j] : op->shape[j];
        if (i) cwm_buf_puts(o, " + ");
        cwm_buf_printf(o, "(%s", idx[i]);
        if (local && (c->L[q].base[i].n || c->L[q].base[i].c0)) {
          cwm_buf_puts(o, " - (");
          emit_lin(c, &c->L[q].base[i], o);
          cwm_buf_puts(o, ")");
        }
        cwm_buf_puts(o, ")");
        if (stride != 1) cwm_buf_printf(o, "*%ld", stride);
      }
      if (!nidx) cwm_buf_puts(o, "0");
      cwm_buf_puts(o, "]");
    }
  }
  for (int i = 0; i < nidx; i++) free(idx[i]);
}

static const char *fn_c(ctx_t *c, int fn) {
  static const char *f32[] = {"cwm_expf", "tanhf", "cwm_erff", "sqrtf", "rsqrt", "cwm_fmaxf", "cwm_fminf", "gelu", "relu"};
  if (!c->ref && (fn == CWM_FN_EXP || fn == CWM_FN_ERF || fn == CWM_FN_MAX || fn == CWM_FN_MIN)) c->used_math = 1;
  static const char *f64[] = {"exp", "tanh", "erf", "sqrt", "rsqrt", "fmax", "fmin", "gelu", "relu"};
  return (c->ref ? f64 : f32)[fn];
}

static void emit_expr(ctx_t *c, const cwm_expr *e, char **env, cwm_buf *o, int depth) {
  if (depth > 200) { cwm_buf_puts(o, "0"); return; }
  switch (e->kind) {
  case CWM_X_CONST:
    if (e->is_int) cwm_buf_printf(o, "%ld", (long)e->value);
    else emit_float(c, e->value, o);
    break;
  case CWM_X_VAR: cwm_buf_puts(o, env[e->var]); break;
  case CWM_X_READ: emit_read(c, e, env, o, depth); break;
  case CWM_X_BIN:
    cwm_buf_puts(o, "(");
    emit_expr(c, e->args[0], env, o, depth + 1);
    cwm_buf_printf(o, " %c ", e->op);
    emit_expr(c, e->args[1], env, o, depth + 1);
    cwm_buf_puts(o, ")");
    break;
  case CWM_X_NEG:
    cwm_buf_puts(o, "(-");
    emit_expr(c, e->args[0], env, o, depth + 1);
    cwm_buf_puts(o, ")");
    break;
  case CWM_X_CALL: {
    const char *half = c->ref ? "0.5" : "0.5f", *one = c->ref ? "1.0" : "1.0f";
    if (c->text) {
      cwm_buf_printf(o, "%s(", cwm_fn_name((cwm_fn)e->op));
      for (int i = 0; i < e->nargs; i++) {
        if (i) cwm_buf_puts(o, ", ");
        emit_expr(c, e->args[i], env, o, depth + 1);
      }
      cwm_buf_puts(o, ")");
    } else if (e->op == CWM_FN_GELU || e->op == CWM_FN_RELU || e->op == CWM_FN_RSQRT) {
      /* statement expression: the argument is evaluated once */
      int t = c->tmp++;
      const char *ty = c->ref ? "double" : "float";
      cwm_buf_printf(o, "({ %s x_%d = ", ty, t);
      emit_expr(c, e->args[0], env, o, depth + 1);
      cwm_buf_puts(o, "; ");
      if (e->op == CWM_FN_GELU)
        cwm_buf_printf(o, "%s * x_%d * (%s + %s(x_%d * %s));", half, t, one, fn_c(c, CWM_FN_ERF), t,
                       c->ref ? "0.70710678118654752" : "0.707106781f");
      else if (e->op == CWM_FN_RELU)
        cwm_buf_printf(o, "x_%d > 0 ? x_%d : %s;", t, t, c->ref ? "0.0" : "0.0f");
      else
        cwm_buf_printf(o, "%s / %s(x_%d);", one, c->ref ? "sqrt" : "sqrtf", t);
      cwm_buf_puts(o, " })");
    } else {
      cwm_buf_printf(o, "%s(", fn_c(c, e->op));
      for (int i = 0; i < e->nargs; i++) {
        if (i) cwm_buf_puts(o, ", ");
        emit_expr(c, e->args[i], env, o, depth + 1);
      }
      cwm_buf_puts(o, ")");
    }
    break;
  }
  case CWM_X_SELECT:
    cwm_buf_puts(o, "(");
    emit_expr(c, e->args[0], env, o, depth + 1);
    cwm_buf_puts(o, " ? ");
    emit_expr(c, e->args[1], env, o, depth + 1);
    cwm_buf_puts(o, " : ");
    emit_expr(c, e->args[2], env, o, depth + 1);
    cwm_buf_puts(o, ")");
    break;
  case CWM_X_CMP: {
    const char *op = e->op == '<' ? "<" : e->op == 'l' ? "<=" : e->op == '>' ? ">" : e->op == 'g' ? ">="
                   : e->op == '=' ? "==" : "!=";
    cwm_buf_puts(o, "(");
    emit_expr(c, e->args[0], env, o, depth + 1);
    cwm_buf_printf(o, " %s ", op);
    emit_expr(c, e->args[1], env, o, depth + 1);
    cwm_buf_puts(o, ")");
    break;
  }
  case CWM_X_AND:
  case CWM_X_OR:
    cwm_buf_puts(o, "(");
    emit_expr(c, e->args[0], env, o, depth + 1);
    cwm_buf_puts(o, e->kind == CWM_X_AND ? " && " : " || ");
    emit_expr(c, e->args[1], env, o, depth + 1);
    cwm_buf_puts(o, ")");
    break;
  case CWM_X_NOT:
    cwm_buf_puts(o, "(!");
    emit_expr(c, e->args[0], env, o, depth + 1);
    cwm_buf_puts(o, ")");
    break;
  }
}

/* ---- statements and loop nests ---- */

static void line(ctx_t *c, int depth, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void line(ctx_t *c, int depth, const char *fmt, ...) {
  cwm_buf_indent(c->b, depth);
  va_list ap;
  va_start(ap, fmt);
  cwm_buf_vprintf(c->b, fmt, ap);
  va_end(ap);
  cwm_buf_putc(c->b, '\n');
}

/* Appends " && (value of split node) < its extent" to o (no " && " when o is empty). */
static void append_split_guard(ctx_t *c, int p, int node, cwm_buf *o) {
  const cwm_stage *st = &c->L[p].st;
  long ext = st->nodes[node].root >= 0 ? st->domain[st->nodes[node].root] : st->nodes[node].extent;
  cwm_buf v;
  cwm_buf_init(&v);
  emit_node_value(c, p, node, &v, 0);
  cwm_buf_printf(o, "%s(%s) < %ld", o->len ? " && " : "", v.s, ext);
  cwm_buf_free(&v);
}

/* Guard condition of stage p (spatial roots only when init), or empty. */
static char *guard_cond(ctx_t *c, int p, int init) {
  const cwm_op *b = body_op(c, p);
  cwm_buf o;
  cwm_buf_init(&o);
  int nroot = b->ndim + b->nred;
  const cwm_stage *st = &c->L[p].st;
  for (int g = 0; g < c->L[p].nguard; g++) {
    int node = c->L[p].guard[g];
    if (init && st->nodes[node].kind != CWM_IT_SPATIAL) continue;
    if (c->L[p].absorbed[g]) continue; /* a loop bound already (loop_bound) */
    append_split_guard(c, p, node, &o);
  }
  for (int r = 0; r < nroot; r++) {
    if (init && r >= b->ndim) continue;
    if (init && c->L[p].st.tid != c->L[p].st.body_tid && tensor_op(c, c->L[p].st.tid)->ndim != b->ndim) {
      /* rfactor stage: roots of the init are the spatial ones; fine */
    }
    if (c->L[p].local && r < b->ndim && c->L[p].gguard[r] && !c->L[p].gabsorbed[r]) {
      char *v = root_value(c, p, r, 1);
      cwm_buf_printf(&o, "%s%s >= 0 && %s < %d", o.len ? " && " : "", v, v, b->shape[r]);
      free(v);
    }
  }
  return cwm_buf_take(&o);
}

static void emit_store_target(ctx_t *c, int p, cwm_buf *o) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *top = tensor_op(c, st->tid);
  char nm[128];
  buf_name(c, st->tid, nm, sizeof nm);
  char *idx[CWM_MAX_DIMS];
  for (int d = 0; d < st->nout; d++) {
    int node = st->out_node[d];
    if (st->nodes[node].root >= 0) idx[d] = root_value(c, p, st->nodes[node].root, c->text || !c->L[p].local);
    else {
      cwm_buf t;
      cwm_buf_init(&t);
      emit_node_value(c, p, node, &t, 0);
      idx[d] = cwm_buf_take(&t);
    }
  }
  cwm_buf_printf(o, "%s[", nm);
  for (int d = 0; d < st->nout; d++) {
    if (c->text) {
      cwm_buf_printf(o, "%s%s", d ? ", " : "", idx[d]);
    } else {
      long stride = 1;
      for (int j = d + 1; j < st->nout; j++) stride *= c->L[p].local ? c->L[p].dims[j] : top->shape[j];
      cwm_buf_printf(o, "%s(%s)", d ? " + " : "", idx[d]);
      if (stride != 1) cwm_buf_printf(o, "*%ld", stride);
    }
    free(idx[d]);
  }
  if (!st->nout) cwm_buf_puts(o, "0");
  cwm_buf_puts(o, "]");
}

static void emit_guarded(ctx_t *c, int depth, const char *cond, const char *stmt) {
  if (cond[0]) {
    if (c->text) line(c, depth, "if (%s) %s", cond, stmt);
    else line(c, depth, "if (%s) %s;", cond, stmt);
  } else {
    line(c, depth, "%s%s", stmt, c->text ? "" : ";");
  }
}

static const char *init_value(ctx_t *c, cwm_reduce r) {
  if (r == CWM_RED_SUM) return c->text ? "0" : c->ref ? "0.0" : "0.0f";
  if (r == CWM_RED_MAX) return c->text ? "-inf" : "-INFINITY";
  return c->text ? "inf" : "INFINITY";
}

static void collect_store(ctx_t *c, int p, int is_init);
static void emit_init_stmt(ctx_t *c, int p, int depth) {
  const cwm_op *b = body_op(c, p);
  if (c->collect) collect_store(c, p, 1);
  cwm_buf o;
  cwm_buf_init(&o);
  emit_store_target(c, p, &o);
  cwm_buf_printf(&o, " = %s", init_value(c, b->reduce));
  char *cond = guard_cond(c, p, 1);
  emit_guarded(c, depth, cond, o.s);
  free(cond);
  cwm_buf_free(&o);
}

static void emit_update_stmt(ctx_t *c, int p, int depth) {
  const cwm_op *b = body_op(c, p);
  if (c->collect) collect_store(c, p, 0);
  c->cur_stage = p;
  int nroot = b->ndim + b->nred;
  char *env[CWM_MAX_DIMS * 2];
  for (int r = 0; r < nroot; r++) env[r] = root_value(c, p, r, 1);
  cwm_buf val, tgt, o;
  cwm_buf_init(&val);
  cwm_buf_init(&tgt);
  cwm_buf_init(&o);
  emit_expr(c, b->body, env, &val, 0);
  emit_store_target(c, p, &tgt);
  if (b->reduce == CWM_RED_NONE) cwm_buf_printf(&o, "%s = %s", tgt.s, val.s);
  else if (c->text) cwm_buf_printf(&o, "%s %s= %s", tgt.s, b->reduce == CWM_RED_SUM ? "+" : b->reduce == CWM_RED_MAX ? "max" : "min", val.s);
  else if (b->reduce == CWM_RED_SUM) cwm_buf_printf(&o, "%s = %s + %s", tgt.s, tgt.s, val.s);
  else cwm_buf_printf(&o, "%s = %s(%s, %s)", tgt.s, fn_c(c, b->reduce == CWM_RED_MAX ? CWM_FN_MAX : CWM_FN_MIN), tgt.s, val.s);
  char *cond = guard_cond(c, p, 0);
  emit_guarded(c, depth, cond, o.s);
  free(cond);
  c->cur_stage = -1;
  for (int r = 0; r < nroot; r++) free(env[r]);
  cwm_buf_free(&val);
  cwm_buf_free(&tgt);
  cwm_buf_free(&o);
}

/* Rough size of the code inside loop position pos of stage p (statements after full unrolling),
 * attached stages included; bounds explicit unrolling. */
static long body_work(ctx_t *c, int p, int pos) {
  /* W(j) = extent_j * (W(j+1) + the work of the stages attached at loop j); W(end) = 1 */
  const cwm_stage *st = &c->L[p].st;
  if (pos >= st->niters) return 1;
  long inner = body_work(c, p, pos + 1);
  for (int q = 0; q < c->s->nstages && inner < (1L << 40); q++) {
    const cwm_stage *sq = &c->s->stages[q];
    if (sq->loc == CWM_LOC_ITER && sq->attach_stage == p && sq->attach_node == st->iters[pos])
      inner += body_work(c, q, 0);
  }
  long w = inner * st->nodes[st->iters[pos]].extent;
  return w > (1L << 40) ? (1L << 40) : w;
}

/* Opens a loop; returns 1 if it opened a parallel region. */
static int open_loop_(ctx_t *c, int p, int pos, int depth, int in_init);
static int open_loop(ctx_t *c, int p, int pos, int depth, int in_init) {
  int r = open_loop_(c, p, pos, depth, in_init);
  if (c->nloop < CWM_STORE_MAX_LOOPS) {
    const cwm_stage *st = &c->L[p].st;
    const cwm_node *n = &st->nodes[st->iters[pos]];
    c->loop[c->nloop].stage = p;
    c->loop[c->nloop].node = st->iters[pos];
    c->loop[c->nloop].extent = n->extent;
    c->loop[c->nloop].ann = in_init && n->ann == CWM_ANN_PARALLEL ? 0 : n->ann;
    c->loop[c->nloop].unroll = c->last_unroll;
    c->loop[c->nloop].reduce = n->kind == CWM_IT_REDUCE;
  }
  c->nloop++;
  return r;
}
static int open_loop_(ctx_t *c, int p, int pos, int depth, int in_init) {
  const cwm_stage *st = &c->L[p].st;
  int node = st->iters[pos];
  const cwm_node *n = &st->nodes[node];
  char nm[300];
  var_name(c, p, node, nm, sizeof nm);
  int ann = n->ann;
  if (in_init && ann == CWM_ANN_PARALLEL) ann = CWM_ANN_NONE;
  int unroll = 0;
  if (ann == CWM_ANN_UNROLL) {
    /* explicit unroll is a full unroll, bounded so a huge body cannot stall the compiler */
    long inner = body_work(c, p, pos) / (n->extent > 0 ? n->extent : 1);
    unroll = (long)n->extent * inner <= 512 ? n->extent : (int)(inner >= 64 ? 1 : 64 / inner);
  }
  if (!unroll && st->auto_unroll > 0) {
    long prod = 1;
    for (int j = pos; j < st->niters && prod <= st->auto_unroll; j++) {
      if (in_init && st->nodes[st->iters[j]].kind != CWM_IT_SPATIAL) continue;
      prod *= st->nodes[st->iters[j]].extent;
    }
    /* stages attached inside count too: unrolling their nests is what TVM's step count limits */
    if (!in_init && prod <= st->auto_unroll) prod = body_work(c, p, pos);
    unroll = prod <= st->auto_unroll ? n->extent : 0;
  }
  c->last_unroll = unroll > 1 || ann == CWM_ANN_UNROLL;
  if (c->text) {
    const char *kw = ann == CWM_ANN_PARALLEL ? "parallel" : ann == CWM_ANN_VECTORIZE ? "vectorize"
                   : ann == CWM_ANN_UNROLL ? "unroll" : "for";
    line(c, depth, "%s %s (0,%d)%s", kw, nm, n->extent, unroll && ann != CWM_ANN_UNROLL ? " auto_unroll" : "");
    return 0;
  }
  /* returns a bit set: 1 opened a parallel region, 2 opened a simd loop */
  int par = 0;
  char bnd[340];
  snprintf(bnd, sizeof bnd, "%d", n->extent);
  char *e = c->L[p].nbound[pos] ? loop_bound(c, p, pos, in_init) : NULL;
  if (e && strcmp(e, bnd) == 0) {
    free(e);
    e = NULL;
  }
  if (e) {
    /* a named bound before the pragmas: GCC drops an unroll annotation on a loop whose
     * condition holds a conditional expression; the name is unique in the kernel */
    snprintf(bnd, sizeof bnd, "%s_n%d", nm, c->nbounds++);
    line(c, depth, "const int %s = %s;", bnd, e);
    free(e);
  }
  if (ann == CWM_ANN_PARALLEL && c->par_depth == 0 && c->simd_depth == 0 && n->extent > 1) {
    line(c, depth, "#pragma omp parallel for");
    c->par_depth++;
    par = 1;
  } else if (ann == CWM_ANN_VECTORIZE) {
    line(c, depth, "#pragma omp simd");
    c->simd_depth++;
    par = 2;
  } else if (unroll > 1) {
    line(c, depth, "#pragma GCC unroll %d", unroll);
  }
  line(c, depth, "for (int %s = 0; %s < %s; ++%s) {", nm, nm, bnd, nm);
  return par;
}

static void close_loop(ctx_t *c, int depth, int par) {
  if (c->nloop > 0) c->nloop--;
  if (!c->text) line(c, depth, "}");
  if (par & 1) c->par_depth--;
  if (par & 2) c->simd_depth--;
}

static void emit_stage(ctx_t *c, int p, int depth);

/* ---- register tiles ----
 * A reduction loop whose body is a small nest of unrolled spatial loops ending in a vectorized
 * contiguous loop is emitted with the tile's accumulators in vector variables: loaded before
 * the reduction loop, updated with explicit vector arithmetic, stored after. This is what lets
 * a cache-write stage live in registers; GCC does not reliably promote it on its own. */

#define MAX_ACC 24
#define CSE_MAX 64
typedef struct cse_s {
  int n;
  char *text[CSE_MAX];
  int vec[CSE_MAX];
} cse_t;

/* Flattened-index stride of leaf node `leaf` of stage p in an index over dims, or -1 if unknown. */
static long flat_stride(int p, int leaf, const lin_t *idx, const long *dims, int nidx) {
  long stride = 1, total = 0;
  for (int d = nidx - 1; d >= 0; d--) {
    if (!idx[d].ok) return -1;
    for (int k = 0; k < idx[d].n; k++) {
      const atom_t *a = &idx[d].a[k];
      if (a->stage == p && a->node == leaf) {
        if (a->div != 1 || a->mod) return -1;
        total += stride * idx[d].coef[k];
      }
    }
    stride *= dims[d];
  }
  return total;
}

/* Vector form of a body expression; returns 1 (vector), 0 (scalar) or -1 (not expressible). */
static int emit_vexpr(ctx_t *c, int p, int leaf, const cwm_expr *e, char **env, const lin_t *lenv, cwm_buf *o) {
  switch (e->kind) {
  case CWM_X_CONST:
    emit_float(c, e->value, o);
    return 0;
  case CWM_X_READ: {
    int q = state_stage_of_tid(c->s, e->tensor);
    if (q >= 0 && c->s->stages[q].loc == CWM_LOC_INLINE) return -1;
    lin_t idx[RW_MAX_DIMS];
    long dims[RW_MAX_DIMS];
    int nidx = read_index(c, p, e, lenv, idx, dims);
    long st = flat_stride(p, leaf, idx, dims, nidx);
    if (st != 0 && st != 1) return -1;
    cwm_buf r;
    cwm_buf_init(&r);
    if (st == 1) cwm_buf_puts(&r, c->vw == 16 ? "CWM_LOADU16(&" : "CWM_LOADU(&");
    emit_read(c, e, env, &r, 0);
    if (st == 1) cwm_buf_puts(&r, ")");
    if (c->cse) {
      /* each distinct read once per iteration, into a register temporary */
      int k = 0;
      while (k < c->cse->n && strcmp(c->cse->text[k], r.s)) k++;
      if (k == c->cse->n && k < CSE_MAX) {
        c->cse->text[k] = cwm_xstrdup(r.s);
        c->cse->vec[k] = (int)st;
        c->cse->n++;
      }
      if (k < CSE_MAX) {
        cwm_buf_free(&r);
        cwm_buf_printf(o, "t%d", k);
        return (int)st;
      }
    }
    cwm_buf_puts(o, r.s);
    cwm_buf_free(&r);
    return (int)st;
  }
  case CWM_X_BIN: {
    if (e->op == '%') return -1;
    cwm_buf a, b;
    cwm_buf_init(&a);
    cwm_buf_init(&b);
    int ka = emit_vexpr(c, p, leaf, e->args[0], env, lenv, &a);
    int kb = ka < 0 ? -1 : emit_vexpr(c, p, leaf, e->args[1], env, lenv, &b);
    if (kb >= 0) cwm_buf_printf(o, "(%s %c %s)", a.s, e->op, b.s);
    cwm_buf_free(&a);
    cwm_buf_free(&b);
    return kb < 0 ? -1 : (ka | kb);
  }
  case CWM_X_NEG: {
    cwm_buf a;
    cwm_buf_init(&a);
    int k = emit_vexpr(c, p, leaf, e->args[0], env, lenv, &a);
    if (k >= 0) cwm_buf_printf(o, "(-%s)", a.s);
    cwm_buf_free(&a);
    return k;
  }
  default:
    return -1;
  }
}

/* Every reduction loop before position pos has extent 1. */
static int reduction_outside_is_trivial(const cwm_stage *st, int pos) {
  for (int j = 0; j < pos; j++)
    if (st->nodes[st->iters[j]].kind != CWM_IT_SPATIAL && st->nodes[st->iters[j]].extent != 1) return 0;
  return 1;
}

/* A register tile at loop position pos of stage p: the reduction loops pos..first-1 enclose the
 * spatial tile loops first..last (the last vectorized, VW lanes), nacc vector accumulators, the
 * store target's stride sst along the vector leaf. */
typedef struct {
  int first, last, vw;
  long nacc, sst;
} rtile_t;

/* Whether some stage is attached in stage p at one of its loop positions from..to. */
static int attached_in_loops(const ctx_t *c, int p, int from, int to) {
  const cwm_stage *st = &c->L[p].st;
  for (int j = from < 0 ? 0 : from; j <= to && j < st->niters; j++)
    for (int q = 0; q < c->s->nstages; q++)
      if (c->s->stages[q].loc == CWM_LOC_ITER && c->s->stages[q].attach_stage == p &&
          c->s->stages[q].attach_node == st->iters[j])
        return 1;
  return 0;
}

/* The position of the loop whose bound carries guard g of stage p (plan_bound), or -1. */
static int guard_bound_pos(const ctx_t *c, int p, int g) {
  for (int pos = 0; pos < c->L[p].st.niters; pos++)
    for (int j = 0; j < c->L[p].nbound[pos]; j++)
      if (c->L[p].bound[pos][j] == g) return pos;
  return -1;
}

/* A tile of a guarded stage (a split that does not divide its extent, or a region that may leave
 * the tensor) may be emitted without its guards where it lies wholly inside (tile_inside_cond,
 * tested at run time): every spatial guard is then true, and every reduction guard must be a loop
 * bound of a loop outside the tile loops (pos..first-1 are opened by the tile itself). A region
 * guard's tile terms must grow with the loops, so that the tile's corners bound it. */
static int guards_fit_tile(ctx_t *c, int p, int pos, int first) {
  const cwm_stage *st = &c->L[p].st;
  for (int g = 0; g < c->L[p].nguard; g++) {
    if (st->nodes[c->L[p].guard[g]].kind == CWM_IT_SPATIAL) continue;
    int bp = c->L[p].absorbed[g] ? guard_bound_pos(c, p, g) : -1;
    if (bp < 0 || bp >= first) return 0;
  }
  const cwm_op *b = body_op(c, p);
  for (int r = 0; r < b->ndim; r++) {
    if (!c->L[p].local || !c->L[p].gguard[r]) continue;
    lin_t l = root_lin(c, p, r);
    if (!l.ok) return 0;
    for (int k = 0; k < l.n; k++) {
      if (l.a[k].stage != p) continue;
      int at = stage_iter_pos(st, l.a[k].node);
      if (at >= first && (l.coef[k] <= 0 || l.a[k].div != 1 || l.a[k].mod)) return 0;
    }
  }
  /* the slow path (emit_stage_rest) would emit stages attached inside the tile; the tile does not */
  return !attached_in_loops(c, p, pos, st->niters - 1);
}

/* Whether a register tile applies at pos (its checks, and a probe of the body for the first tile
 * element, emitted nowhere): the plan in *rt. Emits nothing. `unguarded`: a guarded stage's tile
 * for the case that it lies wholly inside (guards_fit_tile). */
static int register_tile_plan(ctx_t *c, int p, int pos, rtile_t *rt, int unguarded) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *b = body_op(c, p);
  if (c->text || c->ref || c->collect || b->reduce != CWM_RED_SUM) return 0;
  if (st->nodes[st->iters[pos]].kind != CWM_IT_REDUCE) return 0;
  int guarded = c->L[p].nguard > 0;
  for (int d = 0; d < b->ndim; d++) guarded |= c->L[p].local && c->L[p].gguard[d];
  if (guarded != !!unguarded) return 0;
  /* reduction loops pos..first-1 enclose the tile loops first..last */
  int first = pos, last = st->niters - 1;
  while (first <= last && st->nodes[st->iters[first]].kind == CWM_IT_REDUCE) first++;
  if (first > last || last - first + 1 > 4) return 0;
  if (unguarded && !guards_fit_tile(c, p, pos, first)) return 0;
  int vleaf = st->iters[last];
  const cwm_node *vn = &st->nodes[vleaf];
  if (vn->ann != CWM_ANN_VECTORIZE) return 0;
  /* one 16-lane vector per 16 contiguous elements where the machine has them, else 8-lane */
  const int VW = c->max_lanes >= 16 && vn->extent % 16 == 0 ? 16 : 8;
  if (vn->extent % VW) return 0;
  c->vw = VW;
  long nacc = vn->extent / VW, tile = vn->extent;
  for (int j = first; j < last; j++) {
    const cwm_node *n = &st->nodes[st->iters[j]];
    if (n->kind != CWM_IT_SPATIAL || n->ann == CWM_ANN_PARALLEL || n->ann == CWM_ANN_VECTORIZE) return 0;
    nacc *= n->extent;
    tile *= n->extent;
  }
  if (nacc > MAX_ACC) return 0;
  /* the schedule must have asked for the tile to be unrolled */
  if (last > first) {
    int explicit_unroll = 1;
    for (int j = first; j < last; j++)
      if (st->nodes[st->iters[j]].ann != CWM_ANN_UNROLL) explicit_unroll = 0;
    if (!explicit_unroll && !(st->auto_unroll > 0 && tile <= st->auto_unroll)) return 0;
  }
  if (attached_in_loops(c, p, first - 1, last)) return 0;
  /* the store target's stride along the vector leaf */
  long sst = 1;
  lin_t tidx[CWM_MAX_DIMS];
  for (int d = 0; d < st->nout; d++) {
    int node = st->out_node[d];
    lin_t l = node_lin(c, p, node, 0);
    if (c->L[p].local || st->nodes[node].root < 0) tidx[d] = l; /* local coordinates */
    else tidx[d] = root_lin(c, p, st->nodes[node].root);
  }
  int nroot = b->ndim + b->nred;
  lin_t lenv[CWM_MAX_DIMS * 2];
  for (int r = 0; r < nroot; r++) lenv[r] = root_lin(c, p, r);
  if (c->L[p].local) {
    /* local buffers are indexed relative to their base: strides come from the region dims */
  }
  {
    int q = p;
    long stv = 0, stride = 1;
    const cwm_op *top = tensor_op(c, st->tid);
    for (int d = st->nout - 1; d >= 0; d--) {
      if (!tidx[d].ok) return 0;
      for (int k = 0; k < tidx[d].n; k++)
        if (tidx[d].a[k].stage == p && tidx[d].a[k].node == vleaf) {
          if (tidx[d].a[k].div != 1 || tidx[d].a[k].mod) return 0;
          stv += stride * tidx[d].coef[k];
        }
      stride *= c->L[q].local ? c->L[q].dims[d] : top->shape[d];
    }
    if (stv < 1) return 0;
    sst = stv; /* > 1: the vector leaf is not the store's last axis (a strided load and store) */
  }
  /* try the body for the first tile element to see that it vectorizes */
  char *env[CWM_MAX_DIMS * 2];
  int nt = last - first + 1;
  c->ov_stage = p;
  c->nov = nt;
  for (int j = 0; j < nt; j++) c->ov_node[j] = st->iters[first + j];
  cwm_buf probe;
  cwm_buf_init(&probe);
  for (int j = 0; j < nt; j++) c->ov_val[j] = 0;
  for (int r = 0; r < nroot; r++) env[r] = root_value(c, p, r, 1);
  c->cur_stage = p;
  int kind = emit_vexpr(c, p, vleaf, b->body, env, lenv, &probe);
  c->cur_stage = -1;
  for (int r = 0; r < nroot; r++) free(env[r]);
  cwm_buf_free(&probe);
  c->nov = 0;
  if (kind < 0) return 0;
  rt->first = first;
  rt->last = last;
  rt->vw = VW;
  rt->nacc = nacc;
  rt->sst = sst;
  return 1;
}

/* The run-time condition under which the tile of plan rt lies wholly inside its stage's guards:
 * every spatial guard, and every region guard at both corners, holds with the tile loops at their
 * last (and, for regions, first) values. Owned string; empty when nothing needs testing. */
static char *tile_inside_cond(ctx_t *c, int p, const rtile_t *rt) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *b = body_op(c, p);
  int nt = rt->last - rt->first + 1;
  cwm_buf o;
  cwm_buf_init(&o);
  c->ov_stage = p;
  c->nov = nt;
  for (int corner = 1; corner >= 0; corner--) {
    for (int j = 0; j < nt; j++) {
      c->ov_node[j] = st->iters[rt->first + j];
      c->ov_val[j] = corner ? st->nodes[c->ov_node[j]].extent - 1 : 0;
    }
    for (int g = 0; g < c->L[p].nguard && corner; g++) {
      int node = c->L[p].guard[g];
      if (st->nodes[node].kind != CWM_IT_SPATIAL) continue;
      append_split_guard(c, p, node, &o);
    }
    for (int r = 0; r < b->ndim; r++) {
      if (!c->L[p].local || !c->L[p].gguard[r]) continue;
      char *v = root_value(c, p, r, 1);
      if (corner) cwm_buf_printf(&o, "%s%s < %d", o.len ? " && " : "", v, b->shape[r]);
      else cwm_buf_printf(&o, "%s%s >= 0", o.len ? " && " : "", v);
      free(v);
    }
  }
  c->nov = 0;
  return cwm_buf_take(&o);
}

static int try_register_tile(ctx_t *c, int p, int pos, int depth, int unguarded) {
  rtile_t rt;
  if (!register_tile_plan(c, p, pos, &rt, unguarded)) return 0;
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *b = body_op(c, p);
  const int first = rt.first, last = rt.last, VW = rt.vw, nt = last - first + 1, nroot = b->ndim + b->nred;
  const long nacc = rt.nacc, sst = rt.sst;
  const int vleaf = st->iters[last];
  c->vw = VW;
  const char *vty = VW == 16 ? "cwm_v16f" : "cwm_v8f", *sfx = VW == 16 ? "16" : "";
  char *env[CWM_MAX_DIMS * 2];
  long val[CWM_MAX_ITERS] = {0};
  lin_t lenv[CWM_MAX_DIMS * 2];
  for (int r = 0; r < nroot; r++) lenv[r] = root_lin(c, p, r);

  /* emit: declare + load accumulators, reduction loop, store. A tile whose reduction is whole
   * (every reduction loop outside it has extent 1) starts its accumulators at zero, and
   * emit_stage leaves out the init nest (a pass over the output, strided when the vectorized
   * axis is not the output's last, as an NCHW convolution's channels are). */
  int complete = reduction_outside_is_trivial(st, pos);
  line(c, depth, "{");
  char acc[MAX_ACC][32];
  cwm_buf tgt[MAX_ACC], upd[MAX_ACC];
  long ext[CWM_MAX_ITERS];
  for (int j = 0; j < nt; j++) ext[j] = st->nodes[st->iters[first + j]].extent;
  c->nov = nt;
  cse_t cse = {0};
  for (long t = 0; t < nacc; t++) {
    long rem = t;
    for (int j = nt - 1; j >= 0; j--) {
      long e = j == nt - 1 ? ext[j] / VW : ext[j];
      val[j] = (rem % e) * (j == nt - 1 ? VW : 1);
      rem /= e;
    }
    for (int j = 0; j < nt; j++) c->ov_val[j] = val[j];
    cwm_buf_init(&tgt[t]);
    cwm_buf_init(&upd[t]);
    emit_store_target(c, p, &tgt[t]);
    for (int r = 0; r < nroot; r++) env[r] = root_value(c, p, r, 1);
    c->cse = &cse;
    c->cur_stage = p;
    emit_vexpr(c, p, vleaf, b->body, env, lenv, &upd[t]);
    c->cur_stage = -1;
    c->cse = NULL;
    for (int r = 0; r < nroot; r++) free(env[r]);
    snprintf(acc[t], sizeof acc[t], "acc%ld", t);
    if (complete) line(c, depth + 1, "%s %s = (%s){0};", vty, acc[t], vty);
    else if (sst == 1) line(c, depth + 1, "%s %s = CWM_LOADU%s(&%s);", vty, acc[t], sfx, tgt[t].s);
    else line(c, depth + 1, "%s %s = CWM_LOADS%s(&%s, %ld);", vty, acc[t], sfx, tgt[t].s, sst);
  }
  c->nov = 0;
  int rpar[CWM_MAX_ITERS], rd = depth + 1;
  for (int j = pos; j < first; j++) rpar[j] = open_loop(c, p, j, rd++, 0);
  for (int k = 0; k < cse.n; k++) {
    line(c, rd, "%s t%d = %s;", cse.vec[k] ? vty : "float", k, cse.text[k]);
    if (cse.vec[k]) line(c, rd, "CWM_INREG%s(t%d);", sfx, k);
    free(cse.text[k]);
  }
  for (long t = 0; t < nacc; t++) line(c, rd, "%s += %s;", acc[t], upd[t].s);
  for (int j = first - 1; j >= pos; j--) close_loop(c, --rd, rpar[j]);
  for (long t = 0; t < nacc; t++) {
    if (sst == 1) line(c, depth + 1, "CWM_STOREU%s(&%s, %s);", sfx, tgt[t].s, acc[t]);
    else line(c, depth + 1, "CWM_STORES%s(&%s, %ld, %s);", sfx, tgt[t].s, sst, acc[t]);
    cwm_buf_free(&tgt[t]);
    cwm_buf_free(&upd[t]);
  }
  line(c, depth, "}");
  c->used_vec |= VW == 16 ? 2 : 1;
  return 1;
}

static void emit_alloc_and_stage(ctx_t *c, int q, int depth) {
  const cwm_op *op = tensor_op(c, c->L[q].st.tid);
  char nm[128];
  buf_name(c, c->L[q].st.tid, nm, sizeof nm);
  long size = 1;
  for (int d = 0; d < op->ndim; d++) size *= c->L[q].dims[d];
  int heap = size * 4 > 256 * 1024;
  if (c->text) {
    cwm_buf_indent(c->b, depth);
    cwm_buf_printf(c->b, "allocate %s[", nm);
    for (int d = 0; d < op->ndim; d++) cwm_buf_printf(c->b, "%s%d", d ? ", " : "", c->L[q].dims[d]);
    cwm_buf_puts(c->b, "]\n");
  } else if (heap) {
    line(c, depth, "float *restrict %s = (float *)malloc(%ld * sizeof(float));", nm, size);
  } else {
    line(c, depth, "float %s[%ld] __attribute__((aligned(64)));", nm, size);
  }
  emit_stage(c, q, depth);
  /* a heap buffer of an attached stage is freed where its scope ends (emit_attached_frees),
   * after the consumer's statements that read it */
  if (!c->text && heap && c->s->stages[q].loc != CWM_LOC_ITER) line(c, depth, "free(%s);", nm);
}

static void emit_attached_frees(ctx_t *c, int p, int node, int depth) {
  if (c->text) return;
  for (int q = 0; q < c->s->nstages; q++) {
    const cwm_stage *sq = &c->s->stages[q];
    if (sq->loc != CWM_LOC_ITER || sq->attach_stage != p || sq->attach_node != node) continue;
    const cwm_op *op = tensor_op(c, sq->tid);
    long size = 1;
    for (int d = 0; d < op->ndim; d++) size *= c->L[q].dims[d];
    if (size * 4 > 256 * 1024) {
      char nm[128];
      buf_name(c, sq->tid, nm, sizeof nm);
      line(c, depth, "free(%s);", nm);
    }
  }
}

static void emit_attached(ctx_t *c, int p, int node, int depth) {
  for (int q = 0; q < c->s->nstages; q++)
    if (c->s->stages[q].loc == CWM_LOC_ITER && c->s->stages[q].attach_stage == p &&
        c->s->stages[q].attach_node == node)
      emit_alloc_and_stage(c, q, depth);
}

/* The reduction's init nest from loop position pos on: the spatial loops only. */
static void emit_init_nest(ctx_t *c, int p, int pos, int depth) {
  const cwm_stage *st = &c->L[p].st;
  int ipar[CWM_MAX_ITERS], id = depth;
  for (int j = pos; j < st->niters; j++) {
    if (st->nodes[st->iters[j]].kind != CWM_IT_SPATIAL) continue;
    ipar[j] = open_loop(c, p, j, id++, 1);
  }
  emit_init_stmt(c, p, id);
  for (int j = st->niters - 1; j >= pos; j--) {
    if (st->nodes[st->iters[j]].kind != CWM_IT_SPATIAL) continue;
    close_loop(c, --id, ipar[j]);
  }
}

/* The loops of stage p from position pos on, with their guards and attached stages, around the
 * update: the slow path of a guarded register tile (init: its init nest first). */
static void emit_stage_rest(ctx_t *c, int p, int pos, int depth, int init) {
  const cwm_stage *st = &c->L[p].st;
  int par[CWM_MAX_ITERS], d = depth;
  if (init) emit_init_nest(c, p, pos, d);
  for (int j = pos; j < st->niters; j++) {
    par[j] = open_loop(c, p, j, d++, 0);
    emit_attached(c, p, st->iters[j], d);
  }
  emit_update_stmt(c, p, d);
  for (int j = st->niters - 1; j >= pos; j--) {
    emit_attached_frees(c, p, st->iters[j], d);
    close_loop(c, --d, par[j]);
  }
}

static void emit_stage(ctx_t *c, int p, int depth) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *b = body_op(c, p);
  if (c->text && st->auto_unroll) line(c, depth, "pragma auto_unroll_max_step=%d", st->auto_unroll);
  int first_red = b->reduce != CWM_RED_NONE ? first_reduce_pos(st) : -1;
  int par[CWM_MAX_ITERS];
  int d = depth;
  int skip_init = 0;
  if (first_red >= 0 && !c->text && !c->ref && !c->collect) {
    /* the first register tile the walk below will emit decides whether the tile itself starts
     * the reduction (a guarded stage's slow path then has its own init nest) */
    rtile_t rt;
    for (int pos = first_red; pos < st->niters; pos++)
      if (register_tile_plan(c, p, pos, &rt, 0) || register_tile_plan(c, p, pos, &rt, 1)) {
        skip_init = reduction_outside_is_trivial(st, pos);
        break;
      }
  }
  for (int pos = 0; pos < st->niters; pos++) {
    if (pos == first_red && !skip_init) emit_init_nest(c, p, pos, d);
    rtile_t rt;
    int done = try_register_tile(c, p, pos, d, 0);
    if (!done && register_tile_plan(c, p, pos, &rt, 1)) {
      /* a guarded stage: the register tile where the tile lies wholly inside, the guarded loops
       * at the edges (a 1023-wide matrix product: 63 full 16-wide column tiles and one of 15) */
      char *cond = tile_inside_cond(c, p, &rt);
      if (!cond[0]) {
        done = try_register_tile(c, p, pos, d, 1);
      } else {
        line(c, d, "/* the register tile where the tile lies inside the guards, guarded loops at the edge */");
        line(c, d, "if (%s) {", cond);
        try_register_tile(c, p, pos, d + 1, 1); /* planned above: it applies */
        line(c, d, "} else {");
        emit_stage_rest(c, p, pos, d + 1, skip_init);
        line(c, d, "}");
        done = 1;
      }
      free(cond);
    }
    if (done) {
      for (int j = pos - 1; j >= 0; j--) {
        emit_attached_frees(c, p, st->iters[j], d);
        close_loop(c, --d, par[j]);
      }
      return;
    }
    par[pos] = open_loop(c, p, pos, d++, 0);
    emit_attached(c, p, st->iters[pos], d);
  }
  if (b->reduce != CWM_RED_NONE && first_red < 0) emit_init_stmt(c, p, d);
  emit_update_stmt(c, p, d);
  for (int pos = st->niters - 1; pos >= 0; pos--) {
    emit_attached_frees(c, p, st->iters[pos], d);
    close_loop(c, --d, par[pos]);
  }
}

/* Reference kernel: initial state, double accumulator per output element. */
static void emit_stage_ref(ctx_t *c, int p, int depth) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *b = body_op(c, p);
  int d = depth;
  char nm[300];
  for (int r = 0; r < b->ndim; r++) {
    var_name(c, p, st->iters[r], nm, sizeof nm);
    line(c, d++, "for (int %s = 0; %s < %d; ++%s) {", nm, nm, b->shape[r], nm);
  }
  char *env[CWM_MAX_DIMS * 2];
  for (int r = 0; r < b->ndim + b->nred; r++) {
    var_name(c, p, st->iters[r], nm, sizeof nm);
    env[r] = cwm_xstrdup(nm);
  }
  cwm_buf tgt, val;
  cwm_buf_init(&tgt);
  cwm_buf_init(&val);
  emit_store_target(c, p, &tgt);
  emit_expr(c, b->body, env, &val, 0);
  if (b->reduce == CWM_RED_NONE) {
    line(c, d, "%s = (float)(%s);", tgt.s, val.s);
  } else {
    line(c, d, "double acc = %s;", init_value(c, b->reduce));
    int d0 = d;
    for (int r = b->ndim; r < b->ndim + b->nred; r++) {
      var_name(c, p, st->iters[r], nm, sizeof nm);
      line(c, d++, "for (int %s = 0; %s < %d; ++%s) {", nm, nm, b->red_extent[r - b->ndim], nm);
    }
    if (b->reduce == CWM_RED_SUM) line(c, d, "acc += %s;", val.s);
    else line(c, d, "acc = %s(acc, %s);", b->reduce == CWM_RED_MAX ? "fmax" : "fmin", val.s);
    while (d > d0) line(c, --d, "}");
    line(c, d, "%s = (float)acc;", tgt.s);
  }
  while (d > depth) line(c, --d, "}");
  for (int r = 0; r < b->ndim + b->nred; r++) free(env[r]);
  cwm_buf_free(&tgt);
  cwm_buf_free(&val);
}


/* ---- store collection: what the Ansor-style features are computed from ---- */

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
      for (int i = 0; i < e->nargs && i < CWM_MAX_DIMS; i++) idx[i] = expr_lin(c, e->args[i], env);
      count_expr(c, so, body_op(c, q)->body, idx, depth + 1);
    } else {
      int n = read_index(c, so->stage, e, env, idx, dims);
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

static void collect_store(ctx_t *c, int p, int is_init) {
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
    tidx[d] = c->L[p].local || st->nodes[node].root < 0 ? node_lin(c, p, node, 0) : root_lin(c, p, st->nodes[node].root);
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
  for (int r = 0; r < b->ndim + b->nred; r++) env[r] = root_lin(c, p, r);
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
  ctx_free(c);
  return 0;
}

int cwm_lower_stores(const cwm_state *s, cwm_store **out, int *n, cwm_err *err) {
  if (!cwm_state_is_complete(s)) return cwm_fail(err, CWM_ESTEP, "the state is a sketch");
  cwm_buf body;
  ctx_t *c = lowered_for_analysis(s, &body, 0);
  for (int p = 0; p < s->nstages; p++)
    if (!cwm_stage_is_placeholder(s, p) && s->stages[p].loc == CWM_LOC_ROOT) emit_stage(c, p, 1);
  *out = c->stores;
  *n = c->nstores;
  cwm_buf_free(&body);
  ctx_free(c);
  return 0;
}

/* ---- entry points ---- */

static int is_output(const cwm_state *s, int p) {
  return s->stages[p].tid == cwm_dag_workload(s->dag)->output;
}

/* The value of node `node` of the rewrite's stage (before bound inference) composed from the new
 * layout's dims, named names[d]; conditions for its parts being in range go to cond. */
static void compose_value(const cwm_state *s, const rewrite_t *rw, int node, char (*names)[96],
                          cwm_buf *o, cwm_buf *cond, int depth) {
  const cwm_stage *ust = &s->stages[rw->stage];
  const cwm_node *n = &ust->nodes[node];
  if (depth > 32) { cwm_buf_puts(o, "0"); return; }
  if (!n->nparts) {
    for (int d = 0; d < rw->ndim; d++)
      if (rw->node[d] == node) { cwm_buf_puts(o, names[d]); return; }
    cwm_buf_puts(o, "0"); /* a part of extent 1 */
    return;
  }
  cwm_buf v;
  cwm_buf_init(&v);
  for (int k = 0; k < n->nparts; k++) {
    cwm_buf t;
    cwm_buf_init(&t);
    compose_value(s, rw, n->parts[k], names, &t, cond, depth + 1);
    if (strcmp(t.s, "0")) {
      long st = split_stride(ust, n, k);
      if (v.len) cwm_buf_puts(&v, " + ");
      if (st != 1) cwm_buf_printf(&v, "%ld*", st);
      cwm_buf_puts(&v, strpbrk(t.s, " ") && st != 1 ? "(" : "");
      cwm_buf_puts(&v, t.s);
      cwm_buf_puts(&v, strpbrk(t.s, " ") && st != 1 ? ")" : "");
    }
    cwm_buf_free(&t);
  }
  if (!v.len) cwm_buf_puts(&v, "0");
  /* an inner node whose parts can overshoot it: the slots past its extent are padding */
  if (n->root < 0 && node_max(ust, node, 0) >= n->extent && cond)
    cwm_buf_printf(cond, "%s%s%s%s < %d", cond->len ? " && " : "", strchr(v.s, ' ') ? "(" : "", v.s,
                   strchr(v.s, ' ') ? ")" : "", n->extent);
  cwm_buf_puts(o, v.s);
  cwm_buf_free(&v);
}

/* Original index of dim d of tensor t (from the new dims), and the range conditions. */
static void original_index(const cwm_state *s, const rewrite_t *rw, const cwm_op *in, int d,
                           char (*names)[96], cwm_buf *o, cwm_buf *cond) {
  const cwm_stage *ust = &s->stages[rw->stage];
  int r = -1;
  for (int q = 0; q < CWM_MAX_DIMS * 2; q++)
    if (rw->root_dim[q] == d) r = q;
  if (r < 0) { /* a fixed position: the read's constant */
    cwm_buf_printf(o, "%ld", rw->fixed[d]);
    return;
  }
  int rn = -1;
  for (int i = 0; i < ust->nnodes; i++)
    if (ust->nodes[i].root == r) { rn = i; break; }
  cwm_buf v;
  cwm_buf_init(&v);
  compose_value(s, rw, rn, names, &v, cond, 0);
  long bound = ust->nodes[rn].extent < in->shape[d] ? ust->nodes[rn].extent : in->shape[d];
  if (cond && node_max(ust, rn, 0) >= bound)
    cwm_buf_printf(cond, "%s%s%s%s < %ld", cond->len ? " && " : "", strchr(v.s, ' ') ? "(" : "", v.s,
                   strchr(v.s, ' ') ? ")" : "", bound);
  cwm_buf_puts(o, v.s);
  cwm_buf_free(&v);
}

/* "[48, 3, 256, 16] by (j.0, k.0, k.1, j.3): W[16*j.0 + j.3, 256*k.0 + k.1]" */
static void layout_text(const cwm_state *s, const rewrite_t *rw, const cwm_op *in, char *out, size_t n) {
  char names[RW_MAX_DIMS][96];
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_puts(&b, "[");
  for (int d = 0; d < rw->ndim; d++) cwm_buf_printf(&b, "%s%ld", d ? ", " : "", rw->extent[d]);
  cwm_buf_puts(&b, "] by (");
  for (int d = 0; d < rw->ndim; d++) {
    cwm_node_name(s, rw->stage, rw->node[d], names[d], sizeof names[d]);
    cwm_buf_printf(&b, "%s%s", d ? ", " : "", names[d]);
  }
  cwm_buf_printf(&b, "): %s[", in->name);
  for (int d = 0; d < in->ndim; d++) {
    if (d) cwm_buf_puts(&b, ", ");
    original_index(s, rw, in, d, names, &b, NULL);
  }
  cwm_buf_puts(&b, "]");
  snprintf(out, n, "%s", b.s);
  cwm_buf_free(&b);
}

/* The innermost statement of a conversion into rw's layout, inside loops d0..d(ndim-1) that walk
 * the new layout in order with a running offset o: nm_packed[o++] = nm[original index], 0 where
 * the new layout pads. */
/* The flattened index into the original tensor of the packed element (d0, d1, ...) in *idx, and
 * in *cond the test that it lies inside (empty when no dim is padded). Both initialised here. */
static void pack_source_index(ctx_t *c, const rewrite_t *rw, const cwm_op *in, cwm_buf *idx, cwm_buf *cond) {
  char names[RW_MAX_DIMS][96];
  for (int d = 0; d < rw->ndim; d++) snprintf(names[d], sizeof names[d], "d%d", d);
  cwm_buf_init(cond);
  cwm_buf_init(idx);
  for (int d = 0; d < in->ndim; d++) {
    long st = 1;
    for (int e = d + 1; e < in->ndim; e++) st *= in->shape[e];
    cwm_buf v;
    cwm_buf_init(&v);
    original_index(c->s, rw, in, d, names, &v, cond);
    if (strcmp(v.s, "0")) {
      if (idx->len) cwm_buf_puts(idx, " + ");
      if (st != 1) cwm_buf_printf(idx, "(%s)*%ld", v.s, st);
      else cwm_buf_puts(idx, v.s);
    }
    cwm_buf_free(&v);
  }
}

static void emit_pack_store(ctx_t *c, const rewrite_t *rw, const cwm_op *in, const char *nm, cwm_buf *o) {
  cwm_buf cond, idx;
  pack_source_index(c, rw, in, &idx, &cond);
  cwm_buf_indent(o, rw->ndim + 1);
  if (cond.len)
    cwm_buf_printf(o, "%s_packed[o++] = %s ? %s[%s] : 0.0f;\n", nm, cond.s, nm, idx.len ? idx.s : "0");
  else
    cwm_buf_printf(o, "%s_packed[o++] = %s[%s];\n", nm, nm, idx.len ? idx.s : "0");
  cwm_buf_free(&cond);
  cwm_buf_free(&idx);
}

/* void <fn>(const float *restrict W, float *restrict W_packed): fills the new layout in order. */
static void emit_pack(ctx_t *c, const rewrite_t *rw, const cwm_op *in, const char *fn, cwm_buf *o) {
  char nm[128];
  sanitize(in->name, nm, sizeof nm);
  cwm_buf_printf(o, "void %s(const float *restrict %s, float *restrict %s_packed) {\n  long o = 0;\n", fn, nm, nm);
  for (int d = 0; d < rw->ndim; d++) {
    cwm_buf_indent(o, d + 1);
    cwm_buf_printf(o, "for (long d%d = 0; d%d < %ld; ++d%d)\n", d, d, rw->extent[d], d);
  }
  emit_pack_store(c, rw, in, nm, o);
  cwm_buf_puts(o, "}\n");
}

/* A runtime pack at the top of the kernel body: X_packed allocated and filled from X in the
 * layout the reading stage walks, the outermost dim split among the threads (each thread's
 * running offset starts at its d0's place). */
/* A runtime pack whose innermost dim J is read with a stride and another dim K contiguously (a
 * transposition, as a batch matrix product's second operand given as [B,N,K] is copied into
 * [.., K, N] panels): 8 x 8 blocks loaded as 8 rows along K, transposed in registers and stored
 * as 8 rows along J, about four times faster than copying element by element. Returns 0 (emits
 * nothing) when the pack is not of that kind: a padded dim, or J or K not a multiple of 8. */
static int emit_runtime_pack_transposed(ctx_t *c, const rewrite_t *rw, const cwm_op *in, const char *nm,
                                        cwm_buf *o) {
  const cwm_stage *ust = &c->s->stages[rw->stage];
  int n = rw->ndim, J = n - 1, K = -1;
  if (n < 2 || rw->extent[J] % 8) return 0;
  long src[RW_MAX_DIMS];
  for (int d = 0; d < n; d++) {
    int dim = rw->root_dim[cwm_node_root(ust, rw->node[d])];
    if (dim < 0) return 0;
    long ds = 1;
    for (int e = dim + 1; e < in->ndim; e++) ds *= in->shape[e];
    src[d] = orig_stride(ust, rw->node[d], ds);
  }
  for (int d = 0; d < J && K < 0; d++)
    if (src[d] == 1 && rw->extent[d] % 8 == 0) K = d;
  if (K < 0 || src[J] <= 1) return 0;
  cwm_buf idx, cond, dst;
  pack_source_index(c, rw, in, &idx, &cond);
  int ok = cond.len == 0;
  cwm_buf_init(&dst);
  for (int d = 0; d < n; d++) cwm_buf_printf(&dst, "%sd%d*%ldL", d ? " + " : "", d, rw->stride[d]);
  if (ok) {
    cwm_buf_printf(o, "  /* %s, read with a stride by a vectorized loop, copied into the layout the loops walk: "
                      "8 x 8 blocks transposed in registers */\n", nm);
    cwm_buf_printf(o, "  float *restrict %s_packed = (float *)aligned_alloc(64, %ld);\n", nm, ((rw->size * 4 + 63) / 64) * 64);
    cwm_buf_printf(o, "  if (!%s_packed) abort();\n", nm);
    int depth = 1, first = 1;
    for (int d = 0; d < n; d++) {
      if (d == J || d == K) continue;
      if (first && rw->extent[d] > 1) {
        cwm_buf_indent(o, depth);
        cwm_buf_puts(o, "#pragma omp parallel for\n");
      }
      first = 0;
      cwm_buf_indent(o, depth++);
      cwm_buf_printf(o, "for (long d%d = 0; d%d < %ld; ++d%d)\n", d, d, rw->extent[d], d);
    }
    cwm_buf_indent(o, depth++);
    cwm_buf_printf(o, "for (long d%d = 0; d%d < %ld; d%d += 8)\n", K, K, rw->extent[K], K);
    cwm_buf_indent(o, depth);
    cwm_buf_printf(o, "for (long d%d = 0; d%d < %ld; d%d += 8) {\n", J, J, rw->extent[J], J);
    cwm_buf_indent(o, depth + 1);
    cwm_buf_printf(o, "const float *s_ = &%s[%s];\n", nm, idx.len ? idx.s : "0");
    cwm_buf_indent(o, depth + 1);
    cwm_buf_printf(o, "float *p_ = &%s_packed[%s];\n", nm, dst.s);
    cwm_buf_indent(o, depth + 1);
    cwm_buf_puts(o, "cwm_v8f r_[8];\n");
    cwm_buf_indent(o, depth + 1);
    cwm_buf_printf(o, "for (int i_ = 0; i_ < 8; i_++) r_[i_] = CWM_LOADU(s_ + (long)i_ * %ld);\n", src[J]);
    cwm_buf_indent(o, depth + 1);
    cwm_buf_puts(o, "cwm_tr8(r_);\n");
    cwm_buf_indent(o, depth + 1);
    cwm_buf_printf(o, "for (int i_ = 0; i_ < 8; i_++) CWM_STOREU(p_ + (long)i_ * %ld, r_[i_]);\n", rw->stride[K]);
    cwm_buf_indent(o, depth);
    cwm_buf_puts(o, "}\n");
    c->used_vec |= 1;
    c->used_tr8 = 1;
  }
  cwm_buf_free(&idx);
  cwm_buf_free(&cond);
  cwm_buf_free(&dst);
  return ok;
}

static void emit_runtime_pack(ctx_t *c, const rewrite_t *rw, const cwm_op *in, cwm_buf *o) {
  char nm[128];
  sanitize(in->name, nm, sizeof nm);
  if (emit_runtime_pack_transposed(c, rw, in, nm, o)) return;
  cwm_buf_printf(o, "  /* %s, read with a stride by a vectorized loop, copied into the layout the loops walk */\n", nm);
  cwm_buf_printf(o, "  float *restrict %s_packed = (float *)aligned_alloc(64, %ld);\n", nm, ((rw->size * 4 + 63) / 64) * 64);
  cwm_buf_printf(o, "  if (!%s_packed) abort();\n", nm);
  if (rw->ndim > 1 && rw->extent[0] > 1) cwm_buf_puts(o, "  #pragma omp parallel for\n");
  cwm_buf_printf(o, "  for (long d0 = 0; d0 < %ld; ++d0) {\n    long o = d0 * %ldL;\n", rw->ndim ? rw->extent[0] : 1,
                 rw->ndim ? rw->stride[0] : 1);
  for (int d = 1; d < rw->ndim; d++) {
    cwm_buf_indent(o, d + 1);
    cwm_buf_printf(o, "for (long d%d = 0; d%d < %ld; ++d%d)\n", d, d, rw->extent[d], d);
  }
  emit_pack_store(c, rw, in, nm, o);
  cwm_buf_puts(o, "  }\n");
}

char *cwm_state_print(const cwm_state *s) {
  ctx_t *c = cwm_xcalloc(1, sizeof *c);
  cwm_buf b;
  cwm_buf_init(&b);
  c->s = s;
  c->text = 1;
  c->b = &b;
  lower_all(c);
  for (int p = 0; p < s->nstages; p++) {
    const cwm_op *op = tensor_op(c, s->stages[p].tid);
    if (!cwm_stage_is_placeholder(s, p)) continue;
    cwm_buf_printf(&b, "placeholder %s[", op->name);
    for (int d = 0; d < op->ndim; d++) cwm_buf_printf(&b, "%s%d", d ? ", " : "", op->shape[d]);
    cwm_buf_puts(&b, op->is_const ? "] const" : "]");
    int t = s->stages[p].tid;
    const rewrite_t *rw = t >= 0 && t < CWM_MAX_OPS ? c->rw[t] : NULL;
    if (rw) {
      /* the reads below index this layout: (part:extent, ...) of the reading stage's loops */
      cwm_buf_puts(&b, " layout(");
      for (int d = 0; d < rw->ndim; d++) {
        char nm[256];
        cwm_node_name(s, rw->stage, rw->node[d], nm, sizeof nm);
        cwm_buf_printf(&b, "%s%s:%ld", d ? ", " : "", nm, rw->extent[d]);
      }
      cwm_buf_puts(&b, ")");
    }
    cwm_buf_puts(&b, "\n");
  }
  for (int p = 0; p < s->nstages; p++) {
    if (cwm_stage_is_placeholder(s, p)) continue;
    const cwm_op *op = tensor_op(c, s->stages[p].tid);
    if (s->stages[p].loc == CWM_LOC_INLINE) {
      line(c, 0, "inline %s", op->name);
      continue;
    }
    if (s->stages[p].loc != CWM_LOC_ROOT) continue;
    if (!is_output(s, p)) emit_alloc_and_stage(c, p, 0);
    else emit_stage(c, p, 0);
  }
  ctx_free(c);
  return cwm_buf_take(&b);
}

/* exp and erf in plain C, branch-free, so that a loop calling them vectorizes (libm's expf and
 * erff are scalar calls: 4 and 11 ns an element here, against 0.8 and 1.2 vectorized). exp:
 * Cephes' reduction by ln 2 and its degree-6 polynomial, relative error below 1e-7 on
 * [-87.33, 88.72], 0 below, inf above, NaN kept; erf: Abramowitz-Stegun 7.1.26 on |x| with that
 * exp, absolute error below 1e-6; max and min as selects (fmaxf's NaN rule keeps a loop scalar),
 * equal to fmaxf and fminf on numbers. The compiler if-converts the range selects when trapping math
 * is off (the builder's -fno-trapping-math); otherwise the loop stays scalar but correct. */
static const char math_defs[] =
    "#ifndef CWM_MATH_DEFS\n#define CWM_MATH_DEFS\n"
    "static inline float cwm_expf(float x) {\n"
    "  float xc = x < -87.33f ? -87.33f : x;\n"
    "  xc = xc > 88.72f ? 88.72f : xc;\n"
    "  float k = (xc * 1.44269504f + 12582912.0f) - 12582912.0f; /* round to nearest */\n"
    "  k = k > 127.0f ? 127.0f : k;\n"
    "  float r = xc - k * 0.693359375f + k * 2.12194440e-4f;\n"
    "  float p = 1.9875691500e-4f;\n"
    "  p = p * r + 1.3981999507e-3f;\n"
    "  p = p * r + 8.3334519073e-3f;\n"
    "  p = p * r + 4.1665795894e-2f;\n"
    "  p = p * r + 1.6666665459e-1f;\n"
    "  p = p * r + 5.0000001201e-1f;\n"
    "  p = p * r * r + r + 1.0f;\n"
    "  int ki = ((int)k + 127) << 23; /* 2^k */\n"
    "  float sc;\n"
    "  __builtin_memcpy(&sc, &ki, sizeof sc);\n"
    "  float y = p * sc;\n"
    "  y = x < -87.33f ? 0.0f : y;\n"
    "  return x > 88.72f ? __builtin_inff() : y;\n"
    "}\n"
    "static inline float cwm_fmaxf(float a, float b) { return a > b ? a : b; }\n"
    "static inline float cwm_fminf(float a, float b) { return a < b ? a : b; }\n"
    "static inline float cwm_erff(float x) {\n"
    "  float a = __builtin_fabsf(x);\n"
    "  float t = 1.0f / (1.0f + 0.3275911f * a);\n"
    "  float q = 1.061405429f;\n"
    "  q = q * t - 1.453152027f;\n"
    "  q = q * t + 1.421413741f;\n"
    "  q = q * t - 0.284496736f;\n"
    "  q = q * t + 0.254829592f;\n"
    "  return __builtin_copysignf(1.0f - q * t * cwm_expf(-a * a), x);\n"
    "}\n#endif\n";

static long max_reduction(const cwm_workload *w) {
  long m = 1;
  for (int i = 0; i < w->nops; i++) {
    long r = 1;
    for (int k = 0; k < w->ops[i].nred; k++) r *= w->ops[i].red_extent[k];
    if (r > m) m = r;
  }
  return m;
}

int cwm_codegen_host_lanes(void) {
  static int lanes;
  if (!lanes) {
    const char *e = getenv("CWM_VEC_LANES");
    if (e && (!strcmp(e, "8") || !strcmp(e, "16"))) lanes = atoi(e);
#if defined(__x86_64__) && defined(__GNUC__)
    else if (__builtin_cpu_supports("avx512f")) lanes = 16;
#endif
    else lanes = 8;
  }
  return lanes;
}

int cwm_codegen(const cwm_state *s, const cwm_codegen_opts *o, cwm_kernel *k, cwm_err *err) {
  memset(k, 0, sizeof *k);
  if (!cwm_state_is_complete(s))
    return cwm_fail(err, CWM_ESTEP, "the state is a sketch: some split lengths are unknown");
  const cwm_workload *w = cwm_dag_workload(s->dag);
  ctx_t *c = cwm_xcalloc(1, sizeof *c);
  cwm_buf body, b;
  cwm_buf_init(&body);
  cwm_buf_init(&b);
  c->s = s;
  c->ref = o && o->reference;
  c->max_lanes = o && o->vec_lanes ? o->vec_lanes : cwm_codegen_host_lanes();
  c->vw = 8;
  c->b = &body;
  c->err = err;
  lower_all(c);
  if (c->ref)
    for (int p = 0; p < s->nstages; p++)
      if (!cwm_stage_is_placeholder(s, p) && (s->stages[p].loc != CWM_LOC_ROOT || s->nsteps)) {
        ctx_free(c);
        cwm_buf_free(&body);
        return cwm_fail(err, CWM_EINTERNAL, "reference code needs the initial state");
      }
  /* inputs converted on every call (runtime packs), then intermediate buffers at root */
  for (int t = 0; t < w->nops && t < CWM_MAX_OPS && !c->ref; t++)
    if (c->rw[t] && c->rw[t]->runtime) emit_runtime_pack(c, c->rw[t], &w->ops[t], &body);
  for (int p = 0; p < s->nstages; p++) {
    if (cwm_stage_is_placeholder(s, p) || is_output(s, p) || s->stages[p].loc != CWM_LOC_ROOT) continue;
    const cwm_op *op = tensor_op(c, s->stages[p].tid);
    long size = 1;
    for (int d = 0; d < op->ndim; d++) size *= op->shape[d];
    char nm[128];
    buf_name(c, s->stages[p].tid, nm, sizeof nm);
    line(c, 1, "float *restrict %s = (float *)aligned_alloc(64, %ld);", nm, ((size * 4 + 63) / 64) * 64);
    line(c, 1, "if (!%s) abort();", nm);
  }
  for (int p = 0; p < s->nstages; p++) {
    if (cwm_stage_is_placeholder(s, p) || s->stages[p].loc != CWM_LOC_ROOT) continue;
    if (c->ref) emit_stage_ref(c, p, 1);
    else emit_stage(c, p, 1);
  }
  for (int p = 0; p < s->nstages; p++) {
    if (cwm_stage_is_placeholder(s, p) || is_output(s, p) || s->stages[p].loc != CWM_LOC_ROOT) continue;
    char nm[128];
    buf_name(c, s->stages[p].tid, nm, sizeof nm);
    line(c, 1, "free(%s);", nm);
  }
  for (int t = 0; t < w->nops && t < CWM_MAX_OPS && !c->ref; t++)
    if (c->rw[t] && c->rw[t]->runtime) {
      char nm[128];
      buf_name(c, t, nm, sizeof nm);
      line(c, 1, "free(%s);", nm);
    }
  /* signature: inputs in workload order, then the output */
  for (int i = 0; i < w->nops; i++)
    if (w->ops[i].is_input && k->nargs < CWM_MAX_ARGS - 1) k->arg_tid[k->nargs++] = i;
  k->arg_tid[k->nargs++] = w->output;
  for (int a = 0; a < k->nargs; a++) {
    const cwm_op *op = &w->ops[k->arg_tid[a]];
    long n = 1;
    for (int d = 0; d < op->ndim; d++) n *= op->shape[d];
    k->arg_len[a] = n;
    snprintf(k->arg_name[a], CWM_MAX_NAME, "%s", op->name);
    const rewrite_t *rw = a < k->nargs - 1 && k->arg_tid[a] < CWM_MAX_OPS ? c->rw[k->arg_tid[a]] : NULL;
    if (rw && !rw->runtime) {
      k->src_len[a] = n;
      k->arg_len[a] = rw->size;
      k->npacked++;
      layout_text(s, rw, op, k->layout[a], sizeof k->layout[a]);
    }
  }
  k->red_len = max_reduction(w);
  if (c->failed) {
    ctx_free(c);
    cwm_buf_free(&body);
    return err && err->code ? (int)err->code : CWM_EINTERNAL;
  }
  /* the name hashes the loop nest and the conversions (they fix the layouts it reads) */
  cwm_buf packs;
  cwm_buf_init(&packs);
  for (int a = 0; a < k->nargs; a++)
    if (k->src_len[a]) emit_pack(c, c->rw[k->arg_tid[a]], &w->ops[k->arg_tid[a]], "PACK", &packs);
  char key[17];
  uint64_t h = cwm_hash64(body.s ? body.s : "", body.len);
  if (packs.len) h ^= cwm_hash64(packs.s, packs.len) * 0x9e3779b97f4a7c15ULL;
  cwm_buf_free(&packs);
  cwm_hash_hex(h ^ (c->ref ? 0x5bd1e995ULL : 0), key);
  if (o && o->fn_name) snprintf(k->fn, sizeof k->fn, "%s", o->fn_name);
  else snprintf(k->fn, sizeof k->fn, "cwm_%s_%s", c->ref ? "ref" : "k", key);
  snprintf(k->entry, sizeof k->entry, "%s_entry", k->fn);
  char wname[sizeof w->name];
  cwm_codegen_safe_name(w->name, wname, sizeof wname); /* names come from files: never raw into C */
  cwm_buf_printf(&b, "/* %s: workload %s, %d steps (generated by cwm %s) */\n", k->fn, wname, s->nsteps, CWM_VERSION);
  if (c->used_vec & 1)
    cwm_buf_puts(&b, "#ifndef CWM_VEC_DEFS\n#define CWM_VEC_DEFS\n"
                     "typedef float cwm_v8f __attribute__((vector_size(32)));\n"
                     "typedef float cwm_v8fu __attribute__((vector_size(32), aligned(4), may_alias));\n"
                     "#define CWM_LOADU(p) (*(const cwm_v8fu *)(p))\n"
                     "#define CWM_STOREU(p, v) (*(cwm_v8fu *)(p) = (v))\n"
                     "/* a vector whose lanes lie s floats apart (the accumulators of a strided tile) */\n"
                     "#define CWM_LOADS(p, s) ((cwm_v8f){(p)[0], (p)[(s)], (p)[2 * (s)], (p)[3 * (s)], \\\n"
                     "                                   (p)[4 * (s)], (p)[5 * (s)], (p)[6 * (s)], (p)[7 * (s)]})\n"
                     "#define CWM_STORES(p, s, v) do { float *q_ = (p); cwm_v8f v_ = (v); \\\n"
                     "  for (int l_ = 0; l_ < 8; l_++) q_[l_ * (s)] = v_[l_]; } while (0)\n"
                     "#endif\n");
  if (c->used_vec & 2)
    cwm_buf_puts(&b, "#ifndef CWM_VEC16_DEFS\n#define CWM_VEC16_DEFS\n"
                     "/* 16 lanes: one AVX-512 register (two AVX2 registers where the compiler has no AVX-512) */\n"
                     "typedef float cwm_v16f __attribute__((vector_size(64)));\n"
                     "typedef float cwm_v16fu __attribute__((vector_size(64), aligned(4), may_alias));\n"
                     "#define CWM_LOADU16(p) (*(const cwm_v16fu *)(p))\n"
                     "#define CWM_STOREU16(p, v) (*(cwm_v16fu *)(p) = (v))\n"
                     "#define CWM_LOADS16(p, s) ((cwm_v16f){(p)[0], (p)[(s)], (p)[2 * (s)], (p)[3 * (s)], \\\n"
                     "    (p)[4 * (s)], (p)[5 * (s)], (p)[6 * (s)], (p)[7 * (s)], (p)[8 * (s)], (p)[9 * (s)], \\\n"
                     "    (p)[10 * (s)], (p)[11 * (s)], (p)[12 * (s)], (p)[13 * (s)], (p)[14 * (s)], (p)[15 * (s)]})\n"
                     "#define CWM_STORES16(p, s, v) do { float *q_ = (p); cwm_v16f v_ = (v); \\\n"
                     "  for (int l_ = 0; l_ < 16; l_++) q_[l_ * (s)] = v_[l_]; } while (0)\n"
                     "#endif\n");
  if (c->used_vec)
    cwm_buf_puts(&b, "#ifndef CWM_INREG\n"
                     "/* keeps a loaded vector in a register: one load reused by every FMA */\n"
                     "#if defined(__x86_64__) && defined(__GNUC__) && defined(__AVX512VL__)\n"
                     "#define CWM_INREG(v) __asm__(\"\" : \"+v\"(v))\n"
                     "#elif defined(__x86_64__) && defined(__GNUC__) && defined(__AVX__)\n"
                     "#define CWM_INREG(v) __asm__(\"\" : \"+x\"(v))\n"
                     "#else\n#define CWM_INREG(v) ((void)0) /* no 32-byte registers: the compiler splits it */\n#endif\n"
                     "#if defined(__x86_64__) && defined(__GNUC__) && defined(__AVX512F__)\n"
                     "#define CWM_INREG16(v) __asm__(\"\" : \"+v\"(v))\n"
                     "#else\n#define CWM_INREG16(v) ((void)0) /* no 64-byte registers: the compiler splits it */\n"
                     "#endif\n#endif\n");
  if (c->used_tr8)
    cwm_buf_puts(&b, "#ifndef CWM_TR8_DEFS\n#define CWM_TR8_DEFS\n"
                     "#if defined(__clang__)\n#define CWM_SHUF8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)\n"
                     "#else\ntypedef int cwm_v8i __attribute__((vector_size(32)));\n"
                     "#define CWM_SHUF8(a, b, ...) __builtin_shuffle(a, b, (cwm_v8i){__VA_ARGS__})\n#endif\n"
                     "/* transposes the 8 x 8 block whose rows are r[0..7], in registers */\n"
                     "static inline void cwm_tr8(cwm_v8f *r) {\n"
                     "  cwm_v8f t[8], u[8];\n"
                     "  for (int i = 0; i < 8; i += 2) {\n"
                     "    t[i] = CWM_SHUF8(r[i], r[i + 1], 0, 8, 1, 9, 2, 10, 3, 11);\n"
                     "    t[i + 1] = CWM_SHUF8(r[i], r[i + 1], 4, 12, 5, 13, 6, 14, 7, 15);\n"
                     "  }\n"
                     "  for (int h = 0; h < 8; h += 4) {\n"
                     "    u[h] = CWM_SHUF8(t[h], t[h + 2], 0, 1, 8, 9, 2, 3, 10, 11);\n"
                     "    u[h + 1] = CWM_SHUF8(t[h], t[h + 2], 4, 5, 12, 13, 6, 7, 14, 15);\n"
                     "    u[h + 2] = CWM_SHUF8(t[h + 1], t[h + 3], 0, 1, 8, 9, 2, 3, 10, 11);\n"
                     "    u[h + 3] = CWM_SHUF8(t[h + 1], t[h + 3], 4, 5, 12, 13, 6, 7, 14, 15);\n"
                     "  }\n"
                     "  for (int j = 0; j < 4; j++) {\n"
                     "    r[2 * j] = CWM_SHUF8(u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);\n"
                     "    r[2 * j + 1] = CWM_SHUF8(u[j], u[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);\n"
                     "  }\n}\n#endif\n");
  if (c->used_math) cwm_buf_puts(&b, math_defs);
  cwm_buf_printf(&b, "void %s(", k->fn);
  for (int a = 0; a < k->nargs; a++)
    cwm_buf_printf(&b, "%s%sfloat *restrict %s%s", a ? ", " : "", a < k->nargs - 1 ? "const " : "", k->arg_name[a],
                   k->src_len[a] ? "_packed" : "");
  cwm_buf_puts(&b, ") {\n");
  cwm_buf_puts(&b, body.s ? body.s : "");
  cwm_buf_puts(&b, "}\n");
  cwm_buf_printf(&b, "void %s(float *const *args) { %s(", k->entry, k->fn);
  for (int a = 0; a < k->nargs; a++) cwm_buf_printf(&b, "%sargs[%d]", a ? ", " : "", a);
  cwm_buf_puts(&b, "); }\n");
  if (k->npacked) {
    /* the conversions into the layouts the kernel reads: run once per weight, not per call */
    for (int a = 0; a < k->nargs; a++) {
      if (!k->src_len[a]) continue;
      snprintf(k->pack_fn[a], sizeof k->pack_fn[a], "%s_pack_%s", k->fn, k->arg_name[a]);
      cwm_buf_printf(&b, "/* %s: %s %s */\n", k->pack_fn[a], k->arg_name[a], k->layout[a]);
      emit_pack(c, c->rw[k->arg_tid[a]], &w->ops[k->arg_tid[a]], k->pack_fn[a], &b);
    }
    snprintf(k->pack_entry, sizeof k->pack_entry, "%s_pack_entry", k->fn);
    cwm_buf_printf(&b, "void %s(float *const *src, float *const *dst) {", k->pack_entry);
    for (int a = 0; a < k->nargs; a++)
      if (k->src_len[a]) cwm_buf_printf(&b, " %s(src[%d], dst[%d]);", k->pack_fn[a], a, a);
    cwm_buf_puts(&b, " }\n");
  }
  k->body = cwm_buf_take(&b);
  cwm_buf_free(&body);
  ctx_free(c);
  return 0;
}

void cwm_kernel_free(cwm_kernel *k) {
  free(k->body);
  k->body = NULL;
}

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

void cwm_codegen_safe_name(const char *s, char *out, size_t n) {
  if (!n) return;
  size_t i = 0;
  for (; s && s[i] && i + 1 < n; i++) {
    char c = s[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
             c == '+' || c == '-' || c == '=';
    out[i] = ok ? c : '_';
  }
  out[i] = 0;
}

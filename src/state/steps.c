/* steps.c: the schedule steps, one function per kind behind a table. Each validates its
 * arguments against the state first and fails with a message naming the step when they do not
 * fit; cwm_state_apply (state.c) runs it on a copy and commits only on success. */
#include "state_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- validation helpers ---- */

#define FAIL(...) return cwm_fail(err, CWM_ESTEP, __VA_ARGS__)

static int check_stage(const cwm_state *s, const cwm_step *st, int need_compute, cwm_err *err) {
  if (st->stage < 0 || st->stage >= s->nstages)
    FAIL("%s: stage %d out of range (the state has %d stages)", cwm_step_kind_name(st->kind),
         st->stage, s->nstages);
  if (need_compute && cwm_stage_is_placeholder(s, st->stage))
    FAIL("%s: stage %d (%s) is a placeholder", cwm_step_kind_name(st->kind), st->stage,
         cwm_stage_name(s, st->stage));
  if (need_compute && s->stages[st->stage].loc == CWM_LOC_INLINE)
    FAIL("%s: stage %d (%s) is inlined", cwm_step_kind_name(st->kind), st->stage,
         cwm_stage_name(s, st->stage));
  return 0;
}

static int check_iter(const cwm_state *s, const cwm_step *st, cwm_err *err) {
  const cwm_stage *sg = &s->stages[st->stage];
  if (st->iter < 0 || st->iter >= sg->niters)
    FAIL("%s: iterator %d out of range (stage %s has %d iterators)", cwm_step_kind_name(st->kind),
         st->iter, cwm_stage_name(s, st->stage), sg->niters);
  return 0;
}

static int attached_at(const cwm_state *s, int stage, int node) {
  int n = 0;
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i].loc == CWM_LOC_ITER && s->stages[i].attach_stage == stage &&
        s->stages[i].attach_node == node)
      n++;
  return n;
}
static int has_attached(const cwm_state *s, int stage) {
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i].loc == CWM_LOC_ITER && s->stages[i].attach_stage == stage) return 1;
  return 0;
}

/* Does the body of stage c read tensor tid, directly or through inlined stages? */
static int reads_through_inline(const cwm_state *s, const cwm_expr *e, int tid, int depth) {
  if (!e || depth > CWM_MAX_STAGES) return 0;
  if (e->kind == CWM_X_READ) {
    if (e->tensor == tid) return 1;
    int p = state_stage_of_tid(s, e->tensor);
    if (p >= 0 && s->stages[p].loc == CWM_LOC_INLINE &&
        reads_through_inline(s, cwm_stage_body_op(s, p)->body, tid, depth + 1))
      return 1;
  }
  for (int i = 0; i < e->nargs; i++)
    if (reads_through_inline(s, e->args[i], tid, depth)) return 1;
  return 0;
}

int cwm_stage_consumers(const cwm_state *s, int p, int *out) {
  int n = 0;
  for (int c = 0; c < s->nstages; c++) {
    if (c == p || s->stages[c].loc == CWM_LOC_INLINE || cwm_stage_is_placeholder(s, c)) continue;
    if (reads_through_inline(s, cwm_stage_body_op(s, c)->body, s->stages[p].tid, 0)) out[n++] = c;
  }
  return n;
}

static int is_output_stage(const cwm_state *s, int stage) {
  return s->stages[stage].tid == cwm_dag_workload(s->dag)->output;
}

static int iter_pos(const cwm_stage *sg, int node) {
  for (int i = 0; i < sg->niters; i++)
    if (sg->iters[i] == node) return i;
  return -1;
}

int cwm_node_root(const cwm_stage *st, int node) {
  for (int hops = 0; node >= 0 && hops < CWM_MAX_NODES; hops++) {
    if (st->nodes[node].root >= 0) return st->nodes[node].root;
    node = st->nodes[node].parent;
  }
  return -1;
}

int cwm_attach_in(const cwm_state *s, int q, int t, int after) {
  int x = q;
  for (int guard = 0; guard < CWM_MAX_STAGES && x > after && s->stages[x].loc == CWM_LOC_ITER; guard++) {
    if (s->stages[x].attach_stage == t) return x;
    x = s->stages[x].attach_stage;
  }
  return -1;
}

int cwm_attach_root(const cwm_state *s, int q, int after, int *top) {
  int x = q;
  *top = -1;
  for (int guard = 0; s->stages[x].loc == CWM_LOC_ITER; guard++) {
    if (x <= after || guard >= CWM_MAX_STAGES) return -1;
    *top = x;
    x = s->stages[x].attach_stage;
  }
  return s->stages[x].loc == CWM_LOC_ROOT ? x : -1;
}

/* Where a stage p attached at loop position pos of stage t may be: every consumer of p is t or
 * (Ansor's "common root") a stage attached directly in t at that loop or inside it, so that p's
 * region is computed before each read of it and lives in a scope that holds them all. Returns 0
 * when it may, else the first consumer that breaks it. */
static int attach_breaker(const cwm_state *s, int p, int t, int pos, int *breaker) {
  int cons[CWM_MAX_STAGES], nc = cwm_stage_consumers(s, p, cons);
  if (nc == 0) return *breaker = -1, 1;
  for (int i = 0; i < nc; i++) {
    int q = cons[i];
    if (q == t) continue;
    /* q may sit in a chain of attached stages whose top is attached in t; every stage of the
     * chain comes after p (bound inference and emission take them in that order) */
    int x = cwm_attach_in(s, q, t, p);
    if (x < 0 || iter_pos(&s->stages[t], s->stages[x].attach_node) < pos) return *breaker = q, 1;
  }
  return 0;
}

/* Every attached stage still where attach_breaker allows (a later step may move a consumer out
 * of the scope, or reorder the target's loops). */
int state_attachments_valid(const cwm_state *s, cwm_err *err) {
  for (int p = 0; p < s->nstages; p++) {
    const cwm_stage *sp = &s->stages[p];
    if (sp->loc != CWM_LOC_ITER) continue;
    int pos = iter_pos(&s->stages[sp->attach_stage], sp->attach_node), q = -1;
    if (pos < 0) return cwm_fail(err, CWM_ESTEP, "stage %s is attached at a loop that is gone", cwm_stage_name(s, p));
    if (attach_breaker(s, p, sp->attach_stage, pos, &q))
      return cwm_fail(err, CWM_ESTEP, "stage %s, attached in %s, is read %s", cwm_stage_name(s, p),
                      cwm_stage_name(s, sp->attach_stage),
                      q < 0 ? "by no stage" : "by a stage outside that loop");
  }
  return 0;
}

static int new_node(cwm_stage *sg, cwm_err *err) {
  if (sg->nnodes >= CWM_MAX_NODES) return -cwm_fail(err, CWM_ESTEP, "too many iterators in one stage");
  cwm_node *n = &sg->nodes[sg->nnodes];
  memset(n, 0, sizeof *n);
  n->root = -1;
  n->parent = -1;
  n->fused = -1;
  return sg->nnodes++;
}

/* Split leaf at position pos into parts. lengths are the fixed parts; the implicit part is
 * outermost when inner_to_outer, innermost otherwise. */
static int do_split(cwm_state *s, int stage, int pos, const int *lengths, int nlen, int i2o,
                    cwm_err *err) {
  cwm_stage *sg = &s->stages[stage];
  if (nlen < 1 || nlen > CWM_MAX_SPLIT) FAIL("split needs 1 to %d lengths, got %d", CWM_MAX_SPLIT, nlen);
  long prod = 1;
  for (int i = 0; i < nlen; i++) {
    /* 0 = unknown: a sketch's split, filled in by annotation; the part counts as 1 here */
    if (lengths[i] < 0) FAIL("split length %d is not positive", i);
    prod *= lengths[i] ? lengths[i] : 1;
    if (prod > (1 << 30)) FAIL("split lengths overflow");
  }
  if (sg->niters + nlen > CWM_MAX_ITERS) FAIL("too many iterators in stage %s", cwm_stage_name(s, stage));
  int old = sg->iters[pos];
  int parts[CWM_MAX_SPLIT + 1];
  for (int i = 0; i <= nlen; i++) {
    int id = new_node(sg, err);
    if (id < 0) return -id;
    cwm_node *n = &sg->nodes[id];
    n->parent = old;
    n->part = i;
    n->kind = sg->nodes[old].kind;
    if (i2o) n->factor = i == 0 ? 0 : (lengths[i - 1] ? lengths[i - 1] : 1);
    else n->factor = i == nlen ? 0 : (lengths[i] ? lengths[i] : 1);
    parts[i] = id;
  }
  cwm_node *o = &sg->nodes[old];
  o->nparts = nlen + 1;
  for (int i = 0; i <= nlen; i++) o->parts[i] = parts[i];
  o->ann = CWM_ANN_NONE;
  memmove(&sg->iters[pos + nlen + 1], &sg->iters[pos + 1], sizeof(int) * (size_t)(sg->niters - pos - 1));
  for (int i = 0; i <= nlen; i++) sg->iters[pos + i] = parts[i];
  sg->niters += nlen;
  /* Stages attached at the split loop move to its innermost part. */
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i].loc == CWM_LOC_ITER && s->stages[i].attach_stage == stage &&
        s->stages[i].attach_node == old)
      s->stages[i].attach_node = parts[nlen];
  cwm_stage_extents(sg, 0);
  return 0;
}

static const cwm_step *src_split(const cwm_state *s, int id, const char *what, cwm_err *err) {
  if (id < 0 || id >= s->nsteps) {
    cwm_fail(err, CWM_ESTEP, "%s: source step %d out of range (%d steps so far)", what, id, s->nsteps);
    return NULL;
  }
  if (s->steps[id].kind != CWM_S_SP) {
    cwm_fail(err, CWM_ESTEP, "%s: source step %d is %s, not SP", what, id,
             cwm_step_kind_name(s->steps[id].kind));
    return NULL;
  }
  return &s->steps[id];
}

/* ---- tensor makers for steps that create stages ---- */

typedef struct {
  const cwm_op *op;
  const char *suffix;
  int src_tid, dst_tid;
  int rf_extent, rf_pos;
} make_ctx;

static cwm_op *clone_op(const cwm_op *src) {
  cwm_op *op = cwm_xmalloc(sizeof *op);
  *op = *src;
  op->is_input = 0;
  op->body = src->body ? cwm_expr_clone(src->body) : NULL;
  return op;
}

static cwm_expr *make_read(int tid, int nidx, const int *vars) {
  cwm_expr *r = cwm_expr_new(CWM_X_READ);
  r->tensor = tid;
  r->nargs = nidx;
  r->args = cwm_xcalloc((size_t)nidx, sizeof *r->args);
  for (int i = 0; i < nidx; i++) {
    cwm_expr *v = cwm_expr_new(CWM_X_VAR);
    v->var = vars[i];
    v->is_int = 1;
    r->args[i] = v;
  }
  return r;
}

static void set_name(cwm_op *op, const char *base, const char *suffix) {
  /* keep the suffix whole; shorten the base if the name would not fit */
  int room = (int)sizeof op->name - 2 - (int)strlen(suffix);
  snprintf(op->name, sizeof op->name, "%.*s.%s", room > 0 ? room : 0, base, suffix);
}

static cwm_op *make_local(const cwm_dag *d, const void *p) {
  const make_ctx *c = p;
  cwm_op *op = clone_op(c->op);
  set_name(op, c->op->name, c->suffix);
  return op;
}
/* The original after cache write: out[i..] = local[i..]. */
static cwm_op *make_copy_from(const cwm_dag *d, const void *p) {
  const make_ctx *c = p;
  cwm_op *op = clone_op(c->op);
  cwm_expr_free(op->body);
  op->reduce = CWM_RED_NONE;
  op->nred = 0;
  int vars[CWM_MAX_DIMS];
  for (int i = 0; i < op->ndim; i++) vars[i] = i;
  op->body = make_read(c->src_tid, op->ndim, vars);
  return op;
}
/* Cache read copy stage: X.local[ax] = X[ax]; axes named a0, a1 ... */
static cwm_op *make_cache_read(const cwm_dag *d, const void *p) {
  const make_ctx *c = p;
  cwm_op *op = cwm_xcalloc(1, sizeof *op);
  set_name(op, c->op->name, c->suffix);
  op->ndim = c->op->ndim;
  int vars[CWM_MAX_DIMS];
  for (int i = 0; i < op->ndim; i++) {
    op->shape[i] = c->op->shape[i];
    snprintf(op->axis[i], CWM_MAX_NAME, "ax%d", i);
    vars[i] = i;
  }
  op->body = make_read(c->src_tid, op->ndim, vars);
  return op;
}
static void retarget(cwm_expr *e, int from, int to) {
  if (!e) return;
  if (e->kind == CWM_X_READ && e->tensor == from) e->tensor = to;
  for (int i = 0; i < e->nargs; i++) retarget(e->args[i], from, to);
}
static cwm_op *make_reader(const cwm_dag *d, const void *p) {
  const make_ctx *c = p;
  cwm_op *op = clone_op(c->op);
  retarget(op->body, c->src_tid, c->dst_tid);
  return op;
}
/* rfactor tensor: the original's dims with the factor axis inserted at rf_pos. */
static cwm_op *make_rf_tensor(const cwm_dag *d, const void *p) {
  const make_ctx *c = p;
  cwm_op *op = clone_op(c->op);
  set_name(op, c->op->name, "rf");
  op->ndim = c->op->ndim + 1;
  for (int i = 0, j = 0; i < op->ndim; i++) {
    if (i == c->rf_pos) {
      op->shape[i] = c->rf_extent;
      snprintf(op->axis[i], CWM_MAX_NAME, "rfa");
    } else {
      op->shape[i] = c->op->shape[j];
      memcpy(op->axis[i], c->op->axis[j], CWM_MAX_NAME);
      j++;
    }
  }
  return op;
}
/* The original after rfactor: out[s..] = reduce(r : rf[.. r ..]). */
static cwm_op *make_rf_orig(const cwm_dag *d, const void *p) {
  const make_ctx *c = p;
  cwm_op *op = clone_op(c->op);
  cwm_expr_free(op->body);
  op->nred = 1;
  op->red_extent[0] = c->rf_extent;
  snprintf(op->red_axis[0], CWM_MAX_NAME, "rv");
  for (int k = 0; k < op->ndim; k++)
    if (!strcmp(op->axis[k], "rv")) snprintf(op->red_axis[0], CWM_MAX_NAME, "rv_%d", k);
  int vars[CWM_MAX_DIMS + 1];
  for (int i = 0, j = 0; i <= op->ndim; i++) vars[i] = i == c->rf_pos ? op->ndim : j++;
  op->body = make_read(c->src_tid, op->ndim + 1, vars);
  return op;
}

/* Inserts a stage at index at, shifting later stages and attach references. */
static int insert_stage(cwm_state *s, int at, cwm_err *err) {
  if (s->nstages >= CWM_MAX_STAGES) FAIL("too many stages");
  memmove(&s->stages[at + 1], &s->stages[at], sizeof(cwm_stage) * (size_t)(s->nstages - at));
  s->nstages++;
  for (int i = 0; i < s->nstages; i++)
    if (i != at && s->stages[i].loc == CWM_LOC_ITER && s->stages[i].attach_stage >= at)
      s->stages[i].attach_stage++;
  memset(&s->stages[at], 0, sizeof(cwm_stage));
  s->stages[at].loc = CWM_LOC_ROOT;
  s->stages[at].attach_stage = s->stages[at].attach_node = -1;
  return 0;
}

static int untransformed(const cwm_stage *sg) {
  if (sg->nnodes != sg->niters) return 0;
  for (int i = 0; i < sg->niters; i++)
    if (sg->iters[i] != i || sg->nodes[i].ann) return 0;
  return 1;
}

/* ---- the steps ---- */

static int step_an(cwm_state *s, const cwm_step *st, cwm_err *err) {
  int rc;
  if ((rc = check_stage(s, st, 1, err)) || (rc = check_iter(s, st, err))) return rc;
  cwm_stage *sg = &s->stages[st->stage];
  cwm_node *n = &sg->nodes[sg->iters[st->iter]];
  if (st->a < 0 || st->a > CWM_ANN_PARALLEL)
    FAIL("AN: annotation %d is not supported on CPU (0 none, 1 unroll, 2 vectorize, 3 parallel)", st->a);
  if (n->kind != CWM_IT_SPATIAL && (st->a == CWM_ANN_VECTORIZE || st->a == CWM_ANN_PARALLEL))
    FAIL("AN: cannot %s reduction iterator %d of stage %s", st->a == CWM_ANN_PARALLEL ? "parallelize" : "vectorize",
         st->iter, cwm_stage_name(s, st->stage));
  n->ann = st->a;
  return 0;
}

static int step_pr(cwm_state *s, const cwm_step *st, cwm_err *err) {
  int rc;
  if ((rc = check_stage(s, st, 1, err)) || (rc = check_iter(s, st, err))) return rc;
  if (st->a < 0 || st->a > 4096) FAIL("PR: auto_unroll_max_step %d out of range [0, 4096]", st->a);
  s->stages[st->stage].auto_unroll = st->a;
  return 0;
}

static int step_re(cwm_state *s, const cwm_step *st, cwm_err *err) {
  int rc;
  if ((rc = check_stage(s, st, 1, err))) return rc;
  cwm_stage *sg = &s->stages[st->stage];
  if (st->n != sg->niters)
    FAIL("RE: order has %d iterators, stage %s has %d", st->n, cwm_stage_name(s, st->stage), sg->niters);
  int seen[CWM_MAX_ITERS] = {0}, it[CWM_MAX_ITERS];
  for (int i = 0; i < st->n; i++) {
    if (st->v[i] < 0 || st->v[i] >= sg->niters || seen[st->v[i]])
      FAIL("RE: order is not a permutation of 0..%d (entry %d is %d)", sg->niters - 1, i, st->v[i]);
    seen[st->v[i]] = 1;
    it[i] = sg->iters[st->v[i]];
  }
  memcpy(sg->iters, it, sizeof(int) * (size_t)sg->niters);
  return 0;
}

static int step_fu(cwm_state *s, const cwm_step *st, cwm_err *err) {
  int rc;
  if ((rc = check_stage(s, st, 1, err))) return rc;
  cwm_stage *sg = &s->stages[st->stage];
  if (st->n < 1 || st->n > CWM_MAX_FUSE) FAIL("FU: can fuse 1 to %d iterators, got %d", CWM_MAX_FUSE, st->n);
  for (int i = 0; i < st->n; i++) {
    if (st->v[i] < 0 || st->v[i] >= sg->niters) FAIL("FU: iterator %d out of range", st->v[i]);
    if (i && st->v[i] != st->v[i - 1] + 1) FAIL("FU: iterators must be consecutive (%d after %d)", st->v[i], st->v[i - 1]);
  }
  int kind = sg->nodes[sg->iters[st->v[0]]].kind;
  long prod = 1;
  for (int i = 0; i < st->n; i++) {
    const cwm_node *n = &sg->nodes[sg->iters[st->v[i]]];
    if (n->kind != kind) FAIL("FU: cannot fuse spatial and reduction iterators");
    prod *= n->extent;
    if (prod > (1 << 30)) FAIL("FU: fused extent overflows");
    if (i < st->n - 1 && attached_at(s, st->stage, sg->iters[st->v[i]]))
      FAIL("FU: iterator %d has stages attached; only the last fused iterator may", st->v[i]);
  }
  if (st->n == 1) return 0;
  int id = new_node(sg, err);
  if (id < 0) return -id;
  cwm_node *f = &sg->nodes[id];
  f->is_fuse = 1;
  f->kind = kind;
  f->nsub = st->n;
  for (int i = 0; i < st->n; i++) {
    f->sub[i] = sg->iters[st->v[i]];
    sg->nodes[f->sub[i]].fused = id;
    sg->nodes[f->sub[i]].ann = 0;
  }
  int last = f->sub[st->n - 1];
  sg->iters[st->v[0]] = id;
  memmove(&sg->iters[st->v[0] + 1], &sg->iters[st->v[0] + st->n],
          sizeof(int) * (size_t)(sg->niters - st->v[0] - st->n));
  sg->niters -= st->n - 1;
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i].loc == CWM_LOC_ITER && s->stages[i].attach_stage == st->stage &&
        s->stages[i].attach_node == last)
      s->stages[i].attach_node = id;
  cwm_stage_extents(sg, 0);
  return 0;
}

static int step_sp(cwm_state *s, const cwm_step *st, cwm_err *err) {
  int rc;
  if ((rc = check_stage(s, st, 1, err)) || (rc = check_iter(s, st, err))) return rc;
  cwm_stage *sg = &s->stages[st->stage];
  int ext = sg->nodes[sg->iters[st->iter]].extent;
  if (st->extent != 0 && st->extent != ext)
    FAIL("SP: extent %d does not match iterator %d of stage %s (extent %d)", st->extent, st->iter,
         cwm_stage_name(s, st->stage), ext);
  return do_split(s, st->stage, st->iter, st->v, st->n, st->inner_to_outer, err);
}

static int step_fsp(cwm_state *s, const cwm_step *st, cwm_err *err) {
  int rc;
  if ((rc = check_stage(s, st, 1, err)) || (rc = check_iter(s, st, err))) return rc;
  const cwm_step *src = src_split(s, st->a, "FSP", err);
  if (!src) return err->code;
  if (st->b < 1 || st->b > src->n + 1) FAIL("FSP: n_split %d out of range 1..%d", st->b, src->n + 1);
  int len[CWM_MAX_SPLIT + 1], n = 0;
  long last = 1;
  for (int j = 0; j < src->n; j++) {
    if (j < st->b - 1) len[n++] = src->v[j];
    else last *= src->v[j];
  }
  if (last > (1 << 30)) FAIL("FSP: factor overflows");
  len[n++] = (int)last;
  return do_split(s, st->stage, st->iter, len, n, 1, err);
}

static int step_ffsp(cwm_state *s, const cwm_step *st, cwm_err *err) {
  int rc;
  if ((rc = check_stage(s, st, 1, err)) || (rc = check_iter(s, st, err))) return rc;
  if (st->n < 1) FAIL("FFSP: no source steps");
  long f = 1;
  for (int i = 0; i < st->n; i++) {
    const cwm_step *src = src_split(s, st->v[i], "FFSP", err);
    if (!src) return err->code;
    if (st->a < 0 || st->a >= src->n) FAIL("FFSP: level %d out of range for step %d", st->a, st->v[i]);
    f *= src->v[st->a];
    if (f > (1 << 30)) FAIL("FFSP: factor overflows");
  }
  int len = (int)f;
  return do_split(s, st->stage, st->iter, &len, 1, st->b, err);
}

static int step_sa(cwm_state *s, const cwm_step *st, cwm_err *err) {
  (void)s, (void)st;
  FAIL("SA (storage align) is not supported on CPU targets");
}

static int step_ca(cwm_state *s, const cwm_step *st, cwm_err *err) {
  int rc;
  if ((rc = check_stage(s, st, 1, err))) return rc;
  int p = st->stage, t = st->a;
  if (t < 0 || t >= s->nstages) FAIL("CA: target stage %d out of range", t);
  if (t == p) FAIL("CA: a stage cannot be computed at itself");
  if (cwm_stage_is_placeholder(s, t) || s->stages[t].loc == CWM_LOC_INLINE)
    FAIL("CA: target stage %s is a placeholder or inlined", cwm_stage_name(s, t));
  if (st->b < 0 || st->b >= s->stages[t].niters)
    FAIL("CA: target iterator %d out of range (stage %s has %d)", st->b, cwm_stage_name(s, t), s->stages[t].niters);
  if (is_output_stage(s, p)) FAIL("CA: the output stage %s cannot be attached", cwm_stage_name(s, p));
  if (s->stages[p].body_tid != s->stages[p].tid &&
      cwm_dag_tensor(s->dag, s->stages[p].tid)->ndim != cwm_dag_tensor(s->dag, s->stages[p].body_tid)->ndim) {
    /* an rfactor stage may be attached when its factor axis is its tensor's last dim (the
     * others are then its root axes, in order, as bound inference takes them) */
    const cwm_op *rf = cwm_dag_tensor(s->dag, s->stages[p].tid);
    if (rf->ndim != cwm_dag_tensor(s->dag, s->stages[p].body_tid)->ndim + 1 || strcmp(rf->axis[rf->ndim - 1], "rfa"))
      FAIL("CA: an rfactor stage whose factor axis is not its last dim cannot be attached");
  }
  int q = -1;
  if (attach_breaker(s, p, t, st->b, &q))
    FAIL("CA: stage %s can only be attached in a stage that is or holds all its readers, at or outside "
         "their loops (%s %s)", cwm_stage_name(s, p), q >= 0 ? cwm_stage_name(s, q) : "it has none",
         q >= 0 ? "is outside" : "");
  /* no cycles: t must not be attached (transitively) inside p */
  for (int x = t, guard = 0; s->stages[x].loc == CWM_LOC_ITER && guard < CWM_MAX_STAGES; guard++) {
    x = s->stages[x].attach_stage;
    if (x == p) FAIL("CA: cycle: %s is attached inside %s", cwm_stage_name(s, t), cwm_stage_name(s, p));
  }
  s->stages[p].loc = CWM_LOC_ITER;
  s->stages[p].attach_stage = t;
  s->stages[p].attach_node = s->stages[t].iters[st->b];
  return 0;
}

static int step_ci(cwm_state *s, const cwm_step *st, cwm_err *err) {
  int rc;
  if ((rc = check_stage(s, st, 1, err))) return rc;
  int p = st->stage;
  if (is_output_stage(s, p)) FAIL("CI: the output stage %s cannot be inlined", cwm_stage_name(s, p));
  const cwm_op *b = cwm_stage_body_op(s, p);
  if (b->reduce != CWM_RED_NONE) FAIL("CI: stage %s is a reduction", cwm_stage_name(s, p));
  if (s->stages[p].tid != s->stages[p].body_tid && cwm_stage_op(s, p)->ndim != b->ndim)
    FAIL("CI: stage %s cannot be inlined", cwm_stage_name(s, p));
  if (has_attached(s, p)) FAIL("CI: stage %s has stages attached to it", cwm_stage_name(s, p));
  s->stages[p].loc = CWM_LOC_INLINE;
  s->stages[p].attach_stage = s->stages[p].attach_node = -1;
  return 0;
}

static int step_cr(cwm_state *s, const cwm_step *st, cwm_err *err) {
  int rc;
  if ((rc = check_stage(s, st, 0, err))) return rc;
  if (cwm_stage_is_placeholder(s, st->stage)) FAIL("CR: stage %d is a placeholder", st->stage);
  s->stages[st->stage].loc = CWM_LOC_ROOT;
  s->stages[st->stage].attach_stage = s->stages[st->stage].attach_node = -1;
  return 0;
}

static int step_chw(cwm_state *s, const cwm_step *st, cwm_err *err) {
  int rc;
  if ((rc = check_stage(s, st, 1, err))) return rc;
  int p = st->stage;
  cwm_stage *sg = &s->stages[p];
  if (strcmp(st->scope, "local")) FAIL("CHW: scope \"%s\" is not supported (use \"local\")", st->scope);
  if (!untransformed(sg) || sg->loc != CWM_LOC_ROOT)
    FAIL("CHW: stage %s must be untransformed and at root", cwm_stage_name(s, p));
  if (has_attached(s, p)) FAIL("CHW: stage %s has stages attached to it", cwm_stage_name(s, p));
  if (sg->tid != sg->body_tid) FAIL("CHW: stage %s is already a derived stage", cwm_stage_name(s, p));
  make_ctx c = {.op = cwm_stage_body_op(s, p), .suffix = "local"};
  int ltid = dag_memo(s->dag, MEMO_CHW_LOCAL, sg->body_tid, 0, 0, 0, make_local, &c, err);
  if (ltid < 0) return -ltid;
  c.src_tid = ltid;
  int otid = dag_memo(s->dag, MEMO_CHW_ORIG, sg->body_tid, ltid, 0, 0, make_copy_from, &c, err);
  if (otid < 0) return -otid;
  if ((rc = insert_stage(s, p, err))) return rc;
  cwm_stage *local = &s->stages[p], *orig = &s->stages[p + 1];
  local->tid = local->body_tid = ltid;
  stage_reset(local, cwm_dag_tensor(s->dag, ltid));
  orig->body_tid = otid;
  stage_reset(orig, cwm_dag_tensor(s->dag, otid));
  return 0;
}

static int step_chr(cwm_state *s, const cwm_step *st, cwm_err *err) {
  int rc;
  if ((rc = check_stage(s, st, 0, err))) return rc;
  int p = st->stage;
  if (strcmp(st->scope, "local") && strcmp(st->scope, "global"))
    FAIL("CHR: scope \"%s\" is not supported", st->scope);
  if (st->n < 1) FAIL("CHR: no reader stages");
  int tid = s->stages[p].tid;
  for (int i = 0; i < st->n; i++) {
    int r = st->v[i];
    if (r <= p || r >= s->nstages) FAIL("CHR: reader stage %d out of range", r);
    if (s->stages[r].loc == CWM_LOC_INLINE) FAIL("CHR: reader %s is inlined", cwm_stage_name(s, r));
    if (!cwm_expr_reads(cwm_stage_body_op(s, r)->body, tid))
      FAIL("CHR: stage %s does not read %s", cwm_stage_name(s, r), cwm_stage_name(s, p));
    if (i && r <= st->v[i - 1]) FAIL("CHR: reader ids must be increasing");
  }
  make_ctx c = {.op = cwm_stage_op(s, p), .suffix = st->scope, .src_tid = tid};
  int ctid = dag_memo(s->dag, MEMO_CHR_COPY, tid, st->scope[0], 0, 0, make_cache_read, &c, err);
  if (ctid < 0) return -ctid;
  int newbody[CWM_MAX_STAGES];
  for (int i = 0; i < st->n; i++) {
    make_ctx rc2 = {.op = cwm_stage_body_op(s, st->v[i]), .src_tid = tid, .dst_tid = ctid};
    newbody[i] = dag_memo(s->dag, MEMO_CHR_READER, s->stages[st->v[i]].body_tid, tid, ctid, 0, make_reader, &rc2, err);
    if (newbody[i] < 0) return -newbody[i];
  }
  if ((rc = insert_stage(s, p + 1, err))) return rc;
  cwm_stage *cs = &s->stages[p + 1];
  cs->tid = cs->body_tid = ctid;
  stage_reset(cs, cwm_dag_tensor(s->dag, ctid));
  for (int i = 0; i < st->n; i++) s->stages[st->v[i] + 1].body_tid = newbody[i];
  return 0;
}

static int step_rf(cwm_state *s, const cwm_step *st, cwm_err *err) {
  int rc;
  if ((rc = check_stage(s, st, 1, err)) || (rc = check_iter(s, st, err))) return rc;
  int p = st->stage;
  cwm_stage *sg = &s->stages[p];
  const cwm_op *body = cwm_stage_body_op(s, p);
  if (body->reduce == CWM_RED_NONE) FAIL("RF: stage %s is not a reduction", cwm_stage_name(s, p));
  if (sg->tid != sg->body_tid) FAIL("RF: stage %s is already a derived stage", cwm_stage_name(s, p));
  int x = sg->iters[st->iter];
  if (sg->nodes[x].kind != CWM_IT_REDUCE) FAIL("RF: iterator %d is not a reduction iterator", st->iter);
  if (st->a < 0 || st->a > body->ndim || body->ndim + 1 > CWM_MAX_DIMS)
    FAIL("RF: factor_iter_id %d out of range 0..%d", st->a, body->ndim);
  if (has_attached(s, p) || sg->loc != CWM_LOC_ROOT)
    FAIL("RF: stage %s must be at root with nothing attached", cwm_stage_name(s, p));
  make_ctx c = {.op = body, .rf_extent = sg->nodes[x].extent, .rf_pos = st->a};
  int rtid = dag_memo(s->dag, MEMO_RF_TENSOR, sg->body_tid, c.rf_extent, c.rf_pos, 0, make_rf_tensor, &c, err);
  if (rtid < 0) return -rtid;
  c.src_tid = rtid;
  int otid = dag_memo(s->dag, MEMO_RF_ORIG, sg->body_tid, c.rf_extent, c.rf_pos, rtid, make_rf_orig, &c, err);
  if (otid < 0) return -otid;
  if ((rc = insert_stage(s, p, err))) return rc;
  cwm_stage *rf = &s->stages[p], *orig = &s->stages[p + 1];
  *rf = *orig; /* the rf stage keeps the iterator graph */
  rf->tid = rtid;
  rf->nodes[x].kind = CWM_IT_SPATIAL;
  /* factor iterator first, then the others in their order */
  int pos = stage_iter_pos(rf, x);
  memmove(&rf->iters[1], &rf->iters[0], sizeof(int) * (size_t)pos);
  rf->iters[0] = x;
  rf->nout = 0;
  for (int i = 0, j = 0; i <= body->ndim; i++) rf->out_node[rf->nout++] = i == st->a ? x : j++;
  rf->auto_unroll = 0;
  orig->body_tid = otid;
  orig->auto_unroll = 0;
  stage_reset(orig, cwm_dag_tensor(s->dag, otid));
  return 0;
}

/* One function per step kind; a kind without one is refused. */
typedef int (*step_fn)(cwm_state *s, const cwm_step *st, cwm_err *err);
static const step_fn step_table[CWM_S__COUNT] = {
    [CWM_S_AN] = step_an,
    [CWM_S_PR] = step_pr,
    [CWM_S_RE] = step_re,
    [CWM_S_FU] = step_fu,
    [CWM_S_SP] = step_sp,
    [CWM_S_FSP] = step_fsp,
    [CWM_S_FFSP] = step_ffsp,
    [CWM_S_SA] = step_sa,
    [CWM_S_CA] = step_ca,
    [CWM_S_CI] = step_ci,
    [CWM_S_CR] = step_cr,
    [CWM_S_CHW] = step_chw,
    [CWM_S_CHR] = step_chr,
    [CWM_S_RF] = step_rf,
};

int state_apply_step(cwm_state *s, const cwm_step *st, cwm_err *err) {
  if ((int)st->kind < 0 || st->kind >= CWM_S__COUNT || !step_table[st->kind])
    FAIL("unknown step kind %d", (int)st->kind);
  return step_table[st->kind](s, st, err);
}

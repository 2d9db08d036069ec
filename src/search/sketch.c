/* sketch.c: Ansor's CPU sketch rules (always-inline, rfactor, cache write, multi-level tiling with
 * and without a fused element-wise consumer) over cwm step lists, and the access analyses the
 * rules, the annotation and the mutation share. A sketch is a state whose SP lengths are 0. */
#include "cwm/sketch.h"
#include "cwm/codegen.h"

#include <stdlib.h>
#include <string.h>

/* Ansor reads the host's core count when it decides on rfactor; a fixed number keeps the sketch
 * set a property of the workload alone. 4 is the smallest count for which the reference's own
 * example (matmul 8x8x512) yields its 5 sketches. */
#define SKETCH_CORES 4
/* Ansor's CPU "SSRSRS": 4 spatial levels, 2 reduction levels. */
static const char TILE_FORMAT[] = "SSRSRS";
/* Each rule may fork a state; this bounds the product over many reductions. */
#define MAX_SKETCHES 4096

/* ------------------------------------------------------------------ access analysis */

static int is_output(const cwm_state *s, int p) {
  return s->stages[p].tid == cwm_dag_workload(s->dag)->output;
}

int cwm_stage_is_rfactor(const cwm_state *s, int p) {
  return s->stages[p].tid != s->stages[p].body_tid &&
         cwm_stage_op(s, p)->ndim != cwm_stage_body_op(s, p)->ndim;
}

/* Marks in used[] the loop variables in e; index expressions may be any integer expression. */
static void gather_vars(const cwm_expr *e, int *used) {
  if (!e) return;
  if (e->kind == CWM_X_VAR && e->var >= 0 && e->var < 2 * CWM_MAX_DIMS) used[e->var] = 1;
  for (int i = 0; i < e->nargs; i++) gather_vars(e->args[i], used);
}

/* Union of the variables over every read of tensor t in e. Returns whether t is read at all. */
static int read_vars(const cwm_expr *e, int t, int *used) {
  if (!e) return 0;
  int found = 0;
  if (e->kind == CWM_X_READ && e->tensor == t) {
    found = 1;
    for (int i = 0; i < e->nargs; i++) gather_vars(e->args[i], used);
  }
  for (int i = 0; i < e->nargs; i++) found |= read_vars(e->args[i], t, used);
  return found;
}

static void collect_reads(const cwm_expr *e, int *tids, int *n) {
  if (!e) return;
  if (e->kind == CWM_X_READ) {
    int seen = 0;
    for (int i = 0; i < *n; i++) seen |= tids[i] == e->tensor;
    if (!seen && *n < 64) tids[(*n)++] = e->tensor;
  }
  for (int i = 0; i < e->nargs; i++) collect_reads(e->args[i], tids, n);
}

int cwm_needs_tiling(const cwm_state *s, int p) {
  if (cwm_stage_is_placeholder(s, p)) return 0;
  const cwm_op *b = cwm_stage_body_op(s, p);
  int tids[64], nt = 0, missing = 0;
  collect_reads(b->body, tids, &nt);
  for (int k = 0; k < nt; k++) {
    int used[2 * CWM_MAX_DIMS] = {0};
    read_vars(b->body, tids[k], used);
    for (int a = 0; a < b->ndim; a++)
      if (b->shape[a] > 1 && !used[a]) {
        missing++;
        break;
      }
    if (missing >= 2 || (missing >= 1 && b->nred > 0)) return 1;
  }
  return 0;
}

/* The loop count a stage has before any split or fuse: its op's axes; an rfactor stage has the
 * original spatial axes, the factor axis and the one remaining (fused) reduction part. */
static int base_iters(const cwm_state *s, int p) {
  const cwm_op *b = cwm_stage_body_op(s, p);
  if (cwm_stage_is_rfactor(s, p)) return b->ndim + 2;
  return cwm_stage_op(s, p)->ndim + b->nred;
}

int cwm_stage_is_tiled(const cwm_state *s, int p) {
  return s->stages[p].niters != base_iters(s, p);
}

int cwm_splits_reduction(const cwm_state *s, int step) {
  if (step < 0 || step >= s->nsteps) return 0;
  const cwm_step *st = &s->steps[step];
  if (st->kind != CWM_S_SP || st->n != 1 || st->stage < 0 || st->stage >= s->nstages) return 0;
  int multi = 0;
  for (int i = 0; i < s->nsteps && !multi; i++)
    multi = s->steps[i].kind == CWM_S_SP && s->steps[i].stage == st->stage && s->steps[i].n == 3;
  if (!multi || cwm_stage_is_placeholder(s, st->stage)) return 0;
  const cwm_op *b = cwm_stage_body_op(s, st->stage);
  for (int k = 0; b && k < b->nred; k++)
    if (b->red_extent[k] == st->extent) return 1;
  return 0;
}

static int has_reduce_iter(const cwm_state *s, int p) {
  const cwm_stage *sg = &s->stages[p];
  for (int i = 0; i < sg->niters; i++)
    if (sg->nodes[sg->iters[i]].kind != CWM_IT_SPATIAL) return 1;
  return 0;
}

int cwm_single_consumer(const cwm_state *s, int p) {
  int c[CWM_MAX_STAGES];
  return cwm_stage_consumers(s, p, c) == 1 ? c[0] : -1;
}

int cwm_attached_count(const cwm_state *s, int p, int iter) {
  if (iter < 0 || iter >= s->stages[p].niters) return 0;
  int node = s->stages[p].iters[iter], n = 0;
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i].loc == CWM_LOC_ITER && s->stages[i].attach_stage == p &&
        s->stages[i].attach_node == node)
      n++;
  return n;
}

/* Every read of tensor t in e indexes it by the loop variables 0..ndim-1 in order. */
static int reads_elementwise(const cwm_expr *e, int t, int ndim) {
  if (!e) return 1;
  if (e->kind == CWM_X_READ && e->tensor == t) {
    if (e->nargs != ndim) return 0;
    for (int i = 0; i < e->nargs; i++)
      if (e->args[i]->kind != CWM_X_VAR || e->args[i]->var != i) return 0;
  }
  for (int i = 0; i < e->nargs; i++)
    if (!reads_elementwise(e->args[i], t, ndim)) return 0;
  return 1;
}

/* Ansor's ElementWiseMatch: the chain of single direct readers from p reaches target, each link
 * with the same output shape and reading its producer at exactly its own axes. */
static int elementwise_match(const cwm_state *s, int p, int target) {
  int cur = p;
  for (int guard = 0; cur != target && guard < CWM_MAX_STAGES; guard++) {
    int next = -1, nreaders = 0;
    for (int c = 0; c < s->nstages; c++)
      if (c != cur && !cwm_stage_is_placeholder(s, c) &&
          cwm_expr_reads(cwm_stage_body_op(s, c)->body, s->stages[cur].tid))
        next = c, nreaders++;
    if (nreaders != 1) return 0;
    const cwm_op *a = cwm_stage_op(s, cur), *b = cwm_stage_body_op(s, next);
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
      if (a->shape[d] != b->shape[d]) return 0;
    if (!reads_elementwise(b->body, s->stages[cur].tid, a->ndim)) return 0;
    cur = next;
  }
  return cur == target;
}

/* Ansor's HasSingleElementwiseMatchedConsumer. */
static int single_ew_consumer(const cwm_state *s, int p, int *target) {
  int c = cwm_single_consumer(s, p);
  if (c < 0 || !elementwise_match(s, p, c)) return 0;
  if (has_reduce_iter(s, p) && has_reduce_iter(s, c)) return 0;
  *target = c;
  return 1;
}

/* Plain axis variables in increasing order (missing axes allowed, no repeats) in every read. */
static int reads_in_order(const cwm_expr *e) {
  if (!e) return 1;
  if (e->kind == CWM_X_READ) {
    int last = -1;
    for (int i = 0; i < e->nargs; i++) {
      if (e->args[i]->kind != CWM_X_VAR || e->args[i]->var <= last) return 0;
      last = e->args[i]->var;
    }
  }
  for (int i = 0; i < e->nargs; i++)
    if (!reads_in_order(e->args[i])) return 0;
  return 1;
}

/* Ansor's IsStrictInlineable for an element-wise stage. */
static int strictly_inlineable(const cwm_state *s, int p) {
  const cwm_op *b = cwm_stage_body_op(s, p);
  if (b->reduce != CWM_RED_NONE || b->nred > 0) return 0;
  return reads_in_order(b->body) && !cwm_expr_has_call(b->body) && !cwm_expr_has_select(b->body);
}

/* What dot_product_form learns from the reads of a body: ok stays 1 while every read takes the
 * last reduction axis (kv) only as its last index, plainly, or not at all; once is set by a
 * read of a tensor that is not a weight, walks the innermost output axis (jv) with a stride and
 * takes every output axis longer than 1 (each of its elements serves one output only). */
typedef struct {
  int ok, once;
} dot_scan;

static void scan_dot(const cwm_workload *w, const cwm_op *b, const cwm_expr *e, int kv, int jv, dot_scan *d) {
  if (!e) return;
  if (e->kind == CWM_X_READ && e->nargs > 0) {
    int head[2 * CWM_MAX_DIMS] = {0}, tail[2 * CWM_MAX_DIMS] = {0};
    for (int i = 0; i < e->nargs; i++) gather_vars(e->args[i], i + 1 < e->nargs ? head : tail);
    const cwm_expr *last = e->args[e->nargs - 1];
    int last_is_k = last->kind == CWM_X_VAR && last->var == kv;
    if (head[kv] || (tail[kv] && !last_is_k)) d->ok = 0;
    int every = 1;
    for (int a = 0; a < b->ndim; a++)
      if (b->shape[a] > 1 && !head[a] && !tail[a]) every = 0;
    int weight = e->tensor >= 0 && e->tensor < w->nops && w->ops[e->tensor].is_const;
    if (last_is_k && head[jv] && every && !weight) d->once = 1;
  }
  for (int i = 0; i < e->nargs; i++) scan_dot(w, b, e->args[i], kv, jv, d);
}

/* Beyond Ansor: a product whose reduction is the contiguous axis of every read, with an operand
 * that is read across the innermost output axis with a stride and serves one output element only:
 * decode-time attention, one query row against a [B, N, K] key cache. Multi-level tiling
 * vectorizes the output axis, which needs that operand transposed into a pack on every call, all
 * of it copied for a single use; it is not a weight, so the pack cannot be made ahead. Untiled,
 * the reduction runs innermost as a vector dot product (the accumulate-in-a-scalar path of
 * codegen, accum.c) that reads the operand once, in place. */
static int dot_product_form(const cwm_state *s, int p) {
  if (cwm_stage_is_placeholder(s, p) || s->stages[p].tid != s->stages[p].body_tid) return 0;
  const cwm_op *b = cwm_stage_body_op(s, p);
  if (b->nred == 0 || b->red_extent[b->nred - 1] < 8) return 0;
  int jv = b->ndim - 1;
  while (jv >= 0 && b->shape[jv] == 1) jv--;
  if (jv < 0) return 0;
  dot_scan d = {1, 0};
  scan_dot(cwm_dag_workload(s->dag), b, b->body, b->ndim + b->nred - 1, jv, &d);
  return d.ok && d.once;
}

/* Ansor's HasCacheWriteStage: was a CHW applied to the stage now at id p? Stage ids are traced
 * back through the steps that inserted stages. */
static int has_cache_write(const cwm_state *s, int p) {
  for (int i = s->nsteps - 1; i >= 0; i--) {
    const cwm_step *st = &s->steps[i];
    if (st->kind == CWM_S_CHW && st->stage == p) return 1;
    if ((st->kind == CWM_S_CHW || st->kind == CWM_S_CHR || st->kind == CWM_S_RF) && p > st->stage) p--;
  }
  return 0;
}

/* Ansor's GetSingleConsumerId: the only consumer, or the stage every consumer is (root) or is
 * attached in (a softmax's exponentials, read by the sum attached in the division and by the
 * division itself); *limit is then the outermost loop position of the division at which one of
 * the others is attached, the innermost position left for the stage (a consumer must not run
 * before it). -1 when there is none. */
static int common_consumer_root(const cwm_state *s, int p, int *limit) {
  int c[CWM_MAX_STAGES], n = cwm_stage_consumers(s, p, c), root = -1;
  *limit = CWM_MAX_ITERS;
  if (n == 1) return c[0];
  /* beyond Ansor, which takes each consumer's own attach stage: the root of its whole chain of
   * attach stages, so that a softmax's exponentials can join the row loop that holds the sum
   * and, inside it, the sum's rfactor stage */
  int top[CWM_MAX_STAGES];
  for (int i = 0; i < n; i++) {
    /* every stage of the chain after p: none may run before it */
    int x = cwm_attach_root(s, c[i], p, &top[i]);
    if (x < 0 || (root >= 0 && x != root)) return -1;
    root = x;
  }
  for (int i = 0; i < n; i++) {
    if (top[i] < 0) continue;
    for (int k = 0; k < s->stages[root].niters; k++)
      if (s->stages[root].iters[k] == s->stages[top[i]].attach_node && k < *limit) *limit = k;
  }
  return root;
}

int cwm_compute_location_candidates(const cwm_state *s, int p, int *target, int *iters) {
  int limit, c = common_consumer_root(s, p, &limit);
  *target = c;
  if (c < 0) return 0;
  const cwm_stage *t = &s->stages[c];
  int at_other = t->loc == CWM_LOC_ITER, tiled = cwm_stage_is_tiled(s, c);
  int visited_reduce = 0, n = 0;
  for (int i = 0; i < t->niters && i <= limit; i++) {
    const cwm_node *nd = &t->nodes[t->iters[i]];
    if (nd->kind == CWM_IT_REDUCE) {
      visited_reduce = 1;
      if (!tiled) break; /* do not go into a reduction loop of an untiled consumer */
    } else if (nd->kind == CWM_IT_SPATIAL && visited_reduce) {
      break; /* do not go into the inner tile */
    }
    if (nd->ann == CWM_ANN_UNROLL) break;
    if (nd->extent == 1) continue;
    if (at_other && nd->kind == CWM_IT_SPATIAL) {
      /* outermost tile loops of a consumer that is itself attached have extent 1 in Ansor */
      char name[256];
      cwm_node_name(s, c, t->iters[i], name, sizeof name);
      size_t len = strlen(name);
      if (len >= 2 && !strcmp(name + len - 2, ".0")) continue;
    }
    iters[n++] = i;
    if (cwm_attached_count(s, c, i)) break;
  }
  /* Ansor also offers the loops of the consumer's own attach target; CA here attaches a stage
   * only to its consumer, so those are left out. */
  return n;
}

static int count_parallel(const cwm_state *s, int p, int depth) {
  const cwm_stage *sg = &s->stages[p];
  if (sg->loc == CWM_LOC_INLINE || depth > CWM_MAX_STAGES) return 0;
  int n = 0;
  for (int i = 0; i < sg->niters; i++) {
    if (sg->nodes[sg->iters[i]].ann == CWM_ANN_PARALLEL) n++;
    for (int q = 0; q < s->nstages; q++)
      if (s->stages[q].loc == CWM_LOC_ITER && s->stages[q].attach_stage == p &&
          s->stages[q].attach_node == sg->iters[i])
        n += count_parallel(s, q, depth + 1);
  }
  return n;
}

/* As Ansor's HasNestedParallel: counts the parallel loops of a root stage and everything
 * attached under it, siblings included. */
int cwm_has_nested_parallel(const cwm_state *s) {
  for (int p = 0; p < s->nstages; p++)
    if (s->stages[p].loc == CWM_LOC_ROOT && !cwm_stage_is_placeholder(s, p) &&
        count_parallel(s, p, 0) >= 2)
      return 1;
  return 0;
}

/* ------------------------------------------------------------------ sketch rules */

typedef struct {
  cwm_state *s;
  int stage; /* the next stage to visit; < 0 when done */
} item;

typedef struct {
  item *v;
  int n, cap;
} items;

static void push(items *l, cwm_state *s, int stage) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    l->v = cwm_xrealloc(l->v, sizeof *l->v * (size_t)l->cap);
  }
  l->v[l->n++] = (item){s, stage};
}

static void items_free(items *l) {
  for (int i = 0; i < l->n; i++) cwm_state_free(l->v[i].s);
  free(l->v);
  l->v = NULL;
  l->n = l->cap = 0;
}

static void space_reduce_len(const cwm_state *s, int p, long *space, long *reduce) {
  const cwm_stage *sg = &s->stages[p];
  *space = *reduce = 1;
  for (int i = 0; i < sg->niters; i++) {
    const cwm_node *n = &sg->nodes[sg->iters[i]];
    if (n->kind == CWM_IT_SPATIAL) *space *= n->extent;
    else if (n->kind == CWM_IT_REDUCE) *reduce *= n->extent;
  }
}

/* Ansor's NeedsRfactor (CPU). */
static int needs_rfactor(const cwm_state *s, int p) {
  if (cwm_stage_is_placeholder(s, p) || cwm_stage_body_op(s, p)->nred == 0) return 0;
  if (s->stages[p].tid != s->stages[p].body_tid) return 0; /* RF takes only an original op */
  long space, reduce;
  space_reduce_len(s, p, &space, &reduce);
  if (cwm_needs_tiling(s, p)) return !(space > reduce || space > 16L * SKETCH_CORES);
  return reduce > SKETCH_CORES;
}

/* Applies a step built by the caller; failing means the rule does not fit this state. */
static int add(cwm_state *s, cwm_step st) {
  cwm_err e;
  return cwm_state_apply(s, &st, &e);
}

/* Ansor's DoMultiLevelTiling with TILE_FORMAT: every spatial loop split into 4 parts and every
 * reduction loop into 2 (lengths unknown), then reordered level by level. Fills the ids of the
 * spatial SP steps (loop order). NULL if the stage does not take it (too many loops). */
static cwm_state *multi_level_tiling(const cwm_state *s, int p, int *sp_ids, int *nsp) {
  int nsl = 0, nrl = 0;
  for (const char *c = TILE_FORMAT; *c; c++) {
    if (*c == 'S') nsl++;
    else nrl++;
  }
  cwm_state *t = cwm_state_clone(s);
  int n0 = t->stages[p].niters, base[CWM_MAX_ITERS], kind[CWM_MAX_ITERS], pos = 0;
  *nsp = 0;
  for (int k = 0; k < n0; k++) {
    const cwm_stage *sg = &t->stages[p];
    const cwm_node *nd = &sg->nodes[sg->iters[pos]];
    kind[k] = nd->kind == CWM_IT_SPATIAL;
    int levels = kind[k] ? nsl : nrl;
    base[k] = pos;
    if (levels > 1) {
      cwm_step st = cwm_step_of(CWM_S_SP, p);
      st.iter = pos;
      st.extent = nd->extent;
      st.n = levels - 1; /* lengths stay 0: the sketch's unknowns */
      st.inner_to_outer = 1;
      if (kind[k]) sp_ids[(*nsp)++] = t->nsteps;
      if (add(t, st)) goto fail;
    }
    pos += levels;
  }
  cwm_step re = cwm_step_of(CWM_S_RE, p);
  int sl = 0, rl = 0;
  for (const char *c = TILE_FORMAT; *c; c++) {
    int spatial = *c == 'S', level = spatial ? sl++ : rl++;
    for (int k = 0; k < n0; k++)
      if (kind[k] == spatial) re.v[re.n++] = base[k] + level;
  }
  if (add(t, re)) goto fail;
  return t;
fail:
  cwm_state_free(t);
  return NULL;
}

/* Ansor's FollowTiling + compute_at: consumer c splits each spatial loop like the producer's
 * tiles (FSP with n_split = level), orders the parts level by level, and the producer is
 * computed at the consumer's last loop of that level. */
static cwm_state *fuse_consumer(const cwm_state *tiled, int p, int c, const int *sp_ids, int nsp,
                                int level) {
  const cwm_stage *cg = &tiled->stages[c];
  if (cg->niters != nsp) return NULL;
  for (int i = 0; i < cg->niters; i++)
    if (cg->nodes[cg->iters[i]].kind != CWM_IT_SPATIAL) return NULL;
  cwm_state *t = cwm_state_clone(tiled);
  for (int k = 0; k < nsp; k++) {
    cwm_step st = cwm_step_of(CWM_S_FSP, c);
    st.iter = k * (level + 1);
    st.a = sp_ids[k];
    st.b = level;
    if (add(t, st)) goto fail;
  }
  cwm_step re = cwm_step_of(CWM_S_RE, c);
  for (int j = 0; j <= level; j++)
    for (int k = 0; k < nsp; k++) re.v[re.n++] = k * (level + 1) + j;
  if (add(t, re)) goto fail;
  cwm_step ca = cwm_step_of(CWM_S_CA, p);
  ca.a = c;
  ca.b = level * nsp - 1;
  if (add(t, ca)) goto fail;
  return t;
fail:
  cwm_state_free(t);
  return NULL;
}

/* Ansor's RuleAddRfactor: fuse the reduction loops, split by one unknown factor, and rfactor on
 * either part; the rfactor stage's loops are then put back in Ansor's order (spatial axes, then
 * the two reduction parts), which leaves the inner part innermost for vectorization. */
static void rule_rfactor(const cwm_state *s, int p, items *next) {
  cwm_state *b = cwm_state_clone(s);
  const cwm_stage *sg = &b->stages[p];
  int red[CWM_MAX_ITERS], nr = 0, ns = 0;
  for (int i = 0; i < sg->niters; i++) {
    if (sg->nodes[sg->iters[i]].kind == CWM_IT_REDUCE) red[nr++] = i;
    else ns++;
  }
  if (nr == 0 || red[0] != ns) goto done; /* reduction loops must be the inner ones */
  if (nr > 1) {
    cwm_step fu = cwm_step_of(CWM_S_FU, p);
    for (int i = 0; i < nr; i++) fu.v[fu.n++] = red[i];
    if (add(b, fu)) goto done;
  }
  cwm_step sp = cwm_step_of(CWM_S_SP, p);
  sp.iter = ns;
  sp.extent = b->stages[p].nodes[b->stages[p].iters[ns]].extent;
  sp.n = 1; /* Ansor splits by 1 and then forgets the factor, so it is sampled like a tile */
  sp.inner_to_outer = 1;
  if (add(b, sp)) goto done;
  for (int v = 0; v < 2; v++) {
    cwm_state *t = cwm_state_clone(b);
    cwm_step rf = cwm_step_of(CWM_S_RF, p);
    rf.iter = ns + v;
    rf.a = ns;
    cwm_step re = cwm_step_of(CWM_S_RE, p); /* the rfactor stage takes id p */
    for (int i = 1; i <= ns; i++) re.v[re.n++] = i;
    re.v[re.n++] = v == 0 ? 0 : ns + 1;
    re.v[re.n++] = v == 0 ? ns + 1 : 0;
    if (add(t, rf) || add(t, re)) {
      cwm_state_free(t);
      continue;
    }
    push(next, t, p - 1);
  }
done:
  cwm_state_free(b);
}

/* Runs the rules on one (state, stage) in Ansor's order; takes ownership of it.s. */
static void expand(item it, items *next) {
  cwm_state *s = it.s;
  int p = it.stage;
  if (cwm_stage_is_placeholder(s, p)) {
    push(next, s, p - 1);
    return;
  }
  /* AlwaysInline */
  if (!is_output(s, p) && !has_reduce_iter(s, p) && strictly_inlineable(s, p)) {
    cwm_state *t = cwm_state_clone(s);
    if (add(t, cwm_step_of(CWM_S_CI, p)) == 0) {
      push(next, t, p - 1);
      cwm_state_free(s);
      return;
    }
    cwm_state_free(t);
  }
  /* AddRfactor (apply, keep going) */
  if (needs_rfactor(s, p) && !has_cache_write(s, p)) rule_rfactor(s, p, next);
  int tile = cwm_needs_tiling(s, p), target = -1;
  int ew = tile && single_ew_consumer(s, p, &target);
  /* Beyond Ansor: a stage without a reduction that needs tiling only because it reads two
   * broadcast tensors (a layer norm's output: the row's mean and variance, the columns' gamma
   * and beta) reuses nothing a register tile could keep; every element is read and written
   * once. It also keeps its untiled form, rows vectorized whole (OPT's 32 x 1024 layer norm:
   * 6.8 us untiled; the best of 64 tiled, cache-written candidates 12 us). */
  if (tile && cwm_stage_body_op(s, p)->nred == 0 && !has_cache_write(s, p))
    push(next, cwm_state_clone(s), p - 1);
  /* Beyond Ansor: a dot-product stage keeps its untiled form too (dot_product_form) */
  if (tile && !has_cache_write(s, p) && dot_product_form(s, p)) push(next, cwm_state_clone(s), p - 1);
  /* AddCacheWrite (apply, keep going): the cached stage is visited again with fusion */
  if (tile && !ew) {
    cwm_state *t = cwm_state_clone(s);
    cwm_step chw = cwm_step_of(CWM_S_CHW, p);
    strcpy(chw.scope, "local");
    if (add(t, chw) == 0) push(next, t, p);
    else cwm_state_free(t);
  }
  /* MultiLevelTilingWithFusion: apply and stop after a cache write, else keep going */
  if (tile && ew) {
    int sp_ids[CWM_MAX_ITERS], nsp;
    cwm_state *base = multi_level_tiling(s, p, sp_ids, &nsp);
    int fused = 0;
    for (int level = 1; base && level <= 2; level++) {
      if (TILE_FORMAT[level - 1] != 'S') continue;
      cwm_state *t = fuse_consumer(base, p, target, sp_ids, nsp, level);
      if (t) push(next, t, p - 1), fused++;
    }
    cwm_state_free(base);
    if (fused && has_cache_write(s, p)) {
      cwm_state_free(s);
      return;
    }
  }
  /* MultiLevelTiling: apply and stop */
  if (tile) {
    int sp_ids[CWM_MAX_ITERS], nsp;
    cwm_state *t = multi_level_tiling(s, p, sp_ids, &nsp);
    if (t) {
      push(next, t, p - 1);
      cwm_state_free(s);
      return;
    }
  }
  /* SkipStage */
  push(next, s, p - 1);
}

int cwm_sketches(const cwm_dag *d, cwm_state ***out, int *n, cwm_err *err) {
  *out = NULL;
  *n = 0;
  items now = {0}, next = {0}, done = {0};
  cwm_state *init = cwm_state_init(d);
  push(&now, init, init->nstages - 1);
  /* breadth first, as Ansor's GenerateSketches, so the order of the sketches matches */
  while (now.n) {
    for (int i = 0; i < now.n; i++) {
      if (now.v[i].stage < 0) push(&done, now.v[i].s, -1);
      else expand(now.v[i], &next);
    }
    now.n = 0;
    items tmp = now;
    now = next;
    next = tmp;
    if (now.n + done.n > MAX_SKETCHES) {
      items_free(&now);
      items_free(&next);
      items_free(&done);
      return cwm_fail(err, CWM_ENOSCHED, "more than %d sketches; the workload has too many reductions",
                      MAX_SKETCHES);
    }
  }
  items_free(&next);
  free(now.v);
  cwm_state **v = cwm_xcalloc((size_t)(done.n ? done.n : 1), sizeof *v);
  for (int i = 0; i < done.n; i++) v[i] = done.v[i].s;
  *out = v;
  *n = done.n;
  free(done.v);
  return 0;
}

void cwm_states_free(cwm_state **s, int n) {
  if (!s) return;
  for (int i = 0; i < n; i++) cwm_state_free(s[i]);
  free(s);
}

void cwm_space_opts_default(cwm_space_opts *o) {
  o->cores = 2;
  o->max_innermost = 64;
  /* Ansor's 16 floats is two AVX2 vectors; where the machine has 16-lane vectors, two of those */
  o->max_vectorize = 2 * cwm_codegen_lanes();
  o->vectorize_reorder = 1;
  o->register_tile = 1;
}

const cwm_space_opts *cwm_space_opts_or_default(const cwm_space_opts *o, cwm_space_opts *def) {
  if (o) return o;
  cwm_space_opts_default(def);
  return def;
}

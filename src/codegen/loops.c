/* loops.c: the pieces every nest is written with: lines, the store target, guards, the init and
 * update statements, and the opening and closing of one loop with its bound and pragmas (OpenMP,
 * simd, unroll). stage.c puts them together into a stage's nest; tile.c into register tiles. */
#include "lower_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lower_line(ctx_t *c, int depth, const char *fmt, ...) {
  cwm_buf_indent(c->b, depth);
  va_list ap;
  va_start(ap, fmt);
  cwm_buf_vprintf(c->b, fmt, ap);
  va_end(ap);
  cwm_buf_putc(c->b, '\n');
}

/* Appends " && (value of split node) < its extent" to o (no " && " when o is empty). */
void lower_append_split_guard(ctx_t *c, int p, int node, cwm_buf *o) {
  const cwm_stage *st = &c->L[p].st;
  long ext = st->nodes[node].root >= 0 ? st->domain[st->nodes[node].root] : st->nodes[node].extent;
  cwm_buf v;
  cwm_buf_init(&v);
  lower_emit_node_value(c, p, node, &v, 0);
  cwm_buf_printf(o, "%s(%s) < %ld", o->len ? " && " : "", v.s, ext);
  cwm_buf_free(&v);
}

char *lower_guard_cond(ctx_t *c, int p, int init) {
  const cwm_op *b = body_op(c, p);
  cwm_buf o;
  cwm_buf_init(&o);
  int nroot = b->ndim + b->nred;
  const cwm_stage *st = &c->L[p].st;
  for (int g = 0; g < c->L[p].nguard; g++) {
    int node = c->L[p].guard[g];
    if (init && st->nodes[node].kind != CWM_IT_SPATIAL) continue;
    if (c->L[p].absorbed[g]) continue; /* a loop bound already (loop_bound) */
    lower_append_split_guard(c, p, node, &o);
  }
  for (int r = 0; r < nroot; r++) {
    if (init && r >= b->ndim) continue;
    /* an rfactor stage's init has the spatial roots too: nothing else to leave out */
    if (c->L[p].local && r < b->ndim && c->L[p].gguard[r] && !c->L[p].gabsorbed[r]) {
      char *v = lower_root_value(c, p, r, 1);
      cwm_buf_printf(&o, "%s%s >= 0 && %s < %d", o.len ? " && " : "", v, v, b->shape[r]);
      free(v);
    }
  }
  return cwm_buf_take(&o);
}

void lower_emit_store_target(ctx_t *c, int p, cwm_buf *o) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *top = tensor_op(c, st->tid);
  char nm[128];
  lower_buf_name(c, st->tid, nm, sizeof nm);
  char *idx[CWM_MAX_DIMS];
  for (int d = 0; d < st->nout; d++) {
    int node = st->out_node[d];
    if (st->nodes[node].root >= 0) idx[d] = lower_root_value(c, p, st->nodes[node].root, c->text || !c->L[p].local);
    else {
      cwm_buf t;
      cwm_buf_init(&t);
      lower_emit_node_value(c, p, node, &t, 0);
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
    if (c->text) lower_line(c, depth, "if (%s) %s", cond, stmt);
    else lower_line(c, depth, "if (%s) %s;", cond, stmt);
  } else {
    lower_line(c, depth, "%s%s", stmt, c->text ? "" : ";");
  }
}

/* The reduction's operator as the text form and OpenMP's reduction clause both write it. */
static const char *reduce_op(cwm_reduce r) { return r == CWM_RED_SUM ? "+" : r == CWM_RED_MAX ? "max" : "min"; }

const char *lower_init_value(ctx_t *c, cwm_reduce r) {
  if (r == CWM_RED_SUM) return c->text ? "0" : c->ref ? "0.0" : "0.0f";
  if (r == CWM_RED_MAX) return c->text ? "-inf" : "-INFINITY";
  return c->text ? "inf" : "INFINITY";
}

void lower_emit_init_stmt(ctx_t *c, int p, int depth) {
  const cwm_op *b = body_op(c, p);
  if (c->collect) lower_collect_store(c, p, 1);
  cwm_buf o;
  cwm_buf_init(&o);
  lower_emit_store_target(c, p, &o);
  cwm_buf_printf(&o, " = %s", lower_init_value(c, b->reduce));
  char *cond = lower_guard_cond(c, p, 1);
  emit_guarded(c, depth, cond, o.s);
  free(cond);
  cwm_buf_free(&o);
}

void lower_emit_update_stmt(ctx_t *c, int p, int depth) { lower_emit_update_stmt_with(c, p, depth, body_op(c, p)->body); }

/* The update statement with body in place of the stage's own (partition.c: a select's branch). */
void lower_emit_update_stmt_with(ctx_t *c, int p, int depth, const cwm_expr *body) {
  const cwm_op *b = body_op(c, p);
  if (c->collect) lower_collect_store(c, p, 0);
  c->cur_stage = p;
  int nroot = b->ndim + b->nred;
  char *env[CWM_MAX_DIMS * 2];
  for (int r = 0; r < nroot; r++) env[r] = lower_root_value(c, p, r, 1);
  cwm_buf val, tgt, o;
  cwm_buf_init(&val);
  cwm_buf_init(&tgt);
  cwm_buf_init(&o);
  lower_emit_expr(c, body, env, &val, 0);
  if (c->acc_on && c->acc_stage == p) cwm_buf_puts(&tgt, c->acc_name);
  else lower_emit_store_target(c, p, &tgt);
  if (b->reduce == CWM_RED_NONE) cwm_buf_printf(&o, "%s = %s", tgt.s, val.s);
  else if (c->text) cwm_buf_printf(&o, "%s %s= %s", tgt.s, reduce_op(b->reduce), val.s);
  else if (b->reduce == CWM_RED_SUM) cwm_buf_printf(&o, "%s = %s + %s", tgt.s, tgt.s, val.s);
  else cwm_buf_printf(&o, "%s = %s(%s, %s)", tgt.s, lower_fn_c(c, b->reduce == CWM_RED_MAX ? CWM_FN_MAX : CWM_FN_MIN), tgt.s, val.s);
  char *cond = lower_guard_cond(c, p, 0);
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
    int k = lower_guard_bound_term(c, p, g, &l, &ext);
    if (k < 0) continue; /* cannot happen: planned from the same form */
    long coef = l.coef[k];
    for (int q = k; q + 1 < l.n; q++) l.a[q] = l.a[q + 1], l.coef[q] = l.coef[q + 1];
    l.n--;
    cwm_buf r, e;
    cwm_buf_init(&r);
    cwm_buf_init(&e);
    lower_emit_lin(c, &l, &r);
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

/* Emits the loop at position pos of stage p: in C its named bound, pragmas and opening line, in
 * text one line. Returns a bit set for close_loop: 1 it opened a parallel region, 2 a simd loop. */
static int open_loop_(ctx_t *c, int p, int pos, int depth, int in_init) {
  const cwm_stage *st = &c->L[p].st;
  int node = st->iters[pos];
  const cwm_node *n = &st->nodes[node];
  char nm[300];
  lower_var_name(c, p, node, nm, sizeof nm);
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
    lower_line(c, depth, "%s %s (0,%d)%s", kw, nm, n->extent, unroll && ann != CWM_ANN_UNROLL ? " auto_unroll" : "");
    return 0;
  }
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
    lower_line(c, depth, "const int %s = %s;", bnd, e);
    free(e);
  }
  int acc = c->acc_on && c->acc_stage == p && !in_init; /* a loop around accum.c's scalar */
  if (acc && pos == c->acc_vpos && c->simd_depth == 0) {
    lower_line(c, depth, "#pragma omp simd reduction(%s:%s)", reduce_op(body_op(c, p)->reduce), c->acc_name);
    c->simd_depth++;
    par = 2;
  } else if (acc && ann == CWM_ANN_VECTORIZE) {
    /* a simd loop without the reduction clause would race on the scalar */
  } else if (ann == CWM_ANN_PARALLEL && c->par_depth == 0 && c->simd_depth == 0 && n->extent > 1) {
    lower_line(c, depth, "#pragma omp parallel for");
    c->par_depth++;
    par = 1;
  } else if (ann == CWM_ANN_VECTORIZE) {
    lower_line(c, depth, "#pragma omp simd");
    c->simd_depth++;
    par = 2;
  } else if (unroll > 1) {
    lower_line(c, depth, "#pragma GCC unroll %d", unroll);
  }
  lower_line(c, depth, "for (int %s = 0; %s < %s; ++%s) {", nm, nm, bnd, nm);
  return par;
}

/* open_loop_, and the loop recorded among the open ones (what a collected store's loops are). */
int lower_open_loop(ctx_t *c, int p, int pos, int depth, int in_init) {
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

void lower_close_loop(ctx_t *c, int depth, int par) {
  if (c->nloop > 0) c->nloop--;
  if (!c->text) lower_line(c, depth, "}");
  if (par & 1) c->par_depth--;
  if (par & 2) c->simd_depth--;
}

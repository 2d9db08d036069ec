/* partition.c: the innermost loop of a stage whose statement is a select (a convolution's padding:
 * P[h, w] = select(h >= 1 && h < 57 && w >= 1 && w < 57, I[h - 1, w - 1], 0)) split into three
 * loops: before the range where the condition holds, the range itself with the `then` branch
 * alone, and after it. The condition's conjuncts are linear in the loop variable, so the range is
 * computed once per entry of the loop, from the outer loops' values (Halide's and TVM's loop
 * partitioning). Without it every element tests the condition and reads under a mask, which the
 * compiler turns into a masked gather for a strided read (a stride-2 convolution's packing). */
#include "lower_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONJ 16

/* One conjunct as "coef * v + rest >= k" over the loop variable v. */
typedef struct {
  long coef, k;
  lin_t rest;
} conj_t;

/* Splits cond into conjuncts "coef * v + rest >= k"; 0 when some part is not of that form. */
static int collect(ctx_t *c, const cwm_expr *cond, const lin_t *env, int p, int node, conj_t *out, int *n) {
  if (cond->kind == CWM_X_AND) {
    for (int i = 0; i < cond->nargs; i++)
      if (!collect(c, cond->args[i], env, p, node, out, n)) return 0;
    return 1;
  }
  if (cond->kind != CWM_X_CMP || cond->nargs != 2 || *n >= MAX_CONJ) return 0;
  lin_t l = lower_expr_lin(c, cond->args[0], env), r = lower_expr_lin(c, cond->args[1], env);
  if (!l.ok || !r.ok) return 0;
  lin_t d = lower_lin_add(l, &r, -1); /* d OP 0 */
  if (!d.ok) return 0;
  long k;
  switch (cond->op) {
  case 'g': k = 0; break;                              /* d >= 0 */
  case '>': k = 1; break;                              /* d >= 1 */
  case 'l': d = lower_lin_add(lin_const(0), &d, -1), k = 0; break;  /* -d >= 0 */
  case '<': d = lower_lin_add(lin_const(0), &d, -1), k = 1; break;  /* -d >= 1 */
  default: return 0;
  }
  if (!d.ok) return 0;
  conj_t *o = &out[(*n)++];
  o->coef = 0, o->k = k - d.c0;
  o->rest = lin_const(0);
  for (int i = 0; i < d.n; i++) {
    const atom_t *a = &d.a[i];
    if (a->stage == p && a->node == node) {
      if (a->div != 1 || a->mod) return 0;
      o->coef += d.coef[i];
    } else {
      lower_lin_addterm(&o->rest, d.coef[i], *a);
    }
  }
  return 1;
}

int lower_try_partition(ctx_t *c, int p, int pos, int depth) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *b = body_op(c, p);
  if (c->text || c->ref || c->collect || c->work_only) return 0;
  if (b->reduce != CWM_RED_NONE || !b->body || b->body->kind != CWM_X_SELECT || b->body->nargs != 3) return 0;
  if (pos != st->niters - 1 || c->L[p].nbound[pos]) return 0;
  int node = st->iters[pos];
  const cwm_node *n = &st->nodes[node];
  /* a short loop gains nothing: its middle part holds less than two vectors, and computing the
   * range costs more than testing a few elements (measured: a 5-wide loop 1.4x slower) */
  if (n->extent < 16 || n->ann == CWM_ANN_PARALLEL || lower_attached_in_loops(c, p, pos, pos)) return 0;
  lin_t env[CWM_MAX_DIMS * 2];
  for (int r = 0; r < b->ndim + b->nred; r++) {
    env[r] = lower_root_lin(c, p, r);
    if (!env[r].ok) return 0;
  }
  conj_t cj[MAX_CONJ];
  int ncj = 0;
  if (!collect(c, b->body->args[0], env, p, node, cj, &ncj)) return 0;
  char nm[300], lo[340], hi[340];
  lower_var_name(c, p, node, nm, sizeof nm);
  snprintf(lo, sizeof lo, "%s_lo%d", nm, c->nbounds);
  snprintf(hi, sizeof hi, "%s_hi%d", nm, c->nbounds++);
  lower_line(c, depth, "/* the select's condition holds for %s in [%s, %s) */", nm, lo, hi);
  lower_line(c, depth, "int %s = 0, %s = %d;", lo, hi, n->extent);
  for (int i = 0; i < ncj; i++) {
    cwm_buf r;
    cwm_buf_init(&r);
    lower_emit_lin(c, &cj[i].rest, &r);
    long a = cj[i].coef, k = cj[i].k;
    /* a * v >= k - rest: v >= ceil((k - rest) / a) for a > 0, v <= floor((rest - k) / -a) for a < 0 */
    if (a == 0) lower_line(c, depth, "if ((%s) < %ld) %s = 0;", r.s, k, hi);
    else if (a == 1) lower_line(c, depth, "if (%ld - (%s) > %s) %s = %ld - (%s);", k, r.s, lo, lo, k, r.s);
    else if (a == -1) lower_line(c, depth, "if ((%s) - %ld + 1 < %s) %s = (%s) - %ld + 1;", r.s, k, hi, hi, r.s, k);
    else if (a > 0)
      lower_line(c, depth, "{ const int t__ = %ld - (%s); const int q__ = t__ >= 0 ? (t__ + %ld) / %ld : -(-t__ / %ld); if (q__ > %s) %s = q__; }",
                 k, r.s, a - 1, a, a, lo, lo);
    else
      lower_line(c, depth, "{ const int t__ = (%s) - %ld; const int q__ = (t__ >= 0 ? t__ / %ld : -((-t__ + %ld) / %ld)) + 1; if (q__ < %s) %s = q__; }",
                 r.s, k, -a, -a - 1, -a, hi, hi);
    cwm_buf_free(&r);
  }
  lower_line(c, depth, "if (%s > %d) %s = %d;", lo, n->extent, lo, n->extent);
  lower_line(c, depth, "if (%s < %s) %s = %s;", hi, lo, hi, lo);
  const char *simd = n->ann == CWM_ANN_VECTORIZE ? "#pragma omp simd" : NULL;
  const char *from[3] = {"0", lo, hi};
  char last[32];
  snprintf(last, sizeof last, "%d", n->extent);
  const char *to[3] = {lo, hi, last};
  for (int part = 0; part < 3; part++) {
    if (simd && part == 1) lower_line(c, depth, "%s", simd), c->simd_depth++;
    lower_line(c, depth, "for (int %s = %s; %s < %s; ++%s) {", nm, from[part], nm, to[part], nm);
    c->nloop++;
    lower_emit_update_stmt_with(c, p, depth + 1, part == 1 ? b->body->args[1] : b->body);
    c->nloop--;
    lower_line(c, depth, "}");
    if (simd && part == 1) c->simd_depth--;
  }
  return 1;
}

/* accum.c: a reduction whose innermost loops are all reduction loops (loops of extent 1 aside)
 * accumulates in a local scalar: loaded from the store target before those loops, stored back
 * after them. The innermost of them, if it is 8 or more long and reads every operand
 * contiguously (or not at all), gets `#pragma omp simd reduction(op: scalar)`, which lets GCC
 * keep one partial result per lane: it does not vectorize a float reduction on its own, since
 * that reorders the additions. A softmax's row maximum and sum over a prime length (197: no
 * split gives a vector axis) and a decode-time attention's dot products (M = 1, the reduction is
 * the contiguous axis) run as vector loops this way instead of one element at a time. */
#include "lower_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether every read of e (through inlined stages) moves by 0 or 1 element as leaf `leaf` of
 * stage p steps; env holds the values of e's axes as linear forms. */
static int reads_contiguous(ctx_t *c, int p, int leaf, const cwm_expr *e, const lin_t *env, int depth) {
  if (!e || depth > CWM_MAX_STAGES) return 0;
  if (e->kind == CWM_X_READ) {
    int q = state_stage_of_tid(c->s, e->tensor);
    if (q >= 0 && c->s->stages[q].loc == CWM_LOC_INLINE) {
      lin_t idx[CWM_MAX_DIMS];
      for (int i = 0; i < e->nargs && i < CWM_MAX_DIMS; i++) idx[i] = lower_expr_lin(c, e->args[i], env);
      return reads_contiguous(c, p, leaf, body_op(c, q)->body, idx, depth + 1);
    }
    const rewrite_t *rw = e->tensor >= 0 && e->tensor < CWM_MAX_OPS ? c->rw[e->tensor] : NULL;
    if (rw && rw->stage != p) return 0;
    lin_t idx[RW_MAX_DIMS];
    long dims[RW_MAX_DIMS];
    int n = lower_read_index(c, p, e, env, idx, dims);
    long st = lower_flat_stride(p, leaf, idx, dims, n);
    return st == 0 || st == 1;
  }
  for (int i = 0; i < e->nargs; i++)
    if (!reads_contiguous(c, p, leaf, e->args[i], env, depth)) return 0;
  return 1;
}

/* Whether identifier name occurs in s as a whole word. */
static int has_word(const char *s, const char *name) {
  size_t n = strlen(name);
  for (const char *t = strstr(s, name); t; t = strstr(t + 1, name)) {
    int before = t > s && (isalnum((unsigned char)t[-1]) || t[-1] == '_');
    int after = isalnum((unsigned char)t[n]) || t[n] == '_';
    if (!before && !after) return 1;
  }
  return 0;
}

int lower_accum_plan(ctx_t *c, int p, int *vpos) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *b = body_op(c, p);
  *vpos = -1;
  if (c->text || c->ref || c->collect || c->work_only || b->reduce == CWM_RED_NONE) return -1;
  int start = st->niters, inner = -1;
  while (start > 0) {
    const cwm_node *n = &st->nodes[st->iters[start - 1]];
    if (n->kind != CWM_IT_REDUCE && n->extent != 1) break;
    if (n->kind == CWM_IT_REDUCE && n->extent > 1 && inner < 0) inner = start - 1;
    start--;
  }
  /* the init statement comes first, at the first reduction loop */
  int first_red = lower_first_reduce_pos(st);
  if (start < first_red) start = first_red;
  if (inner < 0 || lower_attached_in_loops(c, p, start, st->niters - 1)) return -1;
  /* a register tile inside takes over those loops; a guard on the spatial axes would have to
   * guard the load and store of the scalar too */
  rtile_t rt;
  for (int pos = start; pos < st->niters; pos++)
    if (lower_register_tile_plan(c, p, pos, &rt, TILE_PLAIN) || lower_register_tile_plan(c, p, pos, &rt, TILE_INSIDE))
      return -1;
  char *cond = lower_guard_cond(c, p, 1);
  int guarded = cond[0] != 0;
  free(cond);
  if (guarded) return -1;
  /* the store target must not name a loop the scalar lives across */
  cwm_buf tgt;
  cwm_buf_init(&tgt);
  lower_emit_store_target(c, p, &tgt);
  int names_tail = 0;
  for (int pos = start; pos < st->niters && !names_tail; pos++) {
    char nm[300];
    lower_var_name(c, p, st->iters[pos], nm, sizeof nm);
    names_tail = has_word(tgt.s, nm);
  }
  cwm_buf_free(&tgt);
  if (names_tail) return -1;
  lin_t env[CWM_MAX_DIMS * 2];
  for (int r = 0; r < b->ndim + b->nred; r++) env[r] = lower_root_lin(c, p, r);
  /* a loop shorter than an 8-lane vector (a 3x3 kernel's taps) stays scalar */
  if (st->nodes[st->iters[inner]].extent >= 8 && reads_contiguous(c, p, st->iters[inner], b->body, env, 0)) *vpos = inner;
  return start;
}

void lower_accum_begin(ctx_t *c, int p, int vpos, int depth) {
  cwm_buf tgt;
  cwm_buf_init(&tgt);
  lower_emit_store_target(c, p, &tgt);
  snprintf(c->acc_name, sizeof c->acc_name, "acc__%d", c->tmp++);
  lower_line(c, depth, "float %s = %s;", c->acc_name, tgt.s);
  cwm_buf_free(&tgt);
  c->acc_on = 1;
  c->acc_stage = p;
  c->acc_vpos = vpos;
}

void lower_accum_end(ctx_t *c, int p, int depth) {
  cwm_buf tgt;
  cwm_buf_init(&tgt);
  lower_emit_store_target(c, p, &tgt);
  lower_line(c, depth, "%s = %s;", tgt.s, c->acc_name);
  cwm_buf_free(&tgt);
  c->acc_on = 0;
}

/* stage.c: a stage's loop nest with the stages attached in it, the reduction's init nest and
 * local buffers, written with the pieces of loops.c; register tiles (tile.c) take over the inner
 * loops where they apply. Also the reference kernel's nests. */
#include "lower_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lower_emit_alloc_and_stage(ctx_t *c, int q, int depth) {
  const cwm_op *op = tensor_op(c, c->L[q].st.tid);
  char nm[128];
  lower_buf_name(c, c->L[q].st.tid, nm, sizeof nm);
  long size = 1;
  for (int d = 0; d < op->ndim; d++) size *= c->L[q].dims[d];
  int heap = size * 4 > 256 * 1024;
  if (c->text) {
    cwm_buf_indent(c->b, depth);
    cwm_buf_printf(c->b, "allocate %s[", nm);
    for (int d = 0; d < op->ndim; d++) cwm_buf_printf(c->b, "%s%d", d ? ", " : "", c->L[q].dims[d]);
    cwm_buf_puts(c->b, "]\n");
  } else if (heap) {
    lower_line(c, depth, "float *restrict %s = (float *)malloc(%ld * sizeof(float));", nm, size);
  } else {
    lower_line(c, depth, "float %s[%ld] __attribute__((aligned(64)));", nm, size);
  }
  if (!c->text && lower_padded_needs_zero(c, q)) {
    lower_line(c, depth, "/* the padded edge tile accumulates into the part of %s past the tensor's edge */", nm);
    lower_line(c, depth, "memset(%s, 0, %ld * sizeof(float));", nm, size);
  }
  lower_emit_stage(c, q, depth);
  /* a heap buffer of an attached stage is freed where its scope ends (emit_attached_frees),
   * after the consumer's statements that read it */
  if (!c->text && heap && c->s->stages[q].loc != CWM_LOC_ITER) lower_line(c, depth, "free(%s);", nm);
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
      lower_buf_name(c, sq->tid, nm, sizeof nm);
      lower_line(c, depth, "free(%s);", nm);
    }
  }
}

static void emit_attached(ctx_t *c, int p, int node, int depth) {
  for (int q = 0; q < c->s->nstages; q++)
    if (c->s->stages[q].loc == CWM_LOC_ITER && c->s->stages[q].attach_stage == p &&
        c->s->stages[q].attach_node == node)
      lower_emit_alloc_and_stage(c, q, depth);
}

/* The reduction's init nest from loop position pos on: the spatial loops only. */
static void emit_init_nest(ctx_t *c, int p, int pos, int depth) {
  const cwm_stage *st = &c->L[p].st;
  int ipar[CWM_MAX_ITERS], id = depth;
  for (int j = pos; j < st->niters; j++) {
    if (st->nodes[st->iters[j]].kind != CWM_IT_SPATIAL) continue;
    ipar[j] = lower_open_loop(c, p, j, id++, 1);
  }
  lower_emit_init_stmt(c, p, id);
  for (int j = st->niters - 1; j >= pos; j--) {
    if (st->nodes[st->iters[j]].kind != CWM_IT_SPATIAL) continue;
    lower_close_loop(c, --id, ipar[j]);
  }
}

/* The loops of stage p from position pos on, with their guards and attached stages, around the
 * update: the slow path of a guarded register tile (init: its init nest first). */
static void emit_stage_rest(ctx_t *c, int p, int pos, int depth, int init) {
  const cwm_stage *st = &c->L[p].st;
  int par[CWM_MAX_ITERS], d = depth;
  if (init) emit_init_nest(c, p, pos, d);
  for (int j = pos; j < st->niters; j++) {
    par[j] = lower_open_loop(c, p, j, d++, 0);
    emit_attached(c, p, st->iters[j], d);
  }
  lower_emit_update_stmt(c, p, d);
  for (int j = st->niters - 1; j >= pos; j--) {
    emit_attached_frees(c, p, st->iters[j], d);
    lower_close_loop(c, --d, par[j]);
  }
}

void lower_emit_stage(ctx_t *c, int p, int depth) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *b = body_op(c, p);
  if (c->text && st->auto_unroll) lower_line(c, depth, "pragma auto_unroll_max_step=%d", st->auto_unroll);
  int first_red = b->reduce != CWM_RED_NONE ? lower_first_reduce_pos(st) : -1;
  int par[CWM_MAX_ITERS];
  int d = depth;
  int skip_init = 0;
  if (first_red >= 0 && !c->text && !c->ref && !c->collect) {
    /* the first register tile the walk below will emit decides whether the tile itself starts
     * the reduction (a guarded stage's slow path then has its own init nest) */
    rtile_t rt;
    for (int pos = first_red; pos < st->niters; pos++)
      if (lower_register_tile_plan(c, p, pos, &rt, TILE_PLAIN) || lower_register_tile_plan(c, p, pos, &rt, TILE_INSIDE)) {
        skip_init = lower_reduction_outside_is_trivial(st, pos);
        break;
      }
  }
  int vpos, acc = lower_accum_plan(c, p, &vpos);
  for (int pos = 0; pos < st->niters; pos++) {
    if (pos == first_red && !skip_init) emit_init_nest(c, p, pos, d);
    if (pos == acc) lower_accum_begin(c, p, vpos, d);
    rtile_t rt;
    int done = lower_try_register_tile(c, p, pos, d, TILE_PLAIN);
    if (!done && lower_register_tile_plan(c, p, pos, &rt, TILE_INSIDE)) {
      /* a guarded stage: the register tile where the tile lies wholly inside; at the edges (a
       * 1023-wide matrix product: 63 full 16-wide column tiles and one of 15) the padded tile
       * where its buffer holds the overshoot, else the guarded loops */
      char *cond = lower_tile_inside_cond(c, p, &rt);
      if (!cond[0]) {
        done = lower_try_register_tile(c, p, pos, d, TILE_INSIDE);
      } else {
        int padded = lower_register_tile_plan(c, p, pos, &rt, TILE_PADDED);
        lower_line(c, d, padded ? "/* the register tile where the tile lies inside the guards, padded at the edge */"
                                : "/* the register tile where the tile lies inside the guards, guarded loops at the edge */");
        lower_line(c, d, "if (%s) {", cond);
        lower_try_register_tile(c, p, pos, d + 1, TILE_INSIDE); /* planned above: it applies */
        lower_line(c, d, "} else {");
        if (padded) lower_try_register_tile(c, p, pos, d + 1, TILE_PADDED);
        else emit_stage_rest(c, p, pos, d + 1, skip_init);
        lower_line(c, d, "}");
        done = 1;
      }
      free(cond);
    }
    if (!done) done = lower_try_partition(c, p, pos, d);
    if (done) {
      for (int j = pos - 1; j >= 0; j--) {
        emit_attached_frees(c, p, st->iters[j], d);
        lower_close_loop(c, --d, par[j]);
      }
      return;
    }
    par[pos] = lower_open_loop(c, p, pos, d++, 0);
    emit_attached(c, p, st->iters[pos], d);
  }
  if (b->reduce != CWM_RED_NONE && first_red < 0) lower_emit_init_stmt(c, p, d);
  lower_emit_update_stmt(c, p, d);
  for (int pos = st->niters - 1; pos >= 0; pos--) {
    emit_attached_frees(c, p, st->iters[pos], d);
    lower_close_loop(c, --d, par[pos]);
    if (pos == acc) lower_accum_end(c, p, d);
  }
}

/* Reference kernel: initial state, double accumulator per output element. */
void lower_emit_stage_ref(ctx_t *c, int p, int depth) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *b = body_op(c, p);
  int d = depth;
  char nm[300];
  for (int r = 0; r < b->ndim; r++) {
    lower_var_name(c, p, st->iters[r], nm, sizeof nm);
    lower_line(c, d++, "for (int %s = 0; %s < %d; ++%s) {", nm, nm, b->shape[r], nm);
  }
  char *env[CWM_MAX_DIMS * 2];
  for (int r = 0; r < b->ndim + b->nred; r++) {
    lower_var_name(c, p, st->iters[r], nm, sizeof nm);
    env[r] = cwm_xstrdup(nm);
  }
  cwm_buf tgt, val;
  cwm_buf_init(&tgt);
  cwm_buf_init(&val);
  lower_emit_store_target(c, p, &tgt);
  lower_emit_expr(c, b->body, env, &val, 0);
  if (b->reduce == CWM_RED_NONE) {
    lower_line(c, d, "%s = (float)(%s);", tgt.s, val.s);
  } else {
    lower_line(c, d, "double acc__ = %s;", lower_init_value(c, b->reduce));
    int d0 = d;
    for (int r = b->ndim; r < b->ndim + b->nred; r++) {
      lower_var_name(c, p, st->iters[r], nm, sizeof nm);
      lower_line(c, d++, "for (int %s = 0; %s < %d; ++%s) {", nm, nm, b->red_extent[r - b->ndim], nm);
    }
    if (b->reduce == CWM_RED_SUM) lower_line(c, d, "acc__ += %s;", val.s);
    else lower_line(c, d, "acc__ = %s(acc__, %s);", b->reduce == CWM_RED_MAX ? "fmax" : "fmin", val.s);
    while (d > d0) lower_line(c, --d, "}");
    lower_line(c, d, "%s = (float)acc__;", tgt.s);
  }
  while (d > depth) lower_line(c, --d, "}");
  for (int r = 0; r < b->ndim + b->nred; r++) free(env[r]);
  cwm_buf_free(&tgt);
  cwm_buf_free(&val);
}

/* tile.c: register tiles. A reduction loop whose body is a small nest of unrolled spatial loops
 * ending in a vectorized contiguous loop is emitted with the tile's accumulators in vector
 * variables: loaded before the reduction loop, updated with explicit vector arithmetic, stored
 * after. This is what lets a cache-write stage live in registers; GCC does not reliably promote
 * it on its own. */
#include "lower_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ACC 24 /* vector accumulators of one tile */
/* The distinct reads of a tile's updates: each loaded once per iteration, into t<k>. */
#define CSE_MAX 64
typedef struct cse_s {
  int n;
  char *text[CSE_MAX];
  int vec[CSE_MAX];
} cse_t;

/* Flattened-index stride of leaf node `leaf` of stage p in an index over dims, or -1 if unknown. */
long lower_flat_stride(int p, int leaf, const lin_t *idx, const long *dims, int nidx) {
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

/* Whether e reads an axis whose bit is set in mask. */
static int reads_vars(const cwm_expr *e, unsigned mask) {
  if (!e) return 0;
  if (e->kind == CWM_X_VAR && e->var >= 0 && e->var < 32 && (mask >> e->var & 1u)) return 1;
  for (int i = 0; i < e->nargs; i++)
    if (reads_vars(e->args[i], mask)) return 1;
  return 0;
}

/* Vector form of a body expression; returns 1 (vector), 0 (scalar) or -1 (not expressible). */
static int emit_vexpr(ctx_t *c, int p, int leaf, const cwm_expr *e, char **env, const lin_t *lenv, cwm_buf *o) {
  switch (e->kind) {
  case CWM_X_CONST:
    lower_emit_float(c, e->value, o);
    return 0;
  case CWM_X_READ: {
    int q = state_stage_of_tid(c->s, e->tensor);
    if (q >= 0 && c->s->stages[q].loc == CWM_LOC_INLINE) return -1;
    lin_t idx[RW_MAX_DIMS];
    long dims[RW_MAX_DIMS];
    int nidx = lower_read_index(c, p, e, lenv, idx, dims);
    /* 0: one value broadcast; 1: contiguous; 2: every other element (a stride-2 convolution's
     * input), two loads and a shuffle */
    long st = lower_flat_stride(p, leaf, idx, dims, nidx);
    if (st != 0 && st != 1 && st != 2) return -1;
    /* a padded edge tile: a read by a clamped root must be a scalar of an input or a root
     * stage, or a vector of a root stage's own buffer, whose allocation has LOWER_ROOT_SLACK
     * floats past its end for the lanes that run past the last row (a local buffer is indexed
     * from its base; an input is the caller's memory), unless its layout was rewritten
     * (overshooting parts hold 0) */
    int own = q >= 0 && c->s->stages[q].loc == CWM_LOC_ROOT && !cwm_stage_is_placeholder(c->s, q) && !is_output(c->s, q);
    if (c->clamp && reads_vars(e, c->clamp) && !(e->tensor >= 0 && e->tensor < CWM_MAX_OPS && c->rw[e->tensor]) &&
        ((st != 0 && !own) || (q >= 0 && c->L[q].local)))
      return -1;
    cwm_buf r;
    cwm_buf_init(&r);
    if (st == 1) cwm_buf_puts(&r, c->vw == 16 ? "CWM_LOADU16(&" : "CWM_LOADU(&");
    if (st == 2) {
      cwm_buf_puts(&r, c->vw == 16 ? "CWM_LOADE16(&" : "CWM_LOADE(&");
      if (c->cse) c->used_vec |= c->vw == 16 ? 8 : 4; /* emitted, not a plan's probe */
    }
    lower_emit_read(c, e, env, &r, 0);
    if (st) cwm_buf_puts(&r, ")");
    st = st != 0;
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
        cwm_buf_printf(o, "t__%d", k);
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
int lower_reduction_outside_is_trivial(const cwm_stage *st, int pos) {
  for (int j = 0; j < pos; j++)
    if (st->nodes[st->iters[j]].kind != CWM_IT_SPATIAL && st->nodes[st->iters[j]].extent != 1) return 0;
  return 1;
}

/* Whether some stage is attached in stage p at one of its loop positions from..to. */
int lower_attached_in_loops(const ctx_t *c, int p, int from, int to) {
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
 * the tensor) may be emitted without its guards where it lies wholly inside (lower_tile_inside_cond,
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
    lin_t l = lower_root_lin(c, p, r);
    if (!l.ok) return 0;
    for (int k = 0; k < l.n; k++) {
      if (l.a[k].stage != p) continue;
      int at = stage_iter_pos(st, l.a[k].node);
      if (at >= first && (l.coef[k] <= 0 || l.a[k].div != 1 || l.a[k].mod)) return 0;
    }
  }
  /* the slow path (emit_stage_rest) would emit stages attached inside the tile; the tile does not */
  return !lower_attached_in_loops(c, p, pos, st->niters - 1);
}

/* The padded edge. A guarded stage that computes into a local buffer (a cache-write stage)
 * holds its whole tile there, past the tensor's edge too: the stage after it copies out only
 * what lies inside. So the tile that crosses the edge can run as the full register tile
 * instead of the guarded scalar loops, provided its reads stay in bounds: the spatial roots a
 * guard bounds are clamped into their range in every read (those accumulators are thrown away),
 * which emit_vexpr allows only for scalar reads of inputs and root stages, and for rewritten
 * layouts, whose overshooting parts hold 0. Where the reduction is split outside the tile, the
 * tile's accumulators start from the buffer, whose padding the init nest does not reach: the
 * buffer is then zeroed where it is declared (lower_padded_needs_zero). Guards on inner split
 * nodes (which stop a tile from aliasing into the next) keep the guarded loops. Sets the clamp
 * mask; 0 if it does not apply. */
static int padded_edge_fits(ctx_t *c, int p, int pos, int first, unsigned *clamp) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *b = body_op(c, p);
  *clamp = 0;
  if (!c->L[p].local || b->ndim > 32) return 0;
  for (int g = 0; g < c->L[p].nguard; g++) {
    const cwm_node *n = &st->nodes[c->L[p].guard[g]];
    if (n->kind != CWM_IT_SPATIAL) {
      int bp = c->L[p].absorbed[g] ? guard_bound_pos(c, p, g) : -1;
      if (bp < 0 || bp >= first) return 0;
      continue;
    }
    if (n->root < 0 || n->root >= b->ndim) return 0;
    *clamp |= 1u << n->root;
  }
  for (int r = 0; r < b->ndim; r++)
    if (c->L[p].gguard[r]) *clamp |= 1u << r;
  /* the buffer must hold the overshoot: a region wider than the tensor is cut to the tensor */
  for (int d = 0; d < st->nout; d++) {
    lin_t l = lower_node_lin(c, p, st->out_node[d], 0);
    if (!l.ok) return 0;
    long lo = l.c0, hi = l.c0;
    for (int k = 0; k < l.n; k++) lower_term_range(c, l.coef[k], &l.a[k], &lo, &hi);
    if (lo < 0 || hi >= c->L[p].dims[d]) return 0;
  }
  return *clamp && !lower_attached_in_loops(c, p, pos, st->niters - 1);
}

int lower_padded_needs_zero(ctx_t *c, int p) {
  const cwm_stage *st = &c->L[p].st;
  if (!c->L[p].local || c->text || c->ref || c->collect) return 0;
  /* the padded tile is emitted at the first position where the guarded stage's tile applies
   * (lower_emit_stage), and only there: a padded plan at another position emits nothing */
  rtile_t rt;
  for (int pos = 0; pos < st->niters; pos++)
    if (lower_register_tile_plan(c, p, pos, &rt, TILE_INSIDE))
      return lower_register_tile_plan(c, p, pos, &rt, TILE_PADDED) && !lower_reduction_outside_is_trivial(st, pos);
  return 0;
}

/* Whether a register tile applies at pos (its checks, and a probe of the body for the first tile
 * element, emitted nowhere): the plan in *rt. Emits nothing. `unguarded`: a guarded stage's tile
 * for the case that it lies wholly inside (guards_fit_tile). */
int lower_register_tile_plan(ctx_t *c, int p, int pos, rtile_t *rt, int mode) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_op *b = body_op(c, p);
  if (c->text || c->ref || c->collect || b->reduce != CWM_RED_SUM) return 0;
  if (st->nodes[st->iters[pos]].kind != CWM_IT_REDUCE) return 0;
  int guarded = c->L[p].nguard > 0;
  for (int d = 0; d < b->ndim; d++) guarded |= c->L[p].local && c->L[p].gguard[d];
  if (guarded != (mode != TILE_PLAIN)) return 0;
  /* reduction loops pos..first-1 enclose the tile loops first..last */
  int first = pos, last = st->niters - 1;
  while (first <= last && st->nodes[st->iters[first]].kind == CWM_IT_REDUCE) first++;
  if (first > last || last - first + 1 > 4) return 0;
  if (mode == TILE_INSIDE && !guards_fit_tile(c, p, pos, first)) return 0;
  unsigned clamp = 0;
  if (mode == TILE_PADDED && !padded_edge_fits(c, p, pos, first, &clamp)) return 0;
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
  if (lower_attached_in_loops(c, p, first - 1, last)) return 0;
  /* the store target's stride along the vector leaf */
  long sst = 1;
  lin_t tidx[CWM_MAX_DIMS];
  for (int d = 0; d < st->nout; d++) {
    int node = st->out_node[d];
    lin_t l = lower_node_lin(c, p, node, 0);
    if (c->L[p].local || st->nodes[node].root < 0) tidx[d] = l; /* local coordinates */
    else tidx[d] = lower_root_lin(c, p, st->nodes[node].root);
  }
  int nroot = b->ndim + b->nred;
  lin_t lenv[CWM_MAX_DIMS * 2];
  for (int r = 0; r < nroot; r++) lenv[r] = lower_root_lin(c, p, r);
  /* a local buffer is indexed relative to its base: its strides come from the region dims */
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
  for (int r = 0; r < nroot; r++) env[r] = lower_root_value(c, p, r, 1);
  c->cur_stage = p;
  c->clamp = clamp;
  int kind = emit_vexpr(c, p, vleaf, b->body, env, lenv, &probe);
  c->clamp = 0;
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
  rt->clamp = clamp;
  return 1;
}

/* The run-time condition under which the tile of plan rt lies wholly inside its stage's guards:
 * every spatial guard, and every region guard at both corners, holds with the tile loops at their
 * last (and, for regions, first) values. Owned string; empty when nothing needs testing. */
char *lower_tile_inside_cond(ctx_t *c, int p, const rtile_t *rt) {
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
      lower_append_split_guard(c, p, node, &o);
    }
    for (int r = 0; r < b->ndim; r++) {
      if (!c->L[p].local || !c->L[p].gguard[r]) continue;
      char *v = lower_root_value(c, p, r, 1);
      if (corner) cwm_buf_printf(&o, "%s%s < %d", o.len ? " && " : "", v, b->shape[r]);
      else cwm_buf_printf(&o, "%s%s >= 0", o.len ? " && " : "", v);
      free(v);
    }
  }
  c->nov = 0;
  return cwm_buf_take(&o);
}

/* Root r's value in the reads of a tile: clamped into [0, extent) when the tile is padded and
 * r is among the roots it clamps. Owned string. */
static char *tile_root_value(ctx_t *c, int p, int r, unsigned clamp) {
  char *v = lower_root_value(c, p, r, 1);
  if (!(r < 32 && (clamp >> r & 1u))) return v;
  int hi = body_op(c, p)->shape[r] - 1;
  cwm_buf o;
  cwm_buf_init(&o);
  cwm_buf_printf(&o, "(%s < 0 ? 0 : %s > %d ? %d : %s)", v, v, hi, hi, v);
  free(v);
  return cwm_buf_take(&o);
}

int lower_try_register_tile(ctx_t *c, int p, int pos, int depth, int mode) {
  rtile_t rt;
  if (!lower_register_tile_plan(c, p, pos, &rt, mode)) return 0;
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
  for (int r = 0; r < nroot; r++) lenv[r] = lower_root_lin(c, p, r);

  /* emit: declare + load accumulators, reduction loop, store. A tile whose reduction is whole
   * (every reduction loop outside it has extent 1) starts its accumulators at zero, and
   * lower_emit_stage leaves out the init nest (a pass over the output, strided when the vectorized
   * axis is not the output's last, as an NCHW convolution's channels are). */
  int complete = lower_reduction_outside_is_trivial(st, pos);
  lower_line(c, depth, "{");
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
    lower_emit_store_target(c, p, &tgt[t]);
    for (int r = 0; r < nroot; r++) env[r] = tile_root_value(c, p, r, rt.clamp);
    c->cse = &cse;
    c->cur_stage = p;
    c->clamp = rt.clamp;
    emit_vexpr(c, p, vleaf, b->body, env, lenv, &upd[t]);
    c->clamp = 0;
    c->cur_stage = -1;
    c->cse = NULL;
    for (int r = 0; r < nroot; r++) free(env[r]);
    snprintf(acc[t], sizeof acc[t], "acc__%ld", t);
    if (complete) lower_line(c, depth + 1, "%s %s = (%s){0};", vty, acc[t], vty);
    else if (sst == 1) lower_line(c, depth + 1, "%s %s = CWM_LOADU%s(&%s);", vty, acc[t], sfx, tgt[t].s);
    else lower_line(c, depth + 1, "%s %s = CWM_LOADS%s(&%s, %ld);", vty, acc[t], sfx, tgt[t].s, sst);
  }
  c->nov = 0;
  int rpar[CWM_MAX_ITERS], rd = depth + 1;
  for (int j = pos; j < first; j++) rpar[j] = lower_open_loop(c, p, j, rd++, 0);
  for (int k = 0; k < cse.n; k++) {
    lower_line(c, rd, "%s t__%d = %s;", cse.vec[k] ? vty : "float", k, cse.text[k]);
    if (cse.vec[k]) lower_line(c, rd, "CWM_INREG%s(t__%d);", sfx, k);
    free(cse.text[k]);
  }
  for (long t = 0; t < nacc; t++) lower_line(c, rd, "%s += %s;", acc[t], upd[t].s);
  for (int j = first - 1; j >= pos; j--) lower_close_loop(c, --rd, rpar[j]);
  for (long t = 0; t < nacc; t++) {
    if (sst == 1) lower_line(c, depth + 1, "CWM_STOREU%s(&%s, %s);", sfx, tgt[t].s, acc[t]);
    else lower_line(c, depth + 1, "CWM_STORES%s(&%s, %ld, %s);", sfx, tgt[t].s, sst, acc[t]);
    cwm_buf_free(&tgt[t]);
    cwm_buf_free(&upd[t]);
  }
  lower_line(c, depth, "}");
  c->used_vec |= VW == 16 ? 2 : 1;
  return 1;
}

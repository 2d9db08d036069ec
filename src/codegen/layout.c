/* layout.c: Ansor's layout rewrite: which inputs a kernel reads in the loop order of the stage
 * that reads them, their index in that layout, and the conversions into it (once per weight
 * outside the kernel, or on every call inside it). */
#include "lower_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A weight (an input marked `const`) that one reduction stage reads with plain axis variables is
 * stored with one dimension per split part of those axes, in that stage's loop order (outer to
 * inner), each with the part's extent; parts an uneven split makes overshoot hold 0. The innermost
 * loop that indexes it then walks contiguous memory, so a vectorized spatial loop reads whole
 * vectors (and the register tile applies) where the original layout had a stride. The conversion
 * runs once, outside the kernel (<fn>_pack_<name>). The decision depends on the state alone, so a
 * logged step list always lowers to the same kernel.
 * An input that is not a weight (batch_matmul's second operand, an activation) is rewritten the
 * same way, but inside the kernel on every call ("runtime pack"), and only when the stage's
 * vectorized loop would otherwise read it with a stride: the copy costs one pass over the input,
 * which the reduction then reads many times as whole vectors instead of element by element. */

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
    if (!lower_lin_div(c, v, lower_split_stride(ust, n, k), &q)) return 0;
    if (k > 0 && !lower_lin_mod(c, &q, ust->nodes[n->parts[k]].extent, &q)) return 0;
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
    s *= lower_split_stride(ust, pn, k);
    node = par;
  }
  return s;
}

/* The one stage that reads input t through plain axis variables (or fixed positions), a
 * reduction: rw->stage, root_dim and fixed set. 0 when t is no candidate. */
static int rewrite_reader(ctx_t *c, int t, rewrite_t *rw) {
  const cwm_state *s = c->s;
  const cwm_op *in = tensor_op(c, t);
  if (!in->is_input) return 0;
  int p = -1;
  for (int q = 0; q < s->nstages; q++) {
    if (cwm_stage_is_placeholder(s, q) || !cwm_expr_reads(body_op(c, q)->body, t)) continue;
    if (p >= 0) return 0; /* read by two stages: one layout cannot suit both */
    p = q;
  }
  if (p < 0 || s->stages[p].loc == CWM_LOC_INLINE) return 0;
  const cwm_op *b = body_op(c, p);
  if (b->reduce == CWM_RED_NONE) return 0; /* a bias or scale read elementwise gains nothing */
  const cwm_expr *rd = NULL;
  int same = 1;
  find_read(b->body, t, &rd, &same);
  if (!rd || !same || rd->nargs != in->ndim) return 0;
  memset(rw, 0, sizeof *rw);
  rw->stage = p;
  int nroot = b->ndim + b->nred;
  for (int r = 0; r < CWM_MAX_DIMS * 2; r++) rw->root_dim[r] = -1;
  for (int d = 0; d < in->ndim; d++) {
    const cwm_expr *a = rd->args[d];
    if (a->kind == CWM_X_VAR && a->var >= 0 && a->var < nroot && rw->root_dim[a->var] < 0) rw->root_dim[a->var] = d;
    else if (a->kind == CWM_X_CONST && a->value >= 0 && a->value < in->shape[d] && a->value == (long)a->value)
      rw->fixed[d] = (long)a->value;
    else
      return 0; /* only plain axes (and fixed positions) have a layout to follow */
  }
  return 1;
}

/* The terminal parts of the axes that index the input, ordered by the loop they end up in (and
 * their place in a fused loop): cand[] the parts, cleaf[] their loops. Their number, or -1 when a
 * part was fused and then split again. */
static int rewrite_parts(const cwm_stage *ust, const rewrite_t *rw, int nroot, int *cand, int *cleaf) {
  int nc = 0;
  long key[CWM_MAX_NODES];
  for (int i = 0; i < ust->nnodes; i++) {
    const cwm_node *n = &ust->nodes[i];
    if (n->nparts || n->is_fuse) continue;
    int r = cwm_node_root(ust, i);
    if (r < 0 || r >= nroot || rw->root_dim[r] < 0) continue;
    int leaf = i, rank = 0;
    if (!is_leaf(ust, i)) {
      leaf = n->fused;
      for (int d = 0; d < 16 && leaf >= 0 && !is_leaf(ust, leaf); d++) leaf = ust->nodes[leaf].fused;
      if (leaf < 0 || !is_leaf(ust, leaf)) return -1; /* fused, then split again */
      int count = 0;
      rank = fuse_rank(ust, leaf, i, &count, 0);
      if (rank < 0) return -1;
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
  return nc;
}

/* An activation is worth a copy per call only where the vectorized loop strides through it. */
static int runtime_pack_pays(const cwm_stage *ust, const rewrite_t *rw, const cwm_op *in, const int *cand,
                             const int *cleaf, int nc) {
  int last = -1;
  for (int i = nc - 1; i >= 0 && last < 0; i--)
    if (ust->nodes[cand[i]].extent > 1) last = i;
  if (last < 0 || ust->nodes[cleaf[last]].ann != CWM_ANN_VECTORIZE) return 0;
  int dim = rw->root_dim[cwm_node_root(ust, cand[last])];
  long ds = 1;
  for (int e = dim + 1; e < in->ndim; e++) ds *= in->shape[e];
  /* contiguous, and every row starts on a vector boundary (or the loop is no whole number of
   * vectors): read in place. Rows of 1023 floats would make most vector loads straddle two
   * cache lines; the copy pads them into the loops' panels. */
  long vext = ust->nodes[cand[last]].extent;
  int misaligned = dim > 0 && (ds * in->shape[dim]) % 8 != 0 && vext % 8 == 0;
  if (orig_stride(ust, cand[last], ds) == 1 && !misaligned) return 0;
  return 1;
}

/* The new layout's dims (the parts of extent > 1), their strides and size. 0 when the padding is
 * out of proportion or the layout is the tensor's own (nothing to rewrite). */
static int rewrite_dims(const cwm_stage *ust, rewrite_t *rw, const cwm_op *in, const int *cand, int nc) {
  long size = 1, orig = 1;
  for (int d = 0; d < in->ndim; d++) orig *= in->shape[d];
  for (int i = 0; i < nc; i++) {
    long e = ust->nodes[cand[i]].extent;
    if (e <= 1) continue;
    if (rw->ndim == RW_MAX_DIMS) return 0;
    rw->node[rw->ndim] = cand[i];
    rw->extent[rw->ndim++] = e;
    size *= e;
    if (size > 8 * orig + 4096 || size > (1L << 31)) return 0; /* padding out of proportion */
  }
  rw->size = size;
  for (int d = rw->ndim - 1; d >= 0; d--) rw->stride[d] = d == rw->ndim - 1 ? 1 : rw->stride[d + 1] * rw->extent[d + 1];
  /* the same layout as the tensor's own (no padding, same strides): nothing to rewrite */
  if (size == orig) {
    int identity = 1;
    for (int d = 0; d < rw->ndim && identity; d++) {
      int dim = rw->root_dim[cwm_node_root(ust, rw->node[d])];
      long ds = 1;
      for (int e = dim + 1; e < in->ndim; e++) ds *= in->shape[e];
      identity = orig_stride(ust, rw->node[d], ds) == rw->stride[d];
    }
    if (identity) return 0;
  }
  return 1;
}

/* Each dim's index in the kernel: the part's own loop value in a root stage; in an attached stage
 * the global axis value (region base + local loops) split the way the parts divide it. 0 when the
 * tile does not line up with the parts. */
static int rewrite_values(ctx_t *c, rewrite_t *rw, int nroot) {
  int p = rw->stage;
  const cwm_stage *ust = &c->s->stages[p];
  if (!c->L[p].local) {
    for (int d = 0; d < rw->ndim; d++) {
      rw->val[d] = lower_node_lin(c, p, rw->node[d], 0);
      if (!rw->val[d].ok) return 0;
    }
    return 1;
  }
  lin_t *val = cwm_xcalloc(CWM_MAX_NODES, sizeof *val);
  int ok = 1;
  for (int r = 0; r < nroot && ok; r++) {
    if (rw->root_dim[r] < 0) continue;
    int rn = -1;
    for (int i = 0; i < ust->nnodes; i++)
      if (ust->nodes[i].root == r) { rn = i; break; }
    lin_t v = lower_root_lin(c, p, r);
    ok = rn >= 0 && v.ok && decompose(c, ust, rn, &v, val, 0);
  }
  for (int d = 0; d < rw->ndim && ok; d++) {
    rw->val[d] = val[rw->node[d]];
    ok = rw->val[d].ok;
  }
  free(val);
  return ok;
}

static void plan_rewrite(ctx_t *c, int t) {
  const cwm_op *in = tensor_op(c, t);
  rewrite_t rw;
  if (!rewrite_reader(c, t, &rw)) return;
  const cwm_stage *ust = &c->s->stages[rw.stage];
  int nroot = body_op(c, rw.stage)->ndim + body_op(c, rw.stage)->nred;
  int cand[CWM_MAX_NODES], cleaf[CWM_MAX_NODES];
  int nc = rewrite_parts(ust, &rw, nroot, cand, cleaf);
  if (nc < 0) return;
  if (!in->is_const) {
    if (!runtime_pack_pays(ust, &rw, in, cand, cleaf, nc)) return;
    rw.runtime = 1;
  }
  if (!rewrite_dims(ust, &rw, in, cand, nc) || !rewrite_values(c, &rw, nroot)) return;
  c->rw[t] = cwm_xmalloc(sizeof rw);
  *c->rw[t] = rw;
}

void lower_plan_rewrites(ctx_t *c) {
  const cwm_workload *w = cwm_dag_workload(c->s->dag);
  for (int t = 0; t < w->nops && t < CWM_MAX_OPS; t++) plan_rewrite(c, t);
}

/* The index of a read of e->tensor in stage p's body as linear forms over the loops, with each
 * indexed dim's extent: the new layout of a rewritten input, the region of a local buffer, or
 * the tensor's shape. env gives the stage's root values. Returns the number of dims. */
int lower_read_index(ctx_t *c, int p, const cwm_expr *e, const lin_t *env, lin_t *idx, long *dims) {
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
    idx[i] = lower_expr_lin(c, e->args[i], env);
    dims[i] = local ? c->L[q].dims[i] : op->shape[i];
  }
  return n;
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
      long st = lower_split_stride(ust, n, k);
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
  if (n->root < 0 && lower_node_max(ust, node, 0) >= n->extent && cond)
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
  if (cond && lower_node_max(ust, rn, 0) >= bound)
    cwm_buf_printf(cond, "%s%s%s%s < %ld", cond->len ? " && " : "", strchr(v.s, ' ') ? "(" : "", v.s,
                   strchr(v.s, ' ') ? ")" : "", bound);
  cwm_buf_puts(o, v.s);
  cwm_buf_free(&v);
}

/* "[48, 3, 256, 16] by (j.0, k.0, k.1, j.3): W[16*j.0 + j.3, 256*k.0 + k.1]" */
void lower_layout_text(const cwm_state *s, const rewrite_t *rw, const cwm_op *in, char *out, size_t n) {
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

/* The flattened index into the original tensor of the packed element (d0, d1, ...) in *idx, and
 * in *cond the test that it lies inside (empty when no dim is padded). Both initialised here. */
static void pack_source_index(ctx_t *c, const rewrite_t *rw, const cwm_op *in, cwm_buf *idx, cwm_buf *cond) {
  char names[RW_MAX_DIMS][96];
  for (int d = 0; d < rw->ndim; d++) snprintf(names[d], sizeof names[d], "d__%d", d);
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

/* The innermost statement of a conversion into rw's layout, inside loops d0..d(ndim-1) that walk
 * the new layout in order with a running offset o: nm_packed[o++] = nm[original index], 0 where
 * the new layout pads. */
static void emit_pack_store(ctx_t *c, const rewrite_t *rw, const cwm_op *in, const char *nm, cwm_buf *o) {
  cwm_buf cond, idx;
  pack_source_index(c, rw, in, &idx, &cond);
  cwm_buf_indent(o, rw->ndim + 1);
  if (cond.len)
    cwm_buf_printf(o, "%s__packed[o__++] = %s ? %s[%s] : 0.0f;\n", nm, cond.s, nm, idx.len ? idx.s : "0");
  else
    cwm_buf_printf(o, "%s__packed[o__++] = %s[%s];\n", nm, nm, idx.len ? idx.s : "0");
  cwm_buf_free(&cond);
  cwm_buf_free(&idx);
}

/* void <fn>(const float *restrict W, float *restrict W_packed): fills the new layout in order. */
void lower_emit_pack(ctx_t *c, const rewrite_t *rw, const cwm_op *in, const char *fn, cwm_buf *o) {
  char nm[128];
  lower_sanitize(in->name, nm, sizeof nm);
  cwm_buf_printf(o, "void %s(const float *restrict %s, float *restrict %s__packed) {\n  long o__ = 0;\n", fn, nm, nm);
  for (int d = 0; d < rw->ndim; d++) {
    cwm_buf_indent(o, d + 1);
    cwm_buf_printf(o, "for (long d__%d = 0; d__%d < %ld; ++d__%d)\n", d, d, rw->extent[d], d);
  }
  emit_pack_store(c, rw, in, nm, o);
  cwm_buf_puts(o, "}\n");
}

/* A runtime pack whose innermost dim J is read with a stride and another dim K contiguously (a
 * transposition, as a batch matrix product's second operand given as [B,N,K] is copied into
 * [.., K, N] panels): 8 x 8 blocks loaded as 8 rows along K, transposed in registers and stored
 * as 8 rows along J, about four times faster than copying element by element. Where the new
 * layout pads (77 columns in panels of 32), a block that the padding condition holds for at its
 * four corners lies wholly inside (the condition is a conjunction of linear bounds, so the set
 * where it holds is convex) and is transposed; the others are copied element by element with
 * the condition. Returns 0 (emits nothing) when the pack is not of that kind: J or K not a
 * multiple of 8, or a condition with a division. */
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
  int ok = cond.len == 0 || (!strchr(cond.s, '/') && !strchr(cond.s, '%'));
  cwm_buf_init(&dst);
  for (int d = 0; d < n; d++) cwm_buf_printf(&dst, "%sd__%d*%ldL", d ? " + " : "", d, rw->stride[d]);
  if (ok) {
    cwm_buf_printf(o, "  /* %s, read with a stride by a vectorized loop, copied into the layout the loops walk: "
                      "8 x 8 blocks transposed in registers */\n", nm);
    cwm_buf_printf(o, "  float *restrict %s__packed = (float *)aligned_alloc(64, %ld);\n", nm, ((rw->size * 4 + 63) / 64) * 64);
    cwm_buf_printf(o, "  if (!%s__packed) abort();\n", nm);
    int depth = 1, first = 1;
    for (int d = 0; d < n; d++) {
      if (d == J || d == K) continue;
      if (first && rw->extent[d] > 1) {
        cwm_buf_indent(o, depth);
        cwm_buf_puts(o, "#pragma omp parallel for\n");
      }
      first = 0;
      cwm_buf_indent(o, depth++);
      cwm_buf_printf(o, "for (long d__%d = 0; d__%d < %ld; ++d__%d)\n", d, d, rw->extent[d], d);
    }
    cwm_buf_indent(o, depth++);
    cwm_buf_printf(o, "for (long d__%d = 0; d__%d < %ld; d__%d += 8)\n", K, K, rw->extent[K], K);
    cwm_buf_indent(o, depth);
    cwm_buf_printf(o, "for (long d__%d = 0; d__%d < %ld; d__%d += 8) {\n", J, J, rw->extent[J], J);
    int ind = depth + 1;
    /* the block's element (K + a, J + b): the loop variables shadowed in a block of their own,
     * from copies (an initializer would see the shadowing name itself) */
    char at[200];
    snprintf(at, sizeof at, "const long d__%d __attribute__((unused)) = k0__ + a__, d__%d __attribute__((unused)) = j0__ + b__;",
             K, J);
    if (cond.len) {
      cwm_buf_indent(o, ind);
      cwm_buf_printf(o, "const long k0__ = d__%d, j0__ = d__%d;\n", K, J);
      cwm_buf_indent(o, ind);
      cwm_buf_puts(o, "int inside__ = 1;\n");
      cwm_buf_indent(o, ind);
      cwm_buf_printf(o, "for (long a__ = 0; a__ < 8; a__ += 7)\n");
      cwm_buf_indent(o, ind + 1);
      cwm_buf_printf(o, "for (long b__ = 0; b__ < 8; b__ += 7) { %s inside__ &= (%s) ? 1 : 0; }\n", at, cond.s);
      cwm_buf_indent(o, ind);
      cwm_buf_puts(o, "if (inside__) {\n");
      ind++;
    }
    cwm_buf_indent(o, ind);
    cwm_buf_printf(o, "const float *s__ = &%s[%s];\n", nm, idx.len ? idx.s : "0");
    cwm_buf_indent(o, ind);
    cwm_buf_printf(o, "float *p__ = &%s__packed[%s];\n", nm, dst.s);
    cwm_buf_indent(o, ind);
    cwm_buf_puts(o, "cwm_v8f r__[8];\n");
    cwm_buf_indent(o, ind);
    cwm_buf_printf(o, "for (int i__ = 0; i__ < 8; i__++) r__[i__] = CWM_LOADU(s__ + (long)i__ * %ld);\n", src[J]);
    cwm_buf_indent(o, ind);
    cwm_buf_puts(o, "cwm_tr8(r__);\n");
    cwm_buf_indent(o, ind);
    cwm_buf_printf(o, "for (int i__ = 0; i__ < 8; i__++) CWM_STOREU(p__ + (long)i__ * %ld, r__[i__]);\n", rw->stride[K]);
    if (cond.len) {
      /* a block across the padding's edge, element by element */
      cwm_buf_indent(o, ind - 1);
      cwm_buf_puts(o, "} else {\n");
      cwm_buf_indent(o, ind);
      cwm_buf_puts(o, "for (long a__ = 0; a__ < 8; a__++)\n");
      cwm_buf_indent(o, ind + 1);
      cwm_buf_printf(o, "for (long b__ = 0; b__ < 8; b__++) { %s %s__packed[%s] = (%s) ? %s[%s] : 0.0f; }\n", at, nm,
                     dst.s, cond.s, nm, idx.len ? idx.s : "0");
      cwm_buf_indent(o, ind - 1);
      cwm_buf_puts(o, "}\n");
    }
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

/* A runtime pack at the top of the kernel body: X_packed allocated and filled from X in the
 * layout the reading stage walks, the outermost dim split among the threads (each thread's
 * running offset starts at its d0's place). */
void lower_emit_runtime_pack(ctx_t *c, const rewrite_t *rw, const cwm_op *in, cwm_buf *o) {
  char nm[128];
  lower_sanitize(in->name, nm, sizeof nm);
  if (emit_runtime_pack_transposed(c, rw, in, nm, o)) return;
  cwm_buf_printf(o, "  /* %s, read with a stride by a vectorized loop, copied into the layout the loops walk */\n", nm);
  cwm_buf_printf(o, "  float *restrict %s__packed = (float *)aligned_alloc(64, %ld);\n", nm, ((rw->size * 4 + 63) / 64) * 64);
  cwm_buf_printf(o, "  if (!%s__packed) abort();\n", nm);
  if (rw->ndim > 1 && rw->extent[0] > 1) cwm_buf_puts(o, "  #pragma omp parallel for\n");
  cwm_buf_printf(o, "  for (long d__0 = 0; d__0 < %ld; ++d__0) {\n    long o__ = d__0 * %ldL;\n", rw->ndim ? rw->extent[0] : 1,
                 rw->ndim ? rw->stride[0] : 1);
  for (int d = 1; d < rw->ndim; d++) {
    cwm_buf_indent(o, d + 1);
    cwm_buf_printf(o, "for (long d__%d = 0; d__%d < %ld; ++d__%d)\n", d, d, rw->extent[d], d);
  }
  emit_pack_store(c, rw, in, nm, o);
  cwm_buf_puts(o, "  }\n");
}

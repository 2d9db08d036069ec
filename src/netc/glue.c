/* glue.c: the C of a glue step, one call into the runtime (src/netc/runtime/netrt.c) with the
 * node's shapes, strides and pointers as constants. Each emitter takes the ops of one family and
 * answers NOT_MINE for the others; an op none takes cannot run in a compiled network. */
#include "netc_internal.h"

#include <stdio.h>
#include <string.h>

#define NOT_MINE (-1)

typedef struct {
  plan *pl;
  int n;                 /* the node */
  const cwm_gnode *nd;
  const char *op;
  const cwm_value *o, *x; /* first output, first input (NULL if none) */
  int64_t numel;          /* of the first output */
  cwm_buf *b;
} gx;

/* The names every emitter's body uses. */
#define GX_NAMES                                                                                  \
  plan *pl = c->pl;                                                                               \
  const cwm_graph *g = pl->g;                                                                     \
  const cwm_gnode *nd = c->nd;                                                                    \
  const char *op = c->op;                                                                         \
  const cwm_value *o = c->o, *x = c->x;                                                           \
  int n = c->n;                                                                                   \
  int64_t numel = c->numel;                                                                       \
  cwm_buf *b = c->b;                                                                              \
  (void)g, (void)nd, (void)op, (void)o, (void)x, (void)n, (void)numel, (void)b

static int glue_binary(const gx *c) {
  GX_NAMES;
  static const struct { const char *op; const char *code; } bins[] = {
      {"Add", "RT_ADD"}, {"Sub", "RT_SUB"}, {"Mul", "RT_MUL"}, {"Div", "RT_DIV"},   {"Pow", "RT_POW"}, {"Max", "RT_MAX"},
      {"Min", "RT_MIN"}, {"Equal", "RT_EQ"}, {"Less", "RT_LT"}, {"Greater", "RT_GT"}, {"And", "RT_AND"}, {"Or", "RT_OR"}};
  for (size_t i = 0; i < sizeof bins / sizeof *bins; i++) {
    if (strcmp(op, bins[i].op)) continue;
    if (nd->nin != 2) return netc_node_fail(pl, n, "only two inputs are supported at run time");
    int64_t as[CWM_GRAPH_MAX_DIMS], bs[CWM_GRAPH_MAX_DIMS];
    netc_bstrides(&g->values[nd->in[0]], o, as);
    netc_bstrides(&g->values[nd->in[1]], o, bs);
    cwm_buf_printf(b, "  rt_binary(%s, %d, ", bins[i].code, o->ndim);
    netc_ints(b, o->shape, o->ndim);
    cwm_buf_puts(b, ", ");
    netc_vptr(pl, nd->in[0], "float", b);
    cwm_buf_puts(b, ", ");
    netc_ints(b, as, o->ndim);
    cwm_buf_puts(b, ", ");
    netc_vptr(pl, nd->in[1], "float", b);
    cwm_buf_puts(b, ", ");
    netc_ints(b, bs, o->ndim);
    cwm_buf_puts(b, ", ");
    netc_vptr(pl, nd->out[0], "float", b);
    cwm_buf_puts(b, ");\n");
    return 0;
  }
  return NOT_MINE;
}

static int glue_unary(const gx *c) {
  GX_NAMES;
  static const struct { const char *op; const char *code; } uns[] = {
      {"Relu", "RT_RELU"}, {"Sqrt", "RT_SQRT"}, {"Erf", "RT_ERF"},         {"Tanh", "RT_TANH"},
      {"Sigmoid", "RT_SIGMOID"}, {"Exp", "RT_EXP"}, {"Log", "RT_LOG"},     {"Neg", "RT_NEG"},
      {"Abs", "RT_ABS"}, {"Reciprocal", "RT_RECIP"}, {"Clip", "RT_CLIP"},  {"LeakyRelu", "RT_LEAKY"},
      {"HardSigmoid", "RT_HSIGMOID"}, {"HardSwish", "RT_HSWISH"}, {"Not", "RT_NOT"}};
  for (size_t i = 0; i < sizeof uns / sizeof *uns; i++) {
    if (strcmp(op, uns[i].op)) continue;
    float p0 = 0, p1 = 0;
    if (!strcmp(op, "Clip")) {
      p0 = cwm_gnode_attr_float(nd, "min", -3.402823e38f), p1 = cwm_gnode_attr_float(nd, "max", 3.402823e38f);
      if (nd->nin > 1 && nd->in[1] >= 0 && !netc_const_float(pl, nd->in[1], &p0))
        return netc_node_fail(pl, n, "Clip's min must be a constant");
      if (nd->nin > 2 && nd->in[2] >= 0 && !netc_const_float(pl, nd->in[2], &p1))
        return netc_node_fail(pl, n, "Clip's max must be a constant");
    } else if (!strcmp(op, "LeakyRelu")) {
      p0 = cwm_gnode_attr_float(nd, "alpha", 0.01f);
    } else if (!strcmp(op, "HardSigmoid")) {
      p0 = cwm_gnode_attr_float(nd, "alpha", 0.2f), p1 = cwm_gnode_attr_float(nd, "beta", 0.5f);
    }
    cwm_buf_printf(b, "  rt_unary(%s, %lld, ", uns[i].code, (long long)numel);
    netc_vptr(pl, nd->in[0], "float", b);
    cwm_buf_puts(b, ", ");
    netc_vptr(pl, nd->out[0], "float", b);
    cwm_buf_printf(b, ", %.9gf, %.9gf);\n", p0, p1);
    return 0;
  }
  return NOT_MINE;
}

static int glue_where(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "Where"))) return NOT_MINE;
  int64_t cs[CWM_GRAPH_MAX_DIMS], as[CWM_GRAPH_MAX_DIMS], bs[CWM_GRAPH_MAX_DIMS];
  netc_bstrides(&g->values[nd->in[0]], o, cs);
  netc_bstrides(&g->values[nd->in[1]], o, as);
  netc_bstrides(&g->values[nd->in[2]], o, bs);
  cwm_buf_printf(b, "  rt_where(%d, ", o->ndim);
  netc_ints(b, o->shape, o->ndim);
  for (int k = 0; k < 3; k++) {
    cwm_buf_puts(b, ", ");
    netc_vptr(pl, nd->in[k], "float", b);
    cwm_buf_puts(b, ", ");
    netc_ints(b, k == 0 ? cs : k == 1 ? as : bs, o->ndim);
  }
  cwm_buf_puts(b, ", ");
  netc_vptr(pl, nd->out[0], "float", b);
  cwm_buf_puts(b, ");\n");
  return 0;
}

static int glue_cast(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "Cast"))) return NOT_MINE;
  cwm_buf_printf(b, "  rt_cast(%lld, ", (long long)numel);
  netc_vptr(pl, nd->in[0], "void", b);
  cwm_buf_printf(b, ", %d, ", x->dtype == CWM_DT_INT64 ? 7 : x->dtype == CWM_DT_BOOL ? 9 : 1);
  netc_vptr(pl, nd->out[0], "void", b);
  cwm_buf_printf(b, ", %d);\n", o->dtype == CWM_DT_INT64 ? 7 : o->dtype == CWM_DT_BOOL ? 9 : 1);
  return 0;
}

static int glue_transpose(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "Transpose"))) return NOT_MINE;
  const cwm_attr *pa = cwm_gnode_attr(nd, "perm");
  cwm_buf_printf(b, "  rt_transpose(%d, ", x->ndim);
  netc_ints(b, x->shape, x->ndim);
  cwm_buf_puts(b, ", (const int[]){");
  for (int d = 0; d < x->ndim; d++)
    cwm_buf_printf(b, "%s%lld", d ? ", " : "", pa && pa->n == x->ndim ? (long long)pa->ints[d] : (long long)(x->ndim - 1 - d));
  if (!x->ndim) cwm_buf_puts(b, "0");
  cwm_buf_puts(b, "}, ");
  netc_vptr(pl, nd->in[0], "void", b);
  cwm_buf_puts(b, ", ");
  netc_vptr(pl, nd->out[0], "void", b);
  cwm_buf_printf(b, ", %d);\n", netc_esize(x->dtype));
  return 0;
}

static int glue_expand(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "Expand"))) return NOT_MINE;
  int64_t st[CWM_GRAPH_MAX_DIMS];
  netc_bstrides(x, o, st);
  cwm_buf_printf(b, "  rt_bcast(%d, ", o->ndim);
  netc_ints(b, o->shape, o->ndim);
  cwm_buf_puts(b, ", ");
  netc_vptr(pl, nd->in[0], "void", b);
  cwm_buf_puts(b, ", ");
  netc_ints(b, st, o->ndim);
  cwm_buf_puts(b, ", ");
  netc_vptr(pl, nd->out[0], "void", b);
  cwm_buf_printf(b, ", %d);\n", netc_esize(x->dtype));
  return 0;
}

static int glue_concat(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "Concat"))) return NOT_MINE;
  int axis = netc_norm_axis(cwm_gnode_attr_int(nd, "axis", 0), o->ndim);
  cwm_buf_printf(b, "  rt_concat(%d, (const void *const[]){", nd->nin);
  for (int i = 0; i < nd->nin; i++) {
    if (i) cwm_buf_puts(b, ", ");
    netc_vptr(pl, nd->in[i], "void", b);
  }
  cwm_buf_puts(b, "}, (const int64_t[]){");
  for (int i = 0; i < nd->nin; i++) {
    const cwm_value *v = &g->values[nd->in[i]];
    cwm_buf_printf(b, "%s%lld", i ? ", " : "", (long long)netc_prod(v->shape, axis, v->ndim));
  }
  cwm_buf_printf(b, "}, %lld, ", (long long)netc_prod(o->shape, 0, axis));
  netc_vptr(pl, nd->out[0], "void", b);
  cwm_buf_printf(b, ", %d);\n", netc_esize(o->dtype));
  return 0;
}

static int glue_slice(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "Slice") || !strcmp(op, "Split"))) return NOT_MINE;
  int nouts = !strcmp(op, "Split") ? nd->nout : 1;
  int64_t along = 0;
  for (int k = 0; k < nouts; k++) {
    const cwm_value *ov = &g->values[nd->out[k]];
    int64_t start[CWM_GRAPH_MAX_DIMS] = {0}, step[CWM_GRAPH_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) step[d] = 1;
    if (!strcmp(op, "Split")) {
      int axis = netc_norm_axis(cwm_gnode_attr_int(nd, "axis", 0), x->ndim);
      start[axis] = along;
      along += ov->shape[axis];
    } else {
      int ns = 0, ne = 0, na = 0, nst = 0;
      const int64_t *st = netc_const_ints(pl, nd->nin > 1 ? nd->in[1] : -1, &ns);
      const int64_t *en = netc_const_ints(pl, nd->nin > 2 ? nd->in[2] : -1, &ne);
      const int64_t *ax = nd->nin > 3 ? netc_const_ints(pl, nd->in[3], &na) : NULL;
      const int64_t *sp = nd->nin > 4 ? netc_const_ints(pl, nd->in[4], &nst) : NULL;
      if (!st || !en) return netc_node_fail(pl, n, "Slice's starts and ends must be constants (opset 10 or later)");
      for (int i = 0; i < ns; i++) {
        int a = ax && i < na ? netc_norm_axis(ax[i], x->ndim) : i;
        int64_t dim = x->shape[a], s = st[i], stp = sp && i < nst ? sp[i] : 1;
        if (s < 0) s += dim;
        if (stp > 0) s = s < 0 ? 0 : s > dim ? dim : s;
        else s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
        start[a] = s, step[a] = stp;
      }
    }
    cwm_buf_printf(b, "  rt_slice(%d, ", x->ndim);
    netc_ints(b, x->shape, x->ndim);
    cwm_buf_puts(b, ", ");
    netc_ints(b, start, x->ndim);
    cwm_buf_puts(b, ", ");
    netc_ints(b, step, x->ndim);
    cwm_buf_puts(b, ", ");
    netc_ints(b, ov->shape, ov->ndim);
    cwm_buf_puts(b, ", ");
    netc_vptr(pl, nd->in[0], "void", b);
    cwm_buf_puts(b, ", ");
    netc_vptr(pl, nd->out[k], "void", b);
    cwm_buf_printf(b, ", %d);\n", netc_esize(x->dtype));
  }
  return 0;
}

static int glue_gather(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "Gather"))) return NOT_MINE;
  const cwm_value *iv = &g->values[nd->in[1]];
  if (iv->dtype != CWM_DT_INT64) return netc_node_fail(pl, n, "Gather's indices must be int64 at run time (int32 index inputs are not supported)");
  int axis = netc_norm_axis(cwm_gnode_attr_int(nd, "axis", 0), x->ndim);
  cwm_buf_puts(b, "  if (rt_gather(");
  netc_vptr(pl, nd->in[0], "void", b);
  cwm_buf_printf(b, ", %lld, %lld, %lld, ", (long long)netc_prod(x->shape, 0, axis), (long long)x->shape[axis],
                 (long long)netc_prod(x->shape, axis + 1, x->ndim));
  netc_vptr(pl, nd->in[1], "int64_t", b);
  cwm_buf_printf(b, ", %lld, ", (long long)cwm_value_numel(iv));
  netc_vptr(pl, nd->out[0], "void", b);
  cwm_buf_printf(b, ", %d)) return 2;\n", netc_esize(x->dtype));
  return 0;
}

static int glue_pool(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool") || !strcmp(op, "GlobalAveragePool"))) return NOT_MINE;
  if (x->ndim != 4) return netc_node_fail(pl, n, "only 2-D pooling (NCHW) is supported");
  int global = !strcmp(op, "GlobalAveragePool");
  if (global) { /* the mean of each contiguous plane */
    cwm_buf_printf(b, "  rt_reduce(1, %lld, %lld, 1, ", (long long)(x->shape[0] * x->shape[1]),
                   (long long)(x->shape[2] * x->shape[3]));
    netc_vptr(pl, nd->in[0], "float", b);
    cwm_buf_puts(b, ", ");
    netc_vptr(pl, nd->out[0], "float", b);
    cwm_buf_puts(b, ");\n");
    return 0;
  }
  const cwm_attr *ks = cwm_gnode_attr(nd, "kernel_shape"), *st = cwm_gnode_attr(nd, "strides"),
                 *pd = cwm_gnode_attr(nd, "pads");
  int kh = global ? (int)x->shape[2] : ks && ks->n == 2 ? (int)ks->ints[0] : 1;
  int kw = global ? (int)x->shape[3] : ks && ks->n == 2 ? (int)ks->ints[1] : 1;
  int sh = st && st->n == 2 ? (int)st->ints[0] : 1, sw = st && st->n == 2 ? (int)st->ints[1] : 1;
  int pt = pd && pd->n == 4 ? (int)pd->ints[0] : 0, pl_ = pd && pd->n == 4 ? (int)pd->ints[1] : 0;
  cwm_buf_printf(b, "  rt_pool2d(%d, %lld, %lld, %lld, %lld, %lld, %d, %d, %d, %d, %d, %d, %d, ", !strcmp(op, "MaxPool"),
                 (long long)(x->shape[0] * x->shape[1]), (long long)x->shape[2], (long long)x->shape[3],
                 (long long)o->shape[2], (long long)o->shape[3], kh, kw, sh, sw, pt, pl_,
                 (int)cwm_gnode_attr_int(nd, "count_include_pad", 0));
  netc_vptr(pl, nd->in[0], "float", b);
  cwm_buf_puts(b, ", ");
  netc_vptr(pl, nd->out[0], "float", b);
  cwm_buf_puts(b, ");\n");
  return 0;
}

static int glue_reduce(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "ReduceMean") || !strcmp(op, "ReduceSum") || !strcmp(op, "ReduceMax"))) return NOT_MINE;
  int mark[CWM_GRAPH_MAX_DIMS] = {0}, na = 0;
  const cwm_attr *aa = cwm_gnode_attr(nd, "axes");
  const int64_t *ax = NULL;
  if (aa && aa->kind == CWM_ATTR_INTS) ax = aa->ints, na = aa->n;
  else if (nd->nin > 1 && nd->in[1] >= 0 && !(ax = netc_const_ints(pl, nd->in[1], &na)))
    return netc_node_fail(pl, n, "the axes must be constant");
  if (!ax) /* all axes */
    for (int d = 0; d < x->ndim; d++) mark[d] = 1;
  for (int i = 0; ax && i < na; i++) mark[netc_norm_axis(ax[i], x->ndim)] = 1;
  int lo = -1, hi = -1;
  for (int d = 0; d < x->ndim; d++)
    if (mark[d]) {
      if (lo < 0) lo = d;
      else if (hi != d - 1) return netc_node_fail(pl, n, "the reduced axes must be adjacent");
      hi = d;
    }
  if (lo < 0) lo = 0, hi = -1;
  cwm_buf_printf(b, "  rt_reduce(%d, %lld, %lld, %lld, ", !strcmp(op, "ReduceSum") ? 0 : !strcmp(op, "ReduceMean") ? 1 : 2,
                 (long long)netc_prod(x->shape, 0, lo), (long long)netc_prod(x->shape, lo, hi + 1),
                 (long long)netc_prod(x->shape, hi + 1, x->ndim));
  netc_vptr(pl, nd->in[0], "float", b);
  cwm_buf_puts(b, ", ");
  netc_vptr(pl, nd->out[0], "float", b);
  cwm_buf_puts(b, ");\n");
  return 0;
}

static int glue_softmax(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax"))) return NOT_MINE;
  int axis = netc_norm_axis(cwm_gnode_attr_int(nd, "axis", g->opset >= 13 ? -1 : 1), x->ndim);
  int64_t inner = g->opset >= 13 ? netc_prod(x->shape, axis + 1, x->ndim) : 1;
  int64_t len = g->opset >= 13 ? x->shape[axis] : netc_prod(x->shape, axis, x->ndim);
  cwm_buf_printf(b, "  rt_softmax(%d, %lld, %lld, %lld, ", !strcmp(op, "LogSoftmax"), (long long)netc_prod(x->shape, 0, axis),
                 (long long)len, (long long)inner);
  netc_vptr(pl, nd->in[0], "float", b);
  cwm_buf_puts(b, ", ");
  netc_vptr(pl, nd->out[0], "float", b);
  cwm_buf_puts(b, ");\n");
  return 0;
}

static int glue_batchnorm(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "BatchNormalization"))) return NOT_MINE;
  if (x->ndim < 2) return netc_node_fail(pl, n, "the input needs a channel dimension");
  cwm_buf_printf(b, "  rt_batchnorm(%lld, %lld, %lld, ", (long long)x->shape[0], (long long)x->shape[1],
                 (long long)netc_prod(x->shape, 2, x->ndim));
  for (int k = 0; k < 5; k++) {
    netc_vptr(pl, nd->in[k], "float", b);
    cwm_buf_puts(b, ", ");
  }
  cwm_buf_printf(b, "%.9gf, ", cwm_gnode_attr_float(nd, "epsilon", 1e-5f));
  netc_vptr(pl, nd->out[0], "float", b);
  cwm_buf_puts(b, ");\n");
  return 0;
}

static int glue_conv(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "Conv"))) return NOT_MINE;
  const cwm_value *w = &g->values[nd->in[1]];
  if (x->ndim != 4) return netc_node_fail(pl, n, "only 2-D convolutions (NCHW) are supported");
  const cwm_attr *st = cwm_gnode_attr(nd, "strides"), *pd = cwm_gnode_attr(nd, "pads");
  int sh = st && st->n == 2 ? (int)st->ints[0] : 1, sw = st && st->n == 2 ? (int)st->ints[1] : 1;
  int pt = pd && pd->n == 4 ? (int)pd->ints[0] : 0, pl_ = pd && pd->n == 4 ? (int)pd->ints[1] : 0;
  cwm_buf_printf(b, "  rt_conv2d(%lld, %lld, %lld, %lld, %lld, %lld, %lld, %d, %d, %d, %d, %d, %d, %lld, ",
                 (long long)x->shape[0], (long long)x->shape[1], (long long)x->shape[2], (long long)x->shape[3],
                 (long long)w->shape[0], (long long)o->shape[2], (long long)o->shape[3], (int)w->shape[2],
                 (int)w->shape[3], sh, sw, pt, pl_, (long long)cwm_gnode_attr_int(nd, "group", 1));
  netc_vptr(pl, nd->in[0], "float", b);
  cwm_buf_puts(b, ", ");
  netc_vptr(pl, nd->in[1], "float", b);
  cwm_buf_puts(b, ", ");
  if (nd->nin > 2 && nd->in[2] >= 0) netc_vptr(pl, nd->in[2], "float", b);
  else cwm_buf_puts(b, "NULL");
  cwm_buf_puts(b, ", ");
  netc_vptr(pl, nd->out[0], "float", b);
  cwm_buf_puts(b, ");\n");
  return 0;
}

static int glue_matmul(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "MatMul"))) return NOT_MINE;
  const cwm_value *a = x, *bb = &g->values[nd->in[1]];
  int64_t M = a->ndim >= 2 ? a->shape[a->ndim - 2] : 1, K = a->shape[a->ndim - 1];
  int64_t N = bb->ndim >= 2 ? bb->shape[bb->ndim - 1] : 1;
  int ob = o->ndim - (a->ndim >= 2 ? 1 : 0) - (bb->ndim >= 2 ? 1 : 0); /* batch dims of the output */
  if (ob < 0) ob = 0;
  int64_t batch = netc_prod(o->shape, 0, ob);
  cwm_buf_printf(b, "  rt_matmul(%lld, ", (long long)batch);
  for (int k = 0; k < 2; k++) {
    const cwm_value *v = k ? bb : a;
    int vb = v->ndim - 2 > 0 ? v->ndim - 2 : 0;
    cwm_buf_puts(b, "(const int64_t[]){");
    for (int64_t t = 0; t < batch; t++) { /* offsets of each output batch in this operand */
      int64_t rem = t, off = 0, stride = (k ? K * N : M * K);
      for (int d = ob - 1; d >= 0; d--) {
        int64_t od = o->shape[d], idx = rem % od;
        rem /= od;
        int vd = d - (ob - vb);
        if (vd >= 0) {
          if (v->shape[vd] != 1) off += idx * stride;
          stride *= v->shape[vd];
        }
      }
      cwm_buf_printf(b, "%s%lld", t ? ", " : "", (long long)off);
    }
    cwm_buf_puts(b, "}, ");
  }
  cwm_buf_printf(b, "%lld, %lld, %lld, ", (long long)M, (long long)N, (long long)K);
  netc_vptr(pl, nd->in[0], "float", b);
  cwm_buf_puts(b, ", ");
  netc_vptr(pl, nd->in[1], "float", b);
  cwm_buf_puts(b, ", ");
  netc_vptr(pl, nd->out[0], "float", b);
  cwm_buf_puts(b, ");\n");
  return 0;
}

static int glue_gemm(const gx *c) {
  GX_NAMES;
  if (!(!strcmp(op, "Gemm"))) return NOT_MINE;
  int ta = (int)cwm_gnode_attr_int(nd, "transA", 0), tb = (int)cwm_gnode_attr_int(nd, "transB", 0);
  int64_t M = o->shape[0], N = o->shape[1], K = ta ? x->shape[0] : x->shape[1];
  int64_t cs0 = 0, cs1 = 0;
  int hasc = nd->nin > 2 && nd->in[2] >= 0;
  if (hasc) {
    const cwm_value *cv = &g->values[nd->in[2]];
    int64_t st[2];
    netc_bstrides(cv, o, st);
    cs0 = st[0], cs1 = st[1];
  }
  cwm_buf_printf(b, "  rt_gemm(%lld, %lld, %lld, %d, %d, %.9gf, %.9gf, ", (long long)M, (long long)N, (long long)K, ta,
                 tb, cwm_gnode_attr_float(nd, "alpha", 1), cwm_gnode_attr_float(nd, "beta", 1));
  netc_vptr(pl, nd->in[0], "float", b);
  cwm_buf_puts(b, ", ");
  netc_vptr(pl, nd->in[1], "float", b);
  cwm_buf_puts(b, ", ");
  if (hasc) netc_vptr(pl, nd->in[2], "float", b);
  else cwm_buf_puts(b, "NULL");
  cwm_buf_printf(b, ", %lld, %lld, ", (long long)cs0, (long long)cs1);
  netc_vptr(pl, nd->out[0], "float", b);
  cwm_buf_puts(b, ");\n");
  return 0;
}

int netc_glue(plan *pl, int n, cwm_buf *b) {
  const cwm_graph *g = pl->g;
  const cwm_gnode *nd = &g->nodes[n];
  const char *op = nd->op_type;
  if (netc_is_view(op)) return 0;
  gx c = {.pl = pl, .n = n, .nd = nd, .op = op, .o = &g->values[nd->out[0]], .b = b};
  c.x = nd->nin > 0 && nd->in[0] >= 0 ? &g->values[nd->in[0]] : NULL;
  c.numel = cwm_value_numel(c.o);
  /* runtime arithmetic is on float (bool kept as float 0/1); int64 only moves */
  static const char *const moves[] = {"Transpose", "Concat", "Slice", "Gather", "Expand", "Split", "Cast"};
  int moving = 0;
  for (size_t i = 0; i < sizeof moves / sizeof *moves; i++) moving |= !strcmp(op, moves[i]);
  if (!moving)
    for (int i = 0; i < nd->nin; i++)
      if (nd->in[i] >= 0 && g->values[nd->in[i]].dtype == CWM_DT_INT64 &&
          !(i > 0 && g->values[nd->in[i]].kind == CWM_VAL_CONST))
        return netc_node_fail(pl, n, "arithmetic on int64 tensors at run time is not supported (only float)");
  static int (*const emitters[])(const gx *) = {glue_binary, glue_unary, glue_where,  glue_cast,   glue_transpose,
                                                 glue_expand, glue_concat, glue_slice,  glue_gather, glue_pool,
                                                 glue_reduce, glue_softmax, glue_batchnorm, glue_conv, glue_matmul,
                                                 glue_gemm};
  for (size_t i = 0; i < sizeof emitters / sizeof *emitters; i++) {
    int r = emitters[i](&c);
    if (r != NOT_MINE) return r;
  }
  return netc_node_fail(pl, n, "this op cannot run in a compiled network (it should have been folded at import)");
}

/* infer.c: shape and dtype inference over a loaded graph, in topological order, with the rewrites
 * that make the graph what the network compiler runs: constants folded (fold.c evaluates them),
 * Identity/Dropout bypassed, BatchNorm folded into the Conv before it, dead nodes dropped. The
 * parameters each op takes from attributes or constant inputs (which depends on the opset) are
 * read once here into a cwm_opp, so evaluation and inference cannot disagree. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer_int.h"

static const char *const SUPPORTED[] = {
    /* compute */
    "Conv", "Gemm", "MatMul", "Softmax", "LogSoftmax", "ReduceMean", "ReduceSum", "ReduceMax", "MaxPool",
    "AveragePool", "GlobalAveragePool", "BatchNormalization", "LayerNormalization",
    /* elementwise */
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less", "Greater", "Where", "And", "Or", "Not",
    "Relu", "Sqrt", "Erf", "Tanh", "Sigmoid", "Exp", "Log", "Neg", "Abs", "Reciprocal", "Clip", "LeakyRelu",
    "HardSigmoid", "HardSwish", "Cast",
    /* structural */
    "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Slice", "Gather", "Expand", "Split",
    "Shape", "Size", "Constant", "ConstantOfShape", "Range", "Identity", "Dropout", "Tile"};

int cwm_graph_op_supported(const char *op) {
  for (size_t i = 0; i < sizeof SUPPORTED / sizeof *SUPPORTED; i++)
    if (!strcmp(SUPPORTED[i], op)) return 1;
  return 0;
}


static int check_no_autopad(ictx *c) {
  const cwm_attr *a = cwm_gnode_attr(NODE, "auto_pad");
  if (a && a->kind == CWM_ATTR_STRING && strcmp(a->s, "NOTSET"))
    FAIL("auto_pad '%s' is not supported (only NOTSET with explicit pads)", a->s);
  return 0;
}

/* strides, pads and dilations of 2-D windows (Conv, MaxPool, AveragePool) */
static int window_attrs(ictx *c, cwm_opp *p) {
  int64_t v[8];
  int n;
  if (check_no_autopad(c) || ginf_attr_ints(c, "dilations", v, 8, &n)) return -1;
  for (int i = 0; i < n; i++)
    if (v[i] != 1) FAIL("dilations other than 1 are not supported (dilation %lld)", (long long)v[i]);
  p->stride[0] = p->stride[1] = 1;
  if (ginf_attr_ints(c, "strides", v, 8, &n)) return -1;
  if (n >= 0 && n != 2) FAIL("strides has %d entries (2-D windows need 2)", n);
  for (int i = 0; i < n; i++) {
    if (v[i] < 1 || v[i] > (1 << 20)) FAIL("stride %lld is out of range", (long long)v[i]);
    p->stride[i] = v[i];
  }
  if (ginf_attr_ints(c, "pads", v, 8, &n)) return -1;
  if (n >= 0 && n != 4) FAIL("pads has %d entries (2-D windows need 4)", n);
  for (int i = 0; i < n; i++) {
    if (v[i] < 0 || v[i] > (1 << 20)) FAIL("pad %lld is out of range", (long long)v[i]);
    p->pad[i] = v[i];
  }
  return 0;
}

/* output extent of a window over extent x (padded by pb + pe), kernel k, stride s */
static int64_t win_out(int64_t x, int64_t pb, int64_t pe, int64_t k, int64_t s, int ceil_mode) {
  int64_t span = x + pb + pe - k;
  if (span < 0) return 0;
  int64_t o = span / s + 1;
  if (ceil_mode && span % s) {
    o++;
    if ((o - 1) * s >= x + pb) o--; /* the last window must start inside the input or its begin pad */
  }
  return o;
}

static int infer_conv(ictx *c, cwm_opp *p) {
  if (ginf_need(c, 0, "X") || ginf_need(c, 1, "W") || ginf_need_float(c, 0) || ginf_need_float(c, 1) || ginf_need_float(c, 2)) return -1;
  const cwm_value *x = IN(c, 0), *w = IN(c, 1), *b = IN(c, 2);
  if (x->ndim != 4) FAIL("only 2-D convolutions (NCHW input of rank 4) are supported; the input has rank %d", x->ndim);
  if (w->ndim != 4) FAIL("the weight has rank %d (2-D convolutions need 4)", w->ndim);
  if (window_attrs(c, p)) return -1;
  int64_t C = x->shape[1], M = w->shape[0];
  p->group = cwm_gnode_attr_int(NODE, "group", 1);
  if (p->group != 1 && p->group != C)
    FAIL("group %lld is not supported (only 1 or the channel count %lld)", (long long)p->group, (long long)C);
  char ws[96];
  cwm_value_shape_str(w, ws, sizeof ws);
  if (C == 0 || w->shape[1] != C / p->group) /* group is 1 or C, so C / group is exact */
    FAIL("the input has %lld channels but the weight %s expects %llu (group %lld)", (long long)C, ws,
         (unsigned long long)w->shape[1] * (unsigned long long)p->group, (long long)p->group);
  if (M == 0 || M % p->group) FAIL("%lld output channels are not a multiple of group %lld", (long long)M, (long long)p->group);
  int64_t ks[8];
  int nk;
  if (ginf_attr_ints(c, "kernel_shape", ks, 8, &nk)) return -1;
  if (nk >= 0 && (nk != 2 || ks[0] != w->shape[2] || ks[1] != w->shape[3]))
    FAIL("kernel_shape does not match the weight %s", ws);
  if (b && (b->ndim != 1 || b->shape[0] != M)) FAIL("the bias has %d dims but %lld output channels need [%lld]", b->ndim, (long long)M, (long long)M);
  p->kernel[0] = w->shape[2];
  p->kernel[1] = w->shape[3];
  int64_t oh = win_out(x->shape[2], p->pad[0], p->pad[2], p->kernel[0], p->stride[0], 0);
  int64_t ow = win_out(x->shape[3], p->pad[1], p->pad[3], p->kernel[1], p->stride[1], 0);
  if (oh < 1 || ow < 1)
    FAIL("kernel %lldx%lld is larger than the padded input %lldx%lld", (long long)p->kernel[0], (long long)p->kernel[1],
         (long long)(x->shape[2] + p->pad[0] + p->pad[2]), (long long)(x->shape[3] + p->pad[1] + p->pad[3]));
  int64_t sh[4] = {x->shape[0], M, oh, ow};
  return ginf_set_out(c, 0, CWM_DT_FLOAT, 4, sh);
}

static int infer_pool(ictx *c, cwm_opp *p, int is_max) {
  if (ginf_need(c, 0, "X") || ginf_need_float(c, 0)) return -1;
  const cwm_value *x = IN(c, 0);
  if (x->ndim != 4) FAIL("only 2-D pooling (NCHW input of rank 4) is supported; the input has rank %d", x->ndim);
  if (NODE->nout > 1) FAIL("the Indices output is not supported");
  if (window_attrs(c, p)) return -1;
  int64_t ks[8];
  int nk;
  if (ginf_attr_ints(c, "kernel_shape", ks, 8, &nk)) return -1;
  if (nk != 2) FAIL("kernel_shape must have 2 entries");
  if (ks[0] < 1 || ks[1] < 1 || ks[0] > (1 << 20) || ks[1] > (1 << 20)) FAIL("kernel_shape entries must be positive");
  p->kernel[0] = ks[0];
  p->kernel[1] = ks[1];
  if (p->pad[0] >= ks[0] || p->pad[2] >= ks[0] || p->pad[1] >= ks[1] || p->pad[3] >= ks[1])
    FAIL("pads must be smaller than the kernel");
  int ceil_mode = (int)cwm_gnode_attr_int(NODE, "ceil_mode", 0);
  p->count_include_pad = is_max ? 0 : (int)cwm_gnode_attr_int(NODE, "count_include_pad", 0);
  int64_t oh = win_out(x->shape[2], p->pad[0], p->pad[2], ks[0], p->stride[0], ceil_mode);
  int64_t ow = win_out(x->shape[3], p->pad[1], p->pad[3], ks[1], p->stride[1], ceil_mode);
  if (oh < 1 || ow < 1) FAIL("kernel %lldx%lld is larger than the padded input", (long long)ks[0], (long long)ks[1]);
  int64_t sh[4] = {x->shape[0], x->shape[1], oh, ow};
  return ginf_set_out(c, 0, CWM_DT_FLOAT, 4, sh);
}

static int infer_matmul(ictx *c) {
  if (ginf_need(c, 0, "A") || ginf_need(c, 1, "B") || ginf_need_float(c, 0) || ginf_need_float(c, 1)) return -1;
  const cwm_value *a = IN(c, 0), *b = IN(c, 1);
  if (a->ndim < 1 || b->ndim < 1) FAIL("MatMul needs operands of rank 1 or more");
  int64_t ka = a->shape[a->ndim - 1], kb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
  char as[96], bs[96];
  cwm_value_shape_str(a, as, sizeof as);
  cwm_value_shape_str(b, bs, sizeof bs);
  if (ka != kb) FAIL("inner dimensions differ: %s x %s", as, bs);
  int64_t sh[CWM_GRAPH_MAX_DIMS + 2];
  int nb;
  int na_b = a->ndim > 2 ? a->ndim - 2 : 0, nb_b = b->ndim > 2 ? b->ndim - 2 : 0;
  if (ginf_bcast(na_b, a->shape, nb_b, b->shape, &nb, sh)) FAIL("batch dimensions of %s and %s do not broadcast", as, bs);
  int nd = nb;
  if (a->ndim >= 2) sh[nd++] = a->shape[a->ndim - 2];
  if (b->ndim >= 2) sh[nd++] = b->shape[b->ndim - 1];
  return ginf_set_out(c, 0, CWM_DT_FLOAT, nd, sh);
}

static int infer_gemm(ictx *c, cwm_opp *p) {
  if (ginf_need(c, 0, "A") || ginf_need(c, 1, "B") || ginf_need_float(c, 0) || ginf_need_float(c, 1) || ginf_need_float(c, 2)) return -1;
  const cwm_value *a = IN(c, 0), *b = IN(c, 1), *cc = IN(c, 2);
  if (a->ndim != 2 || b->ndim != 2) FAIL("Gemm needs 2-D operands (ranks %d and %d)", a->ndim, b->ndim);
  p->alpha = cwm_gnode_attr_float(NODE, "alpha", 1);
  p->beta = cwm_gnode_attr_float(NODE, "beta", 1);
  p->trans_a = cwm_gnode_attr_int(NODE, "transA", 0) != 0;
  p->trans_b = cwm_gnode_attr_int(NODE, "transB", 0) != 0;
  int64_t M = a->shape[p->trans_a], K = a->shape[!p->trans_a], K2 = b->shape[p->trans_b], N = b->shape[!p->trans_b];
  char as[96], bs[96];
  cwm_value_shape_str(a, as, sizeof as);
  cwm_value_shape_str(b, bs, sizeof bs);
  if (K != K2) FAIL("inner dimensions differ: A %s (transA %d), B %s (transB %d)", as, p->trans_a, bs, p->trans_b);
  int64_t sh[2] = {M, N}, r[CWM_GRAPH_MAX_DIMS];
  int nr;
  if (cc && (cc->ndim > 2 || ginf_bcast(2, sh, cc->ndim, cc->shape, &nr, r) || r[0] != M || r[1] != N)) {
    cwm_value_shape_str(cc, as, sizeof as);
    FAIL("C %s does not broadcast to [%lld, %lld]", as, (long long)M, (long long)N);
  }
  return ginf_set_out(c, 0, CWM_DT_FLOAT, 2, sh);
}

/* Elementwise ops, N-ary with broadcasting. */
static int infer_elementwise(ictx *c, const char *op) {
  int bool_in = !strcmp(op, "And") || !strcmp(op, "Or") || !strcmp(op, "Not");
  int cmp = !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater");
  int where = !strcmp(op, "Where");
  int float_only = !strcmp(op, "Sqrt") || !strcmp(op, "Erf") || !strcmp(op, "Tanh") || !strcmp(op, "Sigmoid") ||
                   !strcmp(op, "Exp") || !strcmp(op, "Log") || !strcmp(op, "Reciprocal") ||
                   !strcmp(op, "LeakyRelu") || !strcmp(op, "HardSigmoid") || !strcmp(op, "HardSwish");
  int unary = float_only || !strcmp(op, "Relu") || !strcmp(op, "Neg") || !strcmp(op, "Abs") ||
              !strcmp(op, "Not") || !strcmp(op, "Clip") || !strcmp(op, "Cast");
  int nmax = unary ? 1 : where ? 3 : (!strcmp(op, "Max") || !strcmp(op, "Min")) ? NODE->nin : 2;
  if (nmax < 1) FAIL("no inputs");
  for (int k = 0; k < nmax; k++)
    if (ginf_need(c, k, "operand")) return -1;
  int nd = 0;
  int64_t sh[CWM_GRAPH_MAX_DIMS];
  for (int k = 0; k < nmax; k++) {
    const cwm_value *v = IN(c, k);
    int64_t r[CWM_GRAPH_MAX_DIMS];
    int nr;
    if (ginf_bcast(nd, sh, v->ndim, v->shape, &nr, r)) {
      char s1[96], s2[96];
      ginf_shape_str(nd, sh, s1, sizeof s1);
      cwm_value_shape_str(v, s2, sizeof s2);
      FAIL("inputs %s and %s do not broadcast", s1, s2);
    }
    nd = nr;
    memcpy(sh, r, sizeof(int64_t) * (size_t)nr);
  }
  int d0 = IN(c, where ? 1 : 0)->dtype;
  if (where) {
    if (IN(c, 0)->dtype != CWM_DT_BOOL) FAIL("the condition has dtype %s (needs bool)", cwm_dtype_name(IN(c, 0)->dtype));
    if (!same_dt(d0, IN(c, 2)->dtype))
      FAIL("inputs have dtypes %s and %s", cwm_dtype_name(d0), cwm_dtype_name(IN(c, 2)->dtype));
  } else if (!strcmp(op, "Cast")) {
    /* any of our dtypes casts */
  } else {
    for (int k = 0; k < nmax; k++) {
      int dk = IN(c, k)->dtype;
      if (bool_in ? dk != CWM_DT_BOOL : float_only ? dk != CWM_DT_FLOAT : (dk == CWM_DT_BOOL && strcmp(op, "Equal")))
        FAIL("input %d has dtype %s, which %s does not take", k, cwm_dtype_name(dk), op);
      if (k && strcmp(op, "Pow") && !same_dt(dk, d0))
        FAIL("inputs have dtypes %s and %s", cwm_dtype_name(d0), cwm_dtype_name(dk));
    }
  }
  return ginf_set_out(c, 0, cmp ? CWM_DT_BOOL : d0, nd, sh);
}

static int infer_reduce(ictx *c, cwm_opp *p, const char *op) {
  if (ginf_need(c, 0, "data")) return -1;
  const cwm_value *x = IN(c, 0);
  if (x->dtype == CWM_DT_BOOL || (!strcmp(op, "ReduceMean") && x->dtype != CWM_DT_FLOAT))
    FAIL("input 0 has dtype %s, which %s does not take", cwm_dtype_name(x->dtype), op);
  int from_input = c->g->opset >= (!strcmp(op, "ReduceSum") ? 13 : 18);
  int64_t axes[CWM_GRAPH_MAX_DIMS];
  int n;
  if (ginf_get_axes(c, from_input, 1, axes, &n)) return -1;
  int keep = cwm_gnode_attr_int(NODE, "keepdims", 1) != 0;
  if (n <= 0) {
    int noop = cwm_gnode_attr_int(NODE, "noop_with_empty_axes", 0) != 0;
    for (int d = 0; d < x->ndim; d++) p->reduce[d] = !noop;
  }
  for (int i = 0; i < n; i++) {
    int a;
    if (ginf_norm_axis(c, axes[i], x->ndim, &a)) return -1;
    if (p->reduce[a]) FAIL("axis %d appears twice", a);
    p->reduce[a] = 1;
  }
  int64_t sh[CWM_GRAPH_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (p->reduce[d] && x->shape[d] == 0 && !strcmp(op, "ReduceMax")) FAIL("reduces an empty axis %d", d);
    if (!p->reduce[d]) sh[nd++] = x->shape[d];
    else if (keep) sh[nd++] = 1;
  }
  return ginf_set_out(c, 0, x->dtype, nd, sh);
}

static int infer_norm(ictx *c, cwm_opp *p, const char *op) {
  const cwm_value *x = IN(c, 0);
  if (ginf_need(c, 0, "X") || ginf_need(c, 1, "scale")) return -1;
  for (int k = 0; k < NODE->nin; k++)
    if (ginf_need_float(c, k)) return -1;
  p->eps = cwm_gnode_attr_float(NODE, "epsilon", 1e-5f);
  if (!strcmp(op, "BatchNormalization")) {
    if (x->ndim < 2) FAIL("the input has rank %d (needs N, C, ...)", x->ndim);
    for (int k = 1; k < 5; k++) {
      if (ginf_need(c, k, "scale, B, mean or var")) return -1;
      if (IN(c, k)->ndim != 1 || IN(c, k)->shape[0] != x->shape[1])
        FAIL("input %d must have shape [%lld] (the channel count)", k, (long long)x->shape[1]);
    }
    int64_t ch = x->shape[1];
    for (int k = 1; k < NODE->nout; k++)
      if (ginf_set_out(c, k, CWM_DT_FLOAT, 1, &ch)) return -1;
    return ginf_set_out(c, 0, CWM_DT_FLOAT, x->ndim, x->shape);
  }
  int a;
  if (ginf_norm_axis(c, cwm_gnode_attr_int(NODE, "axis", -1), x->ndim, &a)) return -1;
  p->axis = a;
  for (int k = 1; k < 3; k++) {
    const cwm_value *s = IN(c, k);
    int64_t r[CWM_GRAPH_MAX_DIMS];
    int nr;
    if (s && (s->ndim > x->ndim - a || ginf_bcast(x->ndim, x->shape, s->ndim, s->shape, &nr, r) ||
              memcmp(r, x->shape, sizeof(int64_t) * (size_t)x->ndim))) {
      char xs[96], ss[96];
      cwm_value_shape_str(x, xs, sizeof xs);
      cwm_value_shape_str(s, ss, sizeof ss);
      FAIL("input %d %s does not match the normalized dimensions of %s from axis %d", k, ss, xs, a);
    }
  }
  int64_t sh[CWM_GRAPH_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) sh[d] = d < a ? x->shape[d] : 1;
  for (int k = 1; k < NODE->nout; k++)
    if (ginf_set_out(c, k, CWM_DT_FLOAT, x->ndim, sh)) return -1;
  return ginf_set_out(c, 0, CWM_DT_FLOAT, x->ndim, x->shape);
}

/* Op-specific parameters of elementwise ops (constants of Clip, Cast's target). */
static int elementwise_params(ictx *c, cwm_opp *p, const char *op) {
  if (!strcmp(op, "LeakyRelu")) p->alpha = cwm_gnode_attr_float(NODE, "alpha", 0.01f);
  if (!strcmp(op, "HardSigmoid")) {
    p->alpha = cwm_gnode_attr_float(NODE, "alpha", 0.2f);
    p->beta = cwm_gnode_attr_float(NODE, "beta", 0.5f);
  }
  if (!strcmp(op, "Clip")) {
    p->cmin = -INFINITY;
    p->cmax = INFINITY;
    if (c->g->opset < 11) {
      p->cmin = cwm_gnode_attr_float(NODE, "min", -INFINITY);
      p->cmax = cwm_gnode_attr_float(NODE, "max", INFINITY);
    }
    for (int k = 1; k < 3 && c->g->opset >= 11; k++) {
      const cwm_value *b = IN(c, k);
      if (!b) continue;
      if (b->kind != CWM_VAL_CONST || cwm_value_numel(b) != 1)
        FAIL("input %d (%s) must be a constant scalar", k, k == 1 ? "min" : "max");
      double x = b->dtype == CWM_DT_FLOAT ? *(float *)b->data : b->dtype == CWM_DT_INT64 ? (double)*(int64_t *)b->data
                                                                                       : *(uint8_t *)b->data;
      if (k == 1) p->cmin = x; else p->cmax = x;
    }
  }
  if (!strcmp(op, "Cast")) {
    int64_t to = cwm_gnode_attr_int(NODE, "to", 0);
    if (to != CWM_DT_FLOAT && to != CWM_DT_INT64 && to != CWM_DT_INT32 && to != CWM_DT_BOOL)
      FAIL("Cast to %s is not supported (float, int64, int32, bool)", cwm_dtype_name((int)to));
    p->to = out_dt((int)to);
  }
  return 0;
}

static int is_elementwise(const char *op) {
  static const char *const E[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less", "Greater",
                                  "Where", "And", "Or", "Not", "Relu", "Sqrt", "Erf", "Tanh", "Sigmoid", "Exp",
                                  "Log", "Neg", "Abs", "Reciprocal", "Clip", "LeakyRelu", "HardSigmoid",
                                  "HardSwish", "Cast"};
  for (size_t i = 0; i < sizeof E / sizeof *E; i++)
    if (!strcmp(E[i], op)) return 1;
  return 0;
}

static int infer_op(ictx *c, cwm_opp *p) {
  const char *op = NODE->op_type;
  for (int k = 0; k < NODE->nin; k++)
    if (IN(c, k) && !IN(c, k)->shape_known) FAIL("input %d ('%s') has no known shape", k, IN(c, k)->name);
  if (!strcmp(op, "Conv")) return infer_conv(c, p);
  if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool")) return infer_pool(c, p, op[0] == 'M');
  if (!strcmp(op, "MatMul")) return infer_matmul(c);
  if (!strcmp(op, "Gemm")) return infer_gemm(c, p);
  if (!strcmp(op, "BatchNormalization") || !strcmp(op, "LayerNormalization")) return infer_norm(c, p, op);
  if (!strncmp(op, "Reduce", 6)) return infer_reduce(c, p, op);
  if (is_elementwise(op)) {
    if (elementwise_params(c, p, op) || infer_elementwise(c, op)) return -1;
    if (!strcmp(op, "Cast")) c->g->values[NODE->out[0]].dtype = p->to;
    return 0;
  }
  if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax")) {
    if (ginf_need(c, 0, "input") || ginf_need_float(c, 0)) return -1;
    const cwm_value *x = IN(c, 0);
    int a;
    if (ginf_norm_axis(c, cwm_gnode_attr_int(NODE, "axis", c->g->opset >= 13 ? -1 : 1), x->ndim, &a)) return -1;
    p->axis = a;
    p->softmax_2d = c->g->opset < 13;
    return ginf_set_out(c, 0, CWM_DT_FLOAT, x->ndim, x->shape);
  }
  if (!strcmp(op, "GlobalAveragePool")) {
    if (ginf_need(c, 0, "X") || ginf_need_float(c, 0)) return -1;
    const cwm_value *x = IN(c, 0);
    if (x->ndim < 3) FAIL("the input has rank %d (needs N, C and spatial dimensions)", x->ndim);
    int64_t sh[CWM_GRAPH_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) sh[d] = d < 2 ? x->shape[d] : 1;
    return ginf_set_out(c, 0, CWM_DT_FLOAT, x->ndim, sh);
  }
  return ginf_structural(c, p, op);
}

/* Replaces every read of value `from` (later nodes and graph outputs) by `to`. */
static void rewire(cwm_graph *g, int after, int from, int to) {
  for (int j = after + 1; j < g->nnodes; j++)
    for (int k = 0; k < g->nodes[j].nin; k++)
      if (g->nodes[j].in[k] == from) g->nodes[j].in[k] = to;
  for (int k = 0; k < g->noutputs; k++)
    if (g->outputs[k] == from) g->outputs[k] = to;
}

static int readers(const cwm_graph *g, int v, int except) {
  int n = 0;
  for (int j = 0; j < g->nnodes; j++)
    if (j != except && !g->nodes[j].dead)
      for (int k = 0; k < g->nodes[j].nin; k++) n += g->nodes[j].in[k] == v;
  for (int k = 0; k < g->noutputs; k++) n += g->outputs[k] == v;
  return n;
}

static int is_const_float(const cwm_graph *g, int v) {
  return v >= 0 && g->values[v].kind == CWM_VAL_CONST && g->values[v].dtype == CWM_DT_FLOAT;
}

static int add_const(cwm_graph *g, const char *base, const char *suffix, int ndim, const int64_t *shape, void *data) {
  char nm[300];
  snprintf(nm, sizeof nm, "%s%s", base, suffix);
  for (int k = 2, clash = 1; clash; k++) {
    clash = 0;
    for (int i = 0; i < g->nvalues && !clash; i++) clash = !strcmp(g->values[i].name, nm);
    if (clash) snprintf(nm, sizeof nm, "%s%s%d", base, suffix, k);
  }
  int vi = cwm_graph_add_value(g, nm, CWM_VAL_CONST, CWM_DT_FLOAT, ndim, shape);
  g->values[vi].data = data;
  return vi;
}

/* BatchNormalization ni reading a Conv's output that nobody else reads, every parameter constant:
 * the conv takes the per-channel scale into its weights and the shift into its bias. */
static int fold_bn(cwm_graph *g, int ni) {
  cwm_gnode *bn = &g->nodes[ni];
  if (bn->nin < 5 || cwm_gnode_attr_int(bn, "training_mode", 0)) return 0;
  int x = bn->in[0];
  int ci = x >= 0 ? g->values[x].producer : -1;
  if (ci < 0 || strcmp(g->nodes[ci].op_type, "Conv") || g->nodes[ci].dead || readers(g, x, ni)) return 0;
  for (int k = 1; k < bn->nout; k++)
    if (readers(g, bn->out[k], -1)) return 0;
  cwm_gnode *cv = &g->nodes[ci];
  int w = cv->in[1], b = cv->nin > 2 ? cv->in[2] : -1;
  if (!is_const_float(g, w) || (b >= 0 && !is_const_float(g, b))) return 0;
  for (int k = 1; k < 5; k++)
    if (!is_const_float(g, bn->in[k])) return 0;
  const cwm_value *wv = &g->values[w];
  int64_t M = wv->shape[0], per = cwm_value_numel(wv) / (M ? M : 1);
  const float *gam = g->values[bn->in[1]].data, *beta = g->values[bn->in[2]].data;
  const float *mean = g->values[bn->in[3]].data, *var = g->values[bn->in[4]].data;
  const float *w0 = wv->data, *b0 = b >= 0 ? g->values[b].data : NULL;
  float eps = cwm_gnode_attr_float(bn, "epsilon", 1e-5f);
  float *nw = cwm_xmalloc(sizeof(float) * (size_t)(M * per + 1));
  float *nb = cwm_xmalloc(sizeof(float) * (size_t)(M ? M : 1));
  for (int64_t m = 0; m < M; m++) {
    float s = gam[m] / sqrtf(var[m] + eps);
    for (int64_t i = 0; i < per; i++) nw[m * per + i] = w0[m * per + i] * s;
    nb[m] = ((b0 ? b0[m] : 0.f) - mean[m]) * s + beta[m];
  }
  int64_t wsh[CWM_GRAPH_MAX_DIMS];
  memcpy(wsh, wv->shape, sizeof wsh);
  int wnd = wv->ndim;
  char base[260];
  snprintf(base, sizeof base, "%s", g->nodes[ci].name);
  int nwv = add_const(g, base, "_w_bn", wnd, wsh, nw);
  int nbv = add_const(g, base, "_b_bn", 1, &M, nb);
  cv = &g->nodes[ci];
  if (cv->nin < 3) {
    cv->in = cwm_xrealloc(cv->in, sizeof(int) * 3);
    cv->nin = 3;
  }
  cv->in[1] = nwv;
  cv->in[2] = nbv;
  g->nodes[ni].dead = 1;
  rewire(g, ni, g->nodes[ni].out[0], x);
  return 1;
}

/* Work of evaluating the node at import, in multiply-adds (roughly). */
static int64_t fold_work(const cwm_graph *g, const cwm_gnode *n, const cwm_opp *p) {
  double w = 0, mul = 1;
  if (!strcmp(n->op_type, "Conv")) mul = (double)cwm_value_numel(&g->values[n->in[1]]) / (double)g->values[n->in[1]].shape[0];
  else if (!strcmp(n->op_type, "MaxPool") || !strcmp(n->op_type, "AveragePool")) mul = (double)(p->kernel[0] * p->kernel[1]);
  else if (!strcmp(n->op_type, "MatMul") || !strcmp(n->op_type, "Gemm")) {
    const cwm_value *a = &g->values[n->in[0]];
    mul = (double)a->shape[!strcmp(n->op_type, "Gemm") && p->trans_a ? 0 : a->ndim - 1];
  }
  for (int k = 0; k < n->nin; k++)
    if (n->in[k] >= 0) w += (double)cwm_value_numel(&g->values[n->in[k]]);
  for (int k = 0; k < n->nout; k++) {
    int64_t m = cwm_value_numel(&g->values[n->out[k]]);
    if (m > CWM_FOLD_MAX_NUMEL) return INT64_MAX;
    w += (double)m * mul;
  }
  return w > (double)CWM_FOLD_MAX_WORK ? INT64_MAX : (int64_t)w;
}

int cwm_graph_infer(cwm_graph *g, cwm_err *err) {
  for (int ni = 0; ni < g->nnodes; ni++) {
    cwm_gnode *n = &g->nodes[ni];
    if (n->dead) continue;
    if (!cwm_graph_op_supported(n->op_type)) return cwm_node_fail(g, ni, err, "unsupported op '%s'", n->op_type);
    if (n->nout == 0) { /* writes nothing anybody could read */
      n->dead = 1;
      continue;
    }
    ictx c = {g, ni, err};
    cwm_opp p;
    memset(&p, 0, sizeof p);
    if (!strcmp(n->op_type, "Identity") || !strcmp(n->op_type, "Dropout")) {
      const cwm_value *x = n->nin ? IN(&c, 0) : NULL;
      if (!x) return cwm_node_fail(g, ni, err, "input 0 is missing");
      if (n->nout < 1) continue;
      int vx = n->in[0];
      if (ginf_set_out(&c, 0, x->dtype, x->ndim, x->shape)) return -1;
      if (n->nout > 1 && readers(g, n->out[1], -1))
        return cwm_node_fail(g, ni, err, "the mask output is not supported (inference only)");
      n->dead = 1;
      rewire(g, ni, n->out[0], vx);
      continue;
    }
    if (infer_op(&c, &p)) return -1;
    n = &g->nodes[ni];
    for (int k = 0; k < n->nout; k++)
      if (!g->values[n->out[k]].shape_known)
        return cwm_node_fail(g, ni, err, "output %d ('%s') is not one that %s produces", k, g->values[n->out[k]].name,
                             n->op_type);
    if (!strcmp(n->op_type, "BatchNormalization") && fold_bn(g, ni)) continue;
    n = &g->nodes[ni];
    int all_const = 1;
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] >= 0 && g->values[n->in[k]].kind != CWM_VAL_CONST) all_const = 0;
    if (!strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size")) all_const = 1;
    if (!all_const || fold_work(g, n, &p) == INT64_MAX) continue;
    if (cwm_graph_fold_node(g, ni, &p, err)) return -1;
    n = &g->nodes[ni];
    for (int k = 0; k < n->nout; k++) {
      g->values[n->out[k]].kind = CWM_VAL_CONST;
      g->values[n->out[k]].producer = -1;
    }
    n->dead = 1;
  }
  /* dead code: a node lives when one of its outputs is a graph output or read by a live node */
  char *want = cwm_xcalloc((size_t)g->nvalues + 1, 1);
  for (int k = 0; k < g->noutputs; k++) want[g->outputs[k]] = 1;
  for (int ni = g->nnodes - 1; ni >= 0; ni--) {
    cwm_gnode *n = &g->nodes[ni];
    if (n->dead) continue;
    int live = 0;
    for (int k = 0; k < n->nout; k++) live |= want[n->out[k]];
    if (!live) { n->dead = 1; continue; }
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] >= 0) want[n->in[k]] = 1;
  }
  free(want);
  for (int v = 0; v < g->nvalues; v++) g->values[v].nuses = 0;
  for (int ni = 0; ni < g->nnodes; ni++)
    if (!g->nodes[ni].dead)
      for (int k = 0; k < g->nodes[ni].nin; k++)
        if (g->nodes[ni].in[k] >= 0) g->values[g->nodes[ni].in[k]].nuses++;
  for (int k = 0; k < g->noutputs; k++) g->values[g->outputs[k]].nuses++;
  return 0;
}

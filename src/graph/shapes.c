/* shapes.c: shape inference of the structural ops (Shape, Size, ConstantOfShape, Range, Reshape,
 * Slice, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Gather, Expand, Tile, Split): what they
 * take from attributes or constant inputs, checked, into the node's cwm_opp. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer_int.h"

static int infer_reshape(ictx *c) {
  if (ginf_need(c, 0, "data")) return -1;
  const cwm_value *x = IN(c, 0);
  int64_t s[CWM_GRAPH_MAX_DIMS];
  int n;
  if (ginf_const_ints(c, 1, "shape", s, CWM_GRAPH_MAX_DIMS, &n)) return -1;
  int allowzero = cwm_gnode_attr_int(NODE, "allowzero", 0) != 0, neg = -1;
  int64_t known = 1, numel = cwm_value_numel(x);
  char xs[96], ts[128];
  cwm_value_shape_str(x, xs, sizeof xs);
  ginf_shape_str(n, s, ts, sizeof ts);
  for (int i = 0; i < n; i++) {
    if (s[i] == 0 && !allowzero) {
      if (i >= x->ndim) FAIL("shape %s copies dimension %d, which the input %s lacks", ts, i, xs);
      s[i] = x->shape[i];
    }
    if (s[i] == -1) {
      if (neg >= 0) FAIL("shape %s has more than one -1", ts);
      neg = i;
      continue;
    }
    if (s[i] < 0 || s[i] > CWM_GRAPH_MAX_NUMEL) FAIL("shape %s has an invalid dimension", ts);
    if (s[i] && known > CWM_GRAPH_MAX_NUMEL / s[i]) FAIL("shape %s is too large", ts);
    known *= s[i];
  }
  if (neg >= 0) {
    if (known == 0 || numel % known) FAIL("cannot reshape %s (%lld elements) to %s", xs, (long long)numel, ts);
    s[neg] = numel / known;
  } else if (known != numel) {
    FAIL("cannot reshape %s (%lld elements) to %s (%lld elements)", xs, (long long)numel, ts, (long long)known);
  }
  return ginf_set_out(c, 0, x->dtype, n, s);
}

static int infer_slice(ictx *c, cwm_opp *p) {
  if (ginf_need(c, 0, "data")) return -1;
  const cwm_value *x = IN(c, 0);
  int64_t st[CWM_GRAPH_MAX_DIMS], en[CWM_GRAPH_MAX_DIMS], ax[CWM_GRAPH_MAX_DIMS], sp[CWM_GRAPH_MAX_DIMS];
  int ns, ne, na = -1, np = -1;
  if (c->g->opset >= 10) {
    if (ginf_const_ints(c, 1, "starts", st, 8, &ns) || ginf_const_ints(c, 2, "ends", en, 8, &ne)) return -1;
    if (IN(c, 3) && ginf_const_ints(c, 3, "axes", ax, 8, &na)) return -1;
    if (IN(c, 4) && ginf_const_ints(c, 4, "steps", sp, 8, &np)) return -1;
  } else if (ginf_attr_ints(c, "starts", st, 8, &ns) || ginf_attr_ints(c, "ends", en, 8, &ne) || ginf_attr_ints(c, "axes", ax, 8, &na)) {
    return -1;
  }
  if (ns < 0 || ns != ne) FAIL("starts and ends have different lengths");
  if ((na >= 0 && na != ns) || (np >= 0 && np != ns)) FAIL("axes or steps differ in length from starts");
  int64_t sh[CWM_GRAPH_MAX_DIMS];
  int seen[CWM_GRAPH_MAX_DIMS] = {0};
  for (int d = 0; d < x->ndim; d++) {
    p->start[d] = 0;
    p->step[d] = 1;
    sh[d] = x->shape[d];
  }
  for (int i = 0; i < ns; i++) {
    int a;
    if (ginf_norm_axis(c, na >= 0 ? ax[i] : i, x->ndim, &a)) return -1;
    if (seen[a]++) FAIL("axis %d appears twice", a);
    int64_t step = np >= 0 ? sp[i] : 1, d = x->shape[a], s = st[i], e = en[i];
    if (step == 0) FAIL("step 0 on axis %d", a);
    if (step < -CWM_GRAPH_MAX_NUMEL) step = -CWM_GRAPH_MAX_NUMEL; /* any step past the extent takes one element */
    if (step > CWM_GRAPH_MAX_NUMEL) step = CWM_GRAPH_MAX_NUMEL;
    if (s < 0) s = s < -d ? -d - 1 + d : s + d; /* clamps without overflowing INT64_MIN + d */
    if (e < 0) e = e < -d ? -1 : e + d;
    if (step > 0) {
      s = s < 0 ? 0 : s > d ? d : s;
      e = e < 0 ? 0 : e > d ? d : e;
    } else {
      s = s > d - 1 ? d - 1 : s < 0 ? 0 : s;
      e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
    }
    int64_t len = step > 0 ? (e > s ? (e - s) / step + ((e - s) % step != 0) : 0)
                           : (s > e ? (s - e) / -step + ((s - e) % -step != 0) : 0);
    p->start[a] = s;
    p->step[a] = step;
    sh[a] = len;
  }
  return ginf_set_out(c, 0, x->dtype, x->ndim, sh);
}

static int shape_shape_of(ictx *c, cwm_opp *p, const char *op, const cwm_value *x) {
  int64_t sh[CWM_GRAPH_MAX_DIMS] = {0};
  if (op[1] == 'i') return ginf_set_out(c, 0, CWM_DT_INT64, 0, sh);
  int64_t s = c->g->opset >= 15 ? cwm_gnode_attr_int(NODE, "start", 0) : 0;
  int64_t e = c->g->opset >= 15 ? cwm_gnode_attr_int(NODE, "end", x->ndim) : x->ndim;
  if (s < 0) s += x->ndim;
  if (e < 0) e += x->ndim;
  s = s < 0 ? 0 : s > x->ndim ? x->ndim : s;
  e = e < s ? s : e > x->ndim ? x->ndim : e;
  p->shape_start = s;
  sh[0] = e - s;
  return ginf_set_out(c, 0, CWM_DT_INT64, 1, sh);
}

static int shape_constant_of_shape(ictx *c, cwm_opp *p, const char *op, const cwm_value *x) {
  (void)x;
  (void)op;
  int64_t v[CWM_GRAPH_MAX_DIMS];
  int n;
  if (ginf_const_ints(c, 0, "shape", v, CWM_GRAPH_MAX_DIMS, &n)) return -1;
  const cwm_attr *a = cwm_gnode_attr(NODE, "value");
  p->fill = -1;
  int dt = CWM_DT_FLOAT;
  if (a) {
    if (a->kind != CWM_ATTR_TENSOR || cwm_value_numel(&c->g->values[a->value]) != 1)
      FAIL("attribute 'value' must be a one-element tensor");
    p->fill = a->value;
    dt = c->g->values[a->value].dtype;
  }
  return ginf_set_out(c, 0, dt, n, v);
}

static int shape_range(ictx *c, cwm_opp *p, const char *op, const cwm_value *x) {
  (void)p, (void)op;
  for (int k = 0; k < 3; k++) {
    const cwm_value *r = IN(c, k);
    if (!r) FAIL("input %d is missing", k);
    if (r->kind != CWM_VAL_CONST) FAIL("input %d is computed at run time: only constant ranges are supported", k);
    if (cwm_value_numel(r) != 1 || r->dtype == CWM_DT_BOOL || !same_dt(r->dtype, IN(c, 0)->dtype))
      FAIL("start, limit and delta must be scalars of one numeric dtype");
  }
  int64_t len;
  if (x->dtype == CWM_DT_FLOAT) {
    double s = *(float *)x->data, l = *(float *)IN(c, 1)->data, d = *(float *)IN(c, 2)->data;
    double nn = d == 0 ? NAN : ceil((l - s) / d);
    if (!(nn < (double)CWM_GRAPH_MAX_NUMEL)) FAIL("delta is 0 or the range too long");
    len = nn < 0 ? 0 : (int64_t)nn;
  } else {
    int64_t s = *(int64_t *)x->data, l = *(int64_t *)IN(c, 1)->data, d = *(int64_t *)IN(c, 2)->data;
    if (d == 0) FAIL("delta is 0");
    uint64_t span = d > 0 ? (l > s ? (uint64_t)l - (uint64_t)s : 0) : (s > l ? (uint64_t)s - (uint64_t)l : 0);
    uint64_t ad = d > 0 ? (uint64_t)d : (uint64_t)0 - (uint64_t)d;
    uint64_t nn = span / ad + (span % ad != 0);
    if (nn > (uint64_t)CWM_GRAPH_MAX_NUMEL) FAIL("the range is too long");
    len = (int64_t)nn;
  }
  return ginf_set_out(c, 0, x->dtype, 1, &len);
}

static int shape_flatten(ictx *c, cwm_opp *p, const char *op, const cwm_value *x) {
  (void)p, (void)op;
  int64_t sh[CWM_GRAPH_MAX_DIMS];
  int r = x->ndim;
  int64_t a = cwm_gnode_attr_int(NODE, "axis", 1);
  if (a < -r || a > r) FAIL("axis %lld is out of range for rank %d", (long long)a, r);
  if (a < 0) a += r;
  sh[0] = cwm_shape_numel((int)a, x->shape);
  sh[1] = cwm_shape_numel(r - (int)a, x->shape + a);
  return ginf_set_out(c, 0, x->dtype, 2, sh);
}

static int shape_transpose(ictx *c, cwm_opp *p, const char *op, const cwm_value *x) {
  (void)op;
  int64_t sh[CWM_GRAPH_MAX_DIMS], v[CWM_GRAPH_MAX_DIMS];
  int n;
  char vs[128];
  int r = x->ndim;
  if (ginf_attr_ints(c, "perm", v, CWM_GRAPH_MAX_DIMS, &n)) return -1;
  if (n < 0) {
    n = r;
    for (int i = 0; i < r; i++) v[i] = r - 1 - i;
  }
  int seen[CWM_GRAPH_MAX_DIMS] = {0}, ok = n == r;
  for (int i = 0; i < n && ok; i++) ok = v[i] >= 0 && v[i] < r && !seen[v[i]]++;
  ginf_shape_str(n, v, vs, sizeof vs);
  if (!ok) FAIL("perm %s is not a permutation of 0..%d", vs, r - 1);
  for (int i = 0; i < r; i++) {
    p->perm[i] = (int)v[i];
    sh[i] = x->shape[v[i]];
  }
  return ginf_set_out(c, 0, x->dtype, r, sh);
}

static int shape_squeeze(ictx *c, cwm_opp *p, const char *op, const cwm_value *x) {
  (void)p;
  int64_t sh[CWM_GRAPH_MAX_DIMS], v[CWM_GRAPH_MAX_DIMS];
  int n;
  char xs[96];
  cwm_value_shape_str(x, xs, sizeof xs);
  int r = x->ndim;
  if (ginf_get_axes(c, c->g->opset >= 13, 1, v, &n)) return -1;
  int unsq = op[0] == 'U', ro = unsq ? r + (n > 0 ? n : 0) : r;
  if (unsq && n < 0) FAIL("axes are missing");
  if (ro > CWM_GRAPH_MAX_DIMS) FAIL("the result would have %d dimensions", ro);
  int mark[CWM_GRAPH_MAX_DIMS] = {0};
  for (int i = 0; i < n; i++) {
    int a;
    if (ginf_norm_axis(c, v[i], ro, &a)) return -1;
    if (mark[a]++) FAIL("axis %d appears twice", a);
    if (!unsq && x->shape[a] != 1)
      FAIL("cannot squeeze axis %d of %s (size %lld)", a, xs, (long long)x->shape[a]);
  }
  int nd = 0;
  for (int i = 0, k = 0; i < ro; i++) {
    if (unsq) sh[nd++] = mark[i] ? 1 : x->shape[k++];
    else if (!(n < 0 ? x->shape[i] == 1 : mark[i])) sh[nd++] = x->shape[i];
  }
  return ginf_set_out(c, 0, x->dtype, nd, sh);
}

static int shape_concat(ictx *c, cwm_opp *p, const char *op, const cwm_value *x) {
  (void)op;
  int64_t sh[CWM_GRAPH_MAX_DIMS];
  char xs[96], vs[128];
  cwm_value_shape_str(x, xs, sizeof xs);
  int r = x->ndim;
  const cwm_attr *aa = cwm_gnode_attr(NODE, "axis");
  if (!aa) FAIL("attribute 'axis' is missing");
  int a;
  if (ginf_norm_axis(c, cwm_gnode_attr_int(NODE, "axis", 0), r, &a)) return -1;
  memcpy(sh, x->shape, sizeof(int64_t) * (size_t)r);
  p->axis = a;
  for (int k = 1; k < NODE->nin; k++) {
    const cwm_value *y = IN(c, k);
    if (!y) FAIL("input %d is missing", k);
    if (y->ndim != r) FAIL("input %d has rank %d but input 0 has rank %d", k, y->ndim, r);
    if (!same_dt(y->dtype, x->dtype))
      FAIL("input %d has dtype %s but input 0 has %s", k, cwm_dtype_name(y->dtype), cwm_dtype_name(x->dtype));
    for (int d = 0; d < r; d++)
      if (d != a && y->shape[d] != x->shape[d]) {
        cwm_value_shape_str(y, vs, sizeof vs);
        FAIL("input %d is %s but input 0 is %s: only dimension %d may differ", k, vs, xs, a);
      }
    sh[a] += y->shape[a];
    if (sh[a] > CWM_GRAPH_MAX_NUMEL) FAIL("the result is too large");
  }
  return ginf_set_out(c, 0, x->dtype, r, sh);
}

static int shape_gather(ictx *c, cwm_opp *p, const char *op, const cwm_value *x) {
  (void)op;
  int64_t sh[CWM_GRAPH_MAX_DIMS];
  int r = x->ndim;
  const cwm_value *ix = IN(c, 1);
  if (!ix) FAIL("input 1 (indices) is missing");
  if (!is_int(ix->dtype)) FAIL("indices have dtype %s (need int64 or int32)", cwm_dtype_name(ix->dtype));
  int a;
  if (ginf_norm_axis(c, cwm_gnode_attr_int(NODE, "axis", 0), r, &a)) return -1;
  p->axis = a;
  if (r - 1 + ix->ndim > CWM_GRAPH_MAX_DIMS) FAIL("the result would have too many dimensions");
  if (ix->kind == CWM_VAL_CONST) {
    int64_t m = cwm_value_numel(ix), d = x->shape[a];
    for (int64_t i = 0; i < m; i++) {
      int64_t t = ((int64_t *)ix->data)[i];
      if (t < -d || t >= d) FAIL("index %lld is out of range for axis %d of size %lld", (long long)t, a, (long long)d);
    }
  }
  int nd = 0;
  for (int d = 0; d < a; d++) sh[nd++] = x->shape[d];
  for (int d = 0; d < ix->ndim; d++) sh[nd++] = ix->shape[d];
  for (int d = a + 1; d < r; d++) sh[nd++] = x->shape[d];
  return ginf_set_out(c, 0, x->dtype, nd, sh);
}

/* Expand (broadcast to a constant shape) and Tile (constant repeats per axis) */
static int shape_expand_tile(ictx *c, cwm_opp *p, const char *op, const cwm_value *x) {
  (void)p;
  int tile = !strcmp(op, "Tile");
  int64_t sh[CWM_GRAPH_MAX_DIMS], v[CWM_GRAPH_MAX_DIMS];
  int n, r = x ? x->ndim : 0;
  if (ginf_const_ints(c, 1, tile ? "repeats" : "shape", v, CWM_GRAPH_MAX_DIMS, &n)) return -1;
  if (!tile) {
    char xs[96], vs[128];
    int nd;
    cwm_value_shape_str(x, xs, sizeof xs);
    ginf_shape_str(n, v, vs, sizeof vs);
    if (ginf_bcast(r, x->shape, n, v, &nd, sh)) FAIL("input %s does not broadcast to shape %s", xs, vs);
    return ginf_set_out(c, 0, x->dtype, nd, sh);
  }
  if (n != r) FAIL("repeats has %d entries for an input of rank %d", n, r);
  for (int d = 0; d < r; d++) {
    if (v[d] < 0 || v[d] > CWM_GRAPH_MAX_NUMEL || (v[d] && x->shape[d] > CWM_GRAPH_MAX_NUMEL / v[d]))
      FAIL("repeat %lld on axis %d is invalid or too large", (long long)v[d], d);
    sh[d] = x->shape[d] * v[d];
  }
  return ginf_set_out(c, 0, x->dtype, r, sh);
}

static int shape_split(ictx *c, cwm_opp *p, const char *op, const cwm_value *x) {
  (void)op;
  int64_t sh[CWM_GRAPH_MAX_DIMS];
  char vs[128];
  int r = x->ndim;
  int a, no = NODE->nout;
  if (ginf_norm_axis(c, cwm_gnode_attr_int(NODE, "axis", 0), r, &a)) return -1;
  p->axis = a;
  if (no < 1) FAIL("no outputs");
  int64_t sz[CWM_SPLIT_MAX];
  if (no > CWM_SPLIT_MAX) FAIL("%d outputs (at most %d)", no, CWM_SPLIT_MAX);
  int ns = -1;
  if (c->g->opset >= 13) {
    if (IN(c, 1) && ginf_const_ints(c, 1, "split", sz, CWM_SPLIT_MAX, &ns)) return -1;
  } else if (ginf_attr_ints(c, "split", sz, CWM_SPLIT_MAX, &ns)) {
    return -1;
  }
  int64_t d = x->shape[a], sum = 0;
  if (ns < 0) {
    int64_t chunk = (d + no - 1) / no;
    if (d % no && c->g->opset < 18) FAIL("axis %d of size %lld does not split evenly into %d outputs", a, (long long)d, no);
    for (int k = 0; k < no; k++) sz[k] = k < no - 1 ? chunk : d - chunk * (no - 1);
    if (sz[no - 1] < 0) FAIL("axis %d of size %lld does not split into %d outputs", a, (long long)d, no);
    ns = no;
  }
  if (ns != no) FAIL("split has %d entries for %d outputs", ns, no);
  for (int k = 0; k < no; k++) {
    if (sz[k] < 0 || sz[k] > d) FAIL("split entry %lld is invalid", (long long)sz[k]);
    sum += sz[k];
  }
  ginf_shape_str(ns, sz, vs, sizeof vs);
  if (sum != d) FAIL("split %s sums to %lld but axis %d has size %lld", vs, (long long)sum, a, (long long)d);
  for (int k = 0; k < no; k++) {
    memcpy(sh, x->shape, sizeof(int64_t) * (size_t)r);
    sh[a] = sz[k];
    if (ginf_set_out(c, k, x->dtype, r, sh)) return -1;
  }
  return 0;
}

static int shape_reshape(ictx *c, cwm_opp *p, const char *op, const cwm_value *x) {
  (void)p, (void)op, (void)x;
  return infer_reshape(c);
}

static int shape_slice(ictx *c, cwm_opp *p, const char *op, const cwm_value *x) {
  (void)op, (void)x;
  return infer_slice(c, p);
}

/* One function per op; each reads its parameters into p and sets the outputs' dtypes and shapes.
 * x is input 0 (checked present for the ops that read data). */
int ginf_structural(ictx *c, cwm_opp *p, const char *op) {
  static const struct {
    const char *op;
    int (*fn)(ictx *c, cwm_opp *p, const char *op, const cwm_value *x);
    int data; /* reads a data input first (checked present here) */
  } ops[] = {
      {"Shape", shape_shape_of, 1},
      {"Size", shape_shape_of, 1},
      {"ConstantOfShape", shape_constant_of_shape, 0},
      {"Range", shape_range, 0},
      {"Reshape", shape_reshape, 1},
      {"Slice", shape_slice, 1},
      {"Flatten", shape_flatten, 1},
      {"Transpose", shape_transpose, 1},
      {"Squeeze", shape_squeeze, 1},
      {"Unsqueeze", shape_squeeze, 1},
      {"Concat", shape_concat, 1},
      {"Gather", shape_gather, 1},
      {"Expand", shape_expand_tile, 1},
      {"Tile", shape_expand_tile, 1},
      {"Split", shape_split, 1},
  };
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].op, op)) {
      if (ops[i].data && ginf_need(c, 0, "data")) return -1;
      return ops[i].fn(c, p, op, IN(c, 0));
    }
  FAIL("internal: no inference for %s", op);
}

/* checks.c: the helpers of shape inference (infer_int.h): the node's outputs set with their
 * limits checked, required inputs, axes, and integer lists from constant inputs or attributes,
 * each failing with an error that names the node. */
#include <string.h>

#include "infer_int.h"

void ginf_shape_str(int nd, const int64_t *d, char *buf, size_t n) {
  cwm_value v;
  v.ndim = nd;
  memcpy(v.shape, d, sizeof(int64_t) * (size_t)nd);
  cwm_value_shape_str(&v, buf, n);
}

/* numpy broadcasting of two shapes; -1 when they do not broadcast */
int ginf_bcast(int na, const int64_t *a, int nb, const int64_t *b, int *nr, int64_t *r) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int64_t x = i < n - na ? 1 : a[i - (n - na)], y = i < n - nb ? 1 : b[i - (n - nb)];
    if (x != y && x != 1 && y != 1) return -1;
    r[i] = x == 1 ? y : x;
  }
  *nr = n;
  return 0;
}



int ginf_set_out(ictx *c, int k, int dt, int nd, const int64_t *sh) {
  if (k >= NODE->nout) return 0;
  if (nd > CWM_GRAPH_MAX_DIMS) FAIL("output %d would have %d dimensions (at most %d)", k, nd, CWM_GRAPH_MAX_DIMS);
  if (cwm_shape_numel(nd, sh) < 0) FAIL("output %d would have more than 2^40 elements or a negative dimension", k);
  cwm_value *v = &c->g->values[NODE->out[k]];
  v->dtype = out_dt(dt);
  v->ndim = nd;
  memcpy(v->shape, sh, sizeof(int64_t) * (size_t)nd);
  v->shape_known = 1;
  return 0;
}

int ginf_need(ictx *c, int k, const char *what) {
  if (!IN(c, k)) FAIL("input %d (%s) is missing", k, what);
  return 0;
}

int ginf_need_float(ictx *c, int k) {
  if (IN(c, k) && IN(c, k)->dtype != CWM_DT_FLOAT)
    FAIL("input %d has dtype %s but %s needs float", k, cwm_dtype_name(IN(c, k)->dtype), NODE->op_type);
  return 0;
}

int ginf_norm_axis(ictx *c, int64_t a, int rank, int *out) {
  *out = 0;
  if (a < -rank || a >= rank) FAIL("axis %lld is out of range for rank %d", (long long)a, rank);
  *out = (int)(a < 0 ? a + rank : a);
  return 0;
}

/* A constant 1-D (or scalar) int64 input read into out; *n its length. */
int ginf_const_ints(ictx *c, int k, const char *what, int64_t *out, int max, int *n) {
  const cwm_value *v = IN(c, k);
  if (!v) FAIL("input %d (%s) is missing", k, what);
  if (v->kind != CWM_VAL_CONST) FAIL("input %d (%s) is computed at run time: only constant %s are supported", k, what, what);
  if (!is_int(v->dtype) || v->ndim > 1) FAIL("input %d (%s) must be a 1-D int64 tensor", k, what);
  int64_t len = cwm_value_numel(v);
  if (len > max) FAIL("input %d (%s) has %lld entries (at most %d)", k, what, (long long)len, max);
  memcpy(out, v->data, sizeof(int64_t) * (size_t)len);
  *n = (int)len;
  return 0;
}

/* An INTS attribute into out; -1 in *n when absent. */
int ginf_attr_ints(ictx *c, const char *name, int64_t *out, int max, int *n) {
  const cwm_attr *a = cwm_gnode_attr(NODE, name);
  *n = -1;
  if (!a) return 0;
  if (a->kind != CWM_ATTR_INTS) FAIL("attribute '%s' must be a list of ints", name);
  if (a->n > max) FAIL("attribute '%s' has %d entries (at most %d)", name, a->n, max);
  memcpy(out, a->ints, sizeof(int64_t) * (size_t)a->n);
  *n = a->n;
  return 0;
}

/* axes from an attribute (older opsets) or an optional constant input (newer); -1 when absent */
int ginf_get_axes(ictx *c, int from_input, int k, int64_t *axes, int *n) {
  *n = -1;
  if (from_input) return IN(c, k) ? ginf_const_ints(c, k, "axes", axes, CWM_GRAPH_MAX_DIMS, n) : 0;
  return ginf_attr_ints(c, "axes", axes, CWM_GRAPH_MAX_DIMS, n);
}

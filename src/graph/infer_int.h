/* infer_int.h: what the files of shape inference (infer.c, shapes.c, checks.c) share: the context of the
 * node being inferred, its inputs, and the checks that name the node when they fail. */
#ifndef CWM_GRAPH_INFER_INT_H
#define CWM_GRAPH_INFER_INT_H

#include "graph_int.h"

typedef struct {
  cwm_graph *g;
  int ni;
  cwm_err *err;
} ictx;

#define NODE (&c->g->nodes[c->ni])
#define FAIL(...) return cwm_node_fail(c->g, c->ni, c->err, __VA_ARGS__)

static inline int is_int(int dt) { return dt == CWM_DT_INT64 || dt == CWM_DT_INT32; }
static inline int same_dt(int a, int b) { return a == b || (is_int(a) && is_int(b)); }
/* Computed integers are int64 whatever the inputs' width. */
static inline int out_dt(int dt) { return dt == CWM_DT_INT32 ? CWM_DT_INT64 : dt; }
static inline int in_idx(const ictx *c, int k) { return k < NODE->nin ? NODE->in[k] : -1; }
static inline cwm_value *IN(const ictx *c, int k) { int v = in_idx(c, k); return v < 0 ? NULL : &c->g->values[v]; }

void ginf_shape_str(int nd, const int64_t *d, char *buf, size_t n); /* "[1, 3, 224, 224]" */
/* numpy broadcasting of two shapes; -1 when they do not broadcast */
int ginf_bcast(int na, const int64_t *a, int nb, const int64_t *b, int *nr, int64_t *r);
int ginf_set_out(ictx *c, int k, int dt, int nd, const int64_t *sh);
int ginf_need(ictx *c, int k, const char *what);
int ginf_need_float(ictx *c, int k);
int ginf_norm_axis(ictx *c, int64_t a, int rank, int *out);
/* A constant 1-D (or scalar) int64 input read into out; *n its length. */
int ginf_const_ints(ictx *c, int k, const char *what, int64_t *out, int max, int *n);
/* An INTS attribute into out; -1 in *n when absent. */
int ginf_attr_ints(ictx *c, const char *name, int64_t *out, int max, int *n);
/* axes from an attribute (older opsets) or an optional constant input (newer); -1 when absent */
int ginf_get_axes(ictx *c, int from_input, int k, int64_t *axes, int *n);

/* The structural ops (Shape, Reshape, Slice, Transpose, Concat, Gather, Split ...): shapes.c. */
int ginf_structural(ictx *c, cwm_opp *p, const char *op);

#endif

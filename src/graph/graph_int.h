/* graph_int.h: what the graph front end's files (onnx.c, infer.c, fold.c) share and nobody else
 * needs: size limits, an error helper that names the node, and the parameters infer.c reads from a
 * node's attributes once so that fold.c evaluates exactly what shape inference assumed. */
#ifndef CWM_GRAPH_INT_H
#define CWM_GRAPH_INT_H

#include "cwm/graph.h"

/* Any value's element count: shapes past this are an error, so that no product of dims overflows. */
#define CWM_GRAPH_MAX_NUMEL ((int64_t)1 << 40)
/* Folding materializes data: a folded value past this many elements (or a fold costing more
 * multiply-adds than CWM_FOLD_MAX_WORK) stays a run-time node instead of using gigabytes at import. */
#define CWM_FOLD_MAX_NUMEL ((int64_t)1 << 24)
#define CWM_FOLD_MAX_WORK ((int64_t)1 << 28)
#define CWM_SPLIT_MAX 256

/* Product of dims, or -1 past CWM_GRAPH_MAX_NUMEL (or a negative dim). */
int64_t cwm_shape_numel(int ndim, const int64_t *shape);
/* "node '<name>' (<op>): " then the formatted reason; returns CWM_EPARSE. */
int cwm_node_fail(const cwm_graph *g, int ni, cwm_err *err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A node's parameters in the form both inference and evaluation use (axes normalized). */
typedef struct {
  int axis;                   /* Softmax, LogSoftmax, Concat, Gather, Flatten, Split, LayerNorm */
  int softmax_2d;             /* opset < 13: softmax over all dims from axis on */
  int reduce[CWM_GRAPH_MAX_DIMS]; /* reductions: 1 for a reduced input dim */
  int perm[CWM_GRAPH_MAX_DIMS];
  int64_t start[CWM_GRAPH_MAX_DIMS], step[CWM_GRAPH_MAX_DIMS]; /* Slice, per input dim */
  int64_t kernel[2], stride[2], pad[4]; /* Conv and pools: pad = top, left, bottom, right */
  int64_t group;
  int count_include_pad;
  float alpha, beta, eps;     /* Gemm, LeakyRelu, HardSigmoid; eps of the norms */
  int trans_a, trans_b;
  double cmin, cmax;          /* Clip */
  int to;                     /* Cast: the CWM_DT_* result */
  int64_t shape_start;        /* Shape: first dim reported */
  int fill;                   /* ConstantOfShape: the CONST value of its fill (-1: float 0) */
} cwm_opp;

/* Evaluates node ni whose present inputs are all constants (Shape/Size: known shapes) into its
 * outputs, whose dtypes and shapes infer.c has set; allocates each output's data. */
int cwm_graph_fold_node(cwm_graph *g, int ni, const cwm_opp *p, cwm_err *err);

#endif

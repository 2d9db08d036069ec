/* partition.h: a graph cut into tasks and glue. Anchor ops (Conv, Gemm, MatMul, Softmax and the
 * LayerNorm pattern) become tasks: op-library workloads (or workload text of the same shape)
 * with their elementwise neighbours fused (bias add, ReLU, the erf GELU pattern), which the tuner
 * schedules. Identical tasks are one task with a weight. Everything else is glue: a node the
 * network compiler runs with plain loops (pooling, residual adds, reshapes, transposes, the
 * embedding Gather ...). The steps run in order and together compute the graph's outputs. */
#ifndef CWM_PARTITION_H
#define CWM_PARTITION_H

#include "cwm/graph.h"
#include "cwm/te.h"

#define CWM_GSTEP_MAX_ARGS 8

typedef struct {
  char name[64];   /* a C identifier: "<op>_<n>", unique in the partition */
  char op[32];     /* the op library's op name (the scheduler's similarity group) */
  char spec[512];  /* op-library spec, or a description for workloads written as text */
  cwm_workload *w; /* owned; w->name is the task's name */
  char key[17];    /* cwm_workload_key of w: what log records of the task carry */
  double weight;   /* how many steps run it per inference */
  int first_node;  /* the anchor node of its first occurrence (for messages) */
} cwm_gtask;

typedef enum {
  CWM_GS_KERNEL,    /* a task's kernel: args = the workload's inputs in order, then its output */
  CWM_GS_NODE,      /* glue: the graph node `node` as it is */
  CWM_GS_TRANSPOSE, /* glue: args[0] permuted by perm into args[1] (a materialized layout) */
  CWM_GS_GELU,      /* glue: args[1] = gelu(args[0]) elementwise (the erf pattern, not fused) */
} cwm_gstep_kind;

typedef struct {
  cwm_gstep_kind kind;
  int task;  /* KERNEL */
  int node;  /* NODE; for the others the anchor node, for messages */
  int nargs;
  int args[CWM_GSTEP_MAX_ARGS]; /* value indices */
  int perm[CWM_GRAPH_MAX_DIMS]; /* TRANSPOSE: output dim d is input dim perm[d] */
} cwm_gstep;

typedef struct {
  cwm_graph *g;    /* borrowed; partitioning may add constant values (transposed weights) */
  int ntasks, nsteps;
  cwm_gtask *tasks;
  cwm_gstep *steps;
  int fused_nodes; /* graph nodes inside tasks */
} cwm_partition;

/* Cuts an inferred graph (cwm_graph_infer done). Errors name the node. */
cwm_partition *cwm_graph_partition(cwm_graph *g, cwm_err *err);
void cwm_partition_free(cwm_partition *p);

/* Workload text of a last-axis layer norm over [M, N] with the given epsilon; the op library's
 * `layernorm` is the same with eps 1e-05. */
char *cwm_layernorm_text(long M, long N, double eps);

#endif

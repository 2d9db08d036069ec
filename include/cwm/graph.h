/* graph.h: the graph front end. A network read from an ONNX file becomes a cwm_graph: values
 * (graph inputs, constants, computed tensors) with static shapes, and nodes in topological order
 * that read and write them. cwm_graph_infer gives every value its shape and folds constants:
 * a node whose inputs are all constants is evaluated at import (the Shape/Gather/Concat chains
 * that torch.onnx emits for Reshape, Constant nodes), BatchNorm after a Conv is folded into the
 * conv's weights. Unsupported ops, dtypes, dynamic shapes and malformed files are errors that
 * name the node, its op type and the reason. Nothing here knows of schedules or tasks. */
#ifndef CWM_GRAPH_H
#define CWM_GRAPH_H

#include <stdint.h>

#include "cwm/util.h"

#define CWM_GRAPH_MAX_DIMS 8

/* Element types: ONNX TensorProto.DataType values, so that a file's code maps one to one. */
enum {
  CWM_DT_FLOAT = 1,
  CWM_DT_INT32 = 6,
  CWM_DT_INT64 = 7,
  CWM_DT_BOOL = 9,
};

typedef enum {
  CWM_VAL_INPUT, /* a graph input: data comes from the caller at run time */
  CWM_VAL_CONST, /* an initializer, a Constant node's value or a folded result: data is set */
  CWM_VAL_ACT,   /* computed by a node at run time */
} cwm_val_kind;

typedef struct {
  char *name;      /* owned; the ONNX name ("" never: unnamed values get "v<index>") */
  cwm_val_kind kind;
  int dtype;       /* CWM_DT_* */
  int ndim;        /* 0 for a scalar */
  int64_t shape[CWM_GRAPH_MAX_DIMS];
  int shape_known; /* 1 once the shape is inferred (always for inputs and constants) */
  void *data;      /* CONST only: owned, numel elements of dtype (bool as uint8_t) */
  int producer;    /* node index, -1 for inputs and constants */
  int nuses;       /* how many node inputs (and graph outputs) read it; set by cwm_graph_infer */
} cwm_value;

typedef enum {
  CWM_ATTR_FLOAT,
  CWM_ATTR_INT,
  CWM_ATTR_STRING,
  CWM_ATTR_TENSOR, /* value: index of a CONST value holding the tensor */
  CWM_ATTR_FLOATS,
  CWM_ATTR_INTS,
} cwm_attr_kind;

typedef struct {
  char *name; /* owned */
  cwm_attr_kind kind;
  float f;
  int64_t i;
  char *s;         /* owned, NUL-terminated */
  int value;       /* TENSOR */
  int n;           /* FLOATS/INTS count */
  float *floats;   /* owned */
  int64_t *ints;   /* owned */
} cwm_attr;

typedef struct {
  char *name;    /* owned; "" in the file becomes "<op_type>_<index>" */
  char *op_type; /* owned, e.g. "Conv" */
  int nin, nout;
  int *in;       /* value indices; -1 for an omitted optional input ("" in the file) */
  int *out;
  int nattr;
  cwm_attr *attr;
  int dead;      /* removed by folding (its outputs are constants or unused) */
} cwm_gnode;

typedef struct cwm_graph {
  char *name;       /* the graph's name, or the file's base name */
  int64_t opset;    /* default-domain opset of the model */
  int nvalues, nnodes;
  cwm_value *values;
  cwm_gnode *nodes;  /* topological order after load (a cycle is an error) */
  int ninputs, noutputs;
  int *inputs;      /* graph inputs that are not initializers */
  int *outputs;
} cwm_graph;

/* Reads an ONNX ModelProto. path names the file in messages. Checks what a file can get wrong on
 * its own: truncated or not protobuf, no graph, external data, a value read before any node writes
 * it, a value written twice, a cycle, an initializer whose data does not match its dims. */
cwm_graph *cwm_onnx_load(const char *path, cwm_err *err);
cwm_graph *cwm_onnx_parse(const uint8_t *buf, size_t len, const char *path, cwm_err *err);
void cwm_graph_free(cwm_graph *g);

/* Shape inference and constant folding over the whole graph, in order; also BatchNorm folded into
 * the Conv before it and Identity/Dropout removed. Errors name the node: "node 'Conv_3' (Conv):
 * input 1 has shape [64, 3, 7, 7] but ...". Every value a live node reads or writes then has a
 * known static shape; every live node's op is one cwm_graph_op_supported accepts. */
int cwm_graph_infer(cwm_graph *g, cwm_err *err);
/* 1 if op_type (default domain) is one the importer can infer and the network compiler can run. */
int cwm_graph_op_supported(const char *op_type);

/* Helpers. */
int64_t cwm_value_numel(const cwm_value *v);
const cwm_attr *cwm_gnode_attr(const cwm_gnode *n, const char *name);
int64_t cwm_gnode_attr_int(const cwm_gnode *n, const char *name, int64_t dflt);
float cwm_gnode_attr_float(const cwm_gnode *n, const char *name, float dflt);
/* Adds a value (name copied) and returns its index; the graph's arrays may move. */
int cwm_graph_add_value(cwm_graph *g, const char *name, cwm_val_kind kind, int dtype, int ndim,
                        const int64_t *shape);
/* "[1, 64, 56, 56]" into buf. */
void cwm_value_shape_str(const cwm_value *v, char *buf, size_t n);
/* The ONNX name of a TensorProto.DataType code ("float", "float16", "double" ...; "unknown" for
 * codes ONNX does not define), and a CWM_DT_* element's size in bytes (bool:
 * 1, int32: 4; 0 for other codes). */
const char *cwm_dtype_name(int dtype);
int cwm_dtype_size(int dtype);

#endif

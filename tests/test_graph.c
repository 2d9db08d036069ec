/* test_graph.c: the ONNX importer and graph inference. Models are built in memory with protobuf-c's
 * generated structs, packed, and read back through cwm_onnx_parse: a conv/BN/relu/pool/gemm graph
 * (BatchNorm folded, Identity removed), the Shape/Gather/Unsqueeze/Concat chain into Reshape,
 * constant folding of the structural ops, more than twenty malformed or unsupported models each
 * with the message it must give, and a real torch.onnx export (tests/models/tiny_import.onnx). */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/graph.h"
#include "onnx/onnx.pb-c.h"
#include "testlib.h"

/* ---------- a model builder; everything it allocates lives in one arena ---------- */

static void **arena;
static int narena, carena;

static void *A(size_t n) {
  if (narena == carena) {
    carena = carena ? 2 * carena : 256;
    arena = realloc(arena, sizeof(void *) * (size_t)carena);
  }
  return arena[narena++] = calloc(1, n ? n : 1);
}

static char *AS(const char *s) { return strcpy(A(strlen(s) + 1), s); }

static void arena_free(void) {
  for (int i = 0; i < narena; i++) free(arena[i]);
  narena = 0;
}

#define CAP 64
typedef struct {
  Onnx__ModelProto m;
  Onnx__GraphProto g;
  Onnx__OperatorSetIdProto op;
  Onnx__OperatorSetIdProto *opp;
} mb;

static mb *mb_new(int opset) {
  mb *b = A(sizeof *b);
  Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
  Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
  Onnx__OperatorSetIdProto op = ONNX__OPERATOR_SET_ID_PROTO__INIT;
  b->m = m;
  b->g = g;
  b->op = op;
  b->m.has_ir_version = 1;
  b->m.ir_version = 8;
  b->op.domain = AS("");
  b->op.has_version = 1;
  b->op.version = opset;
  b->opp = &b->op;
  b->m.n_opset_import = 1;
  b->m.opset_import = &b->opp;
  b->m.graph = &b->g;
  b->g.name = AS("test");
  b->g.node = A(sizeof(void *) * CAP);
  b->g.initializer = A(sizeof(void *) * CAP);
  b->g.input = A(sizeof(void *) * CAP);
  b->g.output = A(sizeof(void *) * CAP);
  return b;
}

static Onnx__ValueInfoProto *vinfo(const char *name, int dt, int nd, const int64_t *dims) {
  Onnx__ValueInfoProto *v = A(sizeof *v);
  Onnx__ValueInfoProto v0 = ONNX__VALUE_INFO_PROTO__INIT;
  *v = v0;
  v->name = AS(name);
  if (dt < 0) return v;
  Onnx__TypeProto *tp = A(sizeof *tp);
  Onnx__TypeProto tp0 = ONNX__TYPE_PROTO__INIT;
  *tp = tp0;
  Onnx__TypeProto__Tensor *tt = A(sizeof *tt);
  Onnx__TypeProto__Tensor tt0 = ONNX__TYPE_PROTO__TENSOR__INIT;
  *tt = tt0;
  tt->has_elem_type = 1;
  tt->elem_type = dt;
  Onnx__TensorShapeProto *sp = A(sizeof *sp);
  Onnx__TensorShapeProto sp0 = ONNX__TENSOR_SHAPE_PROTO__INIT;
  *sp = sp0;
  sp->n_dim = (size_t)nd;
  sp->dim = A(sizeof(void *) * (size_t)(nd + 1));
  for (int i = 0; i < nd; i++) {
    Onnx__TensorShapeProto__Dimension *d = A(sizeof *d);
    Onnx__TensorShapeProto__Dimension d0 = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    *d = d0;
    if (dims[i] >= 0) {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      d->dim_value = dims[i];
    } else {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      d->dim_param = AS("batch");
    }
    sp->dim[i] = d;
  }
  tt->shape = sp;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  v->type = tp;
  return v;
}

static void mb_input(mb *b, const char *name, int dt, int nd, const int64_t *dims) {
  b->g.input[b->g.n_input++] = vinfo(name, dt, nd, dims);
}
static void mb_output(mb *b, const char *name) { b->g.output[b->g.n_output++] = vinfo(name, -1, 0, NULL); }

static Onnx__TensorProto *tensor(const char *name, int dt, int nd, const int64_t *dims) {
  Onnx__TensorProto *t = A(sizeof *t);
  Onnx__TensorProto t0 = ONNX__TENSOR_PROTO__INIT;
  *t = t0;
  t->name = AS(name);
  t->has_data_type = 1;
  t->data_type = dt;
  t->n_dims = (size_t)nd;
  t->dims = A(sizeof(int64_t) * (size_t)(nd + 1));
  if (nd) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)nd);
  return t;
}

static Onnx__TensorProto *tensor_f(const char *name, int nd, const int64_t *dims, const float *data) {
  Onnx__TensorProto *t = tensor(name, 1, nd, dims);
  size_t n = 1;
  for (int i = 0; i < nd; i++) n *= (size_t)dims[i];
  t->n_float_data = n;
  t->float_data = A(sizeof(float) * n);
  memcpy(t->float_data, data, sizeof(float) * n);
  return t;
}

static Onnx__TensorProto *tensor_i(const char *name, int nd, const int64_t *dims, const int64_t *data) {
  Onnx__TensorProto *t = tensor(name, 7, nd, dims);
  size_t n = 1;
  for (int i = 0; i < nd; i++) n *= (size_t)dims[i];
  t->n_int64_data = n;
  t->int64_data = A(sizeof(int64_t) * n);
  memcpy(t->int64_data, data, sizeof(int64_t) * n);
  return t;
}

static Onnx__TensorProto *mb_init(mb *b, Onnx__TensorProto *t) { return b->g.initializer[b->g.n_initializer++] = t; }
static void mb_init_f(mb *b, const char *name, int nd, const int64_t *dims, const float *data) {
  mb_init(b, tensor_f(name, nd, dims, data));
}
static void mb_init_i(mb *b, const char *name, int nd, const int64_t *dims, const int64_t *data) {
  mb_init(b, tensor_i(name, nd, dims, data));
}
/* a 1-D int64 initializer of n entries */
static void mb_ints(mb *b, const char *name, int n, const int64_t *v) {
  int64_t d = n;
  mb_init_i(b, name, 1, &d, v);
}

/* ins/outs: comma-separated names ("x,,w" leaves input 1 out) */
static char **split_names(const char *s, size_t *n) {
  char **v = A(sizeof(char *) * 16);
  *n = 0;
  if (!s) return v;
  const char *p = s;
  for (;;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char *x = A(len + 1);
    memcpy(x, p, len);
    v[(*n)++] = x;
    if (!e) break;
    p = e + 1;
  }
  return v;
}

static Onnx__NodeProto *mb_node(mb *b, const char *op, const char *name, const char *ins, const char *outs) {
  Onnx__NodeProto *n = A(sizeof *n);
  Onnx__NodeProto n0 = ONNX__NODE_PROTO__INIT;
  *n = n0;
  n->op_type = AS(op);
  n->name = AS(name);
  n->input = split_names(ins, &n->n_input);
  n->output = split_names(outs, &n->n_output);
  n->attribute = A(sizeof(void *) * 16);
  b->g.node[b->g.n_node++] = n;
  return n;
}

static Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name, int type) {
  Onnx__AttributeProto *a = A(sizeof *a);
  Onnx__AttributeProto a0 = ONNX__ATTRIBUTE_PROTO__INIT;
  *a = a0;
  a->name = AS(name);
  a->has_type = 1;
  a->type = type;
  n->attribute[n->n_attribute++] = a;
  return a;
}
static void attr_i(Onnx__NodeProto *n, const char *name, int64_t v) {
  Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = v;
}
static void attr_f(Onnx__NodeProto *n, const char *name, float v) {
  Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  a->has_f = 1;
  a->f = v;
}
static void attr_s(Onnx__NodeProto *n, const char *name, const char *s) {
  Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  a->has_s = 1;
  a->s.data = (uint8_t *)AS(s);
  a->s.len = strlen(s);
}
static void attr_ints(Onnx__NodeProto *n, const char *name, int cnt, const int64_t *v) {
  Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  a->n_ints = (size_t)cnt;
  a->ints = A(sizeof(int64_t) * (size_t)(cnt + 1));
  memcpy(a->ints, v, sizeof(int64_t) * (size_t)cnt);
}
static void attr_t(Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t) {
  attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t = t;
}

static uint8_t *mb_pack(mb *b, size_t *len) {
  *len = onnx__model_proto__get_packed_size(&b->m);
  uint8_t *buf = malloc(*len + 1);
  onnx__model_proto__pack(&b->m, buf);
  return buf;
}

/* Packs, frees the builder, parses; infers too when infer is set and the parse worked. With
 * CWM_GRAPH_SEEDS=DIR set, each packed model is also written there (fuzz/corpus/onnx seeds). */
static cwm_graph *mb_load(mb *b, int infer, cwm_err *err) {
  static int nseed;
  size_t len;
  uint8_t *buf = mb_pack(b, &len);
  arena_free();
  const char *dir = getenv("CWM_GRAPH_SEEDS");
  if (dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/t%02d.onnx", dir, nseed++);
    FILE *f = fopen(path, "wb");
    if (f) {
      fwrite(buf, 1, len, f);
      fclose(f);
    }
  }
  memset(err, 0, sizeof *err);
  cwm_graph *g = cwm_onnx_parse(buf, len, "m.onnx", err);
  free(buf);
  if (g && infer && cwm_graph_infer(g, err)) {
    cwm_graph_free(g);
    return NULL;
  }
  return g;
}

/* ---------- helpers over the loaded graph ---------- */

static int find_value(const cwm_graph *g, const char *name) {
  for (int i = 0; i < g->nvalues; i++)
    if (!strcmp(g->values[i].name, name)) return i;
  return -1;
}

static int find_node(const cwm_graph *g, const char *name) {
  for (int i = 0; i < g->nnodes; i++)
    if (!strcmp(g->nodes[i].name, name)) return i;
  return -1;
}

static int shape_is(const cwm_value *v, int nd, const int64_t *d) {
  if (!v->shape_known || v->ndim != nd) return 0;
  for (int i = 0; i < nd; i++)
    if (v->shape[i] != d[i]) return 0;
  return 1;
}

static const cwm_value *out0(const cwm_graph *g) { return &g->values[g->outputs[0]]; }

/* ---------- (a) conv -> BN -> relu -> identity -> maxpool -> flatten -> gemm ---------- */

static void test_conv_bn(void) {
  mb *b = mb_new(13);
  int64_t xd[4] = {1, 3, 8, 8}, wd[4] = {4, 3, 3, 3}, cd[1] = {4}, gd[2] = {10, 64}, bd[1] = {10};
  float w[108], bias[4] = {0.1f, -0.2f, 0.3f, 0};
  float gam[4] = {1.5f, 0.5f, 2, 1}, beta[4] = {0.1f, 0.2f, -0.3f, 0}, mean[4] = {0.5f, -1, 0, 2}, var[4] = {4, 0.25f, 1, 9};
  float gw[640], gbias[10];
  for (int i = 0; i < 108; i++) w[i] = (float)((i * 37 % 11) - 5) / 7.0f;
  for (int i = 0; i < 640; i++) gw[i] = (float)((i * 13 % 7) - 3) / 10.0f;
  for (int i = 0; i < 10; i++) gbias[i] = (float)i / 10;
  mb_input(b, "x", 1, 4, xd);
  mb_init_f(b, "w", 4, wd, w);
  mb_init_f(b, "b", 1, cd, bias);
  mb_init_f(b, "gamma", 1, cd, gam);
  mb_init_f(b, "beta", 1, cd, beta);
  mb_init_f(b, "mean", 1, cd, mean);
  mb_init_f(b, "var", 1, cd, var);
  mb_init_f(b, "gw", 2, gd, gw);
  mb_init_f(b, "gb", 1, bd, gbias);
  Onnx__NodeProto *n = mb_node(b, "Conv", "conv", "x,w,b", "c");
  int64_t pads[4] = {1, 1, 1, 1}, ks[2] = {3, 3}, two[2] = {2, 2};
  attr_ints(n, "pads", 4, pads);
  attr_ints(n, "kernel_shape", 2, ks);
  n = mb_node(b, "BatchNormalization", "bn", "c,gamma,beta,mean,var", "bnout");
  attr_f(n, "epsilon", 1e-3f);
  mb_node(b, "Relu", "relu", "bnout", "r");
  mb_node(b, "Identity", "id", "r", "r2");
  n = mb_node(b, "MaxPool", "pool", "r2", "p");
  attr_ints(n, "kernel_shape", 2, two);
  attr_ints(n, "strides", 2, two);
  mb_node(b, "Flatten", "flat", "p", "f");
  n = mb_node(b, "Gemm", "fc", "f,gw,gb", "y");
  attr_i(n, "transB", 1);
  mb_output(b, "y");
  cwm_err e;
  cwm_graph *g = mb_load(b, 1, &e);
  CHECKF(g, "%s", e.msg);
  if (!g) return;
  int64_t ys[2] = {1, 10}, ps[4] = {1, 4, 4, 4}, cs[4] = {1, 4, 8, 8};
  CHECK(shape_is(out0(g), 2, ys));
  CHECK(shape_is(&g->values[find_value(g, "p")], 4, ps));
  CHECK(shape_is(&g->values[find_value(g, "c")], 4, cs));
  int bn = find_node(g, "bn"), id = find_node(g, "id"), conv = find_node(g, "conv"), relu = find_node(g, "relu");
  CHECK(bn >= 0 && g->nodes[bn].dead);
  CHECK(id >= 0 && g->nodes[id].dead);
  CHECK(!g->nodes[conv].dead && !g->nodes[relu].dead);
  CHECK(g->nodes[relu].in[0] == find_value(g, "c")); /* the relu reads the conv directly */
  CHECK(g->nodes[find_node(g, "pool")].in[0] == find_value(g, "r")); /* identity bypassed */
  CHECK(g->values[find_value(g, "c")].nuses == 1);
  int live = 0;
  for (int i = 0; i < g->nnodes; i++) live += !g->nodes[i].dead;
  CHECK(live == 5); /* conv relu pool flatten gemm */
  /* the folded conv weights against the hand computation */
  const cwm_gnode *cv = &g->nodes[conv];
  CHECK(cv->nin == 3);
  const cwm_value *fw = &g->values[cv->in[1]], *fb = &g->values[cv->in[2]];
  CHECK(fw->kind == CWM_VAL_CONST && shape_is(fw, 4, wd) && fb->kind == CWM_VAL_CONST && shape_is(fb, 1, cd));
  double maxerr = 0;
  for (int m = 0; m < 4; m++) {
    double s = gam[m] / sqrt(var[m] + 1e-3);
    for (int i = 0; i < 27; i++) maxerr = fmax(maxerr, fabs(((float *)fw->data)[m * 27 + i] - w[m * 27 + i] * s));
    maxerr = fmax(maxerr, fabs(((float *)fb->data)[m] - ((bias[m] - mean[m]) * s + beta[m])));
  }
  CHECKF(maxerr < 1e-5, "folded weights off by %g", maxerr);
  /* the original weight is left as it was (another conv could share it) */
  CHECK(((float *)g->values[find_value(g, "w")].data)[0] == w[0]);
  cwm_graph_free(g);
}

/* ---------- (b) Shape -> Gather -> Unsqueeze -> Concat -> Reshape ---------- */

static void test_shape_chain(void) {
  mb *b = mb_new(13);
  int64_t xd[3] = {2, 3, 4}, zero = 0, minus1 = -1, ax0 = 0;
  mb_input(b, "x", 1, 3, xd);
  mb_init_i(b, "i0", 0, NULL, &zero);
  mb_ints(b, "axes", 1, &ax0);
  mb_node(b, "Shape", "shape", "x", "s");
  mb_node(b, "Gather", "gather", "s,i0", "d0");
  mb_node(b, "Unsqueeze", "unsq", "d0,axes", "d0u");
  Onnx__NodeProto *n = mb_node(b, "Constant", "minus1", NULL, "m1");
  attr_t(n, "value", tensor_i("", 1, (int64_t[]){1}, &minus1));
  n = mb_node(b, "Concat", "concat", "d0u,m1", "shp");
  attr_i(n, "axis", 0);
  mb_node(b, "Reshape", "reshape", "x,shp", "y");
  mb_output(b, "y");
  cwm_err e;
  cwm_graph *g = mb_load(b, 1, &e);
  CHECKF(g, "%s", e.msg);
  if (!g) return;
  int64_t ys[2] = {2, 12};
  CHECK(shape_is(out0(g), 2, ys));
  const cwm_value *s = &g->values[find_value(g, "shp")];
  CHECK(s->kind == CWM_VAL_CONST && s->dtype == CWM_DT_INT64 && s->ndim == 1 && s->shape[0] == 2);
  CHECK(s->data && ((int64_t *)s->data)[0] == 2 && ((int64_t *)s->data)[1] == -1);
  const char *dead[] = {"shape", "gather", "unsq", "minus1", "concat"};
  for (int i = 0; i < 5; i++) CHECKF(g->nodes[find_node(g, dead[i])].dead, "%s not folded", dead[i]);
  CHECK(!g->nodes[find_node(g, "reshape")].dead);
  CHECK(s->nuses == 1);
  cwm_graph_free(g);
}

/* ---------- constant folding of structural and elementwise ops, checked by value ---------- */

static const cwm_value *folded(cwm_graph *g, const char *name) {
  int v = find_value(g, name);
  return v >= 0 && g->values[v].kind == CWM_VAL_CONST ? &g->values[v] : NULL;
}

static void test_fold_values(void) {
  mb *b = mb_new(13);
  float a[6] = {1, 2, 3, 4, 5, 6};
  int64_t ad[2] = {2, 3};
  mb_init_f(b, "a", 2, ad, a);
  /* Slice a[:, INT64_MAX-end, step 2] and reversed rows */
  int64_t st[1] = {0}, en[1] = {INT64_MAX}, axs[1] = {1}, stp[1] = {2};
  mb_ints(b, "st", 1, st);
  mb_ints(b, "en", 1, en);
  mb_ints(b, "ax1", 1, axs);
  mb_ints(b, "stp", 1, stp);
  mb_node(b, "Slice", "slice", "a,st,en,ax1,stp", "sl"); /* [[1,3],[4,6]] */
  int64_t rs[1] = {-1}, re[1] = {INT64_MIN}, ax0[1] = {0}, rstep[1] = {-1};
  mb_ints(b, "rs", 1, rs);
  mb_ints(b, "re", 1, re);
  mb_ints(b, "ax0", 1, ax0);
  mb_ints(b, "rstep", 1, rstep);
  mb_node(b, "Slice", "rev", "a,rs,re,ax0,rstep", "rv"); /* [[4,5,6],[1,2,3]] */
  Onnx__NodeProto *n = mb_node(b, "Transpose", "tr", "a", "t"); /* [[1,4],[2,5],[3,6]] */
  int64_t perm[2] = {1, 0};
  attr_ints(n, "perm", 2, perm);
  int64_t idx[2] = {-1, 0}, idd[1] = {2};
  mb_init_i(b, "idx", 1, idd, idx);
  n = mb_node(b, "Gather", "ga", "a,idx", "gt"); /* axis 1, indices [-1, 0]: [[3,1],[6,4]] */
  attr_i(n, "axis", 1);
  mb_node(b, "MatMul", "mm", "a,t", "mmo"); /* [[14,32],[32,77]] */
  n = mb_node(b, "Softmax", "sm", "a", "smo");
  int64_t sp[2] = {1, 2};
  mb_ints(b, "sp", 2, sp);
  n = mb_node(b, "Split", "split", "a,sp", "s1,s2");
  attr_i(n, "axis", 1);
  int64_t lim = 5, one = 1, zero = 0;
  mb_init_i(b, "zero", 0, NULL, &zero);
  mb_init_i(b, "lim", 0, NULL, &lim);
  mb_init_i(b, "one", 0, NULL, &one);
  mb_node(b, "Range", "range", "zero,lim,one", "rg"); /* [0..4] */
  int64_t three = 3;
  mb_init_i(b, "three", 0, NULL, &three);
  mb_node(b, "Less", "less", "rg,three", "lt");
  n = mb_node(b, "Cast", "cast", "lt", "ltf");
  attr_i(n, "to", 1);
  mb_node(b, "Where", "where", "lt,rg,three", "wh"); /* [0,1,2,3,3] */
  int64_t ex[2] = {2, 5};
  mb_ints(b, "ex", 2, ex);
  mb_node(b, "Expand", "expand", "wh,ex", "exo");
  int64_t rep[2] = {1, 2};
  mb_ints(b, "rep", 2, rep);
  mb_node(b, "Tile", "tile", "a,rep", "tl");
  mb_ints(b, "cshape", 2, ex);
  n = mb_node(b, "ConstantOfShape", "cos", "cshape", "co");
  attr_t(n, "value", tensor_i("", 1, (int64_t[]){1}, &three));
  n = mb_node(b, "ReduceSum", "rsum", "a,ax1", "rso");
  attr_i(n, "keepdims", 0);
  n = mb_node(b, "Div", "idiv", "lim,three", "q");
  const char *outs[] = {"sl", "rv", "t", "gt", "mmo", "smo", "s1", "s2", "ltf", "exo", "tl", "co", "rso", "q"};
  for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) mb_output(b, outs[i]);
  cwm_err e;
  cwm_graph *g = mb_load(b, 1, &e);
  CHECKF(g, "%s", e.msg);
  if (!g) return;
  for (int i = 0; i < g->nnodes; i++) CHECKF(g->nodes[i].dead, "node %s not folded", g->nodes[i].name);
  const cwm_value *v;
#define FV(name, n, ...) do { v = folded(g, name); float want[] = {__VA_ARGS__}; CHECKF(v && cwm_value_numel(v) == n, "%s", name); \
    for (int k = 0; v && k < n && k < (int)cwm_value_numel(v); k++) CHECKF(fabsf(((float *)v->data)[k] - want[k]) < 1e-5f, \
      "%s[%d] = %g, want %g", name, k, ((float *)v->data)[k], want[k]); } while (0)
#define IV(name, n, ...) do { v = folded(g, name); int64_t want[] = {__VA_ARGS__}; CHECKF(v && cwm_value_numel(v) == n, "%s", name); \
    for (int k = 0; v && k < n && k < (int)cwm_value_numel(v); k++) CHECKF(((int64_t *)v->data)[k] == want[k], \
      "%s[%d] = %lld, want %lld", name, k, (long long)((int64_t *)v->data)[k], (long long)want[k]); } while (0)
  FV("sl", 4, 1, 3, 4, 6);
  FV("rv", 6, 4, 5, 6, 1, 2, 3);
  FV("t", 6, 1, 4, 2, 5, 3, 6);
  FV("gt", 4, 3, 1, 6, 4);
  FV("mmo", 4, 14, 32, 32, 77);
  FV("smo", 6, 0.09003057f, 0.24472847f, 0.66524096f, 0.09003057f, 0.24472847f, 0.66524096f);
  FV("s1", 2, 1, 4);
  FV("s2", 4, 2, 3, 5, 6);
  FV("ltf", 5, 1, 1, 1, 0, 0);
  IV("exo", 10, 0, 1, 2, 3, 3, 0, 1, 2, 3, 3);
  FV("tl", 12, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6);
  IV("co", 10, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3);
  FV("rso", 2, 6, 15);
  IV("q", 1, 1);
  cwm_graph_free(g);
}

/* the evaluator's compute ops on constants, against hand computations */
static void test_fold_compute(void) {
  mb *b = mb_new(13);
  float x[18], ones[8] = {1, 1, 1, 1, 1, 1, 1, 1}, one = 1, dw[2] = {2, 3};
  for (int i = 0; i < 18; i++) x[i] = (float)i;
  int64_t xd[4] = {1, 2, 3, 3};
  mb_init_f(b, "x", 4, xd, x);
  mb_init_f(b, "w", 4, (int64_t[]){1, 2, 2, 2}, ones);
  mb_init_f(b, "b", 1, (int64_t[]){1}, &one);
  mb_node(b, "Conv", "conv", "x,w,b", "co");
  mb_init_f(b, "dw", 4, (int64_t[]){2, 1, 1, 1}, dw);
  attr_i(mb_node(b, "Conv", "dwconv", "x,dw", "dwo"), "group", 2);
  Onnx__NodeProto *n = mb_node(b, "MaxPool", "mp", "x", "mpo");
  attr_ints(n, "kernel_shape", 2, (int64_t[]){2, 2});
  for (int cip = 0; cip < 2; cip++) {
    n = mb_node(b, "AveragePool", cip ? "ap1" : "ap0", "x", cip ? "ap1o" : "ap0o");
    attr_ints(n, "kernel_shape", 2, (int64_t[]){2, 2});
    attr_ints(n, "strides", 2, (int64_t[]){2, 2});
    attr_ints(n, "pads", 4, (int64_t[]){0, 0, 1, 1});
    attr_i(n, "count_include_pad", cip);
  }
  mb_node(b, "GlobalAveragePool", "gap", "x", "gapo");
  mb_init_f(b, "A", 2, (int64_t[]){3, 2}, (float[6]){1, 2, 3, 4, 5, 6});
  mb_init_f(b, "B", 2, (int64_t[]){3, 1}, ones);
  mb_init_f(b, "C", 0, NULL, &one);
  n = mb_node(b, "Gemm", "gemm", "A,B,C", "gmo");
  attr_i(n, "transA", 1);
  attr_f(n, "alpha", 2);
  mb_init_f(b, "L", 2, (int64_t[]){2, 3}, (float[6]){1, 2, 3, 4, 6, 8});
  mb_init_f(b, "s3", 1, (int64_t[]){3}, ones);
  mb_node(b, "LayerNormalization", "ln", "L,s3", "lno");
  mb_init_f(b, "bs", 1, (int64_t[]){2}, (float[2]){1, 2});
  mb_init_f(b, "bb", 1, (int64_t[]){2}, (float[2]){0, 1});
  mb_init_f(b, "bm", 1, (int64_t[]){2}, (float[2]){0, 9});
  mb_init_f(b, "bv", 1, (int64_t[]){2}, (float[2]){1, 4});
  attr_f(mb_node(b, "BatchNormalization", "bn", "x,bs,bb,bm,bv", "bno"), "epsilon", 0);
  mb_init_f(b, "acts", 1, (int64_t[]){4}, (float[4]){3, 0, 0.5f, -2});
  mb_node(b, "HardSwish", "hsw", "acts", "hswo");
  mb_node(b, "HardSigmoid", "hsg", "acts", "hsgo");
  mb_node(b, "Erf", "erf", "acts", "erfo");
  attr_f(mb_node(b, "LeakyRelu", "lrelu", "acts", "lro"), "alpha", 0.1f);
  const char *outs[] = {"co", "dwo", "mpo", "ap0o", "ap1o", "gapo", "gmo", "lno", "bno", "hswo", "hsgo", "erfo", "lro"};
  for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) mb_output(b, outs[i]);
  cwm_err e;
  cwm_graph *g = mb_load(b, 1, &e);
  CHECKF(g, "%s", e.msg);
  if (!g) return;
  for (int i = 0; i < g->nnodes; i++) CHECKF(g->nodes[i].dead, "node %s not folded", g->nodes[i].name);
  const cwm_value *v;
  FV("co", 4, 53, 61, 77, 85);
  v = folded(g, "dwo");
  CHECK(v && ((float *)v->data)[4] == 8 && ((float *)v->data)[9] == 27);
  FV("mpo", 8, 4, 5, 7, 8, 13, 14, 16, 17);
  FV("ap0o", 8, 2, 3.5f, 6.5f, 8, 11, 12.5f, 15.5f, 17);
  FV("ap1o", 8, 2, 1.75f, 3.25f, 2, 11, 6.25f, 7.75f, 4.25f);
  FV("gapo", 2, 4, 13);
  FV("gmo", 2, 19, 25);
  FV("lno", 6, -1.2247357f, 0, 1.2247357f, -1.2247357f, 0, 1.2247357f);
  v = folded(g, "bno");
  CHECK(v && ((float *)v->data)[4] == 4 && ((float *)v->data)[9] == 1 && ((float *)v->data)[17] == 9);
  FV("hswo", 4, 3, 0, 0.29166667f, -0.33333333f);
  FV("hsgo", 4, 1, 0.5f, 0.6f, 0.1f);
  FV("erfo", 4, 0.99997791f, 0, 0.52049988f, -0.99532227f);
  FV("lro", 4, 3, 0, 0.5f, -0.2f);
  cwm_graph_free(g);
}

/* shapes of run-time nodes: batched MatMul broadcasting, 1-D operands, ceil-mode pooling, opset 11
 * attributes (Squeeze axes, Split sizes, Clip bounds), LayerNormalization */
static void test_shapes(void) {
  mb *b = mb_new(11);
  int64_t ad[4] = {2, 1, 3, 4}, bd[3] = {5, 4, 6}, vd[1] = {4}, pd[4] = {1, 2, 7, 7};
  mb_input(b, "a", 1, 4, ad);
  mb_input(b, "b", 1, 3, bd);
  mb_input(b, "v", 1, 1, vd);
  mb_input(b, "p", 1, 4, pd);
  mb_node(b, "MatMul", "mm", "a,b", "ab");   /* [2, 5, 3, 6] */
  mb_node(b, "MatMul", "mv", "a,v", "av");   /* [2, 1, 3] */
  mb_node(b, "MatMul", "vm", "v,b", "vb");   /* [5, 6] */
  Onnx__NodeProto *n = mb_node(b, "MaxPool", "pool", "p", "po"); /* ceil((7-3)/2)+1 = 3 ... 7: 3 */
  int64_t k3[2] = {3, 3}, s2[2] = {2, 2}, k2[2] = {2, 2};
  attr_ints(n, "kernel_shape", 2, k3);
  attr_ints(n, "strides", 2, s2);
  attr_i(n, "ceil_mode", 1);
  n = mb_node(b, "AveragePool", "apool", "p", "apo"); /* ceil((7-2)/2)+1 = 4 */
  attr_ints(n, "kernel_shape", 2, k2);
  attr_ints(n, "strides", 2, s2);
  attr_i(n, "ceil_mode", 1);
  n = mb_node(b, "Squeeze", "sq", "av", "sqo"); /* opset 11: axes attribute */
  int64_t ax1[1] = {1};
  attr_ints(n, "axes", 1, ax1);
  n = mb_node(b, "Split", "split", "ab", "sp1,sp2");
  int64_t sizes[2] = {2, 4};
  attr_ints(n, "split", 2, sizes);
  attr_i(n, "axis", -1);
  n = mb_node(b, "Clip", "clip", "ab", "cl");
  mb_node(b, "Softmax", "sm", "a", "smo");
  mb_node(b, "ReduceMean", "rm", "ab", "rmo");
  const char *outs[] = {"ab", "av", "vb", "po", "apo", "sqo", "sp1", "sp2", "cl", "smo", "rmo"};
  for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) mb_output(b, outs[i]);
  cwm_err e;
  cwm_graph *g = mb_load(b, 1, &e);
  CHECKF(g, "%s", e.msg);
  if (!g) return;
  struct { const char *v; int nd; int64_t d[4]; } want[] = {
      {"ab", 4, {2, 5, 3, 6}}, {"av", 3, {2, 1, 3}}, {"vb", 2, {5, 6}}, {"po", 4, {1, 2, 3, 3}},
      {"apo", 4, {1, 2, 4, 4}}, {"sqo", 2, {2, 3}}, {"sp1", 4, {2, 5, 3, 2}}, {"sp2", 4, {2, 5, 3, 4}},
      {"cl", 4, {2, 5, 3, 6}}, {"smo", 4, {2, 1, 3, 4}}, {"rmo", 4, {1, 1, 1, 1}}};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    const cwm_value *v = &g->values[find_value(g, want[i].v)];
    char s[64];
    cwm_value_shape_str(v, s, sizeof s);
    CHECKF(shape_is(v, want[i].nd, want[i].d), "%s is %s", want[i].v, s);
  }
  cwm_graph_free(g);

  b = mb_new(17);
  int64_t xd[3] = {2, 3, 8}, sd[1] = {8};
  float sc[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  mb_input(b, "x", 1, 3, xd);
  mb_init_f(b, "scale", 1, sd, sc);
  mb_init_f(b, "bias", 1, sd, sc);
  n = mb_node(b, "LayerNormalization", "ln", "x,scale,bias", "y");
  attr_f(n, "epsilon", 1e-5f);
  mb_output(b, "y");
  g = mb_load(b, 1, &e);
  CHECKF(g && shape_is(out0(g), 3, xd), "%s", e.msg);
  cwm_graph_free(g);
}

/* ---------- malformed and unsupported models ---------- */

static int nerr_cases;

/* err must be set, start with the path and contain every one of the NULL-terminated substrings */
static void expect(cwm_graph *g, const cwm_err *e, const char *what, ...) {
  nerr_cases++;
  CHECKF(!g, "%s: loaded", what);
  cwm_graph_free(g);
  CHECKF(e->code == CWM_EPARSE, "%s: code %d (%s)", what, e->code, e->msg);
  va_list ap;
  va_start(ap, what);
  for (const char *s; (s = va_arg(ap, const char *));) CHECKF(strstr(e->msg, s), "%s: '%s' lacks '%s'", what, e->msg, s);
  va_end(ap);
}

/* a one-node model: input x of shape xd, op over (x, extra inputs) */
static mb *one_node(int opset, const int64_t *xd, int nd, const char *op, const char *name, const char *ins) {
  mb *b = mb_new(opset);
  mb_input(b, "x", 1, nd, xd);
  mb_node(b, op, name, ins, "y");
  mb_output(b, "y");
  return b;
}

static Onnx__NodeProto *last_node(mb *b) { return b->g.node[b->g.n_node - 1]; }

static void test_errors(void) {
  cwm_err e;
  int64_t x4[4] = {1, 3, 8, 8}, x2[2] = {1, 64}, x2b[2] = {1, 32};
  mb *b;

  /* bytes that are not a model */
  {
    mb *v = mb_new(13);
    mb_input(v, "x", 1, 2, x2);
    mb_node(v, "Relu", "r", "x", "y");
    mb_output(v, "y");
    size_t len;
    uint8_t *buf = mb_pack(v, &len);
    arena_free();
    size_t cuts[] = {len - 1, len / 2, len / 3, 17, 5, 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
      memset(&e, 0, sizeof e);
      cwm_graph *g = cwm_onnx_parse(buf, cuts[i], "cut.onnx", &e);
      expect(g, &e, "truncated", "cut.onnx: ", NULL);
    }
    free(buf);
    uint8_t rnd[512];
    uint64_t s = 12345;
    for (int t = 0; t < 20; t++) {
      for (size_t i = 0; i < sizeof rnd; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        rnd[i] = (uint8_t)(s >> 56);
      }
      memset(&e, 0, sizeof e);
      cwm_graph *g = cwm_onnx_parse(rnd, sizeof rnd - (size_t)t * 7, "rnd.onnx", &e);
      if (g && cwm_graph_infer(g, &e) == 0) {
        CHECKF(0, "random bytes %d loaded and inferred", t);
      }
      cwm_graph_free(g);
      CHECKF(e.code == CWM_EPARSE && e.msg[0], "random bytes %d: code %d", t, e.code);
    }
    nerr_cases++;
    memset(&e, 0, sizeof e);
    expect(cwm_onnx_parse((const uint8_t *)"", 0, "empty.onnx", &e), &e, "empty", "empty.onnx: ", "no graph", NULL);
    memset(&e, 0, sizeof e);
    cwm_graph *g = cwm_onnx_load("/nonexistent/model.onnx", &e);
    CHECK(!g && e.code == CWM_EIO && strstr(e.msg, "/nonexistent/model.onnx"));
  }

  /* dtypes */
  b = mb_new(13);
  mb_input(b, "x", 10, 2, x2);
  mb_node(b, "Relu", "r", "x", "y");
  mb_output(b, "y");
  expect(mb_load(b, 1, &e), &e, "float16 input", "m.onnx: input 'x'", "float16", "not supported", NULL);

  b = one_node(13, x2, 2, "Add", "add", "x,w");
  {
    Onnx__TensorProto *t = mb_init(b, tensor("w", 11, 2, x2));
    t->n_double_data = 64;
    t->double_data = A(sizeof(double) * 64);
  }
  expect(mb_load(b, 1, &e), &e, "double initializer", "initializer 'w'", "double", NULL);

  b = one_node(13, x2, 2, "Cast", "cast", "x");
  attr_i(last_node(b), "to", 11);
  expect(mb_load(b, 1, &e), &e, "cast to double", "node 'cast' (Cast)", "Cast to double is not supported", NULL);

  /* ops and domains */
  b = one_node(13, x2, 2, "NonMaxSuppression", "nms", "x");
  expect(mb_load(b, 1, &e), &e, "unknown op", "node 'nms' (NonMaxSuppression)", "unsupported op 'NonMaxSuppression'", NULL);

  b = one_node(13, x2, 2, "QuickGelu", "qg", "x");
  last_node(b)->domain = AS("com.microsoft");
  expect(mb_load(b, 1, &e), &e, "domain", "node 'qg' (QuickGelu)", "domain 'com.microsoft'", NULL);

  /* structure */
  b = mb_new(13);
  mb_input(b, "x", 1, 2, x2);
  mb_node(b, "Add", "a", "x,c_out", "a_out");
  mb_node(b, "Relu", "c", "a_out", "c_out");
  mb_output(b, "c_out");
  expect(mb_load(b, 1, &e), &e, "cycle", "node 'a' (Add)", "cycle", NULL);

  b = one_node(13, x2, 2, "Add", "add", "x,w");
  expect(mb_load(b, 1, &e), &e, "missing initializer", "node 'add' (Add)", "input 'w' is never produced", NULL);

  b = mb_new(13);
  mb_input(b, "x", 1, 2, x2);
  mb_node(b, "Relu", "r1", "x", "y");
  mb_node(b, "Neg", "r2", "x", "y");
  mb_output(b, "y");
  expect(mb_load(b, 1, &e), &e, "produced twice", "node 'r2' (Neg)", "output 'y' is produced twice", "'r1'", NULL);

  b = mb_new(13);
  mb_input(b, "x", 1, 2, x2);
  mb_node(b, "Relu", "r", "x", "y");
  expect(mb_load(b, 1, &e), &e, "no outputs", "m.onnx: the graph has no outputs", NULL);

  b = one_node(13, x2, 2, "Relu", "r", "x");
  mb_output(b, "zz");
  expect(mb_load(b, 1, &e), &e, "output never produced", "m.onnx: output 'zz' is never produced", NULL);

  /* inputs and initializers */
  {
    int64_t dyn[2] = {-1, 64};
    b = mb_new(13);
    mb_input(b, "x", 1, 2, dyn);
    mb_node(b, "Relu", "r", "x", "y");
    mb_output(b, "y");
    expect(mb_load(b, 1, &e), &e, "dynamic dim", "m.onnx: input 'x': dimension 0 is dynamic ('batch')",
           "fixed shapes", NULL);
  }
  b = one_node(13, x2, 2, "Add", "add", "x,w");
  {
    Onnx__TensorProto *t = mb_init(b, tensor("w", 1, 2, x2));
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  }
  expect(mb_load(b, 1, &e), &e, "external data", "initializer 'w'", "outside the model", NULL);

  b = one_node(13, x2, 2, "Add", "add", "x,w");
  {
    Onnx__TensorProto *t = mb_init(b, tensor("w", 1, 2, x2));
    t->has_raw_data = 1;
    t->raw_data.len = 12;
    t->raw_data.data = A(12);
  }
  expect(mb_load(b, 1, &e), &e, "raw size", "initializer 'w'", "12 bytes", "64 elements", NULL);

  /* shapes */
  b = one_node(13, x2, 2, "Add", "add", "x,w");
  mb_init_f(b, "w", 2, x2b, (float[32]){0});
  expect(mb_load(b, 1, &e), &e, "add broadcast", "node 'add' (Add)", "inputs [1, 64] and [1, 32] do not broadcast", NULL);

  b = one_node(13, x2, 2, "MatMul", "mm", "x,w");
  mb_init_f(b, "w", 2, (int64_t[]){32, 10}, (float[320]){0});
  expect(mb_load(b, 1, &e), &e, "matmul inner", "node 'mm' (MatMul)", "inner dimensions differ: [1, 64] x [32, 10]", NULL);

  b = one_node(13, x4, 4, "Conv", "conv", "x,w");
  mb_init_f(b, "w", 4, (int64_t[]){8, 4, 3, 3}, (float[288]){0});
  expect(mb_load(b, 1, &e), &e, "conv channels", "node 'conv' (Conv)", "the input has 3 channels", "expects 4", NULL);

  b = one_node(13, x4, 4, "Conv", "conv", "x,w");
  mb_init_f(b, "w", 4, (int64_t[]){8, 3, 3, 3}, (float[216]){0});
  attr_ints(last_node(b), "dilations", 2, (int64_t[]){2, 2});
  expect(mb_load(b, 1, &e), &e, "conv dilation", "node 'conv' (Conv)", "dilations other than 1", NULL);

  b = one_node(13, (int64_t[]){1, 3, 4, 8, 8}, 5, "Conv", "conv3d", "x,w");
  mb_init_f(b, "w", 5, (int64_t[]){2, 3, 1, 1, 1}, (float[6]){0});
  expect(mb_load(b, 1, &e), &e, "conv 3-D", "node 'conv3d' (Conv)", "only 2-D convolutions", NULL);

  b = one_node(13, (int64_t[]){1, 4, 8, 8}, 4, "Conv", "gconv", "x,w");
  mb_init_f(b, "w", 4, (int64_t[]){4, 2, 3, 3}, (float[72]){0});
  attr_i(last_node(b), "group", 2);
  expect(mb_load(b, 1, &e), &e, "conv group", "node 'gconv' (Conv)", "group 2 is not supported", NULL);

  b = one_node(13, x4, 4, "Conv", "conv", "x,w");
  mb_init_f(b, "w", 4, (int64_t[]){8, 3, 3, 3}, (float[216]){0});
  attr_s(last_node(b), "auto_pad", "SAME_UPPER");
  expect(mb_load(b, 1, &e), &e, "auto_pad", "node 'conv' (Conv)", "auto_pad 'SAME_UPPER'", NULL);

  b = one_node(13, x2, 2, "Reshape", "rs", "x,s");
  mb_ints(b, "s", 2, (int64_t[]){3, 5});
  expect(mb_load(b, 1, &e), &e, "reshape count", "node 'rs' (Reshape)", "cannot reshape [1, 64] (64 elements) to [3, 5]", NULL);

  b = one_node(13, x2, 2, "Reshape", "rs", "x,s");
  mb_node(b, "Shape", "sh", "x", "s");
  /* the Reshape reads s before the Shape that makes it: the sort puts Shape first */
  b->g.node[0]->input[1] = AS("s2");
  mb_node(b, "Abs", "abs", "s", "s2");
  {
    cwm_graph *g = mb_load(b, 1, &e);
    CHECKF(g && shape_is(out0(g), 2, x2), "unsorted file: %s", e.msg);
    cwm_graph_free(g);
  }

  b = one_node(13, x2, 2, "Gather", "ga", "w,i");
  mb_init_f(b, "w", 1, (int64_t[]){3}, (float[3]){1, 2, 3});
  mb_ints(b, "i", 2, (int64_t[]){0, 7});
  expect(mb_load(b, 1, &e), &e, "gather range", "node 'ga' (Gather)", "index 7 is out of range for axis 0 of size 3", NULL);

  b = one_node(13, x2, 2, "Transpose", "tr", "x");
  attr_ints(last_node(b), "perm", 2, (int64_t[]){0, 0});
  expect(mb_load(b, 1, &e), &e, "perm", "node 'tr' (Transpose)", "perm [0, 0] is not a permutation", NULL);

  b = one_node(13, x2, 2, "Concat", "cat", "x,w");
  mb_init_f(b, "w", 3, (int64_t[]){1, 1, 64}, (float[64]){0});
  attr_i(last_node(b), "axis", 0);
  expect(mb_load(b, 1, &e), &e, "concat rank", "node 'cat' (Concat)", "input 1 has rank 3 but input 0 has rank 2", NULL);

  b = one_node(13, x2, 2, "Slice", "sl", "x,st,en,ax,stp");
  mb_ints(b, "st", 1, (int64_t[]){0});
  mb_ints(b, "en", 1, (int64_t[]){10});
  mb_ints(b, "ax", 1, (int64_t[]){1});
  mb_ints(b, "stp", 1, (int64_t[]){0});
  expect(mb_load(b, 1, &e), &e, "slice step", "node 'sl' (Slice)", "step 0 on axis 1", NULL);

  b = one_node(13, x2, 2, "Div", "div", "a,z");
  mb_ints(b, "a", 1, (int64_t[]){5});
  mb_ints(b, "z", 1, (int64_t[]){0});
  expect(mb_load(b, 1, &e), &e, "int div by zero", "node 'div' (Div)", "division by zero", NULL);

  b = one_node(13, x2, 2, "Reshape", "rs", "x,s");
  mb_node(b, "Shape", "shp", "x", "s0");
  mb_node(b, "Relu", "dyn", "x", "s");
  expect(mb_load(b, 1, &e), &e, "runtime shape", "node 'rs' (Reshape)", "computed at run time", NULL);

  b = one_node(13, x2, 2, "Constant", "c", NULL);
  expect(mb_load(b, 1, &e), &e, "empty constant", "node 'c' (Constant)", "no value", NULL);

  b = one_node(13, x4, 4, "MaxPool", "mp", "x");
  attr_ints(last_node(b), "kernel_shape", 2, (int64_t[]){9, 9});
  expect(mb_load(b, 1, &e), &e, "pool kernel", "node 'mp' (MaxPool)", "larger than the padded input", NULL);

  b = one_node(13, x2, 2, "Relu", "r", "x");
  last_node(b)->output = split_names("y,extra", &last_node(b)->n_output);
  expect(mb_load(b, 1, &e), &e, "extra output", "node 'r' (Relu)", "output 1 ('extra') is not one that Relu produces", NULL);

  /* a node with no outputs (all-constant inputs) is dead code, not folded into value 0 (found by fuzzing) */
  b = mb_new(13);
  mb_input(b, "x", 1, 2, x2);
  mb_ints(b, "k", 1, (int64_t[]){3});
  mb_node(b, "Neg", "nothing", "k", NULL);
  mb_node(b, "Relu", "r", "x", "y");
  mb_output(b, "y");
  {
    cwm_graph *g = mb_load(b, 1, &e);
    CHECKF(g && g->nodes[find_node(g, "nothing")].dead && ((int64_t *)g->values[find_value(g, "k")].data)[0] == 3,
           "%s", e.msg);
    cwm_graph_free(g);
  }

  b = mb_new(3);
  mb_input(b, "x", 1, 2, x2);
  mb_node(b, "Relu", "r", "x", "y");
  mb_output(b, "y");
  expect(mb_load(b, 1, &e), &e, "opset", "m.onnx: opset 3 is not supported", NULL);

  CHECKF(nerr_cases >= 20, "only %d error cases", nerr_cases);
}

/* Nested subgraph attributes deeper than protobuf-c's recursion should go: an error, no crash. */
static void test_deep_nesting(void) {
  /* ModelProto.graph, then GraphProto.node -> NodeProto.attribute -> AttributeProto.g -> GraphProto
   * ... written outside in; L[i] is the length of the content under the i-th header from inside */
  enum { N = 60001 };
  static const uint8_t tags[3] = {0x0a, 0x2a, 0x32};
  size_t *L = malloc(sizeof(size_t) * (N + 1));
  L[0] = 0;
  for (int i = 0; i < N; i++) {
    size_t h = 1;
    for (size_t v = L[i]; v > 0x7f; v >>= 7) h++;
    L[i + 1] = L[i] + 1 + h;
  }
  uint8_t *buf = malloc(L[N]);
  size_t at = 0;
  for (int j = 0; j < N; j++) {
    buf[at++] = j == 0 ? 0x3a : tags[(j - 1) % 3];
    for (size_t v = L[N - 1 - j];; v >>= 7) {
      buf[at++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
      if (v <= 0x7f) break;
    }
  }
  CHECK(at == L[N]);
  cwm_err e = {0};
  cwm_graph *g = cwm_onnx_parse(buf, at, "deep.onnx", &e);
  CHECKF(!g && strstr(e.msg, "deep.onnx: ") && strstr(e.msg, "nested"), "%s", e.msg);
  cwm_graph_free(g);
  free(buf);
  free(L);
}

/* ---------- a real export ---------- */

static void test_real_model(void) {
  const char *src = getenv("CWM_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/models/tiny_import.onnx", src ? src : ".");
  cwm_err e = {0};
  cwm_graph *g = cwm_onnx_load(path, &e);
  CHECKF(g, "%s", e.msg);
  if (!g) return;
  CHECK(g->opset == 13 && g->ninputs == 1 && g->noutputs == 1);
  int64_t xs[4] = {1, 3, 8, 8}, ys[2] = {1, 10};
  CHECK(shape_is(&g->values[g->inputs[0]], 4, xs));
  CHECKF(cwm_graph_infer(g, &e) == 0, "%s", e.msg);
  CHECK(shape_is(out0(g), 2, ys));
  int live = 0, bn = 0, reshape = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const cwm_gnode *n = &g->nodes[i];
    if (n->dead) continue;
    live++;
    bn += !strcmp(n->op_type, "BatchNormalization");
    if (!strcmp(n->op_type, "Reshape")) {
      reshape++;
      const cwm_value *s = &g->values[n->in[1]];
      CHECK(s->kind == CWM_VAL_CONST && cwm_value_numel(s) == 2 && ((int64_t *)s->data)[0] == 1);
    }
    for (int k = 0; k < n->nout; k++) CHECK(g->values[n->out[k]].shape_known);
    CHECKF(cwm_graph_op_supported(n->op_type), "%s", n->op_type);
  }
  CHECKF(live == 5 && bn == 0 && reshape == 1, "live %d bn %d reshape %d", live, bn, reshape);
  cwm_graph_free(g);
}

int main(void) {
  test_conv_bn();
  test_shape_chain();
  test_fold_values();
  test_fold_compute();
  test_shapes();
  test_errors();
  test_deep_nesting();
  test_real_model();
  free(arena);
  return test_done();
}

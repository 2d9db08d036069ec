/* onnx.c: an ONNX ModelProto (unpacked by protobuf-c's generated code) into a cwm_graph, and the
 * graph's small helpers. Initializers and Constant nodes become constant values, graph inputs get
 * their declared static shapes, nodes are sorted topologically. Whatever a file can get wrong on
 * its own is an error "<path>: <what>: <reason>"; any bytes at all give a graph or an error. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_int.h"
#include "onnx/onnx.pb-c.h"

#define S(x) ((x) ? (x) : "")

/* ---------- helpers declared in graph.h ---------- */

int64_t cwm_shape_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || shape[i] > CWM_GRAPH_MAX_NUMEL) return -1;
    if (shape[i] == 0) n = 0;
    else if (n > CWM_GRAPH_MAX_NUMEL / shape[i]) return -1;
    else n *= shape[i];
  }
  return n;
}

int64_t cwm_value_numel(const cwm_value *v) { return cwm_shape_numel(v->ndim, v->shape); }

const cwm_attr *cwm_gnode_attr(const cwm_gnode *n, const char *name) {
  for (int i = 0; i < n->nattr; i++)
    if (!strcmp(n->attr[i].name, name)) return &n->attr[i];
  return NULL;
}

int64_t cwm_gnode_attr_int(const cwm_gnode *n, const char *name, int64_t dflt) {
  const cwm_attr *a = cwm_gnode_attr(n, name);
  return a && a->kind == CWM_ATTR_INT ? a->i : dflt;
}

float cwm_gnode_attr_float(const cwm_gnode *n, const char *name, float dflt) {
  const cwm_attr *a = cwm_gnode_attr(n, name);
  if (a && a->kind == CWM_ATTR_FLOAT) return a->f;
  return a && a->kind == CWM_ATTR_INT ? (float)a->i : dflt;
}

/* The values array grows in powers of two: its capacity is implied by nvalues, so the struct in
 * graph.h needs no capacity field and every adder goes through here. */
int cwm_graph_add_value(cwm_graph *g, const char *name, cwm_val_kind kind, int dtype, int ndim,
                        const int64_t *shape) {
  int n = g->nvalues;
  if (n == 0 || (n >= 16 && (n & (n - 1)) == 0))
    g->values = cwm_xrealloc(g->values, sizeof(cwm_value) * (size_t)(n == 0 ? 16 : 2 * n));
  cwm_value *v = &g->values[n];
  memset(v, 0, sizeof *v);
  v->name = cwm_xstrdup(name);
  v->kind = kind;
  v->dtype = dtype;
  v->ndim = ndim < 0 ? 0 : ndim > CWM_GRAPH_MAX_DIMS ? CWM_GRAPH_MAX_DIMS : ndim;
  if (shape) memcpy(v->shape, shape, sizeof(int64_t) * (size_t)v->ndim);
  v->shape_known = shape != NULL || ndim == 0;
  v->producer = -1;
  g->nvalues = n + 1;
  return n;
}

void cwm_value_shape_str(const cwm_value *v, char *buf, size_t n) {
  if (!n) return;
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < v->ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)v->shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

const char *cwm_dtype_name(int dt) {
  static const char *names[] = {"undefined", "float",   "uint8",  "int8",      "uint16",     "int16",
                                "int32",     "int64",   "string", "bool",      "float16",    "double",
                                "uint32",    "uint64",  "complex64", "complex128", "bfloat16", "float8e4m3fn",
                                "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4"};
  return dt >= 0 && dt < (int)(sizeof names / sizeof *names) ? names[dt] : "unknown";
}

int cwm_dtype_size(int dt) {
  switch (dt) {
  case CWM_DT_FLOAT: case CWM_DT_INT32: return 4;
  case CWM_DT_INT64: return 8;
  case CWM_DT_BOOL: return 1;
  }
  return 0;
}

int cwm_node_fail(const cwm_graph *g, int ni, cwm_err *err, const char *fmt, ...) {
  char why[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return cwm_fail(err, CWM_EPARSE, "node '%s' (%s): %s", g->nodes[ni].name, g->nodes[ni].op_type, why);
}

static void attr_free(cwm_attr *a) {
  free(a->name);
  free(a->s);
  free(a->floats);
  free(a->ints);
}

void cwm_graph_free(cwm_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->nvalues; i++) {
    free(g->values[i].name);
    free(g->values[i].data);
  }
  for (int i = 0; i < g->nnodes; i++) {
    cwm_gnode *n = &g->nodes[i];
    free(n->name);
    free(n->op_type);
    free(n->in);
    free(n->out);
    for (int k = 0; k < n->nattr; k++) attr_free(&n->attr[k]);
    free(n->attr);
  }
  free(g->values);
  free(g->nodes);
  free(g->inputs);
  free(g->outputs);
  free(g->name);
  free(g);
}

/* ---------- the wire format's nesting depth ---------- */

/* protobuf-c unpacks nested messages recursively with no depth limit, so a few hundred KB of
 * nested subgraph attributes would overflow the stack. This walk reads any length-delimited field
 * that parses as a message as one (strings rarely do, and never 64 levels deep) and reports the
 * deepest nesting, stopping at the limit. Returns -1 when the bytes are not a message. */
#define PB_MAX_DEPTH 64

static int pb_varint(const uint8_t *p, size_t n, size_t *at, uint64_t *v) {
  *v = 0;
  for (int sh = 0; sh < 64; sh += 7) {
    if (*at >= n) return -1;
    uint8_t b = p[(*at)++];
    *v |= (uint64_t)(b & 0x7f) << sh;
    if (!(b & 0x80)) return 0;
  }
  return -1;
}

static int pb_depth(const uint8_t *p, size_t n, int depth) {
  size_t at = 0;
  int deepest = depth;
  while (at < n) {
    uint64_t key, v;
    if (pb_varint(p, n, &at, &key) || (key >> 3) == 0) return -1;
    switch (key & 7) {
    case 0: if (pb_varint(p, n, &at, &v)) return -1; break;
    case 1: if (n - at < 8) return -1; at += 8; break;
    case 5: if (n - at < 4) return -1; at += 4; break;
    case 2:
      if (pb_varint(p, n, &at, &v) || v > n - at) return -1;
      if (depth < PB_MAX_DEPTH && v > 0) {
        int d = pb_depth(p + at, (size_t)v, depth + 1);
        if (d > deepest) deepest = d;
        if (deepest >= PB_MAX_DEPTH) return deepest;
      }
      at += (size_t)v;
      break;
    default: return -1;
    }
  }
  return deepest;
}

/* ---------- loading ---------- */

typedef struct {
  const char *path;
  cwm_graph *g;
  cwm_err *err;
  /* name -> value index: open addressing over the values' names */
  int *slot;
  size_t nslot;
} ld;

static int map_find(const ld *L, const char *name) {
  if (!L->nslot) return -1;
  size_t h = (size_t)cwm_hash64(name, strlen(name)) & (L->nslot - 1);
  for (;; h = (h + 1) & (L->nslot - 1)) {
    int s = L->slot[h];
    if (s < 0) return -1;
    if (!strcmp(L->g->values[s].name, name)) return s;
  }
}

static void map_put(ld *L, int vi) {
  if ((size_t)L->g->nvalues * 2 > L->nslot) {
    size_t ns = L->nslot ? L->nslot * 2 : 64;
    while ((size_t)L->g->nvalues * 2 > ns) ns *= 2;
    free(L->slot);
    L->slot = cwm_xmalloc(ns * sizeof(int));
    L->nslot = ns;
    for (size_t i = 0; i < ns; i++) L->slot[i] = -1;
    for (int i = 0; i < L->g->nvalues; i++)
      if (i != vi) map_put(L, i);
  }
  const char *name = L->g->values[vi].name;
  size_t h = (size_t)cwm_hash64(name, strlen(name)) & (L->nslot - 1);
  while (L->slot[h] >= 0) h = (h + 1) & (L->nslot - 1);
  L->slot[h] = vi;
}

static int add_named(ld *L, const char *name, cwm_val_kind kind) {
  int vi = cwm_graph_add_value(L->g, name, kind, 0, 0, NULL);
  L->g->values[vi].shape_known = 0;
  map_put(L, vi);
  return vi;
}

/* A name for an unnamed value or node that no other has. */
static int add_unnamed(ld *L, cwm_val_kind kind) {
  char nm[32];
  for (int k = L->g->nvalues;; k++) {
    snprintf(nm, sizeof nm, "v%d", k);
    if (map_find(L, nm) < 0) return add_named(L, nm, kind);
  }
}

static int ld_fail(ld *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int ld_fail(ld *L, const char *fmt, ...) {
  char why[440];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return cwm_fail(L->err, CWM_EPARSE, "%s: %s", L->path, why);
}

/* Converts a TensorProto into value vi (made CONST). int32 data becomes int64: one integer type
 * downstream. what names the tensor in messages ("initializer 'w'"). */
static int load_tensor(ld *L, const Onnx__TensorProto *t, int vi, const char *what) {
  if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    const char *loc = "";
    for (size_t i = 0; i < t->n_external_data; i++)
      if (t->external_data[i] && !strcmp(S(t->external_data[i]->key), "location")) loc = S(t->external_data[i]->value);
    return ld_fail(L, "%s: data is stored outside the model ('%s'): save the model with its weights inside the file",
                   what, loc);
  }
  int dt = t->has_data_type ? t->data_type : 0;
  if (dt != CWM_DT_FLOAT && dt != CWM_DT_INT64 && dt != CWM_DT_INT32 && dt != CWM_DT_BOOL)
    return ld_fail(L, "%s: dtype %s is not supported (float, int64, int32, bool)", what, cwm_dtype_name(dt));
  if (t->n_dims > CWM_GRAPH_MAX_DIMS)
    return ld_fail(L, "%s: %zu dimensions (at most %d)", what, t->n_dims, CWM_GRAPH_MAX_DIMS);
  int64_t numel = cwm_shape_numel((int)t->n_dims, t->dims);
  if (numel < 0) return ld_fail(L, "%s: dims are negative or too large", what);
  size_t esz = (size_t)cwm_dtype_size(dt), n = (size_t)numel;
  size_t have;
  if (t->has_raw_data) have = t->raw_data.len / esz;
  else if (dt == CWM_DT_FLOAT) have = t->n_float_data;
  else if (dt == CWM_DT_INT64) have = t->n_int64_data;
  else have = t->n_int32_data;
  if (have != n || (t->has_raw_data && t->raw_data.len % esz))
    return ld_fail(L, "%s: has %zu bytes of %s data for dims of %lld elements", what,
                   t->has_raw_data ? t->raw_data.len : have * esz, cwm_dtype_name(dt), (long long)numel);
  int odt = dt == CWM_DT_INT32 ? CWM_DT_INT64 : dt;
  size_t osz = (size_t)cwm_dtype_size(odt);
  unsigned char *d = cwm_xcalloc(n ? n : 1, osz);
  const unsigned char *raw = t->raw_data.data;
  for (size_t i = 0; i < n; i++) {
    switch (dt) {
    case CWM_DT_FLOAT: {
      float f = t->has_raw_data ? cwm_get_lef32(raw + 4 * i) : t->float_data[i];
      memcpy(d + 4 * i, &f, 4);
      break;
    }
    case CWM_DT_INT64: {
      int64_t x = t->has_raw_data ? (int64_t)cwm_get_le64(raw + 8 * i) : t->int64_data[i];
      memcpy(d + 8 * i, &x, 8);
      break;
    }
    case CWM_DT_INT32: {
      int64_t x = t->has_raw_data ? (int32_t)cwm_get_le32(raw + 4 * i) : t->int32_data[i];
      memcpy(d + 8 * i, &x, 8);
      break;
    }
    default: d[i] = (t->has_raw_data ? raw[i] : t->int32_data[i]) != 0;
    }
  }
  cwm_value *v = &L->g->values[vi];
  free(v->data);
  v->data = d;
  v->kind = CWM_VAL_CONST;
  v->dtype = odt;
  v->ndim = (int)t->n_dims;
  for (int i = 0; i < v->ndim; i++) v->shape[i] = t->dims[i];
  v->shape_known = 1;
  v->producer = -1;
  return 0;
}

static int load_input(ld *L, const Onnx__ValueInfoProto *vi_p, int vi) {
  const char *nm = L->g->values[vi].name;
  const Onnx__TypeProto *tp = vi_p->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
    return ld_fail(L, "input '%s': not a tensor (sequences, maps and optionals are not supported)", nm);
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  int dt = tt->has_elem_type ? tt->elem_type : 0;
  if (dt != CWM_DT_FLOAT && dt != CWM_DT_INT64 && dt != CWM_DT_INT32 && dt != CWM_DT_BOOL)
    return ld_fail(L, "input '%s': dtype %s is not supported (float, int64, int32, bool)", nm, cwm_dtype_name(dt));
  if (!tt->shape) return ld_fail(L, "input '%s': no shape: export the model with fixed shapes", nm);
  if (tt->shape->n_dim > CWM_GRAPH_MAX_DIMS)
    return ld_fail(L, "input '%s': %zu dimensions (at most %d)", nm, tt->shape->n_dim, CWM_GRAPH_MAX_DIMS);
  cwm_value *v = &L->g->values[vi];
  v->dtype = dt;
  v->ndim = (int)tt->shape->n_dim;
  for (int i = 0; i < v->ndim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
    if (!d || d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
      return ld_fail(L, "input '%s': dimension %d is dynamic ('%s'): export the model with fixed shapes", nm, i,
                     d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? S(d->dim_param) : "");
    if (d->dim_value < 0) return ld_fail(L, "input '%s': dimension %d is %lld", nm, i, (long long)d->dim_value);
    v->shape[i] = d->dim_value;
  }
  if (cwm_value_numel(v) < 0) return ld_fail(L, "input '%s': too many elements", nm);
  v->shape_known = 1;
  return 0;
}

/* Attribute types with no cwm_attr kind (graphs, strings lists ...) are left out: no op the
 * importer supports has one, and an unsupported op is reported by name at inference. */
static int load_attrs(ld *L, int ni, const Onnx__NodeProto *np) {
  cwm_gnode *n = &L->g->nodes[ni];
  n->attr = cwm_xcalloc(np->n_attribute ? np->n_attribute : 1, sizeof(cwm_attr));
  for (size_t k = 0; k < np->n_attribute; k++) {
    const Onnx__AttributeProto *a = np->attribute[k];
    if (!a) continue;
    int type = a->has_type ? (int)a->type : 0;
    if (!type) /* IR version 1 files: the field present says the type */
      type = a->t ? 4 : a->n_floats ? 6 : a->n_ints ? 7 : a->has_f ? 1 : a->has_i ? 2 : a->has_s ? 3 : 0;
    cwm_attr at = {0};
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: at.kind = CWM_ATTR_FLOAT; at.f = a->f; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: at.kind = CWM_ATTR_INT; at.i = a->i; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
      at.kind = CWM_ATTR_STRING;
      at.s = cwm_xmalloc(a->s.len + 1);
      if (a->s.len) memcpy(at.s, a->s.data, a->s.len);
      at.s[a->s.len] = 0;
      break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
      at.kind = CWM_ATTR_FLOATS;
      at.n = (int)a->n_floats;
      at.floats = cwm_memdup(a->floats, a->n_floats * sizeof(float));
      break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
      at.kind = CWM_ATTR_INTS;
      at.n = (int)a->n_ints;
      at.ints = cwm_memdup(a->ints, a->n_ints * sizeof(int64_t));
      break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
      if (!a->t) continue;
      char what[300], vname[300];
      snprintf(what, sizeof what, "node '%s' (%s): attribute '%s'", n->name, n->op_type, S(a->name));
      snprintf(vname, sizeof vname, "%s_%s", n->name, S(a->name));
      int vi = map_find(L, vname) < 0 ? add_named(L, vname, CWM_VAL_CONST) : add_unnamed(L, CWM_VAL_CONST);
      n = &L->g->nodes[ni];
      if (load_tensor(L, a->t, vi, what)) return -1;
      at.kind = CWM_ATTR_TENSOR;
      at.value = vi;
      break;
    }
    default: continue;
    }
    at.name = cwm_xstrdup(S(a->name));
    n->attr[n->nattr++] = at;
  }
  return 0;
}

/* A Constant node's value becomes its output, a CONST; the node is dead from the start. */
static int load_constant(ld *L, int ni) {
  cwm_graph *g = L->g;
  cwm_gnode *n = &g->nodes[ni];
  if (n->nout < 1) return ld_fail(L, "node '%s' (Constant): no output", n->name);
  int vo = n->out[0];
  for (int k = 0; k < n->nattr; k++) {
    const cwm_attr *a = &n->attr[k];
    cwm_value *v = &g->values[vo];
    free(v->data);
    v->data = NULL;
    if (!strcmp(a->name, "value") && a->kind == CWM_ATTR_TENSOR) {
      const cwm_value *src = &g->values[a->value];
      size_t bytes = (size_t)cwm_value_numel(src) * (size_t)cwm_dtype_size(src->dtype);
      v->data = cwm_xmalloc(bytes ? bytes : 1);
      memcpy(v->data, src->data, bytes);
      v->dtype = src->dtype;
      v->ndim = src->ndim;
      memcpy(v->shape, src->shape, sizeof v->shape);
    } else if (!strcmp(a->name, "value_float") || !strcmp(a->name, "value_int")) {
      v->ndim = 0;
      if (a->name[6] == 'f') {
        v->dtype = CWM_DT_FLOAT;
        v->data = cwm_xmalloc(sizeof(float));
        *(float *)v->data = cwm_gnode_attr_float(n, a->name, 0);
      } else {
        v->dtype = CWM_DT_INT64;
        v->data = cwm_xmalloc(sizeof(int64_t));
        *(int64_t *)v->data = cwm_gnode_attr_int(n, a->name, 0);
      }
    } else if (!strcmp(a->name, "value_floats") && a->kind == CWM_ATTR_FLOATS) {
      v->dtype = CWM_DT_FLOAT;
      v->ndim = 1;
      v->shape[0] = a->n;
      v->data = cwm_memdup(a->floats, (size_t)a->n * sizeof(float));
    } else if (!strcmp(a->name, "value_ints") && a->kind == CWM_ATTR_INTS) {
      v->dtype = CWM_DT_INT64;
      v->ndim = 1;
      v->shape[0] = a->n;
      v->data = cwm_memdup(a->ints, (size_t)a->n * sizeof(int64_t));
    } else {
      continue;
    }
    v->kind = CWM_VAL_CONST;
    v->shape_known = 1;
    v->producer = -1;
    n->dead = 1;
    return 0;
  }
  return ld_fail(L, "node '%s' (Constant): no value attribute this importer reads (value, value_float, value_int, "
                 "value_floats, value_ints)", n->name);
}

/* Kahn's algorithm, ready nodes taken in file order, so that a sorted file keeps its order. */
static int topo_sort(ld *L) {
  cwm_graph *g = L->g;
  int nn = g->nnodes;
  int *indeg = cwm_xcalloc((size_t)nn + 1, sizeof(int));
  int *order = cwm_xcalloc((size_t)nn + 1, sizeof(int));
  /* readers as CSR: value -> nodes reading it */
  int *cnt = cwm_xcalloc((size_t)g->nvalues + 1, sizeof(int));
  for (int i = 0; i < nn; i++)
    for (int k = 0; k < g->nodes[i].nin; k++) {
      int v = g->nodes[i].in[k];
      if (v >= 0 && g->values[v].producer >= 0) { cnt[v + 1]++; indeg[i]++; }
    }
  for (int v = 0; v < g->nvalues; v++) cnt[v + 1] += cnt[v];
  int *rd = cwm_xcalloc((size_t)cnt[g->nvalues] + 1, sizeof(int));
  int *fill = cwm_xcalloc((size_t)g->nvalues + 1, sizeof(int));
  for (int i = 0; i < nn; i++)
    for (int k = 0; k < g->nodes[i].nin; k++) {
      int v = g->nodes[i].in[k];
      if (v >= 0 && g->values[v].producer >= 0) rd[cnt[v] + fill[v]++] = i;
    }
  /* a min-heap of ready node indices keeps file order among the ready ones */
  int *heap = cwm_xcalloc((size_t)nn + 1, sizeof(int));
  int nh = 0, no = 0;
#define HPUSH(x) do { int _i = nh++; heap[_i] = (x); \
    while (_i && heap[(_i - 1) / 2] > heap[_i]) { int _t = heap[_i]; heap[_i] = heap[(_i - 1) / 2]; \
      heap[(_i - 1) / 2] = _t; _i = (_i - 1) / 2; } } while (0)
  for (int i = 0; i < nn; i++)
    if (!indeg[i]) HPUSH(i);
  while (nh) {
    int x = heap[0];
    heap[0] = heap[--nh];
    for (int i = 0;;) {
      int l = 2 * i + 1, r = l + 1, m = i;
      if (l < nh && heap[l] < heap[m]) m = l;
      if (r < nh && heap[r] < heap[m]) m = r;
      if (m == i) break;
      int t = heap[i]; heap[i] = heap[m]; heap[m] = t;
      i = m;
    }
    order[no++] = x;
    for (int k = 0; k < g->nodes[x].nout; k++) {
      int v = g->nodes[x].out[k];
      for (int r = cnt[v]; r < cnt[v + 1]; r++)
        if (--indeg[rd[r]] == 0) HPUSH(rd[r]);
    }
  }
#undef HPUSH
  int rc = 0;
  if (no < nn) {
    int bad = -1;
    for (int i = 0; i < nn && bad < 0; i++)
      if (indeg[i]) bad = i;
    rc = ld_fail(L, "node '%s' (%s): is part of a cycle (it reads a value that depends on its own output)",
                 g->nodes[bad].name, g->nodes[bad].op_type);
  } else {
    cwm_gnode *sorted = cwm_xmalloc(sizeof(cwm_gnode) * (size_t)(nn ? nn : 1));
    for (int i = 0; i < nn; i++) sorted[i] = g->nodes[order[i]];
    free(g->nodes);
    g->nodes = sorted;
    for (int i = 0; i < nn; i++)
      for (int k = 0; k < g->nodes[i].nout; k++) g->values[g->nodes[i].out[k]].producer = i;
  }
  free(indeg); free(order); free(cnt); free(rd); free(fill); free(heap);
  return rc;
}

static int load_graph(ld *L, const Onnx__ModelProto *m) {
  cwm_graph *g = L->g;
  const Onnx__GraphProto *gp = m->graph;
  if (!gp) return ld_fail(L, "no graph (empty file, or not an ONNX model)");
  int found = 0;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    if (o && (!strcmp(S(o->domain), "") || !strcmp(S(o->domain), "ai.onnx"))) {
      g->opset = o->has_version ? o->version : 0;
      found = 1;
    }
  }
  if (!found) return ld_fail(L, "no opset_import for the default ONNX domain");
  if (g->opset < 7 || g->opset > 18)
    return ld_fail(L, "opset %lld is not supported (7 to 18)", (long long)g->opset);
  if (gp->name && gp->name[0]) { free(g->name); g->name = cwm_xstrdup(gp->name); }

  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *t = gp->initializer[i];
    const char *nm = t ? S(t->name) : "";
    if (!nm[0]) return ld_fail(L, "initializer %zu has no name", i);
    if (map_find(L, nm) >= 0) return ld_fail(L, "initializer '%s': the name appears twice", nm);
    char what[300];
    snprintf(what, sizeof what, "initializer '%s'", nm);
    if (load_tensor(L, t, add_named(L, nm, CWM_VAL_CONST), what)) return -1;
  }
  if (gp->n_sparse_initializer) return ld_fail(L, "sparse initializers are not supported");
  g->inputs = cwm_xcalloc(gp->n_input + 1, sizeof(int));
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vp = gp->input[i];
    const char *nm = vp ? S(vp->name) : "";
    if (!nm[0]) return ld_fail(L, "input %zu has no name", i);
    int vi = map_find(L, nm);
    if (vi >= 0 && g->values[vi].kind == CWM_VAL_CONST) continue; /* an initializer listed as input */
    if (vi >= 0) return ld_fail(L, "input '%s': the name appears twice", nm);
    vi = add_named(L, nm, CWM_VAL_INPUT);
    if (load_input(L, vp, vi)) return -1;
    g->inputs[g->ninputs++] = vi;
  }

  /* nodes: names, outputs (each value written once), then inputs once every output is known */
  g->nodes = cwm_xcalloc(gp->n_node + 1, sizeof(cwm_gnode));
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    cwm_gnode *n = &g->nodes[g->nnodes++];
    n->op_type = cwm_xstrdup(np && np->op_type ? np->op_type : "");
    if (np && np->name && np->name[0]) n->name = cwm_xstrdup(np->name);
    else {
      char nm[300];
      snprintf(nm, sizeof nm, "%s_%zu", n->op_type, i);
      n->name = cwm_xstrdup(nm);
    }
    if (!np) continue;
    if (!n->op_type[0]) return ld_fail(L, "node '%s': no op_type", n->name);
    const char *dom = S(np->domain);
    if (dom[0] && strcmp(dom, "ai.onnx"))
      return ld_fail(L, "node '%s' (%s): domain '%s' is not supported (only the default ONNX domain)", n->name,
                     n->op_type, dom);
    n->out = cwm_xcalloc(np->n_output + 1, sizeof(int));
    for (size_t k = 0; k < np->n_output; k++) {
      const char *on = S(np->output[k]);
      int vi = on[0] ? map_find(L, on) : -1;
      if (vi >= 0) {
        const cwm_value *v = &g->values[vi];
        return ld_fail(L, "node '%s' (%s): output '%s' is produced twice (%s%s%s)", n->name, n->op_type, on,
                       v->kind == CWM_VAL_INPUT ? "it is a graph input" : v->kind == CWM_VAL_CONST && v->producer < 0
                       ? "it is an initializer" : "also by node '",
                       v->kind == CWM_VAL_ACT ? g->nodes[v->producer].name : "", v->kind == CWM_VAL_ACT ? "'" : "");
      }
      vi = on[0] ? add_named(L, on, CWM_VAL_ACT) : add_unnamed(L, CWM_VAL_ACT);
      g->values[vi].producer = (int)i;
      n->out[n->nout++] = vi;
    }
  }
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    cwm_gnode *n = &g->nodes[i];
    if (!np) continue;
    n->in = cwm_xcalloc(np->n_input + 1, sizeof(int));
    for (size_t k = 0; k < np->n_input; k++) {
      const char *in = S(np->input[k]);
      int vi = in[0] ? map_find(L, in) : -1;
      if (in[0] && vi < 0)
        return ld_fail(L, "node '%s' (%s): input '%s' is never produced (no initializer, graph input or node "
                       "output has that name)", n->name, n->op_type, in);
      n->in[n->nin++] = vi;
    }
    if (load_attrs(L, (int)i, np)) return -1;
    if (!strcmp(g->nodes[i].op_type, "Constant") && load_constant(L, (int)i)) return -1;
  }
  if (topo_sort(L)) return -1;

  if (!gp->n_output) return ld_fail(L, "the graph has no outputs");
  g->outputs = cwm_xcalloc(gp->n_output, sizeof(int));
  for (size_t i = 0; i < gp->n_output; i++) {
    const char *nm = gp->output[i] ? S(gp->output[i]->name) : "";
    int vi = nm[0] ? map_find(L, nm) : -1;
    if (vi < 0) return ld_fail(L, "output '%s' is never produced", nm);
    g->outputs[g->noutputs++] = vi;
  }
  return 0;
}

cwm_graph *cwm_onnx_parse(const uint8_t *buf, size_t len, const char *path, cwm_err *err) {
  if (!path) path = "<memory>";
  if (len && pb_depth(buf, len, 0) >= PB_MAX_DEPTH) {
    cwm_fail(err, CWM_EPARSE, "%s: messages nested more than %d deep", path, PB_MAX_DEPTH);
    return NULL;
  }
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
  if (!m) {
    cwm_fail(err, CWM_EPARSE, "%s: not an ONNX model (truncated, or not protobuf)", path);
    return NULL;
  }
  ld L = {.path = path, .err = err};
  L.g = cwm_xcalloc(1, sizeof(cwm_graph));
  const char *base = strrchr(path, '/');
  L.g->name = cwm_xstrdup(base ? base + 1 : path);
  int rc = load_graph(&L, m);
  onnx__model_proto__free_unpacked(m, NULL);
  free(L.slot);
  if (rc) {
    cwm_graph_free(L.g);
    return NULL;
  }
  return L.g;
}

cwm_graph *cwm_onnx_load(const char *path, cwm_err *err) {
  size_t len = 0;
  char *buf = cwm_read_file(path, &len, err);
  if (!buf) return NULL;
  cwm_graph *g = cwm_onnx_parse((const uint8_t *)buf, len, path, err);
  free(buf);
  return g;
}

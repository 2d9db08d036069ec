/* netc.c: a partitioned graph as a C library. Storage first: every value read or written at run
 * time gets a place (the caller's input or output array, the weights, or an offset in one arena);
 * reshapes are views of their input; arena offsets are planned greedily by size over the values'
 * lifetimes in step order, so that two tensors share bytes only when no step sees both. Then the
 * code: the glue runtime, each task's kernel, and one call per step. */
#define _POSIX_C_SOURCE 200809L
#include "cwm/netc.h"

#include "cwm/codegen.h"
#include "cwm/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char cwm_netrt_source[];

void cwm_netc_opts_default(cwm_netc_opts *o) {
  memset(o, 0, sizeof *o);
  o->prefix = "model";
  o->cc = "cc";
  o->cflags = "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math";
}

/* ---- schedules from a log ---------------------------------------------------------------------- */

int cwm_netc_schedules(const cwm_partition *p, const char *log_path, cwm_netc_sched *sched, int *nbad, cwm_err *err) {
  memset(sched, 0, sizeof *sched * (size_t)p->ntasks);
  if (nbad) *nbad = 0;
  if (!log_path) return 0;
  char(*keys)[17] = calloc((size_t)p->ntasks + 1, sizeof *keys);
  cwm_dag **dags = calloc((size_t)p->ntasks + 1, sizeof *dags);
  for (int t = 0; t < p->ntasks; t++) cwm_workload_key(p->tasks[t].w, keys[t]);
  cwm_log_iter *it = cwm_log_iter_open(log_path, err);
  if (!it) {
    free(keys);
    free(dags);
    return err ? err->code : CWM_EIO;
  }
  int rc = 0;
  cwm_record r;
  for (;;) {
    int got = cwm_log_iter_next(it, &r, err);
    if (got < 0) {
      rc = err ? err->code : CWM_EIO;
      break;
    }
    if (got == 0) break;
    double cost = r.error ? CWM_FAILED_COST : cwm_record_cost(&r);
    for (int t = 0; t < p->ntasks && cost < CWM_FAILED_COST; t++) {
      if (strcmp(r.key, keys[t]) || (sched[t].from_log && sched[t].cost <= cost)) continue;
      /* the record must still replay on this workload (a log of another version may not) */
      cwm_err e = {0};
      if (!dags[t]) dags[t] = cwm_dag_new(p->tasks[t].w, &e);
      cwm_state *s = NULL;
      if (!dags[t] || cwm_state_replay(dags[t], r.steps, r.nsteps, &s, NULL, &e) || !cwm_state_is_complete(s)) {
        cwm_state_free(s);
        continue;
      }
      cwm_state_free(s);
      free(sched[t].steps);
      sched[t].steps = cwm_xmalloc(sizeof(cwm_step) * (size_t)(r.nsteps ? r.nsteps : 1));
      memcpy(sched[t].steps, r.steps, sizeof(cwm_step) * (size_t)r.nsteps);
      sched[t].nsteps = r.nsteps;
      sched[t].cost = cost;
      sched[t].from_log = 1;
    }
    cwm_record_free(&r);
  }
  if (nbad) *nbad = cwm_log_iter_nbad(it);
  cwm_log_iter_close(it);
  for (int t = 0; t < p->ntasks; t++) cwm_dag_free(dags[t]);
  free(dags);
  free(keys);
  return rc;
}

void cwm_netc_schedules_free(cwm_netc_sched *sched, int n) {
  for (int i = 0; sched && i < n; i++) free(sched[i].steps);
}

/* ---- storage ------------------------------------------------------------------------------------- */

enum { LOC_NONE, LOC_INPUT, LOC_OUTPUT, LOC_CONST, LOC_ARENA };

typedef struct {
  const cwm_partition *p;
  const cwm_graph *g;
  const cwm_netc_opts *o;
  int *root;        /* value -> value whose storage it uses (itself, or a view's source) */
  int *loc, *slot;  /* per root: LOC_*, input/output index */
  long long *off;   /* per root: byte offset in the arena or the weights */
  int *def, *last;  /* per root: first step writing it, last step reading it (-1: none) */
  int *used;        /* value read or written by some step */
  cwm_buf w;        /* the weights file's data */
  long long arena;
  cwm_err *err;
} plan;

static int is_view(const char *op) {
  return !strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze");
}

static int esize(int dtype) { return dtype == CWM_DT_INT64 ? 8 : 4; }

static long long vbytes(const cwm_graph *g, int v) {
  return (long long)cwm_value_numel(&g->values[v]) * esize(g->values[v].dtype);
}

/* Inputs and outputs of a step, as value lists. */
static int step_io(const plan *pl, const cwm_gstep *s, int *in, int *nin, int *out, int *nout) {
  *nin = *nout = 0;
  if (s->kind == CWM_GS_NODE) {
    const cwm_gnode *nd = &pl->g->nodes[s->node];
    for (int i = 0; i < nd->nin; i++)
      if (nd->in[i] >= 0 && *nin < 64) in[(*nin)++] = nd->in[i];
    for (int i = 0; i < nd->nout && *nout < 16; i++)
      if (nd->out[i] >= 0) out[(*nout)++] = nd->out[i];
    return 0;
  }
  for (int i = 0; i < s->nargs - 1; i++) in[(*nin)++] = s->args[i];
  out[(*nout)++] = s->args[s->nargs - 1];
  return 0;
}

static int plan_storage(plan *pl) {
  const cwm_graph *g = pl->g;
  const cwm_partition *p = pl->p;
  int nv = g->nvalues;
  pl->root = malloc(sizeof(int) * (size_t)nv);
  pl->loc = calloc((size_t)nv, sizeof(int));
  pl->slot = calloc((size_t)nv, sizeof(int));
  pl->off = calloc((size_t)nv, sizeof(long long));
  pl->def = malloc(sizeof(int) * (size_t)nv);
  pl->last = malloc(sizeof(int) * (size_t)nv);
  pl->used = calloc((size_t)nv, sizeof(int));
  for (int v = 0; v < nv; v++) pl->root[v] = v, pl->def[v] = -1, pl->last[v] = -1;
  int in[64], out[16], nin, nout;
  /* views: the output of a reshape is its input's bytes */
  for (int s = 0; s < p->nsteps; s++) {
    const cwm_gstep *st = &p->steps[s];
    if (st->kind == CWM_GS_NODE && is_view(g->nodes[st->node].op_type)) {
      const cwm_gnode *nd = &g->nodes[st->node];
      pl->root[nd->out[0]] = pl->root[nd->in[0]];
    }
  }
  for (int i = 0; i < g->ninputs; i++) pl->loc[g->inputs[i]] = LOC_INPUT, pl->slot[g->inputs[i]] = i;
  for (int s = 0; s < p->nsteps; s++) {
    step_io(pl, &p->steps[s], in, &nin, out, &nout);
    for (int i = 0; i < nin; i++) {
      int r = pl->root[in[i]];
      pl->used[in[i]] = pl->used[r] = 1;
      if (s > pl->last[r]) pl->last[r] = s;
    }
    for (int i = 0; i < nout; i++) {
      int r = pl->root[out[i]];
      pl->used[out[i]] = pl->used[r] = 1;
      if (pl->def[r] < 0) pl->def[r] = s;
      if (s > pl->last[r]) pl->last[r] = s;
    }
  }
  /* a graph output written by a step (not a view, not listed twice) is written in place */
  for (int i = 0; i < g->noutputs; i++) {
    int v = g->outputs[i];
    int twice = 0;
    for (int j = 0; j < i; j++) twice |= g->outputs[j] == v;
    pl->used[pl->root[v]] = 1;
    if (pl->root[v] == v && g->values[v].kind == CWM_VAL_ACT && !twice && pl->loc[v] == LOC_NONE)
      pl->loc[v] = LOC_OUTPUT, pl->slot[v] = i;
    else if (pl->last[pl->root[v]] < p->nsteps) /* read by the final copy */
      pl->last[pl->root[v]] = p->nsteps;
  }
  /* constants into the weights file, 64-byte aligned */
  cwm_buf_init(&pl->w);
  for (int v = 0; v < nv; v++) {
    if (!pl->used[v] || pl->root[v] != v || g->values[v].kind != CWM_VAL_CONST) continue;
    static const char zeros[64];
    cwm_buf_append(&pl->w, zeros, (64 - pl->w.len % 64) % 64);
    pl->loc[v] = LOC_CONST;
    pl->off[v] = (long long)pl->w.len;
    int64_t n = cwm_value_numel(&g->values[v]);
    if (g->values[v].dtype == CWM_DT_FLOAT || g->values[v].dtype == CWM_DT_INT64) {
      cwm_buf_append(&pl->w, g->values[v].data, (size_t)(n * esize(g->values[v].dtype)));
    } else { /* bool (and int32, already int64 at import) as the runtime stores it: float */
      const uint8_t *d = g->values[v].data;
      for (int64_t i = 0; i < n; i++) {
        float f = d[i] ? 1.0f : 0.0f;
        cwm_buf_append(&pl->w, &f, 4);
      }
    }
  }
  /* the arena: largest first, each at the lowest offset clear of every placed value it overlaps
   * in time */
  int *order = malloc(sizeof(int) * (size_t)nv), na = 0;
  for (int v = 0; v < nv; v++)
    if (pl->used[v] && pl->root[v] == v && pl->loc[v] == LOC_NONE) {
      if (pl->def[v] < 0)
        return cwm_fail(pl->err, CWM_EINTERNAL, "value '%s' is read but no step writes it", g->values[v].name);
      pl->loc[v] = LOC_ARENA;
      order[na++] = v;
    }
  for (int i = 1; i < na; i++) /* by size, then by first use: stable and deterministic */
    for (int j = i; j > 0; j--) {
      long long a = vbytes(g, order[j - 1]), b = vbytes(g, order[j]);
      if (a > b || (a == b && pl->def[order[j - 1]] <= pl->def[order[j]])) break;
      int t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  pl->arena = 0;
  for (int i = 0; i < na; i++) {
    int v = order[i];
    long long size = (vbytes(g, v) + 63) / 64 * 64, at = 0;
    for (int moved = 1; moved;) {
      moved = 0;
      for (int j = 0; j < i; j++) {
        int u = order[j];
        if (pl->last[u] < pl->def[v] || pl->last[v] < pl->def[u]) continue;
        long long us = (vbytes(g, u) + 63) / 64 * 64;
        if (at < pl->off[u] + us && pl->off[u] < at + size) at = pl->off[u] + us, moved = 1;
      }
    }
    pl->off[v] = at;
    if (at + size > pl->arena) pl->arena = at + size;
  }
  free(order);
  return 0;
}

/* A pointer expression for value v, of C type ty. */
static void vptr(const plan *pl, int v, const char *ty, cwm_buf *b) {
  int r = pl->root[v];
  switch (pl->loc[r]) {
  case LOC_INPUT: cwm_buf_printf(b, "((%s *)in[%d])", ty, pl->slot[r]); break;
  case LOC_OUTPUT: cwm_buf_printf(b, "((%s *)out[%d])", ty, pl->slot[r]); break;
  case LOC_CONST: cwm_buf_printf(b, "((%s *)(m->w + %lld))", ty, pl->off[r]); break;
  default: cwm_buf_printf(b, "((%s *)(m->arena + %lld))", ty, pl->off[r]); break;
  }
}

/* ---- glue ---------------------------------------------------------------------------------------- */

static void ints(cwm_buf *b, const int64_t *x, int n) {
  cwm_buf_puts(b, "(const int64_t[]){");
  for (int i = 0; i < n; i++) cwm_buf_printf(b, "%s%lld", i ? ", " : "", (long long)x[i]);
  if (!n) cwm_buf_puts(b, "0");
  cwm_buf_puts(b, "}");
}

/* Strides of input value v read over the output shape (numpy broadcasting: 0 on broadcast dims). */
static void bstrides(const cwm_value *v, const cwm_value *o, int64_t *st) {
  int64_t s = 1;
  for (int d = o->ndim - 1; d >= 0; d--) {
    int vd = d - (o->ndim - v->ndim);
    if (vd < 0) {
      st[d] = 0;
      continue;
    }
    st[d] = v->shape[vd] == 1 && o->shape[d] != 1 ? 0 : s;
    if (v->shape[vd] == 1) st[d] = 0;
    s *= v->shape[vd];
  }
}

static int64_t prod(const int64_t *x, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++) p *= x[i];
  return p;
}

static int node_fail(plan *pl, int n, const char *why) {
  const cwm_gnode *nd = &pl->g->nodes[n];
  return cwm_fail(pl->err, CWM_EPARSE, "node '%s' (%s): %s", nd->name, nd->op_type, why);
}

static const int64_t *const_ints(const plan *pl, int v, int *n) {
  if (v < 0 || pl->g->values[v].kind != CWM_VAL_CONST || pl->g->values[v].dtype != CWM_DT_INT64) return NULL;
  *n = (int)cwm_value_numel(&pl->g->values[v]);
  return pl->g->values[v].data;
}

static int const_float(const plan *pl, int v, float *x) {
  if (v < 0 || pl->g->values[v].kind != CWM_VAL_CONST || pl->g->values[v].dtype != CWM_DT_FLOAT ||
      cwm_value_numel(&pl->g->values[v]) != 1)
    return 0;
  *x = ((const float *)pl->g->values[v].data)[0];
  return 1;
}

static int norm_axis(int64_t a, int nd) { return (int)(a < 0 ? a + nd : a); }

static int emit_glue(plan *pl, int n, cwm_buf *b) {
  const cwm_graph *g = pl->g;
  const cwm_gnode *nd = &g->nodes[n];
  const char *op = nd->op_type;
  if (is_view(op)) return 0;
  const cwm_value *o = &g->values[nd->out[0]];
  const cwm_value *x = nd->nin > 0 && nd->in[0] >= 0 ? &g->values[nd->in[0]] : NULL;
  int64_t numel = cwm_value_numel(o);
  /* runtime arithmetic is on float (bool kept as float 0/1); int64 only moves */
  static const char *const moves[] = {"Transpose", "Concat", "Slice", "Gather", "Expand", "Split", "Cast"};
  int moving = 0;
  for (size_t i = 0; i < sizeof moves / sizeof *moves; i++) moving |= !strcmp(op, moves[i]);
  if (!moving)
    for (int i = 0; i < nd->nin; i++)
      if (nd->in[i] >= 0 && g->values[nd->in[i]].dtype == CWM_DT_INT64 &&
          !(i > 0 && g->values[nd->in[i]].kind == CWM_VAL_CONST))
        return node_fail(pl, n, "arithmetic on int64 tensors at run time is not supported (only float)");
  static const struct { const char *op; const char *code; } bins[] = {
      {"Add", "RT_ADD"}, {"Sub", "RT_SUB"}, {"Mul", "RT_MUL"}, {"Div", "RT_DIV"},   {"Pow", "RT_POW"}, {"Max", "RT_MAX"},
      {"Min", "RT_MIN"}, {"Equal", "RT_EQ"}, {"Less", "RT_LT"}, {"Greater", "RT_GT"}, {"And", "RT_AND"}, {"Or", "RT_OR"}};
  for (size_t i = 0; i < sizeof bins / sizeof *bins; i++) {
    if (strcmp(op, bins[i].op)) continue;
    if (nd->nin != 2) return node_fail(pl, n, "only two inputs are supported at run time");
    int64_t as[CWM_GRAPH_MAX_DIMS], bs[CWM_GRAPH_MAX_DIMS];
    bstrides(&g->values[nd->in[0]], o, as);
    bstrides(&g->values[nd->in[1]], o, bs);
    cwm_buf_printf(b, "  rt_binary(%s, %d, ", bins[i].code, o->ndim);
    ints(b, o->shape, o->ndim);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->in[0], "float", b);
    cwm_buf_puts(b, ", ");
    ints(b, as, o->ndim);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->in[1], "float", b);
    cwm_buf_puts(b, ", ");
    ints(b, bs, o->ndim);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->out[0], "float", b);
    cwm_buf_puts(b, ");\n");
    return 0;
  }
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
      if (nd->nin > 1 && nd->in[1] >= 0 && !const_float(pl, nd->in[1], &p0))
        return node_fail(pl, n, "Clip's min must be a constant");
      if (nd->nin > 2 && nd->in[2] >= 0 && !const_float(pl, nd->in[2], &p1))
        return node_fail(pl, n, "Clip's max must be a constant");
    } else if (!strcmp(op, "LeakyRelu")) {
      p0 = cwm_gnode_attr_float(nd, "alpha", 0.01f);
    } else if (!strcmp(op, "HardSigmoid")) {
      p0 = cwm_gnode_attr_float(nd, "alpha", 0.2f), p1 = cwm_gnode_attr_float(nd, "beta", 0.5f);
    }
    cwm_buf_printf(b, "  rt_unary(%s, %lld, ", uns[i].code, (long long)numel);
    vptr(pl, nd->in[0], "float", b);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->out[0], "float", b);
    cwm_buf_printf(b, ", %.9gf, %.9gf);\n", p0, p1);
    return 0;
  }
  if (!strcmp(op, "Where")) {
    int64_t cs[CWM_GRAPH_MAX_DIMS], as[CWM_GRAPH_MAX_DIMS], bs[CWM_GRAPH_MAX_DIMS];
    bstrides(&g->values[nd->in[0]], o, cs);
    bstrides(&g->values[nd->in[1]], o, as);
    bstrides(&g->values[nd->in[2]], o, bs);
    cwm_buf_printf(b, "  rt_where(%d, ", o->ndim);
    ints(b, o->shape, o->ndim);
    for (int k = 0; k < 3; k++) {
      cwm_buf_puts(b, ", ");
      vptr(pl, nd->in[k], "float", b);
      cwm_buf_puts(b, ", ");
      ints(b, k == 0 ? cs : k == 1 ? as : bs, o->ndim);
    }
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->out[0], "float", b);
    cwm_buf_puts(b, ");\n");
    return 0;
  }
  if (!strcmp(op, "Cast")) {
    cwm_buf_printf(b, "  rt_cast(%lld, ", (long long)numel);
    vptr(pl, nd->in[0], "void", b);
    cwm_buf_printf(b, ", %d, ", x->dtype == CWM_DT_INT64 ? 7 : x->dtype == CWM_DT_BOOL ? 9 : 1);
    vptr(pl, nd->out[0], "void", b);
    cwm_buf_printf(b, ", %d);\n", o->dtype == CWM_DT_INT64 ? 7 : o->dtype == CWM_DT_BOOL ? 9 : 1);
    return 0;
  }
  if (!strcmp(op, "Transpose")) {
    const cwm_attr *pa = cwm_gnode_attr(nd, "perm");
    cwm_buf_printf(b, "  rt_transpose(%d, ", x->ndim);
    ints(b, x->shape, x->ndim);
    cwm_buf_puts(b, ", (const int[]){");
    for (int d = 0; d < x->ndim; d++)
      cwm_buf_printf(b, "%s%lld", d ? ", " : "", pa && pa->n == x->ndim ? (long long)pa->ints[d] : (long long)(x->ndim - 1 - d));
    if (!x->ndim) cwm_buf_puts(b, "0");
    cwm_buf_puts(b, "}, ");
    vptr(pl, nd->in[0], "void", b);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->out[0], "void", b);
    cwm_buf_printf(b, ", %d);\n", esize(x->dtype));
    return 0;
  }
  if (!strcmp(op, "Expand")) {
    int64_t st[CWM_GRAPH_MAX_DIMS];
    bstrides(x, o, st);
    cwm_buf_printf(b, "  rt_bcast(%d, ", o->ndim);
    ints(b, o->shape, o->ndim);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->in[0], "void", b);
    cwm_buf_puts(b, ", ");
    ints(b, st, o->ndim);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->out[0], "void", b);
    cwm_buf_printf(b, ", %d);\n", esize(x->dtype));
    return 0;
  }
  if (!strcmp(op, "Concat")) {
    int axis = norm_axis(cwm_gnode_attr_int(nd, "axis", 0), o->ndim);
    cwm_buf_printf(b, "  rt_concat(%d, (const void *const[]){", nd->nin);
    for (int i = 0; i < nd->nin; i++) {
      if (i) cwm_buf_puts(b, ", ");
      vptr(pl, nd->in[i], "void", b);
    }
    cwm_buf_puts(b, "}, (const int64_t[]){");
    for (int i = 0; i < nd->nin; i++) {
      const cwm_value *v = &g->values[nd->in[i]];
      cwm_buf_printf(b, "%s%lld", i ? ", " : "", (long long)prod(v->shape, axis, v->ndim));
    }
    cwm_buf_printf(b, "}, %lld, ", (long long)prod(o->shape, 0, axis));
    vptr(pl, nd->out[0], "void", b);
    cwm_buf_printf(b, ", %d);\n", esize(o->dtype));
    return 0;
  }
  if (!strcmp(op, "Slice") || !strcmp(op, "Split")) {
    int nouts = !strcmp(op, "Split") ? nd->nout : 1;
    int64_t along = 0;
    for (int k = 0; k < nouts; k++) {
      const cwm_value *ov = &g->values[nd->out[k]];
      int64_t start[CWM_GRAPH_MAX_DIMS] = {0}, step[CWM_GRAPH_MAX_DIMS];
      for (int d = 0; d < x->ndim; d++) step[d] = 1;
      if (!strcmp(op, "Split")) {
        int axis = norm_axis(cwm_gnode_attr_int(nd, "axis", 0), x->ndim);
        start[axis] = along;
        along += ov->shape[axis];
      } else {
        int ns = 0, ne = 0, na = 0, nst = 0;
        const int64_t *st = const_ints(pl, nd->nin > 1 ? nd->in[1] : -1, &ns);
        const int64_t *en = const_ints(pl, nd->nin > 2 ? nd->in[2] : -1, &ne);
        const int64_t *ax = nd->nin > 3 ? const_ints(pl, nd->in[3], &na) : NULL;
        const int64_t *sp = nd->nin > 4 ? const_ints(pl, nd->in[4], &nst) : NULL;
        if (!st || !en) return node_fail(pl, n, "Slice's starts and ends must be constants (opset 10 or later)");
        for (int i = 0; i < ns; i++) {
          int a = ax && i < na ? norm_axis(ax[i], x->ndim) : i;
          int64_t dim = x->shape[a], s = st[i], stp = sp && i < nst ? sp[i] : 1;
          if (s < 0) s += dim;
          if (stp > 0) s = s < 0 ? 0 : s > dim ? dim : s;
          else s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
          start[a] = s, step[a] = stp;
        }
      }
      cwm_buf_printf(b, "  rt_slice(%d, ", x->ndim);
      ints(b, x->shape, x->ndim);
      cwm_buf_puts(b, ", ");
      ints(b, start, x->ndim);
      cwm_buf_puts(b, ", ");
      ints(b, step, x->ndim);
      cwm_buf_puts(b, ", ");
      ints(b, ov->shape, ov->ndim);
      cwm_buf_puts(b, ", ");
      vptr(pl, nd->in[0], "void", b);
      cwm_buf_puts(b, ", ");
      vptr(pl, nd->out[k], "void", b);
      cwm_buf_printf(b, ", %d);\n", esize(x->dtype));
    }
    return 0;
  }
  if (!strcmp(op, "Gather")) {
    const cwm_value *iv = &g->values[nd->in[1]];
    if (iv->dtype != CWM_DT_INT64) return node_fail(pl, n, "Gather's indices must be int64 at run time (int32 index inputs are not supported)");
    int axis = norm_axis(cwm_gnode_attr_int(nd, "axis", 0), x->ndim);
    cwm_buf_puts(b, "  if (rt_gather(");
    vptr(pl, nd->in[0], "void", b);
    cwm_buf_printf(b, ", %lld, %lld, %lld, ", (long long)prod(x->shape, 0, axis), (long long)x->shape[axis],
                   (long long)prod(x->shape, axis + 1, x->ndim));
    vptr(pl, nd->in[1], "int64_t", b);
    cwm_buf_printf(b, ", %lld, ", (long long)cwm_value_numel(iv));
    vptr(pl, nd->out[0], "void", b);
    cwm_buf_printf(b, ", %d)) return 2;\n", esize(x->dtype));
    return 0;
  }
  if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool") || !strcmp(op, "GlobalAveragePool")) {
    if (x->ndim != 4) return node_fail(pl, n, "only 2-D pooling (NCHW) is supported");
    int global = !strcmp(op, "GlobalAveragePool");
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
    vptr(pl, nd->in[0], "float", b);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->out[0], "float", b);
    cwm_buf_puts(b, ");\n");
    return 0;
  }
  if (!strcmp(op, "ReduceMean") || !strcmp(op, "ReduceSum") || !strcmp(op, "ReduceMax")) {
    int mark[CWM_GRAPH_MAX_DIMS] = {0}, na = 0;
    const cwm_attr *aa = cwm_gnode_attr(nd, "axes");
    const int64_t *ax = NULL;
    if (aa && aa->kind == CWM_ATTR_INTS) ax = aa->ints, na = aa->n;
    else if (nd->nin > 1 && nd->in[1] >= 0 && !(ax = const_ints(pl, nd->in[1], &na)))
      return node_fail(pl, n, "the axes must be constant");
    if (!ax) /* all axes */
      for (int d = 0; d < x->ndim; d++) mark[d] = 1;
    for (int i = 0; ax && i < na; i++) mark[norm_axis(ax[i], x->ndim)] = 1;
    int lo = -1, hi = -1;
    for (int d = 0; d < x->ndim; d++)
      if (mark[d]) {
        if (lo < 0) lo = d;
        else if (hi != d - 1) return node_fail(pl, n, "the reduced axes must be adjacent");
        hi = d;
      }
    if (lo < 0) lo = 0, hi = -1;
    cwm_buf_printf(b, "  rt_reduce(%d, %lld, %lld, %lld, ", !strcmp(op, "ReduceSum") ? 0 : !strcmp(op, "ReduceMean") ? 1 : 2,
                   (long long)prod(x->shape, 0, lo), (long long)prod(x->shape, lo, hi + 1),
                   (long long)prod(x->shape, hi + 1, x->ndim));
    vptr(pl, nd->in[0], "float", b);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->out[0], "float", b);
    cwm_buf_puts(b, ");\n");
    return 0;
  }
  if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax")) {
    int axis = norm_axis(cwm_gnode_attr_int(nd, "axis", g->opset >= 13 ? -1 : 1), x->ndim);
    int64_t inner = g->opset >= 13 ? prod(x->shape, axis + 1, x->ndim) : 1;
    int64_t len = g->opset >= 13 ? x->shape[axis] : prod(x->shape, axis, x->ndim);
    cwm_buf_printf(b, "  rt_softmax(%d, %lld, %lld, %lld, ", !strcmp(op, "LogSoftmax"), (long long)prod(x->shape, 0, axis),
                   (long long)len, (long long)inner);
    vptr(pl, nd->in[0], "float", b);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->out[0], "float", b);
    cwm_buf_puts(b, ");\n");
    return 0;
  }
  if (!strcmp(op, "BatchNormalization")) {
    if (x->ndim < 2) return node_fail(pl, n, "the input needs a channel dimension");
    cwm_buf_printf(b, "  rt_batchnorm(%lld, %lld, %lld, ", (long long)x->shape[0], (long long)x->shape[1],
                   (long long)prod(x->shape, 2, x->ndim));
    for (int k = 0; k < 5; k++) {
      vptr(pl, nd->in[k], "float", b);
      cwm_buf_puts(b, ", ");
    }
    cwm_buf_printf(b, "%.9gf, ", cwm_gnode_attr_float(nd, "epsilon", 1e-5f));
    vptr(pl, nd->out[0], "float", b);
    cwm_buf_puts(b, ");\n");
    return 0;
  }
  if (!strcmp(op, "Conv")) {
    const cwm_value *w = &g->values[nd->in[1]];
    if (x->ndim != 4) return node_fail(pl, n, "only 2-D convolutions (NCHW) are supported");
    const cwm_attr *st = cwm_gnode_attr(nd, "strides"), *pd = cwm_gnode_attr(nd, "pads");
    int sh = st && st->n == 2 ? (int)st->ints[0] : 1, sw = st && st->n == 2 ? (int)st->ints[1] : 1;
    int pt = pd && pd->n == 4 ? (int)pd->ints[0] : 0, pl_ = pd && pd->n == 4 ? (int)pd->ints[1] : 0;
    cwm_buf_printf(b, "  rt_conv2d(%lld, %lld, %lld, %lld, %lld, %lld, %lld, %d, %d, %d, %d, %d, %d, %lld, ",
                   (long long)x->shape[0], (long long)x->shape[1], (long long)x->shape[2], (long long)x->shape[3],
                   (long long)w->shape[0], (long long)o->shape[2], (long long)o->shape[3], (int)w->shape[2],
                   (int)w->shape[3], sh, sw, pt, pl_, (long long)cwm_gnode_attr_int(nd, "group", 1));
    vptr(pl, nd->in[0], "float", b);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->in[1], "float", b);
    cwm_buf_puts(b, ", ");
    if (nd->nin > 2 && nd->in[2] >= 0) vptr(pl, nd->in[2], "float", b);
    else cwm_buf_puts(b, "NULL");
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->out[0], "float", b);
    cwm_buf_puts(b, ");\n");
    return 0;
  }
  if (!strcmp(op, "MatMul")) {
    const cwm_value *a = x, *bb = &g->values[nd->in[1]];
    int64_t M = a->ndim >= 2 ? a->shape[a->ndim - 2] : 1, K = a->shape[a->ndim - 1];
    int64_t N = bb->ndim >= 2 ? bb->shape[bb->ndim - 1] : 1;
    int ob = o->ndim - (a->ndim >= 2 ? 1 : 0) - (bb->ndim >= 2 ? 1 : 0); /* batch dims of the output */
    if (ob < 0) ob = 0;
    int64_t batch = prod(o->shape, 0, ob);
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
    vptr(pl, nd->in[0], "float", b);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->in[1], "float", b);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->out[0], "float", b);
    cwm_buf_puts(b, ");\n");
    return 0;
  }
  if (!strcmp(op, "Gemm")) {
    int ta = (int)cwm_gnode_attr_int(nd, "transA", 0), tb = (int)cwm_gnode_attr_int(nd, "transB", 0);
    int64_t M = o->shape[0], N = o->shape[1], K = ta ? x->shape[0] : x->shape[1];
    int64_t cs0 = 0, cs1 = 0;
    int hasc = nd->nin > 2 && nd->in[2] >= 0;
    if (hasc) {
      const cwm_value *cv = &g->values[nd->in[2]];
      int64_t st[2];
      bstrides(cv, o, st);
      cs0 = st[0], cs1 = st[1];
    }
    cwm_buf_printf(b, "  rt_gemm(%lld, %lld, %lld, %d, %d, %.9gf, %.9gf, ", (long long)M, (long long)N, (long long)K, ta,
                   tb, cwm_gnode_attr_float(nd, "alpha", 1), cwm_gnode_attr_float(nd, "beta", 1));
    vptr(pl, nd->in[0], "float", b);
    cwm_buf_puts(b, ", ");
    vptr(pl, nd->in[1], "float", b);
    cwm_buf_puts(b, ", ");
    if (hasc) vptr(pl, nd->in[2], "float", b);
    else cwm_buf_puts(b, "NULL");
    cwm_buf_printf(b, ", %lld, %lld, ", (long long)cs0, (long long)cs1);
    vptr(pl, nd->out[0], "float", b);
    cwm_buf_puts(b, ");\n");
    return 0;
  }
  return node_fail(pl, n, "this op cannot run in a compiled network (it should have been folded at import)");
}

/* ---- the library --------------------------------------------------------------------------------- */

static int ident_ok(const char *s) {
  if (!s || !s[0] || strlen(s) > 40 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
    return 0;
  for (const char *q = s; *q; q++)
    if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_')) return 0;
  return 1;
}

static uint64_t wsum(const void *data, size_t n) { return cwm_hash64(data, n); }

static void dims_comment(const cwm_value *v, cwm_buf *b) {
  char sh[256];
  cwm_value_shape_str(v, sh, sizeof sh);
  cwm_buf_printf(b, "%s %s", v->dtype == CWM_DT_INT64 ? "int64" : "float32", sh);
}

static int write(const char *dir, const char *file, const cwm_buf *b, cwm_err *err) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  return cwm_write_file_atomic(path, b->s ? b->s : "", b->len, err);
}

int cwm_netc_write(const cwm_partition *p, const cwm_netc_sched *sched, const char *dir, const cwm_netc_opts *o,
                   cwm_netc_result *res, cwm_err *err) {
  memset(res, 0, sizeof *res);
  const char *P = o->prefix ? o->prefix : "model";
  if (!ident_ok(P)) return cwm_fail(err, CWM_EUSAGE, "the library name '%s' is not a C identifier (at most 40 characters)", P);
  const cwm_graph *g = p->g;
  plan pl;
  memset(&pl, 0, sizeof pl);
  pl.p = p, pl.g = g, pl.o = o, pl.err = err;
  int rc = plan_storage(&pl);
  cwm_buf c, h, r, mk, cm;
  cwm_buf_init(&c);
  cwm_buf_init(&h);
  cwm_buf_init(&r);
  cwm_buf_init(&mk);
  cwm_buf_init(&cm);
  cwm_kernel *ks = calloc((size_t)p->ntasks + 1, sizeof *ks);
  int *have = calloc((size_t)p->ntasks + 1, sizeof(int));
  char src[200];
  cwm_codegen_safe_name(o->source ? o->source : g->name, src, sizeof src);
  res->ntasks = p->ntasks;
  res->nsteps = p->nsteps;
  for (int t = 0; t < p->ntasks && !rc; t++) {
    cwm_dag *d = cwm_dag_new(p->tasks[t].w, err);
    if (!d) {
      rc = err->code;
      break;
    }
    cwm_state *s = NULL;
    if (sched && sched[t].from_log) {
      rc = cwm_state_replay(d, sched[t].steps, sched[t].nsteps, &s, NULL, err);
      res->tuned++;
    } else {
      s = cwm_state_init(d);
    }
    if (!rc) {
      char fn[96];
      snprintf(fn, sizeof fn, "%s_k%d", P, t);
      cwm_codegen_opts co = {.fn_name = fn, .vec_lanes = o->vec_lanes};
      rc = cwm_codegen(s, &co, &ks[t], err);
      have[t] = !rc;
    }
    cwm_state_free(s);
    cwm_dag_free(d);
  }
  /* packed weights: one buffer per (kernel argument, value), converted at create time */
  int npk = 0, pkcap = 16;
  int(*pk)[3] = malloc(sizeof *pk * (size_t)pkcap); /* task, arg, value */
  for (int s = 0; s < p->nsteps && !rc; s++) {
    const cwm_gstep *st = &p->steps[s];
    if (st->kind != CWM_GS_KERNEL) continue;
    res->kernel_steps++;
    const cwm_kernel *k = &ks[st->task];
    if (k->nargs != st->nargs) {
      rc = cwm_fail(err, CWM_EINTERNAL, "task %s: the kernel takes %d arguments, the step gives %d", p->tasks[st->task].name,
                    k->nargs, st->nargs);
      break;
    }
    for (int a = 0; a < k->nargs && !rc; a++) {
      int v = st->args[a];
      long want = k->src_len[a] ? k->src_len[a] : k->arg_len[a];
      if (cwm_value_numel(&g->values[v]) != want)
        rc = cwm_fail(err, CWM_EINTERNAL, "task %s: argument %d has %lld elements, the kernel wants %ld",
                      p->tasks[st->task].name, a, (long long)cwm_value_numel(&g->values[v]), want);
      if (!k->src_len[a]) continue;
      if (pl.loc[pl.root[v]] != LOC_CONST) {
        rc = cwm_fail(err, CWM_EINTERNAL, "task %s: a packed argument is not a constant", p->tasks[st->task].name);
        break;
      }
      int seen = 0;
      for (int i = 0; i < npk; i++) seen |= pk[i][0] == st->task && pk[i][1] == a && pk[i][2] == v;
      if (seen) continue;
      if (npk == pkcap) pk = cwm_xrealloc(pk, sizeof *pk * (size_t)(pkcap *= 2));
      pk[npk][0] = st->task, pk[npk][1] = a, pk[npk][2] = v;
      npk++;
      res->packed_bytes += (long long)k->arg_len[a] * 4;
    }
  }
  uint64_t wh = wsum(pl.w.s ? pl.w.s : "", pl.w.len);
  if (!rc) {
    /* ---- header */
    cwm_buf_printf(&h, "/* %s.h: the network %s compiled by cwm %s.\n *\n", P, src, CWM_VERSION);
    cwm_buf_printf(&h, " * Inputs (in this order, row-major contiguous arrays):\n");
    for (int i = 0; i < g->ninputs; i++) {
      char nm[200];
      cwm_codegen_safe_name(g->values[g->inputs[i]].name, nm, sizeof nm);
      cwm_buf_printf(&h, " *   %d  %-20s ", i, nm);
      dims_comment(&g->values[g->inputs[i]], &h);
      cwm_buf_puts(&h, "\n");
    }
    cwm_buf_printf(&h, " * Outputs:\n");
    for (int i = 0; i < g->noutputs; i++) {
      char nm[200];
      cwm_codegen_safe_name(g->values[g->outputs[i]].name, nm, sizeof nm);
      cwm_buf_printf(&h, " *   %d  %-20s ", i, nm);
      dims_comment(&g->values[g->outputs[i]], &h);
      cwm_buf_puts(&h, "\n");
    }
    cwm_buf_printf(&h,
                   " *\n * %s_create reads the weights file (%s_weights.bin, %lld bytes, checked against the\n"
                   " * size and checksum it was compiled with) and returns NULL with errno set on failure\n"
                   " * (ENOENT, EINVAL for a file of another compile, ENOMEM). %s_run computes the outputs\n"
                   " * from the inputs: 0 on success, 2 when an index input is out of range. One model\n"
                   " * object runs one inference at a time (its arena holds the intermediate tensors:\n"
                   " * %lld bytes). Kernels use OpenMP: link with -fopenmp; OMP_NUM_THREADS sets the threads.\n */\n",
                   P, P, (long long)pl.w.len, P, pl.arena);
    cwm_buf_printf(&h, "#ifndef %s_H\n#define %s_H\n\n", P, P);
    cwm_buf_printf(&h, "#define %s_NUM_INPUTS %d\n#define %s_NUM_OUTPUTS %d\n", P, g->ninputs, P, g->noutputs);
    cwm_buf_printf(&h, "/* bytes of each input and output */\nstatic const long long %s_input_bytes[] = {", P);
    for (int i = 0; i < g->ninputs; i++) cwm_buf_printf(&h, "%s%lld", i ? ", " : "", vbytes(g, g->inputs[i]));
    cwm_buf_printf(&h, "%s};\nstatic const long long %s_output_bytes[] = {", g->ninputs ? "" : "0", P);
    for (int i = 0; i < g->noutputs; i++) cwm_buf_printf(&h, "%s%lld", i ? ", " : "", vbytes(g, g->outputs[i]));
    cwm_buf_printf(&h, "};\n\ntypedef struct %s %s;\n", P, P);
    cwm_buf_printf(&h, "%s *%s_create(const char *weights_path);\n", P, P);
    cwm_buf_printf(&h, "int %s_run(%s *m, const void *const *inputs, void *const *outputs);\n", P, P);
    cwm_buf_printf(&h, "void %s_free(%s *m);\n\n#endif\n", P, P);

    /* ---- library */
    cwm_buf_printf(&c, "/* %s.c: the network %s compiled by cwm %s: %d tasks (%d tuned), %d steps.\n", P, src, CWM_VERSION,
                   p->ntasks, res->tuned, p->nsteps);
    cwm_buf_printf(&c, " * Build: see Makefile (%s %s). */\n", o->cc, o->cflags);
    cwm_buf_puts(&c, "#define _POSIX_C_SOURCE 200809L\n");
    cwm_buf_printf(&c, "#include \"%s.h\"\n#include <errno.h>\n#include <stdio.h>\n", P);
    cwm_buf_puts(&c, cwm_measure_prelude());
    cwm_buf_puts(&c, cwm_netrt_source);
    for (int t = 0; t < p->ntasks; t++) {
      char wn[200];
      cwm_codegen_safe_name(p->tasks[t].spec, wn, sizeof wn);
      cwm_buf_printf(&c, "\n/* ---- task %s: %s, run %g times; %s */\n", p->tasks[t].name, wn, p->tasks[t].weight,
                     sched && sched[t].from_log ? "tuned schedule from the log" : "untuned (no record in the log)");
      cwm_buf_puts(&c, ks[t].body);
    }
    cwm_buf_printf(&c, "\nstruct %s {\n  unsigned char *w, *arena;\n  float *pk[%d];\n};\n\n", P, npk ? npk : 1);
    cwm_buf_printf(&c, "void %s_free(%s *m) {\n  if (!m) return;\n  for (int i = 0; i < %d; i++) free(m->pk[i]);\n"
                       "  free(m->w);\n  free(m->arena);\n  free(m);\n}\n\n", P, P, npk);
    cwm_buf_printf(&c, "static unsigned long long %s_hash(const unsigned char *p, size_t n) {\n", P);
    cwm_buf_puts(&c, "  /* the same FNV-1a as cwm_hash64 */\n  unsigned long long h = 1469598103934665603ULL;\n"
                     "  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;\n  return h;\n}\n\n");
    cwm_buf_printf(&c, "%s *%s_create(const char *weights_path) {\n", P, P);
    cwm_buf_printf(&c, "  %s *m = calloc(1, sizeof *m);\n  if (!m) return NULL;\n", P);
    cwm_buf_printf(&c, "  FILE *f = fopen(weights_path, \"rb\");\n  if (!f) { free(m); return NULL; }\n");
    cwm_buf_printf(&c, "  char magic[16];\n  unsigned long long hdr[2];\n"
                       "  m->w = aligned_alloc(64, %lldULL);\n"
                       "  int ok = m->w && fread(magic, 1, 16, f) == 16 && !memcmp(magic, \"CWM-WEIGHTS-v1\\n\", 16) &&\n"
                       "           fread(hdr, 8, 2, f) == 2 && hdr[0] == %lldULL && hdr[1] == %lluULL &&\n"
                       "           fread(m->w, 1, %lldULL, f) == %lldULL && fgetc(f) == EOF;\n  fclose(f);\n",
                   ((long long)pl.w.len + 63) / 64 * 64 + 64, (long long)pl.w.len, (unsigned long long)wh,
                   (long long)pl.w.len, (long long)pl.w.len);
    cwm_buf_printf(&c, "  if (!ok || %s_hash(m->w, %lldULL) != %lluULL) { %s_free(m); errno = EINVAL; return NULL; }\n", P,
                   (long long)pl.w.len, (unsigned long long)wh, P);
    cwm_buf_printf(&c, "  m->arena = aligned_alloc(64, %lldULL);\n  if (!m->arena) { %s_free(m); errno = ENOMEM; return NULL; }\n",
                   pl.arena + 64, P);
    for (int i = 0; i < npk; i++) {
      const cwm_kernel *k = &ks[pk[i][0]];
      int a = pk[i][1];
      cwm_buf_printf(&c, "  if (!(m->pk[%d] = aligned_alloc(64, %ldULL))) { %s_free(m); errno = ENOMEM; return NULL; }\n", i,
                     (k->arg_len[a] * 4 + 63) / 64 * 64, P);
      cwm_buf_printf(&c, "  %s(", k->pack_fn[a]);
      vptr(&pl, pk[i][2], "const float", &c);
      cwm_buf_printf(&c, ", m->pk[%d]);\n", i);
    }
    cwm_buf_puts(&c, "  return m;\n}\n\n");
    /* -DCWM_PROFILE: seconds per step, summed over runs (the runner's -p prints them) */
    cwm_buf_printf(&c, "#ifdef CWM_PROFILE\n#include <time.h>\ndouble %s_prof_sec[%d];\nconst char *const %s_prof_name[%d] = {\n", P,
                   p->nsteps + 1, P, p->nsteps + 1);
    for (int s = 0; s < p->nsteps; s++) {
      const cwm_gstep *st = &p->steps[s];
      char nm[200], what[300];
      cwm_codegen_safe_name(st->node >= 0 ? g->nodes[st->node].name : "", nm, sizeof nm);
      if (st->kind == CWM_GS_KERNEL) snprintf(what, sizeof what, "%s at %s", p->tasks[st->task].name, nm);
      else if (st->kind == CWM_GS_NODE) snprintf(what, sizeof what, "%s %s", g->nodes[st->node].op_type, nm);
      else snprintf(what, sizeof what, "%s %s", st->kind == CWM_GS_GELU ? "gelu" : "layout transpose", nm);
      cwm_buf_printf(&c, "  \"%s\",\n", what);
    }
    cwm_buf_printf(&c, "  \"output copies\"};\nconst int %s_prof_steps = %d;\n", P, p->nsteps + 1);
    cwm_buf_puts(&c, "static double prof_now(void) {\n  struct timespec t;\n  clock_gettime(CLOCK_MONOTONIC, &t);\n"
                     "  return t.tv_sec + t.tv_nsec * 1e-9;\n}\n");
    cwm_buf_printf(&c, "#define PROF_START double prof_t = prof_now()\n"
                       "#define PROF(i) do { double t_ = prof_now(); %s_prof_sec[i] += t_ - prof_t; prof_t = t_; } while (0)\n"
                       "#else\n#define PROF_START\n#define PROF(i)\n#endif\n\n", P);
    cwm_buf_printf(&c, "int %s_run(%s *m, const void *const *in, void *const *out) {\n", P, P);
    cwm_buf_puts(&c, "  (void)in; (void)out;\n  PROF_START;\n");
    for (int s = 0; s < p->nsteps && !rc; s++) {
      const cwm_gstep *st = &p->steps[s];
      if (s) cwm_buf_printf(&c, "  PROF(%d);\n", s - 1);
      const char *nname = st->node >= 0 ? g->nodes[st->node].name : "";
      char nm[200];
      cwm_codegen_safe_name(nname, nm, sizeof nm);
      if (st->kind == CWM_GS_KERNEL) {
        const cwm_kernel *k = &ks[st->task];
        cwm_buf_printf(&c, "  /* %s at %s */\n  %s((float *const[]){", p->tasks[st->task].name, nm, k->entry);
        for (int a = 0; a < st->nargs; a++) {
          if (a) cwm_buf_puts(&c, ", ");
          int slot = -1;
          for (int i = 0; i < npk && k->src_len[a]; i++)
            if (pk[i][0] == st->task && pk[i][1] == a && pk[i][2] == st->args[a]) slot = i;
          if (slot >= 0) cwm_buf_printf(&c, "m->pk[%d]", slot);
          else vptr(&pl, st->args[a], "float", &c);
        }
        cwm_buf_puts(&c, "});\n");
      } else if (st->kind == CWM_GS_TRANSPOSE) {
        const cwm_value *x = &g->values[st->args[0]];
        cwm_buf_printf(&c, "  /* layout for %s */\n  rt_transpose(%d, ", nm, x->ndim);
        ints(&c, x->shape, x->ndim);
        cwm_buf_puts(&c, ", (const int[]){");
        for (int d = 0; d < x->ndim; d++) cwm_buf_printf(&c, "%s%d", d ? ", " : "", st->perm[d]);
        cwm_buf_puts(&c, "}, ");
        vptr(&pl, st->args[0], "void", &c);
        cwm_buf_puts(&c, ", ");
        vptr(&pl, st->args[1], "void", &c);
        cwm_buf_puts(&c, ", 4);\n");
      } else if (st->kind == CWM_GS_GELU) {
        cwm_buf_printf(&c, "  /* gelu at %s */\n  rt_unary(RT_GELU, %lld, ", nm, (long long)cwm_value_numel(&g->values[st->args[0]]));
        vptr(&pl, st->args[0], "float", &c);
        cwm_buf_puts(&c, ", ");
        vptr(&pl, st->args[1], "float", &c);
        cwm_buf_puts(&c, ", 0, 0);\n");
      } else {
        if (!is_view(g->nodes[st->node].op_type)) cwm_buf_printf(&c, "  /* %s (%s) */\n", nm, g->nodes[st->node].op_type);
        rc = emit_glue(&pl, st->node, &c);
      }
    }
    if (p->nsteps) cwm_buf_printf(&c, "  PROF(%d);\n", p->nsteps - 1);
    /* outputs not written in place: copied */
    for (int i = 0; i < g->noutputs && !rc; i++) {
      int v = g->outputs[i];
      if (pl.loc[pl.root[v]] == LOC_OUTPUT && pl.slot[pl.root[v]] == i) continue;
      cwm_buf_printf(&c, "  memcpy(out[%d], ", i);
      vptr(&pl, v, "void", &c);
      cwm_buf_printf(&c, ", %lldULL);\n", vbytes(g, v));
    }
    cwm_buf_printf(&c, "  PROF(%d);\n  return 0;\n}\n", p->nsteps);
  }
  if (!rc) {
    /* ---- runner */
    cwm_buf_printf(&r,
                   "/* %s_runner.c: runs the compiled network. usage: %s_runner WEIGHTS [-i INPUTS] [-o OUTPUTS] [-n RUNS] [-p]\n"
                   " * INPUTS: every input's bytes in order (as numpy's tofile writes them); OUTPUTS likewise.\n"
                   " * Without -i the inputs are zeros. -n times RUNS runs after 3 warm-up runs and prints the median.\n"
                   " * -p (with a library built with -DCWM_PROFILE) prints the milliseconds of each step per run. */\n",
                   P, P);
    cwm_buf_printf(&r, "#define _POSIX_C_SOURCE 200809L\n#include \"%s.h\"\n#include <errno.h>\n#include <stdio.h>\n"
                       "#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n\n", P);
    cwm_buf_printf(&r, "#ifdef CWM_PROFILE\nextern double %s_prof_sec[];\nextern const char *const %s_prof_name[];\nextern const int %s_prof_steps;\n#endif\n", P, P, P);
    cwm_buf_puts(&r, "static double now(void) {\n  struct timespec t;\n  clock_gettime(CLOCK_MONOTONIC, &t);\n"
                     "  return t.tv_sec + t.tv_nsec * 1e-9;\n}\n\nstatic int cmp(const void *a, const void *b) {\n"
                     "  double x = *(const double *)a, y = *(const double *)b;\n  return x < y ? -1 : x > y;\n}\n\n");
    cwm_buf_printf(&r, "int main(int argc, char **argv) {\n  const char *wpath = NULL, *ipath = NULL, *opath = NULL;\n  long runs = 0;\n  int profile = 0;\n"
                       "  for (int i = 1; i < argc; i++) {\n"
                       "    if (!strcmp(argv[i], \"-i\") && i + 1 < argc) ipath = argv[++i];\n"
                       "    else if (!strcmp(argv[i], \"-o\") && i + 1 < argc) opath = argv[++i];\n"
                       "    else if (!strcmp(argv[i], \"-n\") && i + 1 < argc) runs = strtol(argv[++i], NULL, 10);\n"
                       "    else if (!strcmp(argv[i], \"-p\")) profile = 1;\n"
                       "    else if (!strcmp(argv[i], \"-h\") || !strcmp(argv[i], \"--help\")) {\n"
                       "      printf(\"usage: %%s WEIGHTS [-i INPUTS] [-o OUTPUTS] [-n RUNS] [-p]\\n\", argv[0]);\n      return 0;\n    }\n"
                       "    else if (argv[i][0] != '-' && !wpath) wpath = argv[i];\n"
                       "    else { fprintf(stderr, \"%%s: unexpected argument '%%s' (see --help)\\n\", argv[0], argv[i]); return 2; }\n"
                       "  }\n  if (!wpath || runs < 0) { fprintf(stderr, \"usage: %%s WEIGHTS [-i INPUTS] [-o OUTPUTS] [-n RUNS]\\n\", argv[0]); return 2; }\n");
    cwm_buf_printf(&r, "  %s *m = %s_create(wpath);\n  if (!m) { fprintf(stderr, \"%%s: %%s: %%s\\n\", argv[0], wpath, "
                       "errno == EINVAL ? \"not the weights this library was compiled with\" : strerror(errno)); return 1; }\n",
                   P, P);
    cwm_buf_printf(&r, "  void *in[%d + 1], *out[%d + 1];\n", g->ninputs, g->noutputs);
    cwm_buf_printf(&r, "  FILE *f = ipath ? fopen(ipath, \"rb\") : NULL;\n"
                       "  if (ipath && !f) { fprintf(stderr, \"%%s: %%s: %%s\\n\", argv[0], ipath, strerror(errno)); return 1; }\n"
                       "  for (int i = 0; i < %s_NUM_INPUTS; i++) {\n    in[i] = calloc(1, (size_t)%s_input_bytes[i] + 1);\n"
                       "    if (f && fread(in[i], 1, (size_t)%s_input_bytes[i], f) != (size_t)%s_input_bytes[i]) {\n"
                       "      fprintf(stderr, \"%%s: %%s: too short for input %%d\\n\", argv[0], ipath, i);\n      return 1;\n    }\n  }\n"
                       "  if (f && fgetc(f) != EOF) { fprintf(stderr, \"%%s: %%s: longer than the inputs\\n\", argv[0], ipath); return 1; }\n"
                       "  if (f) fclose(f);\n",
                   P, P, P, P);
    cwm_buf_printf(&r, "  for (int i = 0; i < %s_NUM_OUTPUTS; i++) out[i] = calloc(1, (size_t)%s_output_bytes[i] + 1);\n", P, P);
    cwm_buf_printf(&r, "  int rc = %s_run(m, (const void *const *)in, out);\n"
                       "  if (rc) { fprintf(stderr, \"%%s: run failed (%%d: an index out of range)\\n\", argv[0], rc); return 1; }\n", P);
    cwm_buf_printf(&r, "  if (runs > 0) {\n    double *t = malloc(sizeof(double) * (size_t)runs);\n"
                       "    for (int i = 0; i < 3; i++) %s_run(m, (const void *const *)in, out);\n"
                       "    for (long i = 0; i < runs; i++) {\n      double t0 = now();\n      %s_run(m, (const void *const *)in, out);\n"
                       "      t[i] = now() - t0;\n    }\n    qsort(t, (size_t)runs, sizeof *t, cmp);\n"
                       "    printf(\"%s: median %%.3f ms over %%ld runs (min %%.3f, max %%.3f)\\n\", t[runs / 2] * 1e3, runs, t[0] * 1e3, t[runs - 1] * 1e3);\n"
                       "    free(t);\n  }\n", P, P, P);
    cwm_buf_printf(&r, "#ifdef CWM_PROFILE\n  if (profile && runs > 0) {\n    double tot = 0;\n"
                       "    for (int i = 0; i < %s_prof_steps; i++) tot += %s_prof_sec[i];\n"
                       "    for (int i = 0; i < %s_prof_steps; i++)\n"
                       "      printf(\"%%4d %%9.3f ms %%5.1f%%%%  %%s\\n\", i, %s_prof_sec[i] * 1e3 / (runs + 4), 100 * %s_prof_sec[i] / tot, %s_prof_name[i]);\n"
                       "  }\n#else\n  if (profile) fprintf(stderr, \"%%s: -p needs a build with -DCWM_PROFILE\\n\", argv[0]);\n#endif\n",
                   P, P, P, P, P, P);
    cwm_buf_printf(&r, "  if (opath) {\n    FILE *g = fopen(opath, \"wb\");\n    int ok = g != NULL;\n"
                       "    for (int i = 0; ok && i < %s_NUM_OUTPUTS; i++) ok = fwrite(out[i], 1, (size_t)%s_output_bytes[i], g) == (size_t)%s_output_bytes[i];\n"
                       "    if (g && fclose(g)) ok = 0;\n"
                       "    if (!ok) { fprintf(stderr, \"%%s: %%s: %%s\\n\", argv[0], opath, strerror(errno)); return 1; }\n  }\n",
                   P, P, P);
    cwm_buf_printf(&r, "  for (int i = 0; i < %s_NUM_INPUTS; i++) free(in[i]);\n  for (int i = 0; i < %s_NUM_OUTPUTS; i++) free(out[i]);\n"
                       "  %s_free(m);\n  return 0;\n}\n", P, P, P);
    /* ---- build files */
    cwm_buf_printf(&mk, "# Builds lib%s.a and %s_runner. make CC=... CFLAGS=... to change the compiler or flags.\n", P, P);
    cwm_buf_printf(&mk, "CC ?= %s\nCFLAGS ?= %s\n\nall: lib%s.a %s_runner\n\n", o->cc, o->cflags, P, P);
    cwm_buf_printf(&mk, "%s.o: %s.c %s.h\n\t$(CC) $(CFLAGS) -c %s.c -o $@\n\n", P, P, P, P);
    cwm_buf_printf(&mk, "lib%s.a: %s.o\n\tar rcs $@ %s.o\n\n", P, P, P);
    cwm_buf_printf(&mk, "%s_runner: %s_runner.c lib%s.a\n\t$(CC) $(CFLAGS) %s_runner.c lib%s.a -lm -o $@\n\n", P, P, P, P, P);
    cwm_buf_printf(&mk, "clean:\n\trm -f %s.o lib%s.a %s_runner\n\n.PHONY: all clean\n", P, P, P);
    cwm_buf_printf(&cm, "# add_subdirectory-free use: include(%s.cmake) from a CMakeLists.txt, then link %s.\n", P, P);
    cwm_buf_printf(&cm, "find_package(OpenMP REQUIRED COMPONENTS C)\n");
    cwm_buf_printf(&cm, "add_library(%s STATIC ${CMAKE_CURRENT_LIST_DIR}/%s.c)\n", P, P);
    cwm_buf_printf(&cm, "target_include_directories(%s PUBLIC ${CMAKE_CURRENT_LIST_DIR})\n", P);
    cwm_buf_printf(&cm, "target_compile_options(%s PRIVATE -O3 -march=native -fno-math-errno -fno-trapping-math)\n", P);
    cwm_buf_printf(&cm, "target_link_libraries(%s PUBLIC OpenMP::OpenMP_C m)\n", P);
  }
  if (!rc) rc = cwm_mkdir_p(dir, err);
  if (!rc) {
    char name[256];
    cwm_buf wf;
    cwm_buf_init(&wf);
    cwm_buf_puts(&wf, "CWM-WEIGHTS-v1\n");
    cwm_buf_putc(&wf, 0);
    unsigned long long hdr[2] = {(unsigned long long)pl.w.len, (unsigned long long)wh};
    cwm_buf_append(&wf, hdr, sizeof hdr);
    cwm_buf_append(&wf, pl.w.s ? pl.w.s : "", pl.w.len);
    snprintf(name, sizeof name, "%s_weights.bin", P);
    rc = write(dir, name, &wf, err);
    cwm_buf_free(&wf);
    snprintf(name, sizeof name, "%s.h", P);
    if (!rc) rc = write(dir, name, &h, err);
    snprintf(name, sizeof name, "%s.c", P);
    if (!rc) rc = write(dir, name, &c, err);
    snprintf(name, sizeof name, "%s_runner.c", P);
    if (!rc) rc = write(dir, name, &r, err);
    if (!rc) rc = write(dir, "Makefile", &mk, err);
    snprintf(name, sizeof name, "%s.cmake", P);
    if (!rc) rc = write(dir, name, &cm, err);
  }
  res->arena_bytes = pl.arena;
  res->weight_bytes = (long long)pl.w.len;
  for (int v = 0; pl.used && v < g->nvalues; v++)
    if (pl.loc && pl.loc[v] == LOC_ARENA) res->naive_bytes += (vbytes(g, v) + 63) / 64 * 64;
  for (int t = 0; t < p->ntasks; t++)
    if (have[t]) cwm_kernel_free(&ks[t]);
  free(ks);
  free(have);
  free(pk);
  cwm_buf_free(&c);
  cwm_buf_free(&h);
  cwm_buf_free(&r);
  cwm_buf_free(&mk);
  cwm_buf_free(&cm);
  cwm_buf_free(&pl.w);
  free(pl.root);
  free(pl.loc);
  free(pl.slot);
  free(pl.off);
  free(pl.def);
  free(pl.last);
  free(pl.used);
  return rc;
}

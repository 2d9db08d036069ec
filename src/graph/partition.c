/* partition.c: anchor ops with their fused neighbours become tasks, the rest glue. Patterns are
 * matched on the inferred graph: a fused neighbour must be read only inside its pattern (a value
 * another node also reads stays materialized), so fusing never changes what any node sees. */
#include "cwm/partition.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  cwm_graph *g;
  cwm_partition *p;
  int *nuser, *user_off, *users; /* CSR: live nodes reading each value */
  int *claimed;                  /* node -> 1 once it is inside a task or a glue step */
  int *is_out;                   /* value -> 1 if a graph output */
  int *avail, navail;            /* value -> 1 once computed by an emitted step (or an input/constant) */
  int ncap_steps, ncap_tasks;
  cwm_err *err;
} ctx;

static const char *node_name(const ctx *c, int n) { return c->g->nodes[n].name; }

static int fail_node(ctx *c, int n, const char *fmt, const char *why) {
  return cwm_fail(c->err, CWM_EPARSE, "node '%s' (%s): %s%s", node_name(c, n), c->g->nodes[n].op_type, fmt,
                  why ? why : "");
}

static void build_users(ctx *c) {
  cwm_graph *g = c->g;
  c->nuser = calloc((size_t)g->nvalues + 1, sizeof(int));
  c->user_off = calloc((size_t)g->nvalues + 2, sizeof(int));
  for (int n = 0; n < g->nnodes; n++) {
    if (g->nodes[n].dead) continue;
    for (int i = 0; i < g->nodes[n].nin; i++)
      if (g->nodes[n].in[i] >= 0) c->nuser[g->nodes[n].in[i]]++;
  }
  for (int v = 0; v < g->nvalues; v++) c->user_off[v + 1] = c->user_off[v] + c->nuser[v];
  c->users = calloc((size_t)c->user_off[g->nvalues] + 1, sizeof(int));
  int *fill = calloc((size_t)g->nvalues + 1, sizeof(int));
  for (int n = 0; n < g->nnodes; n++) {
    if (g->nodes[n].dead) continue;
    for (int i = 0; i < g->nodes[n].nin; i++) {
      int v = g->nodes[n].in[i];
      if (v < 0) continue;
      /* a node reading one value twice (Mul(x, x)) is listed once per read */
      c->users[c->user_off[v] + fill[v]++] = n;
    }
  }
  free(fill);
  c->is_out = calloc((size_t)g->nvalues + 1, sizeof(int));
  for (int i = 0; i < g->noutputs; i++) c->is_out[g->outputs[i]] = 1;
}

/* The single live node reading v, or -1 when v has no reader, several, or is a graph output. */
static int sole_user(const ctx *c, int v) {
  if (v < 0 || c->is_out[v] || c->nuser[v] != 1) return -1;
  int n = c->users[c->user_off[v]];
  return c->claimed[n] ? -1 : n;
}

static int is_op(const ctx *c, int n, const char *op) { return n >= 0 && !strcmp(c->g->nodes[n].op_type, op); }

static const cwm_value *val(const ctx *c, int v) { return &c->g->values[v]; }

static int is_const(const ctx *c, int v) { return v >= 0 && c->g->values[v].kind == CWM_VAL_CONST; }

/* A float constant whose every element equals x within tol (a scalar, or a broadcast of one). */
static int const_is(const ctx *c, int v, double x, double tol) {
  if (!is_const(c, v) || val(c, v)->dtype != CWM_DT_FLOAT) return 0;
  int64_t n = cwm_value_numel(val(c, v));
  if (n < 1 || n > 1) return 0;
  const float *d = val(c, v)->data;
  return fabs((double)d[0] - x) <= tol * fmax(1.0, fabs(x));
}

static int const_scalar(const ctx *c, int v, double *x) {
  if (!is_const(c, v) || val(c, v)->dtype != CWM_DT_FLOAT || cwm_value_numel(val(c, v)) != 1) return 0;
  *x = ((const float *)val(c, v)->data)[0];
  return 1;
}

/* The other input of a two-input node, given one of them; -1 if v is not an input. */
static int other_in(const ctx *c, int n, int v) {
  const cwm_gnode *nd = &c->g->nodes[n];
  if (nd->nin != 2) return -1;
  if (nd->in[0] == v) return nd->in[1];
  if (nd->in[1] == v) return nd->in[0];
  return -1;
}

static int out0(const ctx *c, int n) { return c->g->nodes[n].out[0]; }

/* ---- patterns ---------------------------------------------------------------------------------- */

/* GELU as torch exports it: x/sqrt(2) -> Erf -> +1 -> *x -> *0.5 (or x*0.5 first, then times the
 * erf term). On a match, the pattern's nodes go into nodes[] and its output value is returned;
 * -1 otherwise. x may be read by nothing else. */
static int match_gelu(const ctx *c, int x, int nodes[6], int *nn) {
  if (x < 0 || c->is_out[x] || c->nuser[x] != 2) return -1;
  int a = c->users[c->user_off[x]], b = c->users[c->user_off[x] + 1];
  if (a == b || c->claimed[a] || c->claimed[b]) return -1;
  int div = is_op(c, a, "Div") ? a : is_op(c, b, "Div") ? b : -1;
  if (div < 0) return -1;
  int mul = div == a ? b : a;
  if (!is_op(c, mul, "Mul")) return -1;
  const cwm_gnode *d = &c->g->nodes[div];
  if (d->nin != 2 || d->in[0] != x || !const_is(c, d->in[1], 1.4142135623730951, 1e-5)) return -1;
  int erf = sole_user(c, out0(c, div));
  if (!is_op(c, erf, "Erf")) return -1;
  int add = sole_user(c, out0(c, erf));
  if (!is_op(c, add, "Add") || !const_is(c, other_in(c, add, out0(c, erf)), 1.0, 1e-6)) return -1;
  int t = out0(c, add); /* 1 + erf(x / sqrt 2) */
  int other = other_in(c, mul, x);
  int last;
  if (other == t) { /* (x * t) * 0.5 */
    last = sole_user(c, out0(c, mul));
    if (!is_op(c, last, "Mul") || !const_is(c, other_in(c, last, out0(c, mul)), 0.5, 1e-6)) return -1;
  } else if (const_is(c, other, 0.5, 1e-6)) { /* (x * 0.5) * t */
    last = sole_user(c, out0(c, mul));
    if (!is_op(c, last, "Mul") || other_in(c, last, out0(c, mul)) != t || sole_user(c, t) != last) return -1;
  } else {
    return -1;
  }
  if (other == t && sole_user(c, t) != mul) return -1;
  nodes[0] = div, nodes[1] = erf, nodes[2] = add, nodes[3] = mul, nodes[4] = last;
  *nn = 5;
  return out0(c, last);
}

static int reduce_last_axis(const ctx *c, int n) {
  const cwm_gnode *nd = &c->g->nodes[n];
  const cwm_value *x = val(c, nd->in[0]);
  const cwm_attr *ax = cwm_gnode_attr(nd, "axes");
  int64_t a;
  if (ax && ax->kind == CWM_ATTR_INTS && ax->n == 1) a = ax->ints[0];
  else if (nd->nin > 1 && is_const(c, nd->in[1]) && cwm_value_numel(val(c, nd->in[1])) == 1 &&
           val(c, nd->in[1])->dtype == CWM_DT_INT64)
    a = ((const int64_t *)val(c, nd->in[1])->data)[0];
  else
    return 0;
  if (a < 0) a += x->ndim;
  return a == x->ndim - 1 && cwm_gnode_attr_int(nd, "keepdims", 1) == 1;
}

/* A float constant of n elements whose shape is [n] or [1, ..., 1, n]: a per-column vector. */
static int is_vec(const ctx *c, int v, int64_t n) {
  if (!is_const(c, v) || val(c, v)->dtype != CWM_DT_FLOAT || cwm_value_numel(val(c, v)) != n) return 0;
  const cwm_value *cv = val(c, v);
  return cv->ndim >= 1 && cv->shape[cv->ndim - 1] == n;
}

typedef struct {
  int x, gamma, beta, out;
  double eps;
  int nodes[12], nn;
} ln_match;

/* LayerNorm decomposed: m = ReduceMean(x, -1); d = x - m; v = ReduceMean(d^2, -1);
 * y = d / sqrt(v + eps) * gamma + beta. Rooted at the first ReduceMean. */
static int match_layernorm(const ctx *c, int rm, ln_match *m) {
  if (!is_op(c, rm, "ReduceMean") || !reduce_last_axis(c, rm)) return 0;
  int x = c->g->nodes[rm].in[0];
  const cwm_value *xv = val(c, x);
  if (xv->dtype != CWM_DT_FLOAT || xv->ndim < 1) return 0;
  int64_t N = xv->shape[xv->ndim - 1];
  int sub = sole_user(c, out0(c, rm));
  if (!is_op(c, sub, "Sub") || c->g->nodes[sub].in[0] != x || c->g->nodes[sub].in[1] != out0(c, rm)) return 0;
  int d = out0(c, sub);
  if (c->is_out[d] || c->nuser[d] != 2) return 0;
  int u0 = c->users[c->user_off[d]], u1 = c->users[c->user_off[d] + 1];
  int pw = is_op(c, u0, "Pow") ? u0 : is_op(c, u1, "Pow") ? u1 : -1;
  int dv = pw == u0 ? u1 : u0;
  if (pw < 0 || !is_op(c, dv, "Div") || c->claimed[dv] || c->claimed[pw]) return 0;
  if (c->g->nodes[pw].in[0] != d || !const_is(c, c->g->nodes[pw].in[1], 2.0, 0)) return 0;
  int rm2 = sole_user(c, out0(c, pw));
  if (!is_op(c, rm2, "ReduceMean") || !reduce_last_axis(c, rm2)) return 0;
  int add = sole_user(c, out0(c, rm2));
  double eps;
  if (!is_op(c, add, "Add") || !const_scalar(c, other_in(c, add, out0(c, rm2)), &eps)) return 0;
  int sq = sole_user(c, out0(c, add));
  if (!is_op(c, sq, "Sqrt") || sole_user(c, out0(c, sq)) != dv) return 0;
  if (c->g->nodes[dv].in[0] != d || c->g->nodes[dv].in[1] != out0(c, sq)) return 0;
  int nn = 0;
  int list[] = {rm, sub, pw, rm2, add, sq, dv};
  for (int i = 0; i < 7; i++) m->nodes[nn++] = list[i];
  m->x = x, m->eps = eps, m->gamma = -1, m->beta = -1;
  int cur = out0(c, dv);
  int mul = sole_user(c, cur);
  if (is_op(c, mul, "Mul") && is_vec(c, other_in(c, mul, cur), N)) {
    m->gamma = other_in(c, mul, cur);
    m->nodes[nn++] = mul;
    cur = out0(c, mul);
    int ad = sole_user(c, cur);
    if (is_op(c, ad, "Add") && is_vec(c, other_in(c, ad, cur), N)) {
      m->beta = other_in(c, ad, cur);
      m->nodes[nn++] = ad;
      cur = out0(c, ad);
    }
  }
  m->out = cur;
  m->nn = nn;
  return 1;
}

/* ---- building tasks and steps ------------------------------------------------------------------ */

static void set_avail(ctx *c, int v) {
  if (v < 0) return;
  if (v >= c->navail) {
    int n = c->navail;
    c->navail = v + 64 + c->g->nvalues;
    c->avail = cwm_xrealloc(c->avail, sizeof(int) * (size_t)c->navail);
    memset(c->avail + n, 0, sizeof(int) * (size_t)(c->navail - n));
  }
  c->avail[v] = 1;
}

static int is_avail(const ctx *c, int v) {
  return v >= 0 && ((v < c->navail && c->avail[v]) || c->g->values[v].kind != CWM_VAL_ACT);
}

/* The outputs of the step just added become available to later steps. */
static void step_done(ctx *c) {
  const cwm_gstep *s = &c->p->steps[c->p->nsteps - 1];
  if (s->kind == CWM_GS_NODE)
    for (int i = 0; i < c->g->nodes[s->node].nout; i++) set_avail(c, c->g->nodes[s->node].out[i]);
  else
    set_avail(c, s->args[s->nargs - 1]);
}

static cwm_gstep *new_step(ctx *c, cwm_gstep_kind kind, int node) {
  cwm_partition *p = c->p;
  if (p->nsteps == c->ncap_steps) {
    c->ncap_steps = c->ncap_steps ? 2 * c->ncap_steps : 64;
    p->steps = cwm_xrealloc(p->steps, sizeof *p->steps * (size_t)c->ncap_steps);
  }
  cwm_gstep *s = &p->steps[p->nsteps++];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->node = node;
  s->task = -1;
  return s;
}

/* The task of workload text (op: the similarity group; spec: what the summary shows), merged with
 * an identical one; -1 with err set if the text does not parse. */
static int add_task(ctx *c, const char *op, const char *spec, const char *text, int node) {
  cwm_err perr = {0};
  cwm_workload *w = cwm_workload_parse(text, &perr);
  if (!w) {
    fail_node(c, node, "the task's workload does not parse: ", perr.msg);
    return -1;
  }
  char key[17];
  cwm_workload_key(w, key);
  cwm_partition *p = c->p;
  for (int t = 0; t < p->ntasks; t++) {
    if (!strcmp(key, p->tasks[t].key)) {
      cwm_workload_free(w);
      p->tasks[t].weight += 1;
      return t;
    }
  }
  if (p->ntasks == c->ncap_tasks) {
    c->ncap_tasks = c->ncap_tasks ? 2 * c->ncap_tasks : 16;
    p->tasks = cwm_xrealloc(p->tasks, sizeof *p->tasks * (size_t)c->ncap_tasks);
  }
  cwm_gtask *t = &p->tasks[p->ntasks];
  memset(t, 0, sizeof *t);
  int same = 0;
  for (int i = 0; i < p->ntasks; i++) same += !strcmp(p->tasks[i].op, op);
  snprintf(t->name, sizeof t->name, "%s_%d", op, same);
  snprintf(t->op, sizeof t->op, "%s", op);
  snprintf(t->spec, sizeof t->spec, "%s", spec);
  snprintf(w->name, sizeof w->name, "%s", t->name);
  t->w = w;
  memcpy(t->key, key, sizeof t->key);
  t->weight = 1;
  t->first_node = node;
  return p->ntasks++;
}

static int add_kernel(ctx *c, const char *op, const char *spec, const char *text, int node, const int *args, int nargs) {
  int t = add_task(c, op, spec, text, node);
  if (t < 0) return -1;
  cwm_gstep *s = new_step(c, CWM_GS_KERNEL, node);
  s->task = t;
  s->nargs = nargs;
  memcpy(s->args, args, sizeof(int) * (size_t)nargs);
  step_done(c);
  return 0;
}

static int op_text(ctx *c, int node, const char *spec, char **text) {
  cwm_err e = {0};
  *text = cwm_op_to_text(spec, &e);
  if (!*text) return fail_node(c, node, "", e.msg);
  return 0;
}

/* A new constant: src [rows, cols] transposed to [cols, rows]. */
static int transposed_const(ctx *c, int src, int64_t rows, int64_t cols) {
  char name[300];
  snprintf(name, sizeof name, "%s.T", c->g->values[src].name);
  int64_t shape[2] = {cols, rows};
  int v = cwm_graph_add_value(c->g, name, CWM_VAL_CONST, CWM_DT_FLOAT, 2, shape);
  float *d = cwm_xmalloc(sizeof(float) * (size_t)(rows * cols));
  const float *s = c->g->values[src].data;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) d[j * rows + i] = s[i * cols + j];
  c->g->values[v].data = d;
  c->g->values[v].shape_known = 1;
  return v;
}

static void claim(ctx *c, const int *nodes, int n) {
  for (int i = 0; i < n; i++) c->claimed[nodes[i]] = 1;
  c->p->fused_nodes += n;
}

/* The activation after value v: ReLU or the GELU pattern; *act set, nodes claimed, the new output
 * returned (v itself when neither follows). */
static int fuse_act(ctx *c, int v, const char **act) {
  *act = "none";
  int r = sole_user(c, v);
  if (is_op(c, r, "Relu")) {
    *act = "relu";
    claim(c, &r, 1);
    return out0(c, r);
  }
  int gn[6], ng;
  int o = match_gelu(c, v, gn, &ng);
  if (o >= 0) {
    *act = "gelu";
    claim(c, gn, ng);
    return o;
  }
  return v;
}

/* The conv's workload text with a residual input `res` (the output's shape) added to its epilogue
 * "out[...] = conv[...] + bias[...]", then the activation; NULL if the text is not of that form. */
static char *residual_text(const char *text, const char *act) {
  const char *bias = strstr(text, "input bias["), *out = strstr(text, "\nout[");
  if (!bias || !out) return NULL;
  const char *bias_end = strchr(bias, '\n'), *eq = strstr(out, "] = "), *eol = strchr(out + 1, '\n');
  if (!bias_end || !eq || !eol || eq > eol) return NULL;
  /* "out[n:1, k:64, y:56, x:56]": the shape and the index names */
  char shape[256] = "", idx[256] = "";
  size_t ns = 0, ni = 0;
  for (const char *q = out + 5; q < eq && ns < 200 && ni < 200;) {
    const char *colon = strchr(q, ':'), *end = strpbrk(q, ",]");
    if (!colon || !end || colon > end) return NULL;
    ni += (size_t)snprintf(idx + ni, sizeof idx - ni, "%s%.*s", ni ? ", " : "", (int)(colon - q), q);
    ns += (size_t)snprintf(shape + ns, sizeof shape - ns, "%s%.*s", ns ? ", " : "", (int)(end - colon - 1), colon + 1);
    q = end + 1;
    while (*q == ' ') q++;
  }
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_append(&b, text, (size_t)(bias_end + 1 - text));
  cwm_buf_printf(&b, "input res[%s]\n", shape);
  cwm_buf_append(&b, bias_end + 1, (size_t)(eq + 4 - (bias_end + 1)));
  int relu = !strcmp(act, "relu");
  cwm_buf_printf(&b, "%s%.*s + res[%s]%s", relu ? "relu(" : "", (int)(eol - (eq + 4)), eq + 4, idx, relu ? ")" : "");
  cwm_buf_puts(&b, eol);
  return cwm_buf_take(&b);
}

static int try_conv(ctx *c, int n) {
  const cwm_gnode *nd = &c->g->nodes[n];
  const cwm_value *x = val(c, nd->in[0]);
  if (nd->nin < 2 || !is_const(c, nd->in[1]) || x->ndim != 4 || x->shape[0] != 1) return 0;
  const cwm_value *w = val(c, nd->in[1]);
  int64_t C = x->shape[1], H = x->shape[2], W = x->shape[3], K = w->shape[0], R = w->shape[2], S = w->shape[3];
  int64_t group = cwm_gnode_attr_int(nd, "group", 1);
  const cwm_attr *st = cwm_gnode_attr(nd, "strides"), *pd = cwm_gnode_attr(nd, "pads");
  int64_t sh = st && st->n == 2 ? st->ints[0] : 1, sw = st && st->n == 2 ? st->ints[1] : 1;
  int64_t pads[4] = {0, 0, 0, 0};
  if (pd && pd->n == 4) memcpy(pads, pd->ints, sizeof pads);
  if (sh != sw || pads[0] != pads[1] || pads[0] != pads[2] || pads[0] != pads[3]) return 0;
  int depthwise = group == C && K == C && w->shape[1] == 1 && group > 1;
  if (group != 1 && !depthwise) return 0;
  int bias = nd->nin > 2 && nd->in[2] >= 0;
  if (bias && !is_const(c, nd->in[2])) return 0;
  const char *act;
  c->claimed[n] = 1;
  /* a residual added to the conv's output (ResNet's shortcut), when the other operand is
   * already computed here: the add (and a ReLU after it) become the kernel's epilogue */
  int res = -1, out = out0(c, n);
  int u = sole_user(c, out);
  if (bias && is_op(c, u, "Add")) {
    int o = other_in(c, u, out);
    const cwm_value *ov = o >= 0 ? val(c, o) : NULL, *cv = val(c, out);
    if (ov && ov->kind == CWM_VAL_ACT && is_avail(c, o) && ov->dtype == CWM_DT_FLOAT && ov->ndim == cv->ndim &&
        !memcmp(ov->shape, cv->shape, sizeof(int64_t) * (size_t)cv->ndim)) {
      res = o;
      claim(c, &u, 1);
      out = out0(c, u);
    }
  }
  if (res >= 0) {
    act = "none";
    int r = sole_user(c, out);
    if (is_op(c, r, "Relu")) {
      act = "relu";
      claim(c, &r, 1);
      out = out0(c, r);
    }
  } else {
    out = fuse_act(c, out, &act);
  }
  char spec[512];
  if (depthwise)
    snprintf(spec, sizeof spec, "dwconv2d C=%lld H=%lld W=%lld R=%lld S=%lld stride=%lld pad=%lld bias=%d act=%s",
             (long long)C, (long long)H, (long long)W, (long long)R, (long long)S, (long long)sh, (long long)pads[0],
             bias, act);
  else
    snprintf(spec, sizeof spec, "conv2d C=%lld H=%lld W=%lld K=%lld R=%lld S=%lld stride=%lld pad=%lld bias=%d act=%s",
             (long long)C, (long long)H, (long long)W, (long long)K, (long long)R, (long long)S, (long long)sh,
             (long long)pads[0], bias, act);
  char *text;
  if (res >= 0) {
    /* the op library's text without the activation, then the epilogue rewritten */
    char base[512];
    snprintf(base, sizeof base, "%.*s act=none", (int)(strstr(spec, " act=") - spec), spec);
    if (op_text(c, n, base, &text)) return -1;
    char *t2 = residual_text(text, act);
    free(text);
    text = t2;
    if (!text) return fail_node(c, n, "internal: the conv's text has no epilogue to extend", NULL);
    size_t l = strlen(spec);
    snprintf(spec + l, sizeof spec - l, " +residual");
  } else if (op_text(c, n, spec, &text)) {
    return -1;
  }
  int args[5] = {nd->in[0], nd->in[1]}, na = 2;
  if (bias) args[na++] = nd->in[2];
  if (res >= 0) args[na++] = res;
  args[na++] = out;
  c->p->fused_nodes++;
  int rc = add_kernel(c, depthwise ? "dwconv2d" : "conv2d", spec, text, n, args, na);
  free(text);
  return rc ? -1 : 1;
}

/* out = act(A x W^T + bias) with W given [N, K]; bias is Gemm's C, or (-1) the constant of an Add
 * that follows the product. */
static int dense_task(ctx *c, int n, int a, int wT, int64_t M, int64_t N, int64_t K, int after, int bias) {
  int cur = after;
  int u = bias >= 0 ? -1 : sole_user(c, cur);
  if (is_op(c, u, "Add") && is_vec(c, other_in(c, u, cur), N)) {
    bias = other_in(c, u, cur);
    claim(c, &u, 1);
    cur = out0(c, u);
  }
  const char *act;
  cur = fuse_act(c, cur, &act);
  char spec[512];
  snprintf(spec, sizeof spec, "dense M=%lld N=%lld K=%lld bias=%d act=%s", (long long)M, (long long)N, (long long)K,
           bias >= 0, act);
  char *text;
  if (op_text(c, n, spec, &text)) return -1;
  int args[4] = {a, wT}, na = 2;
  if (bias >= 0) args[na++] = bias;
  args[na++] = cur;
  int rc = add_kernel(c, "dense", spec, text, n, args, na);
  free(text);
  return rc ? -1 : 1;
}

static int try_gemm(ctx *c, int n) {
  const cwm_gnode *nd = &c->g->nodes[n];
  if (nd->nin < 2 || !is_const(c, nd->in[1])) return 0;
  if (cwm_gnode_attr_int(nd, "transA", 0) || cwm_gnode_attr_float(nd, "alpha", 1.0f) != 1.0f) return 0;
  const cwm_value *a = val(c, nd->in[0]), *b = val(c, nd->in[1]);
  if (a->ndim != 2 || b->ndim != 2) return 0;
  int64_t M = a->shape[0], K = a->shape[1];
  int transB = (int)cwm_gnode_attr_int(nd, "transB", 0);
  int64_t N = transB ? b->shape[0] : b->shape[1];
  int hasc = nd->nin > 2 && nd->in[2] >= 0;
  if (hasc && (cwm_gnode_attr_float(nd, "beta", 1.0f) != 1.0f || !is_vec(c, nd->in[2], N))) return 0;
  int wT = transB ? nd->in[1] : transposed_const(c, nd->in[1], K, N);
  nd = &c->g->nodes[n]; /* the arrays may have moved */
  c->claimed[n] = 1;
  c->p->fused_nodes++;
  return dense_task(c, n, nd->in[0], wT, M, N, K, out0(c, n), hasc ? nd->in[2] : -1);
}

/* Which node produces v (live), or -1. */
static int producer(const ctx *c, int v) { return v >= 0 ? c->g->values[v].producer : -1; }

static int try_matmul(ctx *c, int n) {
  const cwm_gnode *nd = &c->g->nodes[n];
  if (nd->nin != 2) return 0;
  const cwm_value *a = val(c, nd->in[0]), *b = val(c, nd->in[1]);
  if (a->dtype != CWM_DT_FLOAT || b->dtype != CWM_DT_FLOAT || a->ndim < 2 || b->ndim < 2) return 0;
  int64_t K = a->shape[a->ndim - 1], M = 1;
  if (is_const(c, nd->in[1]) && b->ndim == 2) {
    for (int d = 0; d < a->ndim - 1; d++) M *= a->shape[d];
    int64_t N = b->shape[1];
    int wT = transposed_const(c, nd->in[1], K, N);
    nd = &c->g->nodes[n];
    c->claimed[n] = 1;
    c->p->fused_nodes++;
    return dense_task(c, n, nd->in[0], wT, M, N, K, out0(c, n), -1);
  }
  if (is_const(c, nd->in[0]) || is_const(c, nd->in[1]) || a->ndim != b->ndim || a->ndim < 3) return 0;
  int64_t B = 1;
  for (int d = 0; d < a->ndim - 2; d++) {
    if (a->shape[d] != b->shape[d]) return 0;
    B *= a->shape[d];
  }
  M = a->shape[a->ndim - 2];
  int64_t N = b->shape[b->ndim - 1];
  /* batch_matmul reads its second operand as [B, N, K]: materialize that layout with one
   * transpose, composed with a transpose that produced the operand if nothing else reads it. */
  int nd_ = b->ndim, src = nd->in[1];
  int perm[CWM_GRAPH_MAX_DIMS];
  for (int d = 0; d < nd_; d++) perm[d] = d;
  perm[nd_ - 2] = nd_ - 1, perm[nd_ - 1] = nd_ - 2;
  int pt = producer(c, src);
  if (is_op(c, pt, "Transpose") && sole_user(c, src) == n && !c->claimed[pt]) {
    /* claimed later: the producer ran before us in order, so it must not have been emitted yet;
     * transposes feeding a batched product are left for here by the main loop */
    const cwm_attr *pa = cwm_gnode_attr(&c->g->nodes[pt], "perm");
    if (pa && pa->n == nd_) {
      int comp[CWM_GRAPH_MAX_DIMS];
      for (int d = 0; d < nd_; d++) comp[d] = (int)pa->ints[perm[d]];
      memcpy(perm, comp, sizeof comp);
      src = c->g->nodes[pt].in[0];
      c->claimed[pt] = 1;
      c->p->fused_nodes++;
    }
  }
  int64_t tshape[CWM_GRAPH_MAX_DIMS];
  for (int d = 0; d < nd_; d++) tshape[d] = val(c, src)->shape[perm[d]];
  char name[300];
  snprintf(name, sizeof name, "%s.bt", node_name(c, n));
  int bt = cwm_graph_add_value(c->g, name, CWM_VAL_ACT, CWM_DT_FLOAT, nd_, tshape);
  c->g->values[bt].shape_known = 1;
  c->g->values[bt].producer = -1;
  nd = &c->g->nodes[n];
  cwm_gstep *s = new_step(c, CWM_GS_TRANSPOSE, n);
  s->nargs = 2;
  s->args[0] = src, s->args[1] = bt;
  memcpy(s->perm, perm, sizeof perm);
  step_done(c);
  c->claimed[n] = 1;
  c->p->fused_nodes++;
  char spec[512];
  snprintf(spec, sizeof spec, "batch_matmul B=%lld M=%lld N=%lld K=%lld", (long long)B, (long long)M, (long long)N,
           (long long)K);
  char *text;
  if (op_text(c, n, spec, &text)) return -1;
  int args[3] = {nd->in[0], bt, out0(c, n)};
  int rc = add_kernel(c, "batch_matmul", spec, text, n, args, 3);
  free(text);
  return rc ? -1 : 1;
}

static int try_softmax(ctx *c, int n) {
  const cwm_gnode *nd = &c->g->nodes[n];
  const cwm_value *x = val(c, nd->in[0]);
  int64_t axis = cwm_gnode_attr_int(nd, "axis", -1);
  if (axis < 0) axis += x->ndim;
  if (x->dtype != CWM_DT_FLOAT || axis != x->ndim - 1 || x->ndim < 1) return 0;
  int64_t N = x->shape[x->ndim - 1], M = x->ndim >= 2 ? x->shape[x->ndim - 2] : 1, B = 1;
  for (int d = 0; d < x->ndim - 2; d++) B *= x->shape[d];
  char spec[512], *text;
  snprintf(spec, sizeof spec, "softmax B=%lld M=%lld N=%lld", (long long)B, (long long)M, (long long)N);
  if (op_text(c, n, spec, &text)) return -1;
  c->claimed[n] = 1;
  c->p->fused_nodes++;
  int args[2] = {nd->in[0], out0(c, n)};
  int rc = add_kernel(c, "softmax", spec, text, n, args, 2);
  free(text);
  return rc ? -1 : 1;
}

char *cwm_layernorm_text(long M, long N, double eps) {
  cwm_buf b;
  cwm_buf_init(&b);
  char inv[32], e[32];
  snprintf(inv, sizeof inv, "%.9g", 1.0 / (double)N);
  snprintf(e, sizeof e, "%.9g", eps);
  /* the exponent form keeps the literal a float constant of the language ("1e-12") */
  cwm_buf_printf(&b, "input X[%ld, %ld]\ninput gamma[%ld]\ninput beta[%ld]\n", M, N, N, N);
  cwm_buf_printf(&b, "mu[i:%ld] = sum(k:%ld : X[i, k] * %s)\n", M, N, inv);
  cwm_buf_printf(&b, "var[i:%ld] = sum(k:%ld : X[i, k] * X[i, k] * %s)\n", M, N, inv);
  cwm_buf_printf(&b, "out[i:%ld, j:%ld] = (X[i, j] - mu[i]) * rsqrt(var[i] - mu[i] * mu[i] + %s) * gamma[j] + beta[j]\n",
                 M, N, e);
  cwm_buf_puts(&b, "output out\n");
  return cwm_buf_take(&b);
}

/* gamma or beta absent: a constant of ones or zeros. */
static int filled_const(ctx *c, const char *name, int64_t N, float x) {
  int64_t shape[1] = {N};
  int v = cwm_graph_add_value(c->g, name, CWM_VAL_CONST, CWM_DT_FLOAT, 1, shape);
  float *d = cwm_xmalloc(sizeof(float) * (size_t)N);
  for (int64_t i = 0; i < N; i++) d[i] = x;
  c->g->values[v].data = d;
  c->g->values[v].shape_known = 1;
  return v;
}

static int layernorm_task(ctx *c, int n, int x, int gamma, int beta, int out, double eps) {
  const cwm_value *xv = val(c, x);
  int64_t N = xv->shape[xv->ndim - 1], M = cwm_value_numel(xv) / N;
  char nm[300];
  if (gamma < 0) {
    snprintf(nm, sizeof nm, "%s.gamma", node_name(c, n));
    gamma = filled_const(c, nm, N, 1.0f);
  }
  if (beta < 0) {
    snprintf(nm, sizeof nm, "%s.beta", node_name(c, n));
    beta = filled_const(c, nm, N, 0.0f);
  }
  char *text = cwm_layernorm_text((long)M, (long)N, eps);
  char spec[512];
  if (fabs(eps - 1e-5) < 1e-12) snprintf(spec, sizeof spec, "layernorm M=%lld N=%lld", (long long)M, (long long)N);
  else snprintf(spec, sizeof spec, "layernorm M=%lld N=%lld (eps %g)", (long long)M, (long long)N, eps);
  int args[4] = {x, gamma, beta, out};
  int rc = add_kernel(c, "layernorm", spec, text, n, args, 4);
  free(text);
  return rc ? -1 : 1;
}

static int try_layernorm(ctx *c, int n) {
  ln_match m;
  if (is_op(c, n, "LayerNormalization")) {
    const cwm_gnode *nd = &c->g->nodes[n];
    const cwm_value *x = val(c, nd->in[0]);
    int64_t axis = cwm_gnode_attr_int(nd, "axis", -1);
    if (axis < 0) axis += x->ndim;
    if (axis != x->ndim - 1 || x->dtype != CWM_DT_FLOAT || nd->nout > 1) return 0;
    int64_t N = x->shape[x->ndim - 1];
    int gamma = nd->nin > 1 ? nd->in[1] : -1, beta = nd->nin > 2 ? nd->in[2] : -1;
    if ((gamma >= 0 && !is_vec(c, gamma, N)) || (beta >= 0 && !is_vec(c, beta, N))) return 0;
    c->claimed[n] = 1;
    c->p->fused_nodes++;
    return layernorm_task(c, n, nd->in[0], gamma, beta, out0(c, n), cwm_gnode_attr_float(nd, "epsilon", 1e-5f));
  }
  if (!match_layernorm(c, n, &m)) return 0;
  claim(c, m.nodes, m.nn);
  return layernorm_task(c, n, m.x, m.gamma, m.beta, m.out, m.eps);
}

/* A Transpose whose only reader is a batched product's second operand is composed into that
 * product's own transpose (try_matmul), so the main loop leaves it until then. */
static int feeds_bmm(const ctx *c, int n) {
  if (!is_op(c, n, "Transpose")) return 0;
  int u = sole_user(c, out0(c, n));
  if (!is_op(c, u, "MatMul")) return 0;
  const cwm_gnode *m = &c->g->nodes[u];
  if (m->nin != 2 || m->in[1] != out0(c, n) || is_const(c, m->in[0])) return 0;
  const cwm_value *a = val(c, m->in[0]), *b = val(c, m->in[1]);
  if (a->ndim < 3 || a->ndim != b->ndim || a->dtype != CWM_DT_FLOAT || b->dtype != CWM_DT_FLOAT) return 0;
  for (int d = 0; d < a->ndim - 2; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  const cwm_attr *pa = cwm_gnode_attr(&c->g->nodes[n], "perm");
  return pa && pa->kind == CWM_ATTR_INTS && pa->n == b->ndim;
}

cwm_partition *cwm_graph_partition(cwm_graph *g, cwm_err *err) {
  ctx c;
  memset(&c, 0, sizeof c);
  c.g = g;
  c.err = err;
  c.p = calloc(1, sizeof *c.p);
  c.p->g = g;
  build_users(&c);
  c.navail = g->nvalues + 64;
  c.avail = calloc((size_t)c.navail, sizeof(int));
  int nn0 = g->nnodes;
  c.claimed = calloc((size_t)nn0 + 1, sizeof(int));
  int rc = 0;
  for (int n = 0; n < nn0 && !rc; n++) {
    if (g->nodes[n].dead || c.claimed[n]) continue;
    if (feeds_bmm(&c, n)) continue;
    const char *op = g->nodes[n].op_type;
    int r = 0;
    if (!strcmp(op, "Conv")) r = try_conv(&c, n);
    else if (!strcmp(op, "Gemm")) r = try_gemm(&c, n);
    else if (!strcmp(op, "MatMul")) r = try_matmul(&c, n);
    else if (!strcmp(op, "Softmax")) r = try_softmax(&c, n);
    else if (!strcmp(op, "ReduceMean") || !strcmp(op, "LayerNormalization")) r = try_layernorm(&c, n);
    if (r < 0) {
      rc = -1;
      break;
    }
    if (r > 0) continue;
    /* a GELU that no anchor took: one glue step instead of five */
    int gn[6], ng;
    if (!strcmp(op, "Div") && g->nodes[n].nin == 2) {
      int o = match_gelu(&c, g->nodes[n].in[0], gn, &ng);
      if (o >= 0 && gn[0] == n) {
        claim(&c, gn, ng);
        cwm_gstep *s = new_step(&c, CWM_GS_GELU, n);
        s->nargs = 2;
        s->args[0] = g->nodes[n].in[0], s->args[1] = o;
        step_done(&c);
        continue;
      }
    }
    c.claimed[n] = 1;
    cwm_gstep *s = new_step(&c, CWM_GS_NODE, n);
    s->nargs = 0;
    step_done(&c);
  }
  /* a transpose left for a batched product that then was not one of ours */
  for (int n = 0; n < nn0 && !rc; n++)
    if (!g->nodes[n].dead && !c.claimed[n])
      rc = fail_node(&c, n, "internal: the partition left this node out", NULL);
  free(c.nuser);
  free(c.user_off);
  free(c.users);
  free(c.claimed);
  free(c.is_out);
  free(c.avail);
  if (rc) {
    cwm_partition_free(c.p);
    return NULL;
  }
  return c.p;
}

void cwm_partition_free(cwm_partition *p) {
  if (!p) return;
  for (int t = 0; t < p->ntasks; t++) cwm_workload_free(p->tasks[t].w);
  free(p->tasks);
  free(p->steps);
  free(p);
}

/* fold.c: evaluates, at import, a node whose inputs are all constants (the Shape/Gather/Concat
 * chains torch.onnx writes for Reshape, weight transposes, masks built from Range/Less ...).
 * Float arithmetic is done in double and rounded once per element; integers wrap instead of
 * overflowing. Shapes and parameters come from infer.c, which checked them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph_int.h"

static int64_t f2i(double x) {
  if (x != x) return 0;
  if (x >= 9.2233720368547758e18) return INT64_MAX;
  if (x <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)x;
}

static double ldf(const cwm_value *v, int64_t i) {
  switch (v->dtype) {
  case CWM_DT_FLOAT: return ((const float *)v->data)[i];
  case CWM_DT_INT64: return (double)((const int64_t *)v->data)[i];
  default: return ((const uint8_t *)v->data)[i];
  }
}

static int64_t ldi(const cwm_value *v, int64_t i) {
  switch (v->dtype) {
  case CWM_DT_FLOAT: return f2i(((const float *)v->data)[i]);
  case CWM_DT_INT64: return ((const int64_t *)v->data)[i];
  default: return ((const uint8_t *)v->data)[i];
  }
}

/* Stores f (float results) or x (integer and bool results) by the output's dtype. */
static void st(cwm_value *o, int64_t i, double f, int64_t x) {
  switch (o->dtype) {
  case CWM_DT_FLOAT: ((float *)o->data)[i] = (float)f; break;
  case CWM_DT_INT64: ((int64_t *)o->data)[i] = x; break;
  default: ((uint8_t *)o->data)[i] = x != 0;
  }
}

static void *alloc_data(cwm_value *o) {
  int64_t n = cwm_value_numel(o);
  free(o->data);
  o->data = cwm_xcalloc((size_t)(n ? n : 1), (size_t)cwm_dtype_size(o->dtype));
  return o->data;
}

static int64_t prod(int from, int to, const int64_t *sh) {
  int64_t n = 1;
  for (int d = from; d < to; d++) n *= sh[d];
  return n;
}

/* Linear index into shape ish of the coordinates oc of a right-aligned broadcast result of rank ond. */
static int64_t bidx(int ond, const int64_t *oc, int ind, const int64_t *ish) {
  int64_t i = 0;
  for (int d = 0; d < ind; d++) {
    int od = d + ond - ind;
    i = i * ish[d] + (ish[d] == 1 || od < 0 ? 0 : oc[od]);
  }
  return i;
}

/* Advances row-major coordinates c within sh. */
static void next(int nd, const int64_t *sh, int64_t *c) {
  for (int d = nd - 1; d >= 0; d--) {
    if (++c[d] < sh[d]) return;
    c[d] = 0;
  }
}

/* For each element of o, the element of in it reads under numpy broadcasting. */
static int64_t *bmap(const cwm_value *o, const cwm_value *in) {
  int64_t n = cwm_value_numel(o), c[CWM_GRAPH_MAX_DIMS] = {0};
  int64_t *m = cwm_xmalloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++, next(o->ndim, o->shape, c)) m[i] = bidx(o->ndim, c, in->ndim, in->shape);
  return m;
}

static int fold_elementwise(cwm_graph *g, int ni, const cwm_opp *p, cwm_err *err) {
  cwm_gnode *n = &g->nodes[ni];
  const char *op = n->op_type;
  cwm_value *o = &g->values[n->out[0]];
  const cwm_value *x = &g->values[n->in[0]];
  int unary = !strcmp(op, "Relu") || !strcmp(op, "Sqrt") || !strcmp(op, "Erf") || !strcmp(op, "Tanh") ||
              !strcmp(op, "Sigmoid") || !strcmp(op, "Exp") || !strcmp(op, "Log") || !strcmp(op, "Neg") ||
              !strcmp(op, "Abs") || !strcmp(op, "Reciprocal") || !strcmp(op, "Clip") || !strcmp(op, "LeakyRelu") ||
              !strcmp(op, "HardSigmoid") || !strcmp(op, "HardSwish") || !strcmp(op, "Not") || !strcmp(op, "Cast");
  int nargs = unary ? 1 : !strcmp(op, "Where") ? 3 : (!strcmp(op, "Max") || !strcmp(op, "Min")) ? n->nin : 2;
  int64_t numel = cwm_value_numel(o), *map[3] = {NULL, NULL, NULL};
  const cwm_value *in[3] = {NULL, NULL, NULL};
  alloc_data(o);
  int rc = 0;
  for (int k = 0; k < nargs && k < 3; k++) {
    in[k] = &g->values[n->in[k]];
    map[k] = bmap(o, in[k]);
  }
  if (unary) {
    int fl = x->dtype == CWM_DT_FLOAT;
    for (int64_t i = 0; i < numel; i++) {
      double f = ldf(x, i), r = 0;
      int64_t v = ldi(x, i), ri = 0;
      if (!strcmp(op, "Cast")) {
        st(o, i, f, o->dtype == CWM_DT_BOOL ? (fl ? f != 0 : v != 0) : v);
        continue;
      }
      /* the output has the input's dtype: st keeps r for float and ri for integers */
      switch (op[0]) {
      case 'R': r = op[2] == 'c' ? 1.0 / f : f > 0 ? f : 0; ri = v > 0 ? v : 0; break;
      case 'S': r = op[1] == 'q' ? sqrt(f) : 1.0 / (1.0 + exp(-f)); break;
      case 'E': r = op[1] == 'r' ? erf(f) : exp(f); break;
      case 'T': r = tanh(f); break;
      case 'L': r = op[1] == 'o' ? log(f) : f < 0 ? p->alpha * f : f; break;
      case 'N': r = -f; ri = op[1] == 'o' ? !v : (int64_t)(0 - (uint64_t)v); break;
      case 'A': r = fabs(f); ri = v < 0 ? (int64_t)(0 - (uint64_t)v) : v; break;
      case 'C':
        r = f < p->cmin ? p->cmin : f > p->cmax ? p->cmax : f;
        ri = (double)v < p->cmin ? f2i(ceil(p->cmin)) : (double)v > p->cmax ? f2i(floor(p->cmax)) : v;
        break;
      case 'H':
        r = op[5] == 'i' ? fmax(0, fmin(1, p->alpha * f + p->beta)) : f * fmax(0, fmin(1, f / 6 + 0.5));
        break;
      }
      st(o, i, r, ri);
    }
    goto done;
  }
  int cmp = !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater");
  const cwm_value *a = in[0], *b = in[1];
  if (!strcmp(op, "Where")) {
    for (int64_t i = 0; i < numel; i++) {
      const cwm_value *s = ldi(in[0], map[0][i]) ? in[1] : in[2];
      int64_t j = ldi(in[0], map[0][i]) ? map[1][i] : map[2][i];
      st(o, i, ldf(s, j), ldi(s, j));
    }
    goto done;
  }
  if (nargs > 2) { /* Max/Min of three or more: fold pairwise through the output */
    for (int64_t i = 0; i < numel; i++) st(o, i, ldf(a, map[0][i]), ldi(a, map[0][i]));
    for (int k = 1; k < nargs; k++) {
      const cwm_value *y = &g->values[n->in[k]];
      int64_t *m = bmap(o, y);
      for (int64_t i = 0; i < numel; i++) {
        double f = ldf(o, i), h = ldf(y, m[i]);
        int64_t u = ldi(o, i), w = ldi(y, m[i]);
        int take = op[1] == 'a' ? (o->dtype == CWM_DT_FLOAT ? h > f || h != h : w > u)
                                : (o->dtype == CWM_DT_FLOAT ? h < f || h != h : w < u);
        if (take) st(o, i, h, w);
      }
      free(m);
    }
    goto done;
  }
  if (nargs == 1) { /* Max/Min of one input */
    for (int64_t i = 0; i < numel; i++) st(o, i, ldf(a, map[0][i]), ldi(a, map[0][i]));
    goto done;
  }
  int fl = a->dtype == CWM_DT_FLOAT;
  for (int64_t i = 0; i < numel; i++) {
    double f = ldf(a, map[0][i]), h = ldf(b, map[1][i]), r = 0;
    int64_t u = ldi(a, map[0][i]), w = ldi(b, map[1][i]), ri = 0;
    uint64_t uu = (uint64_t)u, uw = (uint64_t)w;
    if (cmp) {
      ri = op[0] == 'E' ? (fl ? f == h : u == w) : op[0] == 'L' ? (fl ? f < h : u < w) : (fl ? f > h : u > w);
      st(o, i, 0, ri);
      continue;
    }
    switch (op[0]) {
    case 'A':
      if (op[1] == 'n') ri = u && w;
      else { r = f + h; ri = (int64_t)(uu + uw); }
      break;
    case 'O': ri = u || w; break;
    case 'S': r = f - h; ri = (int64_t)(uu - uw); break;
    case 'M':
      if (op[1] == 'u') { r = f * h; ri = (int64_t)(uu * uw); }
      else if (op[1] == 'a') { r = f > h || f != f ? f : h; ri = u > w ? u : w; }
      else { r = f < h || f != f ? f : h; ri = u < w ? u : w; }
      break;
    case 'D':
      r = f / h;
      if (!fl) {
        if (w == 0) { rc = cwm_node_fail(g, ni, err, "integer division by zero in a constant"); goto done; }
        ri = (u == INT64_MIN && w == -1) ? INT64_MIN : u / w;
      }
      break;
    case 'P': r = pow(f, h); ri = f2i(pow(f, h)); break;
    }
    st(o, i, r, ri);
  }
done:
  for (int k = 0; k < 3; k++) free(map[k]);
  return rc;
}

static void fold_reduce(cwm_graph *g, const cwm_gnode *n, const cwm_opp *p) {
  const cwm_value *x = &g->values[n->in[0]];
  cwm_value *o = &g->values[n->out[0]];
  int64_t on = cwm_value_numel(o), xn = cwm_value_numel(x), c[CWM_GRAPH_MAX_DIMS] = {0};
  double *acc = cwm_xmalloc(sizeof(double) * (size_t)(on ? on : 1));
  int mx = !strcmp(n->op_type, "ReduceMax");
  for (int64_t i = 0; i < on; i++) acc[i] = mx ? -INFINITY : 0;
  for (int64_t i = 0; i < xn; i++, next(x->ndim, x->shape, c)) {
    int64_t j = 0;
    for (int d = 0; d < x->ndim; d++)
      if (!p->reduce[d]) j = j * x->shape[d] + c[d];
    double v = ldf(x, i);
    acc[j] = mx ? (v > acc[j] || v != v ? v : acc[j]) : acc[j] + v;
  }
  double cnt = on ? (double)xn / (double)on : 1;
  for (int64_t i = 0; i < on; i++) {
    double v = !strcmp(n->op_type, "ReduceMean") ? acc[i] / cnt : acc[i];
    st(o, i, v, f2i(v));
  }
  free(acc);
}

static void fold_softmax(cwm_graph *g, const cwm_gnode *n, const cwm_opp *p) {
  const cwm_value *x = &g->values[n->in[0]];
  cwm_value *o = &g->values[n->out[0]];
  const float *xd = x->data;
  float *od = o->data;
  int64_t outer = prod(0, p->axis, x->shape);
  int64_t len = p->softmax_2d ? prod(p->axis, x->ndim, x->shape) : x->shape[p->axis];
  int64_t inner = p->softmax_2d ? 1 : prod(p->axis + 1, x->ndim, x->shape);
  int lg = n->op_type[0] == 'L';
  for (int64_t a = 0; a < outer; a++)
    for (int64_t b = 0; b < inner; b++) {
      int64_t base = a * len * inner + b;
      double m = -INFINITY, s = 0;
      for (int64_t i = 0; i < len; i++) m = fmax(m, xd[base + i * inner]);
      for (int64_t i = 0; i < len; i++) s += exp(xd[base + i * inner] - m);
      for (int64_t i = 0; i < len; i++) {
        double v = xd[base + i * inner] - m;
        od[base + i * inner] = (float)(lg ? v - log(s) : exp(v) / s);
      }
    }
}

static void fold_matmul(cwm_graph *g, const cwm_gnode *n) {
  const cwm_value *a = &g->values[n->in[0]], *b = &g->values[n->in[1]];
  cwm_value *o = &g->values[n->out[0]];
  int64_t M = a->ndim >= 2 ? a->shape[a->ndim - 2] : 1, K = a->shape[a->ndim - 1];
  int64_t N = b->ndim >= 2 ? b->shape[b->ndim - 1] : 1;
  int nab = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
  int nob = o->ndim - (a->ndim >= 2) - (b->ndim >= 2);
  int64_t nbatch = prod(0, nob, o->shape), c[CWM_GRAPH_MAX_DIMS] = {0};
  const float *ad = a->data, *bd = b->data;
  float *od = o->data;
  for (int64_t t = 0; t < nbatch; t++, next(nob, o->shape, c)) {
    const float *A = ad + bidx(nob, c, nab, a->shape) * M * K, *B = bd + bidx(nob, c, nbb, b->shape) * K * N;
    float *O = od + t * M * N;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) s += (double)A[i * K + k] * B[k * N + j];
        O[i * N + j] = (float)s;
      }
  }
}

static void fold_gemm(cwm_graph *g, const cwm_gnode *n, const cwm_opp *p) {
  const cwm_value *a = &g->values[n->in[0]], *b = &g->values[n->in[1]];
  const cwm_value *cv = n->nin > 2 && n->in[2] >= 0 ? &g->values[n->in[2]] : NULL;
  cwm_value *o = &g->values[n->out[0]];
  int64_t M = o->shape[0], N = o->shape[1], K = a->shape[!p->trans_a];
  const float *A = a->data, *B = b->data;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++)
        s += (double)A[p->trans_a ? k * M + i : i * K + k] * B[p->trans_b ? j * K + k : k * N + j];
      s *= p->alpha;
      if (cv) {
        int64_t oc[2] = {i, j};
        s += p->beta * ldf(cv, bidx(2, oc, cv->ndim, cv->shape));
      }
      ((float *)o->data)[i * N + j] = (float)s;
    }
}

static void fold_conv(cwm_graph *g, const cwm_gnode *n, const cwm_opp *p) {
  const cwm_value *x = &g->values[n->in[0]], *w = &g->values[n->in[1]];
  const cwm_value *bv = n->nin > 2 && n->in[2] >= 0 ? &g->values[n->in[2]] : NULL;
  cwm_value *o = &g->values[n->out[0]];
  int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t M = o->shape[1], OH = o->shape[2], OW = o->shape[3], KH = p->kernel[0], KW = p->kernel[1];
  int64_t cg = C / p->group, mg = M / p->group;
  const float *xd = x->data, *wd = w->data;
  float *od = o->data;
  for (int64_t b = 0; b < N; b++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double s = bv ? ((const float *)bv->data)[m] : 0;
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t kh = 0; kh < KH; kh++)
              for (int64_t kw = 0; kw < KW; kw++) {
                int64_t ih = oh * p->stride[0] - p->pad[0] + kh, iw = ow * p->stride[1] - p->pad[1] + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += (double)xd[((b * C + (m / mg) * cg + ci) * H + ih) * W + iw] * wd[((m * cg + ci) * KH + kh) * KW + kw];
              }
          od[((b * M + m) * OH + oh) * OW + ow] = (float)s;
        }
}

static void fold_pool(cwm_graph *g, const cwm_gnode *n, const cwm_opp *p) {
  const cwm_value *x = &g->values[n->in[0]];
  cwm_value *o = &g->values[n->out[0]];
  int64_t NC = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3], OH = o->shape[2], OW = o->shape[3];
  int mx = n->op_type[0] == 'M';
  const float *xd = x->data;
  for (int64_t c = 0; c < NC; c++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0 = oh * p->stride[0] - p->pad[0], w0 = ow * p->stride[1] - p->pad[1];
        int64_t h1 = h0 + p->kernel[0], w1 = w0 + p->kernel[1];
        int64_t hp = h1 < H + p->pad[2] ? h1 : H + p->pad[2], wp = w1 < W + p->pad[3] ? w1 : W + p->pad[3];
        double s = mx ? -INFINITY : 0;
        int64_t cnt = 0;
        for (int64_t ih = h0 < 0 ? 0 : h0; ih < h1 && ih < H; ih++)
          for (int64_t iw = w0 < 0 ? 0 : w0; iw < w1 && iw < W; iw++) {
            double v = xd[(c * H + ih) * W + iw];
            s = mx ? (v > s ? v : s) : s + v;
            cnt++;
          }
        if (!mx) {
          int64_t div = p->count_include_pad ? (hp - h0) * (wp - w0) : cnt;
          s = div > 0 ? s / (double)div : 0;
        } else if (!cnt) {
          s = 0;
        }
        ((float *)o->data)[(c * OH + oh) * OW + ow] = (float)s;
      }
}

static void fold_norm(cwm_graph *g, const cwm_gnode *n, const cwm_opp *p) {
  const cwm_value *x = &g->values[n->in[0]];
  cwm_value *o = &g->values[n->out[0]];
  const float *xd = x->data;
  float *od = o->data;
  int64_t xn = cwm_value_numel(x);
  if (n->op_type[0] == 'B') {
    int64_t C = x->shape[1], inner = prod(2, x->ndim, x->shape);
    const float *sc = g->values[n->in[1]].data, *bb = g->values[n->in[2]].data;
    const float *mu = g->values[n->in[3]].data, *var = g->values[n->in[4]].data;
    for (int64_t i = 0; i < xn; i++) {
      int64_t ch = (i / (inner ? inner : 1)) % C;
      od[i] = (float)(((double)xd[i] - mu[ch]) / sqrt((double)var[ch] + p->eps) * sc[ch] + bb[ch]);
    }
    for (int k = 1; k < n->nout; k++) { /* training-mode outputs: the running statistics as given */
      cwm_value *s = &g->values[n->out[k]];
      memcpy(s->data, g->values[n->in[k == 1 ? 3 : 4]].data, sizeof(float) * (size_t)C);
    }
    return;
  }
  const cwm_value *sc = &g->values[n->in[1]];
  const cwm_value *bb = n->nin > 2 && n->in[2] >= 0 ? &g->values[n->in[2]] : NULL;
  int64_t *ms = bmap(o, sc), *mb = bb ? bmap(o, bb) : NULL;
  int64_t inner = prod(p->axis, x->ndim, x->shape), outer = prod(0, p->axis, x->shape);
  for (int64_t a = 0; a < outer; a++) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; i++) mean += xd[a * inner + i];
    mean /= inner ? (double)inner : 1;
    for (int64_t i = 0; i < inner; i++) var += (xd[a * inner + i] - mean) * (xd[a * inner + i] - mean);
    var /= inner ? (double)inner : 1;
    double inv = 1 / sqrt(var + p->eps);
    for (int64_t i = 0; i < inner; i++) {
      int64_t j = a * inner + i;
      od[j] = (float)((xd[j] - mean) * inv * ldf(sc, ms[j]) + (bb ? ldf(bb, mb[j]) : 0));
    }
    if (n->nout > 1) ((float *)g->values[n->out[1]].data)[a] = (float)mean;
    if (n->nout > 2) ((float *)g->values[n->out[2]].data)[a] = (float)inv;
  }
  free(ms);
  free(mb);
}

/* Ops that move elements without arithmetic: each output element copies one input element. */
static void fold_move(cwm_graph *g, const cwm_gnode *n, const cwm_opp *p) {
  const char *op = n->op_type;
  const cwm_value *x = &g->values[n->in[0]];
  cwm_value *o = &g->values[n->out[0]];
  size_t es = (size_t)cwm_dtype_size(x->dtype);
  const char *xd = x->data;
  int64_t on = cwm_value_numel(o), c[CWM_GRAPH_MAX_DIMS] = {0}, xs[CWM_GRAPH_MAX_DIMS];
  int64_t str = 1;
  for (int d = x->ndim - 1; d >= 0; d--) { xs[d] = str; str *= x->shape[d]; }
  if (!strcmp(op, "Concat") || !strcmp(op, "Split")) {
    int ax = p->axis;
    int64_t outer = prod(0, ax, x->shape), inner = prod(ax + 1, x->ndim, x->shape), at = 0;
    const cwm_value *big = op[0] == 'C' ? o : x;
    int nparts = op[0] == 'C' ? n->nin : n->nout;
    for (int k = 0; k < nparts; k++) {
      cwm_value *part = &g->values[op[0] == 'C' ? n->in[k] : n->out[k]];
      int64_t chunk = part->shape[ax] * inner;
      for (int64_t a = 0; a < outer; a++) {
        char *bp = (char *)big->data + ((a * big->shape[ax] * inner) + at * inner) * (int64_t)es;
        char *pp = (char *)part->data + a * chunk * (int64_t)es;
        if (op[0] == 'C') memcpy(bp, pp, (size_t)chunk * es);
        else memcpy(pp, bp, (size_t)chunk * es);
      }
      at += part->shape[ax];
    }
    return;
  }
  if (!strcmp(op, "Gather")) {
    const cwm_value *ix = &g->values[n->in[1]];
    int64_t D = x->shape[p->axis], outer = prod(0, p->axis, x->shape), inner = prod(p->axis + 1, x->ndim, x->shape);
    int64_t ni = cwm_value_numel(ix);
    for (int64_t a = 0; a < outer; a++)
      for (int64_t j = 0; j < ni; j++) {
        int64_t t = ldi(ix, j);
        if (t < 0) t += D;
        memcpy((char *)o->data + ((a * ni + j) * inner) * (int64_t)es, xd + ((a * D + t) * inner) * (int64_t)es,
               (size_t)inner * es);
      }
    return;
  }
  for (int64_t i = 0; i < on; i++, next(o->ndim, o->shape, c)) {
    int64_t j = 0;
    if (!strcmp(op, "Transpose"))
      for (int d = 0; d < o->ndim; d++) j += c[d] * xs[p->perm[d]];
    else if (!strcmp(op, "Slice"))
      for (int d = 0; d < o->ndim; d++) j += (p->start[d] + c[d] * p->step[d]) * xs[d];
    else if (!strcmp(op, "Tile"))
      for (int d = 0; d < o->ndim; d++) j += (c[d] % x->shape[d]) * xs[d];
    else if (!strcmp(op, "Expand"))
      j = bidx(o->ndim, c, x->ndim, x->shape);
    else
      j = i; /* Reshape, Flatten, Squeeze, Unsqueeze: same order */
    memcpy((char *)o->data + i * (int64_t)es, xd + j * (int64_t)es, es);
  }
}

int cwm_graph_fold_node(cwm_graph *g, int ni, const cwm_opp *p, cwm_err *err) {
  cwm_gnode *n = &g->nodes[ni];
  const char *op = n->op_type;
  for (int k = 0; k < n->nout; k++) alloc_data(&g->values[n->out[k]]);
  cwm_value *o = &g->values[n->out[0]];
  const cwm_value *x = n->nin > 0 && n->in[0] >= 0 ? &g->values[n->in[0]] : NULL;
  if (!strcmp(op, "Shape")) {
    for (int64_t i = 0; i < o->shape[0]; i++) ((int64_t *)o->data)[i] = x->shape[p->shape_start + i];
  } else if (!strcmp(op, "Size")) {
    *(int64_t *)o->data = cwm_value_numel(x);
  } else if (!strcmp(op, "ConstantOfShape")) {
    const cwm_value *f = p->fill >= 0 ? &g->values[p->fill] : NULL;
    int64_t on = cwm_value_numel(o);
    for (int64_t i = 0; i < on; i++) st(o, i, f ? ldf(f, 0) : 0, f ? ldi(f, 0) : 0);
  } else if (!strcmp(op, "Range")) {
    const cwm_value *d = &g->values[n->in[2]];
    int64_t on = cwm_value_numel(o);
    for (int64_t i = 0; i < on; i++)
      st(o, i, ldf(x, 0) + (double)i * ldf(d, 0), (int64_t)((uint64_t)ldi(x, 0) + (uint64_t)i * (uint64_t)ldi(d, 0)));
  } else if (!strcmp(op, "Conv")) {
    fold_conv(g, n, p);
  } else if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool")) {
    fold_pool(g, n, p);
  } else if (!strcmp(op, "GlobalAveragePool")) {
    int64_t nc = x->shape[0] * x->shape[1], hw = prod(2, x->ndim, x->shape);
    for (int64_t c = 0; c < nc; c++) {
      double s = 0;
      for (int64_t i = 0; i < hw; i++) s += ((const float *)x->data)[c * hw + i];
      ((float *)o->data)[c] = (float)(hw ? s / (double)hw : 0);
    }
  } else if (!strcmp(op, "MatMul")) {
    fold_matmul(g, n);
  } else if (!strcmp(op, "Gemm")) {
    fold_gemm(g, n, p);
  } else if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax")) {
    fold_softmax(g, n, p);
  } else if (!strncmp(op, "Reduce", 6)) {
    fold_reduce(g, n, p);
  } else if (!strcmp(op, "BatchNormalization") || !strcmp(op, "LayerNormalization")) {
    fold_norm(g, n, p);
  } else if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze") ||
             !strcmp(op, "Transpose") || !strcmp(op, "Slice") || !strcmp(op, "Tile") || !strcmp(op, "Expand") ||
             !strcmp(op, "Concat") || !strcmp(op, "Split") || !strcmp(op, "Gather")) {
    fold_move(g, n, p);
  } else {
    return fold_elementwise(g, ni, p, err);
  }
  return 0;
}

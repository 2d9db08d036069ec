/* anchors.c: the oneDNN and PyTorch speed anchors of bench/anchors.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* popen, clock_gettime (if included first) */
#endif

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "../anchors.h"

#ifdef CWM_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

/* Parses "op k=v k=v ..." (suite columns 2 and 3 joined by a space). Returns 0, or -1 on
 * an unknown op/key, a malformed value, or a missing/non-positive required size. */
int anchor_parse_spec(const char *spec, anchor_op *op) {
  static const struct { const char *name; anchor_kind kind; } kinds[] = {
      {"dense", ANCHOR_DENSE},       {"batch_matmul", ANCHOR_BATCH_MATMUL},
      {"matmul", ANCHOR_MATMUL},     {"conv2d", ANCHOR_CONV2D},
      {"dwconv2d", ANCHOR_DWCONV2D}, {"softmax", ANCHOR_SOFTMAX},
      {"layernorm", ANCHOR_LAYERNORM}};
  char buf[512];
  if (!spec || !op || strlen(spec) >= sizeof buf) return -1;
  strcpy(buf, spec);
  memset(op, 0, sizeof *op);
  op->stride = 1;
  op->pad = 0;
  op->bias = 0;
  op->act = ANCHOR_ACT_NONE;

  char *save = NULL;
  char *tok = strtok_r(buf, " \t\r\n", &save);
  if (!tok) return -1;
  int found = 0;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(tok, kinds[i].name) == 0) {
      op->kind = kinds[i].kind;
      found = 1;
    }
  if (!found) return -1;

  while ((tok = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
    char *eq = strchr(tok, '=');
    if (!eq || eq == tok || !eq[1]) return -1;
    *eq = '\0';
    const char *key = tok, *val = eq + 1;
    if (strcmp(key, "act") == 0) {
      if (strcmp(val, "none") == 0) op->act = ANCHOR_ACT_NONE;
      else if (strcmp(val, "relu") == 0) op->act = ANCHOR_ACT_RELU;
      else if (strcmp(val, "gelu") == 0) op->act = ANCHOR_ACT_GELU;
      else return -1;
      continue;
    }
    char *end = NULL;
    long v = strtol(val, &end, 10);
    if (!end || *end) return -1;
    long *dst = NULL;
    if (strcmp(key, "B") == 0) dst = &op->B;
    else if (strcmp(key, "M") == 0) dst = &op->M;
    else if (strcmp(key, "N") == 0) dst = &op->N;
    else if (strcmp(key, "K") == 0) dst = &op->K;
    else if (strcmp(key, "C") == 0) dst = &op->C;
    else if (strcmp(key, "H") == 0) dst = &op->H;
    else if (strcmp(key, "W") == 0) dst = &op->W;
    else if (strcmp(key, "R") == 0) dst = &op->R;
    else if (strcmp(key, "S") == 0) dst = &op->S;
    else if (strcmp(key, "stride") == 0) dst = &op->stride;
    else if (strcmp(key, "pad") == 0) dst = &op->pad;
    else if (strcmp(key, "bias") == 0) {
      if (v != 0 && v != 1) return -1;
      op->bias = (int)v;
      continue;
    } else return -1;
    *dst = v;
  }

  /* required sizes */
  switch (op->kind) {
  case ANCHOR_BATCH_MATMUL:
    if (op->B <= 0) return -1;
    /* fall through */
  case ANCHOR_DENSE:
  case ANCHOR_MATMUL:
    if (op->M <= 0 || op->N <= 0 || op->K <= 0) return -1;
    break;
  case ANCHOR_CONV2D:
    if (op->K <= 0) return -1;
    /* fall through */
  case ANCHOR_DWCONV2D:
    if (op->C <= 0 || op->H <= 0 || op->W <= 0 || op->R <= 0 || op->S <= 0 ||
        op->stride <= 0 || op->pad < 0)
      return -1;
    if (op->H + 2 * op->pad < op->R || op->W + 2 * op->pad < op->S) return -1;
    break;
  case ANCHOR_SOFTMAX:
    if (op->B <= 0) return -1;
    /* fall through */
  case ANCHOR_LAYERNORM:
    if (op->M <= 0 || op->N <= 0) return -1;
    break;
  }
  return 0;
}

long anchor_conv_oh(const anchor_op *op) {
  return (op->H + 2 * op->pad - op->R) / op->stride + 1;
}
long anchor_conv_ow(const anchor_op *op) {
  return (op->W + 2 * op->pad - op->S) / op->stride + 1;
}

/* Floating-point operations of one call (multiply-add = 2). Bias and activation are not
 * counted. softmax and layernorm count 5 ops per element (softmax: max, subtract, exp,
 * sum, divide; layernorm: sum, subtract mean, square-accumulate, normalize, affine). */
double anchor_flops(const anchor_op *op) {
  switch (op->kind) {
  case ANCHOR_DENSE:
  case ANCHOR_MATMUL:
    return 2.0 * op->M * op->N * op->K;
  case ANCHOR_BATCH_MATMUL:
    return 2.0 * op->B * op->M * op->N * op->K;
  case ANCHOR_CONV2D:
    return 2.0 * op->K * anchor_conv_oh(op) * anchor_conv_ow(op) * op->C * op->R * op->S;
  case ANCHOR_DWCONV2D:
    return 2.0 * op->C * anchor_conv_oh(op) * anchor_conv_ow(op) * op->R * op->S;
  case ANCHOR_SOFTMAX:
    return 5.0 * op->B * op->M * op->N;
  case ANCHOR_LAYERNORM:
    return 5.0 * op->M * op->N;
  }
  return 0.0;
}

/* ---------------------------------------------------------------- helpers */

static double anchor_now_(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int anchor_cmp_double_(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of the finite positive values of v[0..n); `none` when there are none. */
double anchor_median(const double *v, int n, double none) {
  double *w = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  int k = 0;
  for (int i = 0; i < n; i++)
    if (isfinite(v[i]) && v[i] > 0) w[k++] = v[i];
  qsort(w, (size_t)k, sizeof w[0], anchor_cmp_double_);
  double m = k == 0 ? none : k % 2 ? w[k / 2] : 0.5 * (w[k / 2 - 1] + w[k / 2]);
  free(w);
  return m;
}

/* oneDNN here is built on libgomp, which is loaded (as its dependency) whenever this
 * code runs; look omp_set_num_threads up at run time so no -fopenmp link is needed. */
static int anchor_set_threads_(int threads) {
  typedef void (*set_fn)(int);
  void *self = dlopen(NULL, RTLD_NOW);
  if (!self) return -1;
  set_fn fn;
  void *sym = dlsym(self, "omp_set_num_threads");
  memcpy(&fn, &sym, sizeof fn);
  if (fn) fn(threads);
  dlclose(self);
  return fn ? 0 : -1;
}

static void anchor_fill_(float *p, size_t n, uint64_t *state) {
  for (size_t i = 0; i < n; i++) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    p[i] = (float)((double)(*state >> 40) * (2.0 / 16777216.0) - 1.0); /* [-1,1) */
  }
}

#define ANCHOR_MAX_MEMS 24
#define ANCHOR_MAX_STEPS 4
#define ANCHOR_MAX_ARGS 8

typedef struct {
  dnnl_primitive_t prim;
  int nargs;
  dnnl_exec_arg_t args[ANCHOR_MAX_ARGS];
} anchor_step_;

/* How one oneDNN measurement is set up (see anchor_dnnl_seconds). */
typedef struct {
  int alt_act; /* conv: src/dst fixed to NCHW (else format any + timed reorders);
                  dense: activation as a separate eltwise primitive (else post-op) */
  int wtag;    /* dense/matmul constant weights [K,N]: 0 format any, 1 "ab", 2 "ba" */
} anchor_variant_;

/* Everything one measurement owns; anchor_ctx_free_ releases it. */
typedef struct {
  dnnl_engine_t eng;
  dnnl_stream_t strm;
  dnnl_memory_t mems[ANCHOR_MAX_MEMS];
  int nmems;
  anchor_step_ steps[ANCHOR_MAX_STEPS]; /* the timed sequence */
  int nsteps;
  dnnl_memory_desc_t wmd; /* weights layout the primitive uses (has_wmd) */
  int has_wmd;
  uint64_t rng;
  char *err;
  size_t errn;
} anchor_ctx_;

static void anchor_ctx_free_(anchor_ctx_ *c) {
  for (int i = 0; i < c->nsteps; i++)
    if (c->steps[i].prim) dnnl_primitive_destroy(c->steps[i].prim);
  for (int i = 0; i < c->nmems; i++) dnnl_memory_destroy(c->mems[i]);
  if (c->strm) dnnl_stream_destroy(c->strm);
  if (c->eng) dnnl_engine_destroy(c->eng);
  c->nsteps = c->nmems = 0;
  c->strm = NULL;
  c->eng = NULL;
}

static int anchor_fail_(anchor_ctx_ *c, const char *what, dnnl_status_t st) {
  if (c->err && c->errn) snprintf(c->err, c->errn, "oneDNN: %s failed (status %d)", what, (int)st);
  return -1;
}

#define ANCHOR_CHK_(c, call)                                        \
  do {                                                              \
    dnnl_status_t st_ = (call);                                     \
    if (st_ != dnnl_success) return anchor_fail_((c), #call, st_);  \
  } while (0)

/* New library-allocated memory for md; filled with [-1,1) values when fill. */
static dnnl_memory_t anchor_mem_(anchor_ctx_ *c, const dnnl_memory_desc_t *md, int fill) {
  dnnl_memory_t m = NULL;
  if (c->nmems >= ANCHOR_MAX_MEMS) return NULL;
  if (dnnl_memory_create(&m, md, c->eng, DNNL_MEMORY_ALLOCATE) != dnnl_success) return NULL;
  c->mems[c->nmems++] = m;
  if (fill) {
    void *p = NULL;
    dnnl_memory_get_data_handle(m, &p);
    anchor_fill_((float *)p, dnnl_memory_desc_get_size(md) / sizeof(float), &c->rng);
  }
  return m;
}

/* Creates the primitive for pd (and destroys pd) as the next timed step. */
static int anchor_add_step_(anchor_ctx_ *c, dnnl_primitive_desc_t pd, int nargs,
                            const dnnl_exec_arg_t *args) {
  dnnl_primitive_t prim = NULL;
  if (c->nsteps >= ANCHOR_MAX_STEPS || nargs > ANCHOR_MAX_ARGS) {
    dnnl_primitive_desc_destroy(pd);
    return anchor_fail_(c, "too many steps/args", dnnl_runtime_error);
  }
  dnnl_status_t st = dnnl_primitive_create(&prim, pd);
  dnnl_primitive_desc_destroy(pd);
  if (st != dnnl_success) return anchor_fail_(c, "dnnl_primitive_create", st);
  anchor_step_ *s = &c->steps[c->nsteps++];
  s->prim = prim;
  s->nargs = nargs;
  memcpy(s->args, args, (size_t)nargs * sizeof *args);
  return 0;
}

/* Appends a timed reorder src_mem -> dst_mem. */
static int anchor_add_reorder_(anchor_ctx_ *c, dnnl_memory_t src, dnnl_memory_t dst) {
  const dnnl_memory_desc_t *smd = NULL, *dmd = NULL;
  dnnl_primitive_desc_t pd = NULL;
  ANCHOR_CHK_(c, dnnl_memory_get_memory_desc(src, &smd));
  ANCHOR_CHK_(c, dnnl_memory_get_memory_desc(dst, &dmd));
  ANCHOR_CHK_(c, dnnl_reorder_primitive_desc_create(&pd, smd, c->eng, dmd, c->eng, NULL));
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
  return anchor_add_step_(c, pd, 2, args);
}

/* Weights: a plain user buffer (random), reordered ONCE (untimed) into the layout the
 * primitive chose. Returns the memory to pass to the primitive, or NULL. */
static dnnl_memory_t anchor_const_weights_(anchor_ctx_ *c, const dnnl_memory_desc_t *user_md,
                                           const dnnl_memory_desc_t *chosen_md) {
  dnnl_memory_t user = anchor_mem_(c, user_md, 1);
  if (!user) return NULL;
  if (dnnl_memory_desc_equal(user_md, chosen_md)) return user;
  dnnl_memory_t w = anchor_mem_(c, chosen_md, 0);
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t prim = NULL;
  if (!w) return NULL;
  if (dnnl_reorder_primitive_desc_create(&pd, user_md, c->eng, chosen_md, c->eng, NULL) !=
      dnnl_success)
    return NULL;
  dnnl_status_t st = dnnl_primitive_create(&prim, pd);
  dnnl_primitive_desc_destroy(pd);
  if (st != dnnl_success) return NULL;
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, w}};
  st = dnnl_primitive_execute(prim, c->strm, 2, args);
  if (st == dnnl_success) st = dnnl_stream_wait(c->strm);
  dnnl_primitive_destroy(prim);
  return st == dnnl_success ? w : NULL;
}

/* Attribute with the op's activation as an eltwise post-op (NULL attr when none). */
static int anchor_act_attr_(anchor_ctx_ *c, anchor_act act, dnnl_primitive_attr_t *attr) {
  *attr = NULL;
  if (act == ANCHOR_ACT_NONE) return 0;
  dnnl_post_ops_t po = NULL;
  ANCHOR_CHK_(c, dnnl_post_ops_create(&po));
  dnnl_status_t st = dnnl_post_ops_append_eltwise(
      po, 1.0f, act == ANCHOR_ACT_RELU ? dnnl_eltwise_relu : dnnl_eltwise_gelu_erf, 0.0f, 0.0f);
  if (st == dnnl_success) st = dnnl_primitive_attr_create(attr);
  if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(*attr, po);
  dnnl_post_ops_destroy(po);
  if (st != dnnl_success) {
    if (*attr) dnnl_primitive_attr_destroy(*attr);
    *attr = NULL;
    return anchor_fail_(c, "eltwise post-op attr", st);
  }
  return 0;
}

static int anchor_md_(anchor_ctx_ *c, dnnl_memory_desc_t *md, int nd, const dnnl_dims_t dims,
                      dnnl_format_tag_t tag) {
  ANCHOR_CHK_(c, dnnl_memory_desc_init_by_tag(md, nd, dims, dnnl_f32, tag));
  return 0;
}

/* ------------------------------------------------------------ op builders */

/* dense / matmul / batch_matmul with the matmul primitive. For dense and matmul the
 * second operand is a constant weight (layout v->wtag, reordered once, untimed); for
 * batch_matmul it is an activation and stays in the plain [B,N,K] layout. */
static int anchor_build_matmul_(anchor_ctx_ *c, const anchor_op *op, const anchor_variant_ *v) {
  static const dnnl_format_tag_t wtags[3] = {dnnl_format_tag_any, dnnl_ab, dnnl_ba};
  const int sep_act = v->alt_act;
  dnnl_memory_desc_t src_md, wu_md, wa_md, dst_md, b_md;
  const int nd = op->kind == ANCHOR_BATCH_MATMUL ? 3 : 2;
  if (nd == 3) {
    dnnl_dims_t sd = {op->B, op->M, op->K}, wd = {op->B, op->K, op->N}, dd = {op->B, op->M, op->N};
    if (anchor_md_(c, &src_md, 3, sd, dnnl_abc) || anchor_md_(c, &wu_md, 3, wd, dnnl_acb) ||
        anchor_md_(c, &dst_md, 3, dd, dnnl_abc))
      return -1;
    wa_md = wu_md;
  } else {
    dnnl_dims_t sd = {op->M, op->K}, wd = {op->K, op->N}, dd = {op->M, op->N};
    /* dense: W[N,K] row-major is the [K,N] matrix in "ba"; matmul: b[K,N] is "ab" */
    if (anchor_md_(c, &src_md, 2, sd, dnnl_ab) ||
        anchor_md_(c, &wu_md, 2, wd, op->kind == ANCHOR_DENSE ? dnnl_ba : dnnl_ab) ||
        anchor_md_(c, &wa_md, 2, wd, wtags[v->wtag < 0 || v->wtag > 2 ? 0 : v->wtag]) ||
        anchor_md_(c, &dst_md, 2, dd, dnnl_ab))
      return -1;
  }
  const int has_bias = op->kind == ANCHOR_DENSE && op->bias;
  if (has_bias) {
    dnnl_dims_t bd = {1, op->N};
    if (anchor_md_(c, &b_md, 2, bd, dnnl_ab)) return -1;
  }
  dnnl_matmul_desc_t desc;
  ANCHOR_CHK_(c, dnnl_matmul_desc_init(&desc, &src_md, &wa_md, has_bias ? &b_md : NULL, &dst_md));
  dnnl_primitive_attr_t attr = NULL;
  const anchor_act act = op->kind == ANCHOR_DENSE ? op->act : ANCHOR_ACT_NONE;
  if (anchor_act_attr_(c, sep_act ? ANCHOR_ACT_NONE : act, &attr)) return -1;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t st = dnnl_primitive_desc_create(&pd, &desc, attr, c->eng, NULL);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (st != dnnl_success) return anchor_fail_(c, "matmul primitive_desc_create", st);

  const dnnl_memory_desc_t *wc_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  c->wmd = *wc_md;
  c->has_wmd = 1;
  dnnl_memory_t src = anchor_mem_(c, &src_md, 1), dst = anchor_mem_(c, &dst_md, 1);
  dnnl_memory_t w = nd == 3 ? anchor_mem_(c, &wu_md, 1) : anchor_const_weights_(c, &wu_md, wc_md);
  dnnl_memory_t b = has_bias ? anchor_mem_(c, &b_md, 1) : NULL;
  if (!src || !dst || !w || (has_bias && !b)) {
    dnnl_primitive_desc_destroy(pd);
    return anchor_fail_(c, "matmul memory setup", dnnl_out_of_memory);
  }
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, dst},
                             {DNNL_ARG_BIAS, b}};
  if (anchor_add_step_(c, pd, has_bias ? 4 : 3, args)) return -1;
  if (!sep_act || act == ANCHOR_ACT_NONE) return 0;
  /* activation as a separate, in-place eltwise primitive on dst (timed) */
  dnnl_eltwise_desc_t ed;
  ANCHOR_CHK_(c, dnnl_eltwise_forward_desc_init(
                     &ed, dnnl_forward_inference,
                     act == ANCHOR_ACT_RELU ? dnnl_eltwise_relu : dnnl_eltwise_gelu_erf, &dst_md,
                     0.0f, 0.0f));
  ANCHOR_CHK_(c, dnnl_primitive_desc_create(&pd, &ed, NULL, c->eng, NULL));
  dnnl_exec_arg_t eargs[2] = {{DNNL_ARG_SRC, dst}, {DNNL_ARG_DST, dst}};
  return anchor_add_step_(c, pd, 2, eargs);
}

/* conv2d / dwconv2d with the convolution primitive; weights format any (reordered once,
 * untimed). plain_act != 0: src/dst fixed to NCHW; else src/dst format any with timed
 * reorders from/to NCHW around the convolution when oneDNN picks another layout. */
static int anchor_build_conv_(anchor_ctx_ *c, const anchor_op *op, int plain_act) {
  const int dw = op->kind == ANCHOR_DWCONV2D;
  const long kout = dw ? op->C : op->K;
  const long oh = anchor_conv_oh(op), ow = anchor_conv_ow(op);
  dnnl_dims_t sd = {1, op->C, op->H, op->W}, dd = {1, kout, oh, ow}, bd = {kout};
  dnnl_dims_t wd4 = {op->K, op->C, op->R, op->S}, wd5 = {op->C, 1, 1, op->R, op->S};
  dnnl_memory_desc_t su_md, du_md, sa_md, da_md, wu_md, wa_md, b_md;
  const dnnl_format_tag_t act_tag = plain_act ? dnnl_nchw : dnnl_format_tag_any;
  if (anchor_md_(c, &su_md, 4, sd, dnnl_nchw) || anchor_md_(c, &du_md, 4, dd, dnnl_nchw) ||
      anchor_md_(c, &sa_md, 4, sd, act_tag) || anchor_md_(c, &da_md, 4, dd, act_tag))
    return -1;
  if (dw) {
    if (anchor_md_(c, &wu_md, 5, wd5, dnnl_goihw) ||
        anchor_md_(c, &wa_md, 5, wd5, dnnl_format_tag_any))
      return -1;
  } else {
    if (anchor_md_(c, &wu_md, 4, wd4, dnnl_oihw) ||
        anchor_md_(c, &wa_md, 4, wd4, dnnl_format_tag_any))
      return -1;
  }
  if (op->bias && anchor_md_(c, &b_md, 1, bd, dnnl_x)) return -1;
  dnnl_dims_t strides = {op->stride, op->stride}, pads = {op->pad, op->pad};
  dnnl_dims_t pad_r = {0, 0};
  /* right padding so that the output size matches floor((H+2p-R)/s)+1 exactly */
  pad_r[0] = (oh - 1) * op->stride + op->R - op->H - op->pad;
  pad_r[1] = (ow - 1) * op->stride + op->S - op->W - op->pad;
  dnnl_convolution_desc_t desc;
  ANCHOR_CHK_(c, dnnl_convolution_forward_desc_init(
                     &desc, dnnl_forward_inference, dnnl_convolution_auto, &sa_md, &wa_md,
                     op->bias ? &b_md : NULL, &da_md, strides, pads, pad_r));
  dnnl_primitive_attr_t attr = NULL;
  if (anchor_act_attr_(c, op->act, &attr)) return -1;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t st = dnnl_primitive_desc_create(&pd, &desc, attr, c->eng, NULL);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (st != dnnl_success) return anchor_fail_(c, "convolution primitive_desc_create", st);

  const dnnl_memory_desc_t *sc_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  const dnnl_memory_desc_t *wc_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t *dc_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  const int src_re = !dnnl_memory_desc_equal(&su_md, sc_md);
  const int dst_re = !dnnl_memory_desc_equal(&du_md, dc_md);
  dnnl_memory_t su = anchor_mem_(c, &su_md, 1);
  dnnl_memory_t s = src_re ? anchor_mem_(c, sc_md, 0) : su;
  dnnl_memory_t du = anchor_mem_(c, &du_md, 1);
  dnnl_memory_t d = dst_re ? anchor_mem_(c, dc_md, 0) : du;
  dnnl_memory_t w = anchor_const_weights_(c, &wu_md, wc_md);
  dnnl_memory_t b = op->bias ? anchor_mem_(c, &b_md, 1) : NULL;
  if (!su || !s || !du || !d || !w || (op->bias && !b)) {
    dnnl_primitive_desc_destroy(pd);
    return anchor_fail_(c, "convolution memory setup", dnnl_out_of_memory);
  }
  if (src_re && anchor_add_reorder_(c, su, s)) {
    dnnl_primitive_desc_destroy(pd);
    return -1;
  }
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, d},
                             {DNNL_ARG_BIAS, b}};
  if (anchor_add_step_(c, pd, op->bias ? 4 : 3, args)) return -1;
  if (dst_re && anchor_add_reorder_(c, d, du)) return -1;
  return 0;
}

static int anchor_build_softmax_(anchor_ctx_ *c, const anchor_op *op) {
  dnnl_dims_t dims = {op->B, op->M, op->N};
  dnnl_memory_desc_t md;
  if (anchor_md_(c, &md, 3, dims, dnnl_abc)) return -1;
  dnnl_softmax_v2_desc_t desc;
  ANCHOR_CHK_(c, dnnl_softmax_v2_forward_desc_init(&desc, dnnl_forward_inference,
                                                   dnnl_softmax_accurate, &md, &md, 2));
  dnnl_primitive_desc_t pd = NULL;
  ANCHOR_CHK_(c, dnnl_primitive_desc_create(&pd, &desc, NULL, c->eng, NULL));
  dnnl_memory_t src = anchor_mem_(c, &md, 1), dst = anchor_mem_(c, &md, 1);
  if (!src || !dst) {
    dnnl_primitive_desc_destroy(pd);
    return anchor_fail_(c, "softmax memory setup", dnnl_out_of_memory);
  }
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  return anchor_add_step_(c, pd, 2, args);
}

static int anchor_build_layernorm_(anchor_ctx_ *c, const anchor_op *op) {
  dnnl_dims_t dims = {op->M, op->N}, gd = {op->N};
  dnnl_memory_desc_t md, g_md;
  if (anchor_md_(c, &md, 2, dims, dnnl_ab) || anchor_md_(c, &g_md, 1, gd, dnnl_x)) return -1;
  dnnl_layer_normalization_desc_t desc;
  ANCHOR_CHK_(c, dnnl_layer_normalization_forward_desc_init(
                     &desc, dnnl_forward_inference, &md, NULL, 1e-5f,
                     (unsigned)dnnl_use_scale | (unsigned)dnnl_use_shift));
  dnnl_primitive_desc_t pd = NULL;
  ANCHOR_CHK_(c, dnnl_primitive_desc_create(&pd, &desc, NULL, c->eng, NULL));
  dnnl_memory_t src = anchor_mem_(c, &md, 1), dst = anchor_mem_(c, &md, 1);
  dnnl_memory_t g = anchor_mem_(c, &g_md, 1), b = anchor_mem_(c, &g_md, 1);
  if (!src || !dst || !g || !b) {
    dnnl_primitive_desc_destroy(pd);
    return anchor_fail_(c, "layernorm memory setup", dnnl_out_of_memory);
  }
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, g},
                             {DNNL_ARG_SHIFT, b}};
  return anchor_add_step_(c, pd, 4, args);
}

/* One call = every timed step in order, then a stream wait. */
static int anchor_run_once_(anchor_ctx_ *c) {
  for (int i = 0; i < c->nsteps; i++)
    ANCHOR_CHK_(c, dnnl_primitive_execute(c->steps[i].prim, c->strm, c->steps[i].nargs,
                                          c->steps[i].args));
  ANCHOR_CHK_(c, dnnl_stream_wait(c->strm));
  return 0;
}

/* Warm-up once, then ANCHOR_REPEATS windows of >= 50 ms; median seconds per call. */
static double anchor_time_ctx_(anchor_ctx_ *c) {
  double per[ANCHOR_REPEATS];
  if (anchor_run_once_(c)) return -1.0;
  for (int r = 0; r < ANCHOR_REPEATS; r++) {
    long n = 0;
    double t0 = anchor_now_(), el;
    do {
      if (anchor_run_once_(c)) return -1.0;
      n++;
      el = anchor_now_() - t0;
    } while (el < ANCHOR_MIN_REPEAT_S);
    per[r] = el / (double)n;
  }
  qsort(per, ANCHOR_REPEATS, sizeof per[0], anchor_cmp_double_);
  const char *vb = getenv("CWM_ANCHOR_VERBOSE");
  if (vb && atoi(vb) >= 2) { /* the spread of the windows shows machine noise */
    fprintf(stderr, "anchors:     windows (us/call, sorted):");
    for (int r = 0; r < ANCHOR_REPEATS; r++) fprintf(stderr, " %.1f", per[r] * 1e6);
    fprintf(stderr, "\n");
  }
  return per[ANCHOR_REPEATS / 2];
}

/* Builds and times one variant. *wmd (if not NULL) receives the weights layout the
 * matmul used; *has_wmd says whether it was set. */
static double anchor_dnnl_variant_(const anchor_op *op, const anchor_variant_ *v,
                                   dnnl_memory_desc_t *wmd, int *has_wmd, char *err,
                                   size_t errn) {
  anchor_ctx_ c;
  memset(&c, 0, sizeof c);
  c.rng = 0x2545F4914F6CDD1DULL;
  c.err = err;
  c.errn = errn;
  double secs = -1.0;
  int rc;
  if (dnnl_engine_create(&c.eng, dnnl_cpu, 0) != dnnl_success ||
      dnnl_stream_create(&c.strm, c.eng, dnnl_stream_default_flags) != dnnl_success) {
    anchor_fail_(&c, "engine/stream create", dnnl_runtime_error);
    anchor_ctx_free_(&c);
    return -1.0;
  }
  switch (op->kind) {
  case ANCHOR_DENSE:
  case ANCHOR_MATMUL:
  case ANCHOR_BATCH_MATMUL: rc = anchor_build_matmul_(&c, op, v); break;
  case ANCHOR_CONV2D:
  case ANCHOR_DWCONV2D: rc = anchor_build_conv_(&c, op, v->alt_act); break;
  case ANCHOR_SOFTMAX: rc = anchor_build_softmax_(&c, op); break;
  case ANCHOR_LAYERNORM: rc = anchor_build_layernorm_(&c, op); break;
  default: rc = anchor_fail_(&c, "unknown op kind", dnnl_unimplemented); break;
  }
  if (rc == 0) secs = anchor_time_ctx_(&c);
  if (has_wmd) *has_wmd = c.has_wmd;
  if (wmd && c.has_wmd) *wmd = c.wmd;
  anchor_ctx_free_(&c);
  return secs;
}

/* Median seconds per call of the op with oneDNN (float32) on `threads` OpenMP threads,
 * or a negative number with err filled. Where oneDNN offers several reasonable set-ups,
 * each is timed and the fastest is returned:
 *  - dense/matmul weights: format any (what oneDNN picks) and, when any resolved to
 *    something else, the plain layouts "ab" and "ba" of the [K,N] matrix (all pre-laid
 *    out, untimed): with AVX2 oneDNN 2.6 uses gemm-based matmul, picks "ab", and "ba"
 *    is up to 2x faster for some shapes (dense_ffn1);
 *  - dense with relu/gelu: eltwise post-op vs a separate in-place eltwise primitive;
 *  - conv: src/dst format any with timed NCHW reorders vs src/dst fixed to NCHW (both
 *    map NCHW input to NCHW output).
 * CWM_ANCHOR_VERBOSE=1 prints every variant's time to stderr, =2 also the 7 windows. */
double anchor_dnnl_seconds(const anchor_op *op, int threads, char *err, size_t errn) {
  static const char *wnames[3] = {"any", "ab", "ba"};
  if (err && errn) err[0] = '\0';
  if (threads < 1) threads = 1;
  if (anchor_set_threads_(threads) != 0) {
    if (err && errn) snprintf(err, errn, "omp_set_num_threads not found (oneDNN not on libgomp?)");
    return -1.0;
  }
  const int conv = op->kind == ANCHOR_CONV2D || op->kind == ANCHOR_DWCONV2D;
  const int const_w = op->kind == ANCHOR_DENSE || op->kind == ANCHOR_MATMUL;
  const int n_alt = conv || (op->kind == ANCHOR_DENSE && op->act != ANCHOR_ACT_NONE) ? 2 : 1;
  const char *verbose = getenv("CWM_ANCHOR_VERBOSE");
  const int vb = verbose && verbose[0] && verbose[0] != '0';
  double best = -1.0;
  char e1[256];
  for (int alt = 0; alt < n_alt; alt++) {
    dnnl_memory_desc_t any_md;
    int any_set = 0;
    for (int wt = 0; wt < (const_w ? 3 : 1); wt++) {
      if (wt > 0) { /* skip a plain layout that format any already chose */
        dnnl_memory_desc_t md;
        dnnl_dims_t wd = {op->K, op->N};
        if (any_set &&
            dnnl_memory_desc_init_by_tag(&md, 2, wd, dnnl_f32, wt == 1 ? dnnl_ab : dnnl_ba) ==
                dnnl_success &&
            dnnl_memory_desc_equal(&md, &any_md))
          continue;
      }
      anchor_variant_ v = {alt, wt};
      int has = 0;
      e1[0] = '\0';
      double t = anchor_dnnl_variant_(op, &v, wt == 0 ? &any_md : NULL, wt == 0 ? &has : NULL,
                                      e1, sizeof e1);
      if (wt == 0) any_set = has;
      if (vb)
        fprintf(stderr, "anchors:   %s%s%s: %.3f us%s%s\n",
                conv ? (alt ? "conv src/dst nchw" : "conv src/dst any+reorders")
                     : (n_alt == 2 ? (alt ? "separate eltwise" : "eltwise post-op") : "default"),
                const_w ? ", weights " : "", const_w ? wnames[wt] : "", t * 1e6,
                t > 0 ? "" : " ", t > 0 ? "" : e1);
      if (t > 0 && (best <= 0 || t < best)) best = t;
      if (t <= 0 && err && errn && !err[0]) snprintf(err, errn, "%s", e1);
    }
  }
  if (best > 0 && err && errn) err[0] = '\0';
  return best;
}

/* ---------------------------------------------------------------- PyTorch */

/* Path of bench/torch_anchor.py: $CWM_SOURCE_DIR, else the CWM_SOURCE_DIR compile
 * definition, else <exe dir>/../bench, else "bench/torch_anchor.py". */
void anchor_torch_script(char *out, size_t n) {
  const char *env = getenv("CWM_SOURCE_DIR");
  if (env && env[0]) {
    snprintf(out, n, "%s/bench/torch_anchor.py", env);
    if (access(out, R_OK) == 0) return;
  }
#ifdef CWM_SOURCE_DIR
  snprintf(out, n, "%s/bench/torch_anchor.py", CWM_SOURCE_DIR);
  if (access(out, R_OK) == 0) return;
#endif
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = '\0';
      int w = snprintf(out, n, "%s/../bench/torch_anchor.py", exe);
      if (w > 0 && (size_t)w < n && access(out, R_OK) == 0) return;
    }
  }
  snprintf(out, n, "bench/torch_anchor.py");
}

/* Appends s to the command in single quotes (shell-safe). Returns -1 on overflow. */
static int anchor_shell_quote_(char *cmd, size_t n, const char *s) {
  size_t len = strlen(cmd);
  if (len + 1 >= n) return -1;
  cmd[len++] = '\'';
  for (; *s; s++) {
    const char *piece = *s == '\'' ? "'\\''" : NULL;
    size_t pl = piece ? 4 : 1;
    if (len + pl + 2 >= n) return -1;
    if (piece) memcpy(cmd + len, piece, pl);
    else cmd[len] = *s;
    len += pl;
  }
  cmd[len++] = '\'';
  cmd[len] = '\0';
  return 0;
}

/* Median seconds per call of suite row `id` with PyTorch eager on `threads` threads, by
 * running bench/torch_anchor.py under /usr/bin/python3; negative with err on failure. */
double anchor_torch_seconds(const char *suite_path, const char *id, int threads, char *err,
                                   size_t errn) {
  char script[4096], cmd[8192], line[1024], last[1024] = "";
  if (err && errn) err[0] = '\0';
  anchor_torch_script(script, sizeof script);
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 ");
  int bad = anchor_shell_quote_(cmd, sizeof cmd, script);
  strncat(cmd, " --suite ", sizeof cmd - strlen(cmd) - 1);
  bad |= anchor_shell_quote_(cmd, sizeof cmd, suite_path);
  strncat(cmd, " --id ", sizeof cmd - strlen(cmd) - 1);
  bad |= anchor_shell_quote_(cmd, sizeof cmd, id);
  size_t l = strlen(cmd);
  if (snprintf(cmd + l, sizeof cmd - l, " --threads %d 2>&1", threads < 1 ? 1 : threads) >=
      (int)(sizeof cmd - l))
    bad = 1;
  if (bad) {
    if (err && errn) snprintf(err, errn, "torch command line too long");
    return -1.0;
  }
  fflush(NULL);
  FILE *p = popen(cmd, "r");
  if (!p) {
    if (err && errn) snprintf(err, errn, "popen failed: %s", cmd);
    return -1.0;
  }
  while (fgets(line, sizeof line, p)) {
    size_t l = strlen(line);
    while (l && (line[l - 1] == '\n' || line[l - 1] == '\r')) line[--l] = '\0';
    if (l) memcpy(last, line, l + 1);
  }
  int status = pclose(p);
  char *end = NULL;
  double secs = strtod(last, &end);
  if (status != 0 || end == last || *end != '\0' || !(secs > 0)) {
    if (err && errn)
      snprintf(err, errn, "torch_anchor.py failed (status %d): %.200s", status, last);
    return -1.0;
  }
  return secs;
}

#endif /* CWM_HAVE_DNNL */

/* An anchor measured in a child process, because neither libgomp (which oneDNN loads) nor python
 * may live in a process that forks the runner: torch = 0 times oneDNN on the op spec, 1 PyTorch on
 * the suite row id. Seconds per call, negative when unavailable (the reason on stderr). */
double anchor_seconds_child(int torch, const char *suite, const char *id, const char *spec, int threads) {
#ifdef CWM_HAVE_DNNL
  int fd[2];
  if (pipe(fd)) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    return -1;
  }
  if (pid == 0) {
    close(fd[0]);
    char err[256] = "";
    double s = -1;
    anchor_op op;
    if (!torch) {
      if (anchor_parse_spec(spec, &op) == 0) s = anchor_dnnl_seconds(&op, threads, err, sizeof err);
      else snprintf(err, sizeof err, "cannot read the spec '%.200s'", spec);
    } else {
      s = anchor_torch_seconds(suite, id, threads, err, sizeof err);
    }
    if (s < 0) fprintf(stderr, "%s %s: %s\n", torch ? "PyTorch" : "oneDNN", id, err);
    if (write(fd[1], &s, sizeof s) != sizeof s) _exit(1);
    _exit(0);
  }
  close(fd[1]);
  double s = -1;
  if (read(fd[0], &s, sizeof s) != sizeof s) s = -1;
  close(fd[0]);
  waitpid(pid, NULL, 0);
  return s;
#else
  (void)torch, (void)suite, (void)id, (void)spec, (void)threads;
  return -1;
#endif
}

/* workgen.c: training workloads. A seeded generator of op specs of every suite op kind with shapes
 * from the ranges real networks use (never the shape of a suite row), the TSV workload lists it
 * writes, spec comparison by parsed values, and the inverse of the op library (workload -> spec). */
#define _GNU_SOURCE
#include "cwm/dataset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ specs by value */

#define SPEC_MAXK 10

typedef struct {
  const char *name;
  int nkeys;
  const char *keys[SPEC_MAXK];
  long long dflt[SPEC_MAXK]; /* -1: required */
  int epilogue[SPEC_MAXK];   /* bias / act */
} spec_def;

/* The op library's keys (oplib.c), with its defaults. act: 0 none, 1 relu, 2 gelu. */
static const spec_def defs[] = {
    {"dense", 5, {"M", "N", "K", "bias", "act"}, {-1, -1, -1, 0, 0}, {0, 0, 0, 1, 1}},
    {"matmul", 3, {"M", "N", "K"}, {-1, -1, -1}, {0}},
    {"batch_matmul", 4, {"B", "M", "N", "K"}, {-1, -1, -1, -1}, {0}},
    {"conv2d", 10, {"C", "H", "W", "K", "R", "S", "stride", "pad", "bias", "act"},
     {-1, -1, -1, -1, -1, -1, 1, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 1}},
    {"dwconv2d", 9, {"C", "H", "W", "R", "S", "stride", "pad", "bias", "act"},
     {-1, -1, -1, -1, -1, 1, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 1, 1}},
    {"softmax", 3, {"B", "M", "N"}, {-1, -1, -1}, {0}},
    {"layernorm", 2, {"M", "N"}, {-1, -1}, {0}},
};
#define NDEFS ((int)(sizeof defs / sizeof defs[0]))
static const char *const acts[] = {"none", "relu", "gelu"};

typedef struct {
  const spec_def *def;
  long long v[SPEC_MAXK];
} spec_vals;

static int parse_vals(const char *spec, spec_vals *sv, cwm_err *err) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", spec ? spec : "");
  char *save = NULL, *tok = strtok_r(buf, " \t\r\n", &save);
  if (!tok) return cwm_fail(err, CWM_EPARSE, "spec: empty op spec");
  sv->def = NULL;
  for (int i = 0; i < NDEFS; i++)
    if (!strcmp(defs[i].name, tok)) sv->def = &defs[i];
  if (!sv->def) return cwm_fail(err, CWM_EPARSE, "spec '%.64s': unknown op '%.32s'", spec, tok);
  const spec_def *d = sv->def;
  int seen[SPEC_MAXK] = {0};
  while ((tok = strtok_r(NULL, " \t\r\n", &save))) {
    char *eq = strchr(tok, '=');
    if (!eq) return cwm_fail(err, CWM_EPARSE, "spec '%.64s': '%.32s' is not key=value", spec, tok);
    *eq = 0;
    int k = -1;
    for (int i = 0; i < d->nkeys; i++)
      if (!strcmp(d->keys[i], tok)) k = i;
    if (k < 0) return cwm_fail(err, CWM_EPARSE, "spec '%.64s': unknown key '%.32s'", spec, tok);
    if (seen[k]) return cwm_fail(err, CWM_EPARSE, "spec '%.64s': key '%s' given twice", spec, tok);
    seen[k] = 1;
    const char *v = eq + 1;
    if (!strcmp(tok, "act")) {
      int a = -1;
      for (int i = 0; i < 3; i++)
        if (!strcmp(acts[i], v)) a = i;
      if (a < 0) return cwm_fail(err, CWM_EPARSE, "spec '%.64s': bad act '%.32s'", spec, v);
      sv->v[k] = a;
    } else {
      char *end;
      long long x = strtoll(v, &end, 10);
      if (!*v || *end) return cwm_fail(err, CWM_EPARSE, "spec '%.64s': key '%s' needs an integer", spec, tok);
      sv->v[k] = x;
    }
  }
  for (int i = 0; i < d->nkeys; i++) {
    if (seen[i]) continue;
    if (d->dflt[i] < 0) return cwm_fail(err, CWM_EPARSE, "spec '%.64s': missing key '%s'", spec, d->keys[i]);
    sv->v[i] = d->dflt[i];
  }
  return 0;
}

/* "op k=v ..." with every key in the library's order, defaults filled in; the epilogue keys
 * are left out with shape_only. */
static void normal_form(const spec_vals *sv, int shape_only, char *out, size_t n) {
  size_t l = (size_t)snprintf(out, n, "%s", sv->def->name);
  for (int i = 0; i < sv->def->nkeys && l < n; i++) {
    if (shape_only && sv->def->epilogue[i]) continue;
    l += (size_t)snprintf(out + l, n - l, " %s=%lld", sv->def->keys[i], sv->v[i]);
  }
}

int cwm_spec_compare(const char *a, const char *b, int shape_only, int *same, cwm_err *err) {
  spec_vals x, y;
  *same = 0;
  int rc = parse_vals(a, &x, err);
  if (!rc) rc = parse_vals(b, &y, err);
  if (rc) return rc;
  if (x.def != y.def) return 0;
  for (int i = 0; i < x.def->nkeys; i++)
    if (!(shape_only && x.def->epilogue[i]) && x.v[i] != y.v[i]) return 0;
  *same = 1;
  return 0;
}

/* ------------------------------------------------------------------ workload -> spec */

static const cwm_op *find_op(const cwm_workload *w, const char *name, int input, int ndim) {
  for (int i = 0; i < w->nops; i++)
    if (!strcmp(w->ops[i].name, name) && w->ops[i].is_input == input && (ndim < 0 || w->ops[i].ndim == ndim))
      return &w->ops[i];
  return NULL;
}

/* 1 if spec's workload prints as text. */
static int spec_matches(const char *spec, const char *text) {
  cwm_err e;
  char *t = cwm_op_to_text(spec, &e);
  if (!t) return 0;
  cwm_workload *w = cwm_workload_parse(t, &e);
  free(t);
  if (!w) return 0;
  char *p = cwm_workload_print(w);
  int same = !strcmp(p, text);
  free(p);
  cwm_workload_free(w);
  return same;
}

int cwm_workload_spec(const cwm_workload *w, char *spec, size_t n, cwm_err *err) {
  char *text = cwm_workload_print(w);
  char cand[512];
  int found = 0;
  const cwm_op *a, *b, *x;
  int has_bias = find_op(w, "bias", 1, 1) != NULL;
  if ((a = find_op(w, "A", 1, 2)) && (b = find_op(w, "W", 1, 2))) {
    for (int bias = 0; bias <= 1 && !found; bias++)
      for (int act = 0; act < 3 && !found; act++) {
        if (bias != has_bias) continue;
        snprintf(cand, sizeof cand, "dense M=%d N=%d K=%d bias=%d act=%s", a->shape[0], b->shape[0], a->shape[1],
                 bias, acts[act]);
        found = spec_matches(cand, text);
      }
  } else if ((a = find_op(w, "A", 1, 2)) && (b = find_op(w, "B", 1, 2))) {
    snprintf(cand, sizeof cand, "matmul M=%d N=%d K=%d", a->shape[0], b->shape[1], a->shape[1]);
    found = spec_matches(cand, text);
  } else if ((a = find_op(w, "A", 1, 3)) && (b = find_op(w, "Bt", 1, 3))) {
    snprintf(cand, sizeof cand, "batch_matmul B=%d M=%d N=%d K=%d", a->shape[0], a->shape[1], b->shape[1],
             a->shape[2]);
    found = spec_matches(cand, text);
  } else if ((a = find_op(w, "I", 1, 4)) && (b = find_op(w, "Wt", 1, 4)) && (x = find_op(w, "out", 0, 4))) {
    int C = a->shape[1], H = a->shape[2], W = a->shape[3], R = b->shape[2], S = b->shape[3];
    const cwm_op *p = find_op(w, "P", 0, 4);
    int pad = p ? (p->shape[2] - H) / 2 : 0;
    int OH = x->shape[2];
    for (int dw = 0; dw <= 1 && !found; dw++) {
      if (dw && b->shape[1] != 1) continue;
      for (int st = 1; st <= H + 2 * pad && !found; st++) {
        if ((H + 2 * pad - R) / st + 1 != OH) continue;
        for (int act = 0; act < 3 && !found; act++) {
          if (dw)
            snprintf(cand, sizeof cand, "dwconv2d C=%d H=%d W=%d R=%d S=%d stride=%d pad=%d bias=%d act=%s", C, H,
                     W, R, S, st, pad, has_bias, acts[act]);
          else
            snprintf(cand, sizeof cand, "conv2d C=%d H=%d W=%d K=%d R=%d S=%d stride=%d pad=%d bias=%d act=%s", C,
                     H, W, b->shape[0], R, S, st, pad, has_bias, acts[act]);
          found = spec_matches(cand, text);
        }
      }
    }
  } else if ((a = find_op(w, "I", 1, 3)) && (b = find_op(w, "Wt", 1, 4))) {
    /* a pointwise convolution, written over its flattened image: the same text for every H x W
     * of the same size, so the squarest is the spec (28 x 28 for 784) */
    int hw = a->shape[2], h = 1;
    while ((long)(h + 1) * (h + 1) <= hw) h++;
    while (hw % h) h--;
    for (int act = 0; act < 3 && !found; act++) {
      snprintf(cand, sizeof cand, "conv2d C=%d H=%d W=%d K=%d R=1 S=1 stride=1 pad=0 bias=%d act=%s", a->shape[1], h,
               hw / h, b->shape[0], has_bias, acts[act]);
      found = spec_matches(cand, text);
    }
  } else if ((a = find_op(w, "X", 1, 3))) {
    snprintf(cand, sizeof cand, "softmax B=%d M=%d N=%d", a->shape[0], a->shape[1], a->shape[2]);
    found = spec_matches(cand, text);
  } else if ((a = find_op(w, "X", 1, 2))) {
    snprintf(cand, sizeof cand, "layernorm M=%d N=%d", a->shape[0], a->shape[1]);
    found = spec_matches(cand, text);
  }
  free(text);
  if (!found) return cwm_fail(err, CWM_EPARSE, "workload %s: not the text of any op spec", w->name);
  if (strlen(cand) >= n) return cwm_fail(err, CWM_EPARSE, "workload %s: spec too long", w->name);
  memcpy(spec, cand, strlen(cand) + 1);
  return 0;
}

const char *cwm_workload_kind(const cwm_workload *w) {
  char spec[512];
  if (cwm_workload_spec(w, spec, sizeof spec, NULL)) return "custom";
  for (int i = 0; i < NDEFS; i++) {
    size_t l = strlen(defs[i].name);
    if (!strncmp(spec, defs[i].name, l) && spec[l] == ' ') return defs[i].name;
  }
  return "custom";
}

/* ------------------------------------------------------------------ lists */

static void copy_field(char *dst, size_t n, const char *src) {
  if (dst != src) snprintf(dst, n, "%s", src ? src : "");
  size_t l = strlen(dst);
  while (l && (dst[l - 1] == ' ' || dst[l - 1] == '\r')) dst[--l] = 0;
}

int cwm_wlist_read(const char *path, cwm_wl_entry **out, int *n, cwm_err *err) {
  *out = NULL;
  *n = 0;
  char *text = cwm_read_text(path, err);
  if (!text) return err ? err->code : CWM_EIO;
  int cnt = 0, lineno = 0;
  size_t cap = 0;
  cwm_wl_entry *v = NULL;
  int rc = 0;
  for (char *line = text, *next; line && *line && !rc; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    lineno++;
    size_t ln = strlen(line);
    if (ln && line[ln - 1] == '\r') line[--ln] = 0;
    const char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (!*p || *p == '#') continue;
    char *col[4] = {line, NULL, NULL, NULL};
    for (int c = 1; c < 4; c++) {
      char *tab = col[c - 1] ? strchr(col[c - 1], '\t') : NULL;
      if (tab) *tab = 0, col[c] = tab + 1;
    }
    if (!col[1] || !col[2] || !*col[0] || !*col[1]) {
      rc = cwm_fail(err, CWM_EPARSE, "%s: line %d: expected id <TAB> op <TAB> params [<TAB> note]", path, lineno);
      break;
    }
    v = cwm_grow(v, (size_t)cnt, &cap, sizeof *v);
    cwm_wl_entry *e = &v[cnt];
    memset(e, 0, sizeof *e);
    if (strlen(col[0]) >= sizeof e->id || strlen(col[1]) + strlen(col[2]) + 2 > sizeof e->spec) {
      rc = cwm_fail(err, CWM_EPARSE, "%s: line %d: id or spec too long", path, lineno);
      break;
    }
    copy_field(e->id, sizeof e->id, col[0]);
    snprintf(e->spec, sizeof e->spec, "%s %s", col[1], col[2]);
    copy_field(e->spec, sizeof e->spec, e->spec);
    copy_field(e->note, sizeof e->note, col[3]);
    cnt++;
  }
  free(text);
  if (rc) {
    free(v);
    return rc;
  }
  *out = v;
  *n = cnt;
  return 0;
}

int cwm_wlist_write(const char *path, const cwm_wl_entry *e, int n, const char *header, cwm_err *err) {
  cwm_buf b;
  cwm_buf_init(&b);
  if (header) {
    const char *p = header;
    while (*p) {
      const char *nl = strchr(p, '\n');
      size_t l = nl ? (size_t)(nl - p) : strlen(p);
      cwm_buf_printf(&b, "# %.*s\n", (int)l, p);
      p += l + (nl ? 1 : 0);
    }
  }
  for (int i = 0; i < n; i++) {
    const char *sp = strchr(e[i].spec, ' ');
    size_t ol = sp ? (size_t)(sp - e[i].spec) : strlen(e[i].spec);
    cwm_buf_printf(&b, "%s\t%.*s\t%s\t%s\n", e[i].id, (int)ol, e[i].spec, sp ? sp + 1 : "", e[i].note);
  }
  int rc = cwm_write_file_atomic(path, b.s ? b.s : "", b.len, err);
  cwm_buf_free(&b);
  return rc;
}

cwm_workload *cwm_wl_entry_workload(const cwm_wl_entry *e, cwm_err *err) {
  cwm_err e2 = {0};
  cwm_workload *w = cwm_workload_from_spec(e->spec, NULL, &e2);
  if (!w) {
    cwm_fail(err, e2.code, "workload %s: %s", e->id, e2.msg);
    return NULL;
  }
  snprintf(w->name, sizeof w->name, "%s", e->id);
  return w;
}

/* ------------------------------------------------------------------ the generator */

void cwm_workgen_opts_default(cwm_workgen_opts *o) {
  memset(o, 0, sizeof *o);
  o->count = 160;
  o->seed = 1;
  o->max_flops = 2e9;
}

static int is_prime(int x) {
  if (x < 2) return 0;
  for (int d = 2; d * d <= x; d++)
    if (x % d == 0) return 0;
  return 1;
}

static int clampi(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }

/* log-uniform integer in [lo, hi] */
static int log_uniform(cwm_rng *r, int lo, int hi) {
  double a = log((double)lo), b = log((double)hi + 1);
  int x = (int)exp(a + (b - a) * cwm_rng_unit(r));
  return clampi(x, lo, hi);
}

/* A dimension: a size networks use (55%; a third of those one off it: odd sizes), a prime
 * (25%), or any size, log-uniform (20%). Primes and the odd sizes start at 8, so that tiny
 * dimensions (1..7, degenerate loops) stay rare but present. */
static int draw_dim(cwm_rng *r, const int *common, int ncommon, int lo, int hi) {
  double u = cwm_rng_unit(r);
  if (u < 0.55) {
    int c[64], nc = 0;
    for (int i = 0; i < ncommon; i++)
      if (common[i] >= lo && common[i] <= hi) c[nc++] = common[i];
    if (nc) {
      int x = c[cwm_rng_int(r, nc)];
      if (u >= 0.37 && x >= 8) x = clampi(x + (cwm_rng_int(r, 2) ? 1 : -1), lo, hi); /* odd sizes */
      return x;
    }
  }
  if (u < 0.80) { /* a prime near a log-uniform size */
    int plo = lo > 8 ? lo : (hi >= 8 ? 8 : lo);
    int x = log_uniform(r, plo, hi), y = x;
    while (y <= hi && !is_prime(y)) y++;
    if (y > hi) {
      y = x;
      while (y >= lo && !is_prime(y)) y--;
    }
    return y >= lo && y <= hi ? y : x;
  }
  return log_uniform(r, lo, hi);
}

static const int gemm_common[] = {1,   2,   4,   8,   16,  24,   32,   48,   64,   96,   100,  128,
                                  192, 196, 256, 320, 384, 512,  576,  640,  768,  1000, 1024, 1280,
                                  1536, 2048, 2304, 3072, 4096};
static const int chan_common[] = {3,   8,   16,  24,  32,  48,  64,  72,  96,  120, 128,
                                  144, 160, 192, 240, 256, 320, 384, 480, 512, 576, 640,
                                  672, 768, 960, 1024};
static const int spatial_common[] = {7, 8, 13, 14, 16, 17, 19, 26, 27, 28, 32, 35, 38, 52, 56, 64, 73, 75, 112, 147, 149, 224};
static const int seq_common[] = {1, 16, 32, 49, 50, 64, 77, 128, 196, 197, 256, 384, 512};
static const int head_common[] = {16, 32, 40, 48, 64, 80, 96, 128};
static const int batch_common[] = {1, 2, 4, 6, 8, 12, 16, 24, 32};
#define NC(a) ((int)(sizeof a / sizeof a[0]))

/* dense/conv epilogues: (bias, act) */
static void draw_epilogue(cwm_rng *r, int *bias, int *act, int conv) {
  double u = cwm_rng_unit(r);
  if (conv) {
    /* none, bias, bias+relu, relu, bias+gelu */
    if (u < 0.25) *bias = 0, *act = 0;
    else if (u < 0.45) *bias = 1, *act = 0;
    else if (u < 0.85) *bias = 1, *act = 1;
    else if (u < 0.95) *bias = 0, *act = 1;
    else *bias = 1, *act = 2;
  } else {
    if (u < 0.25) *bias = 0, *act = 0;
    else if (u < 0.5) *bias = 1, *act = 0;
    else if (u < 0.7) *bias = 1, *act = 1;
    else if (u < 0.9) *bias = 1, *act = 2;
    else *bias = 0, *act = cwm_rng_int(r, 2) + 1;
  }
}

static int draw_kernel(cwm_rng *r, int depthwise) {
  double u = cwm_rng_unit(r);
  if (depthwise) return u < 0.05 ? 1 : u < 0.65 ? 3 : u < 0.9 ? 5 : 7;
  return u < 0.35 ? 1 : u < 0.8 ? 3 : u < 0.9 ? 5 : 7;
}

#define MAX_ELEMS (8.0 * 1024 * 1024) /* floats per tensor: 32 MiB */

static int draw_once(cwm_rng *r, double max_flops, char *spec, size_t n) {
  double u = cwm_rng_unit(r);
  double flops;
  if (u < 0.40) { /* conv2d */
    int H = draw_dim(r, spatial_common, NC(spatial_common), 7, 224);
    int W = cwm_rng_unit(r) < 0.8 ? H : draw_dim(r, spatial_common, NC(spatial_common), 7, 224);
    int C = draw_dim(r, chan_common, NC(chan_common), 3, 1024);
    int K = draw_dim(r, chan_common, NC(chan_common), 3, 1024);
    int R = draw_kernel(r, 0), S = R;
    if (R > 1 && cwm_rng_unit(r) < 0.08) { /* 1xk / kx1 */
      if (cwm_rng_int(r, 2)) R = 1;
      else S = 1;
    }
    int st = cwm_rng_unit(r) < 0.3 ? 2 : 1;
    int pad = cwm_rng_unit(r) < 0.8 ? (R > S ? R : S) / 2 : 0;
    int bias, act;
    draw_epilogue(r, &bias, &act, 1);
    if (R > H + 2 * pad || S > W + 2 * pad) return 0;
    double OH = (H + 2 * pad - R) / st + 1, OW = (W + 2 * pad - S) / st + 1;
    flops = 2.0 * C * K * OH * OW * R * S;
    if ((double)C * (H + 2 * pad) * (W + 2 * pad) > MAX_ELEMS || (double)K * OH * OW > MAX_ELEMS ||
        (double)K * C * R * S > MAX_ELEMS)
      return 0;
    snprintf(spec, n, "conv2d C=%d H=%d W=%d K=%d R=%d S=%d stride=%d pad=%d bias=%d act=%s", C, H, W, K, R, S, st,
             pad, bias, acts[act]);
  } else if (u < 0.50) { /* dwconv2d */
    int H = draw_dim(r, spatial_common, NC(spatial_common), 7, 224);
    int W = cwm_rng_unit(r) < 0.9 ? H : draw_dim(r, spatial_common, NC(spatial_common), 7, 224);
    int C = draw_dim(r, chan_common, NC(chan_common), 3, 1024);
    int R = draw_kernel(r, 1);
    int st = cwm_rng_unit(r) < 0.35 ? 2 : 1;
    int pad = cwm_rng_unit(r) < 0.85 ? R / 2 : 0;
    int bias = 0, act = 0;
    if (cwm_rng_unit(r) < 0.4) draw_epilogue(r, &bias, &act, 1);
    if (R > H + 2 * pad || R > W + 2 * pad) return 0;
    double OH = (H + 2 * pad - R) / st + 1, OW = (W + 2 * pad - R) / st + 1;
    flops = 2.0 * C * OH * OW * R * R;
    if ((double)C * (H + 2 * pad) * (W + 2 * pad) > MAX_ELEMS) return 0;
    snprintf(spec, n, "dwconv2d C=%d H=%d W=%d R=%d S=%d stride=%d pad=%d bias=%d act=%s", C, H, W, R, R, st, pad,
             bias, acts[act]);
  } else if (u < 0.70) { /* dense */
    int M = cwm_rng_unit(r) < 0.5 ? draw_dim(r, seq_common, NC(seq_common), 1, 4096)
                                  : draw_dim(r, gemm_common, NC(gemm_common), 1, 4096);
    int N = draw_dim(r, gemm_common, NC(gemm_common), 1, 4096);
    int K = draw_dim(r, gemm_common, NC(gemm_common), 1, 4096);
    int bias, act;
    draw_epilogue(r, &bias, &act, 0);
    flops = 2.0 * M * N * K;
    if ((double)M * K > MAX_ELEMS || (double)N * K > MAX_ELEMS || (double)M * N > MAX_ELEMS) return 0;
    snprintf(spec, n, "dense M=%d N=%d K=%d bias=%d act=%s", M, N, K, bias, acts[act]);
  } else if (u < 0.79) { /* matmul */
    int M = draw_dim(r, gemm_common, NC(gemm_common), 1, 4096);
    int N = draw_dim(r, gemm_common, NC(gemm_common), 1, 4096);
    int K = draw_dim(r, gemm_common, NC(gemm_common), 1, 4096);
    flops = 2.0 * M * N * K;
    if ((double)M * K > MAX_ELEMS || (double)N * K > MAX_ELEMS || (double)M * N > MAX_ELEMS) return 0;
    snprintf(spec, n, "matmul M=%d N=%d K=%d", M, N, K);
  } else if (u < 0.89) { /* batch_matmul: attention-like or generic */
    int B = draw_dim(r, batch_common, NC(batch_common), 1, 64);
    int M, N, K;
    if (cwm_rng_unit(r) < 0.6) {
      int L = draw_dim(r, seq_common, NC(seq_common), 1, 1024), D = draw_dim(r, head_common, NC(head_common), 8, 256);
      if (cwm_rng_int(r, 2)) M = L, N = L, K = D; /* scores */
      else M = L, N = D, K = L;                   /* weighted values */
    } else {
      M = draw_dim(r, gemm_common, NC(gemm_common), 1, 1024);
      N = draw_dim(r, gemm_common, NC(gemm_common), 1, 1024);
      K = draw_dim(r, gemm_common, NC(gemm_common), 1, 1024);
    }
    flops = 2.0 * B * M * N * K;
    if ((double)B * M * K > MAX_ELEMS || (double)B * N * K > MAX_ELEMS || (double)B * M * N > MAX_ELEMS) return 0;
    snprintf(spec, n, "batch_matmul B=%d M=%d N=%d K=%d", B, M, N, K);
  } else if (u < 0.945) { /* softmax */
    int B = draw_dim(r, batch_common, NC(batch_common), 1, 64);
    int M = draw_dim(r, seq_common, NC(seq_common), 1, 1024);
    int N = draw_dim(r, gemm_common, NC(gemm_common), 2, 4096);
    flops = 5.0 * B * M * N;
    if ((double)B * M * N > MAX_ELEMS / 2) return 0;
    snprintf(spec, n, "softmax B=%d M=%d N=%d", B, M, N);
  } else { /* layernorm */
    int M = draw_dim(r, seq_common, NC(seq_common), 1, 4096);
    int N = draw_dim(r, gemm_common, NC(gemm_common), 16, 4096);
    flops = 8.0 * M * N;
    if ((double)M * N > MAX_ELEMS / 2) return 0;
    snprintf(spec, n, "layernorm M=%d N=%d", M, N);
  }
  return flops <= max_flops && flops >= 1e4;
}

void cwm_workgen_draw(cwm_rng *r, double max_flops, char *spec, size_t n) {
  if (max_flops <= 0) max_flops = 2e9;
  for (int tries = 0; tries < 100000; tries++)
    if (draw_once(r, max_flops, spec, n)) return;
  snprintf(spec, n, "matmul M=16 N=16 K=17"); /* unreachable for sane caps */
}

static uint64_t form_hash(const char *spec, int shape_only, cwm_err *err) {
  spec_vals sv;
  if (parse_vals(spec, &sv, err)) return 0;
  char f[512];
  normal_form(&sv, shape_only, f, sizeof f);
  uint64_t h = cwm_hash64(f, strlen(f));
  return h ? h : 1;
}

int cwm_workgen(const cwm_workgen_opts *o, cwm_wl_entry **out, int *n, int *rejected, cwm_err *err) {
  *out = NULL;
  *n = 0;
  if (rejected) *rejected = 0;
  if (o->count < 0) return cwm_fail(err, CWM_EUSAGE, "workgen: negative count");
  const char *suite = o->suite ? o->suite : cwm_suite_default_path();
  cwm_wl_entry *sv = NULL;
  int ns = 0;
  cwm_err e = {0};
  if (cwm_wlist_read(suite, &sv, &ns, &e)) return cwm_fail(err, e.code, "workgen: suite: %s", e.msg);
  cwm_hset suite_shapes = {0}, seen = {0};
  for (int i = 0; i < ns; i++) {
    uint64_t h = form_hash(sv[i].spec, 1, &e);
    if (!h) {
      cwm_fail(err, e.code, "workgen: suite %s row %s: %s", suite, sv[i].id, e.msg);
      free(sv);
      free(suite_shapes.h);
      return err ? err->code : CWM_EPARSE;
    }
    cwm_hset_add(&suite_shapes, h);
  }
  cwm_rng r;
  cwm_rng_seed(&r, o->seed);
  cwm_wl_entry *v = cwm_xcalloc((size_t)(o->count ? o->count : 1), sizeof *v);
  int cnt = 0, rej = 0;
  long draws = 0;
  while (cnt < o->count) {
    char spec[512];
    cwm_workgen_draw(&r, o->max_flops, spec, sizeof spec);
    draws++;
    uint64_t hs = form_hash(spec, 1, &e), hf = form_hash(spec, 0, &e);
    if (!hs || !hf) continue;
    /* the hash says "maybe"; the parsed values decide */
    int clash = 0;
    if (cwm_hset_has(&suite_shapes, hs))
      for (int i = 0; i < ns && !clash; i++)
        if (cwm_spec_compare(spec, sv[i].spec, 1, &clash, &e)) clash = 1;
    if (clash) {
      rej++;
      continue;
    }
    if (cwm_hset_has(&seen, hf)) continue; /* a repeat (or a hash collision: a draw lost, no harm) */
    /* the op library must accept it (it always should: the caps keep tensors small) */
    char *text = cwm_op_to_text(spec, &e);
    if (!text) continue;
    free(text);
    cwm_hset_add(&seen, hf);
    cwm_wl_entry *en = &v[cnt];
    const char *sp = strchr(spec, ' ');
    snprintf(en->id, sizeof en->id, "t%03d_%.*s", cnt + 1, (int)(sp - spec), spec);
    snprintf(en->spec, sizeof en->spec, "%s", spec);
    snprintf(en->note, sizeof en->note, "generated (seed %llu, draw %ld)", (unsigned long long)o->seed, draws);
    cnt++;
  }
  free(sv);
  free(suite_shapes.h);
  free(seen.h);
  if (rejected) *rejected = rej;
  *out = v;
  *n = cnt;
  return 0;
}

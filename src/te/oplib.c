/* oplib.c: the operator library. Turns op specs ("conv2d C=64 H=56 ...") into workload text,
 * with fixed stage and tensor names that the scheduler's rules recognise, and resolves specs
 * that are suite ids or "@file" references. */
#define _POSIX_C_SOURCE 200809L /* access */
#include "cwm/te.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_KEYS 16

enum { K_INT, K_ACT };
enum { ACT_NONE, ACT_RELU, ACT_GELU };

typedef struct {
  const char *key;
  int kind;
  int required;
  long long lo, hi, dflt;
} keydef;

typedef struct {
  const char *name;
  int nkeys;
  keydef keys[MAX_KEYS];
} opdef;

#define EXT(k) {k, K_INT, 1, 1, 1LL << 24, 0}
#define WIN(k) {k, K_INT, 1, 1, 4096, 0}
#define STRIDE {"stride", K_INT, 1, 1, 4096, 1}
#define PAD {"pad", K_INT, 1, 0, 4096, 0}
#define BIAS {"bias", K_INT, 0, 0, 1, 0}
#define ACT {"act", K_ACT, 0, 0, 0, ACT_NONE}

static const opdef ops[] = {
    {"dense", 5, {EXT("M"), EXT("N"), EXT("K"), BIAS, ACT}},
    {"matmul", 3, {EXT("M"), EXT("N"), EXT("K")}},
    {"batch_matmul", 4, {EXT("B"), EXT("M"), EXT("N"), EXT("K")}},
    {"conv2d", 10, {EXT("C"), EXT("H"), EXT("W"), EXT("K"), WIN("R"), WIN("S"), STRIDE, PAD, BIAS, ACT}},
    {"dwconv2d", 9, {EXT("C"), EXT("H"), EXT("W"), WIN("R"), WIN("S"), STRIDE, PAD, BIAS, ACT}},
    {"softmax", 3, {EXT("B"), EXT("M"), EXT("N")}},
    {"layernorm", 2, {EXT("M"), EXT("N")}},
};
#define NOPS ((int)(sizeof ops / sizeof ops[0]))

static const char *const act_names[] = {"none", "relu", "gelu"};

static const opdef *find_op(const char *name, size_t n) {
  for (int i = 0; i < NOPS; i++)
    if (strlen(ops[i].name) == n && memcmp(ops[i].name, name, n) == 0) return &ops[i];
  return NULL;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Parsed spec: one value per key of the op, in the op's key order. */
typedef struct {
  const opdef *op;
  long long v[MAX_KEYS];
} spec_vals;

static long long val(const spec_vals *s, const char *key) {
  for (int i = 0; i < s->op->nkeys; i++)
    if (strcmp(s->op->keys[i].key, key) == 0) return s->v[i];
  return 0;
}

/* Strict decimal: no sign games, no trailing junk, no overflow. */
static int parse_int(const char *s, size_t n, long long *out) {
  if (n == 0 || n > 12) return 0;
  long long v = 0;
  size_t i = 0;
  int neg = 0;
  if (s[0] == '-') neg = 1, i = 1;
  if (i == n) return 0;
  for (; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return 0;
    v = v * 10 + (s[i] - '0');
  }
  *out = neg ? -v : v;
  return 1;
}

static int parse_spec(const char *spec, spec_vals *sv, cwm_err *err) {
  const char *p = spec;
  while (is_space(*p)) p++;
  const char *w = p;
  while (*p && !is_space(*p)) p++;
  size_t wn = (size_t)(p - w);
  if (wn == 0) return cwm_fail(err, CWM_EPARSE, "empty op spec");
  sv->op = find_op(w, wn);
  if (!sv->op)
    return cwm_fail(err, CWM_EPARSE, "unknown op '%.*s'", (int)(wn < 64 ? wn : 64), w);
  const opdef *op = sv->op;
  int seen[MAX_KEYS] = {0};
  for (;;) {
    while (is_space(*p)) p++;
    if (!*p) break;
    const char *k = p;
    while (*p && !is_space(*p) && *p != '=') p++;
    size_t kn = (size_t)(p - k);
    int ki = -1;
    for (int i = 0; i < op->nkeys; i++)
      if (strlen(op->keys[i].key) == kn && memcmp(op->keys[i].key, k, kn) == 0) ki = i;
    if (ki < 0)
      return cwm_fail(err, CWM_EPARSE, "%s: unknown key '%.*s'", op->name,
                      (int)(kn < 64 ? kn : 64), k);
    if (*p != '=')
      return cwm_fail(err, CWM_EPARSE, "%s: key '%s' needs a value (%s=...)", op->name,
                      op->keys[ki].key, op->keys[ki].key);
    p++;
    const char *v = p;
    while (*p && !is_space(*p)) p++;
    size_t vn = (size_t)(p - v);
    const keydef *kd = &op->keys[ki];
    if (seen[ki]) return cwm_fail(err, CWM_EPARSE, "%s: key '%s' given twice", op->name, kd->key);
    seen[ki] = 1;
    int vshow = (int)(vn < 64 ? vn : 64);
    if (kd->kind == K_ACT) {
      int a = -1;
      for (int i = 0; i < 3; i++)
        if (strlen(act_names[i]) == vn && memcmp(act_names[i], v, vn) == 0) a = i;
      if (a < 0)
        return cwm_fail(err, CWM_EPARSE, "%s: key 'act' must be none, relu or gelu, found '%.*s'",
                        op->name, vshow, v);
      sv->v[ki] = a;
    } else {
      long long x;
      if (!parse_int(v, vn, &x) || x < kd->lo || x > kd->hi)
        return cwm_fail(err, CWM_EPARSE, "%s: key '%s' must be an integer in [%lld, %lld], found '%.*s'",
                        op->name, kd->key, kd->lo, kd->hi, vshow, v);
      sv->v[ki] = x;
    }
  }
  for (int i = 0; i < op->nkeys; i++) {
    if (seen[i]) continue;
    if (op->keys[i].required)
      return cwm_fail(err, CWM_EPARSE, "%s: missing key '%s'", op->name, op->keys[i].key);
    sv->v[i] = op->keys[i].dflt;
  }
  return 0;
}

/* The epilogue expression around `inner` (e.g. "D[i, j]"), given bias read text. */
static void epilogue(cwm_buf *b, int act, const char *inner, const char *bias) {
  if (act != ACT_NONE) cwm_buf_printf(b, "%s(", act_names[act]);
  cwm_buf_puts(b, inner);
  if (bias) cwm_buf_printf(b, " + %s", bias);
  if (act != ACT_NONE) cwm_buf_putc(b, ')');
}

/* "tmp[dims] = body" then "out[dims] = act(inner + bias)" where there is an epilogue, else
 * "out[dims] = body". */
static void product_and_epilogue(cwm_buf *b, const char *tmp, const char *dims, const char *body, int act,
                                 const char *inner, const char *bias) {
  int epi = bias || act != ACT_NONE;
  cwm_buf_printf(b, "%s[%s] = %s\n", epi ? tmp : "out", dims, body);
  if (epi) {
    cwm_buf_printf(b, "out[%s] = ", dims);
    epilogue(b, act, inner, bias);
    cwm_buf_putc(b, '\n');
  }
}

static void gen_dense(cwm_buf *b, const spec_vals *s) {
  long long M = val(s, "M"), N = val(s, "N"), K = val(s, "K");
  int bias = (int)val(s, "bias"), act = (int)val(s, "act");
  char dims[64], body[64];
  cwm_buf_printf(b, "input A[%lld, %lld]\ninput W[%lld, %lld] const\n", M, K, N, K);
  if (bias) cwm_buf_printf(b, "input bias[%lld] const\n", N);
  snprintf(dims, sizeof dims, "i:%lld, j:%lld", M, N);
  snprintf(body, sizeof body, "sum(k:%lld : A[i, k] * W[j, k])", K);
  product_and_epilogue(b, "D", dims, body, act, "D[i, j]", bias ? "bias[j]" : NULL);
}

static void gen_matmul(cwm_buf *b, const spec_vals *s) {
  long long M = val(s, "M"), N = val(s, "N"), K = val(s, "K");
  cwm_buf_printf(b, "input A[%lld, %lld]\ninput B[%lld, %lld]\n", M, K, K, N);
  cwm_buf_printf(b, "out[i:%lld, j:%lld] = sum(k:%lld : A[i, k] * B[k, j])\n", M, N, K);
}

static void gen_bmm(cwm_buf *b, const spec_vals *s) {
  long long B = val(s, "B"), M = val(s, "M"), N = val(s, "N"), K = val(s, "K");
  cwm_buf_printf(b, "input A[%lld, %lld, %lld]\ninput Bt[%lld, %lld, %lld]\n", B, M, K, B, N, K);
  cwm_buf_printf(b, "out[b:%lld, i:%lld, j:%lld] = sum(k:%lld : A[b, i, k] * Bt[b, j, k])\n", B,
                 M, N, K);
}

/* "y * stride + ry", with the multiplication left out at stride 1 so the text stays minimal. */
static void window_index(cwm_buf *b, const char *ax, long long stride, const char *rax) {
  if (stride == 1) cwm_buf_printf(b, "%s + %s", ax, rax);
  else cwm_buf_printf(b, "%s * %lld + %s", ax, stride, rax);
}

static void gen_conv(cwm_buf *b, const spec_vals *s, int depthwise) {
  long long C = val(s, "C"), H = val(s, "H"), W = val(s, "W");
  long long K = depthwise ? C : val(s, "K");
  long long R = val(s, "R"), S = val(s, "S"), st = val(s, "stride"), pad = val(s, "pad");
  int bias = (int)val(s, "bias"), act = (int)val(s, "act");
  long long OH = (H + 2 * pad - R) / st + 1, OW = (W + 2 * pad - S) / st + 1;
  const char *ko = depthwise ? "c" : "k"; /* output-channel axis */
  if (!depthwise && R == 1 && S == 1 && st == 1 && pad == 0) {
    /* A pointwise convolution is a matrix product over the flattened image, and is written as
     * one: its H x W positions are one contiguous axis (the same memory as NCHW), so a vector
     * of 8 or 16 positions divides a 28 x 28 image (784) where it divides no 28-wide row. */
    long long HW = H * W;
    char dims[80], body[80];
    cwm_buf_printf(b, "input I[1, %lld, %lld]\ninput Wt[%lld, %lld, 1, 1] const\n", C, HW, K, C);
    if (bias) cwm_buf_printf(b, "input bias[%lld] const\n", K);
    snprintf(dims, sizeof dims, "n:1, k:%lld, p:%lld", K, HW);
    snprintf(body, sizeof body, "sum(rc:%lld : I[n, rc, p] * Wt[k, rc, 0, 0])", C);
    product_and_epilogue(b, "conv", dims, body, act, "conv[n, k, p]", bias ? "bias[k]" : NULL);
    return;
  }
  cwm_buf_printf(b, "input I[1, %lld, %lld, %lld]\n", C, H, W);
  if (depthwise) cwm_buf_printf(b, "input Wt[%lld, 1, %lld, %lld] const\n", C, R, S);
  else cwm_buf_printf(b, "input Wt[%lld, %lld, %lld, %lld] const\n", K, C, R, S);
  if (bias) cwm_buf_printf(b, "input bias[%lld] const\n", K);
  const char *src = "I";
  if (pad > 0) {
    src = "P";
    cwm_buf_printf(b,
                   "P[n:1, c:%lld, h:%lld, w:%lld] = select(h >= %lld && h < %lld && w >= %lld && "
                   "w < %lld, I[n, c, h - %lld, w - %lld], 0)\n",
                   C, H + 2 * pad, W + 2 * pad, pad, H + pad, pad, W + pad, pad, pad);
  }
  cwm_buf body;
  cwm_buf_init(&body);
  if (depthwise) cwm_buf_printf(&body, "sum(ry:%lld, rx:%lld : %s[n, c, ", R, S, src);
  else cwm_buf_printf(&body, "sum(rc:%lld, ry:%lld, rx:%lld : %s[n, rc, ", C, R, S, src);
  window_index(&body, "y", st, "ry");
  cwm_buf_puts(&body, ", ");
  window_index(&body, "x", st, "rx");
  cwm_buf_puts(&body, depthwise ? "] * Wt[c, 0, ry, rx])" : "] * Wt[k, rc, ry, rx])");
  char dims[96], inner[64], bread[32];
  snprintf(dims, sizeof dims, "n:1, %s:%lld, y:%lld, x:%lld", ko, K, OH, OW);
  snprintf(inner, sizeof inner, "conv[n, %s, y, x]", ko);
  snprintf(bread, sizeof bread, "bias[%s]", ko);
  product_and_epilogue(b, "conv", dims, body.s, act, inner, bias ? bread : NULL);
  cwm_buf_free(&body);
}

static void gen_softmax(cwm_buf *b, const spec_vals *s) {
  long long B = val(s, "B"), M = val(s, "M"), N = val(s, "N");
  cwm_buf_printf(b, "input X[%lld, %lld, %lld]\n", B, M, N);
  cwm_buf_printf(b, "mx[b:%lld, i:%lld] = max(k:%lld : X[b, i, k])\n", B, M, N);
  cwm_buf_printf(b, "e[b:%lld, i:%lld, j:%lld] = exp(X[b, i, j] - mx[b, i])\n", B, M, N);
  cwm_buf_printf(b, "s[b:%lld, i:%lld] = sum(k:%lld : e[b, i, k])\n", B, M, N);
  cwm_buf_printf(b, "out[b:%lld, i:%lld, j:%lld] = e[b, i, j] / s[b, i]\n", B, M, N);
}

static void gen_layernorm(cwm_buf *b, const spec_vals *s) {
  long long M = val(s, "M"), N = val(s, "N");
  char c[32];
  snprintf(c, sizeof c, "%.9g", 1.0 / (double)N);
  cwm_buf_printf(b, "input X[%lld, %lld]\ninput gamma[%lld]\ninput beta[%lld]\n", M, N, N, N);
  cwm_buf_printf(b, "mu[i:%lld] = sum(k:%lld : X[i, k] * %s)\n", M, N, c);
  cwm_buf_printf(b, "var[i:%lld] = sum(k:%lld : X[i, k] * X[i, k] * %s)\n", M, N, c);
  cwm_buf_printf(b,
                 "out[i:%lld, j:%lld] = (X[i, j] - mu[i]) * rsqrt(var[i] - mu[i] * mu[i] + 1e-05)"
                 " * gamma[j] + beta[j]\n",
                 M, N);
}

char *cwm_op_to_text(const char *spec, cwm_err *err) {
  spec_vals sv;
  memset(&sv, 0, sizeof sv);
  if (!spec) spec = "";
  if (parse_spec(spec, &sv, err)) return NULL;
  const char *name = sv.op->name;
  if (!strcmp(name, "conv2d") || !strcmp(name, "dwconv2d")) {
    /* The window must fit the padded image, or the output would have no pixels. */
    long long H = val(&sv, "H"), W = val(&sv, "W"), pad = val(&sv, "pad");
    if (val(&sv, "R") > H + 2 * pad) {
      cwm_fail(err, CWM_EPARSE, "%s: key 'R' (%lld) exceeds H + 2*pad (%lld)", name,
               val(&sv, "R"), H + 2 * pad);
      return NULL;
    }
    if (val(&sv, "S") > W + 2 * pad) {
      cwm_fail(err, CWM_EPARSE, "%s: key 'S' (%lld) exceeds W + 2*pad (%lld)", name,
               val(&sv, "S"), W + 2 * pad);
      return NULL;
    }
  }
  cwm_buf b;
  cwm_buf_init(&b);
  if (!strcmp(name, "dense")) gen_dense(&b, &sv);
  else if (!strcmp(name, "matmul")) gen_matmul(&b, &sv);
  else if (!strcmp(name, "batch_matmul")) gen_bmm(&b, &sv);
  else if (!strcmp(name, "conv2d")) gen_conv(&b, &sv, 0);
  else if (!strcmp(name, "dwconv2d")) gen_conv(&b, &sv, 1);
  else if (!strcmp(name, "softmax")) gen_softmax(&b, &sv);
  else gen_layernorm(&b, &sv);
  cwm_buf_puts(&b, "output out\n");
  /* Values each in range can still make a tensor the language refuses (too many elements):
   * the text must parse, and if it does not, the spec is what is wrong. */
  cwm_err perr;
  cwm_workload *w = cwm_workload_parse(b.s, &perr);
  if (!w) {
    cwm_buf_free(&b);
    cwm_fail(err, CWM_EPARSE, "%s: the shapes are out of range: %s", name, perr.msg);
    return NULL;
  }
  cwm_workload_free(w);
  return cwm_buf_take(&b);
}

/* The caller's choice of default suite, else the shipped one. */
static cwm_data_default g_suite = CWM_DATA_DEFAULT("suite.tsv", "bench/suite.tsv");

void cwm_suite_set_default_path(const char *path) { cwm_data_default_set(&g_suite, path); }

const char *cwm_suite_default_path(void) {
  const char *p = cwm_data_default_path(&g_suite);
  return p ? p : "bench/suite.tsv";
}

int cwm_suite_lookup(const char *suite_path, const char *id, char *spec, size_t n, cwm_err *err) {
  if (!suite_path) suite_path = cwm_suite_default_path();
  if (!id || !*id) return cwm_fail(err, CWM_EPARSE, "empty suite id");
  char *text = cwm_read_text(suite_path, err);
  if (!text) return err ? err->code : CWM_EIO;
  size_t idn = strlen(id);
  int rc = cwm_fail(err, CWM_EPARSE, "unknown op or suite id '%.64s' (suite %s)", id, suite_path);
  for (char *line = text; line && *line;) {
    char *next = strchr(line, '\n');
    if (next) *next++ = 0;
    size_t ln = strlen(line);
    if (ln && line[ln - 1] == '\r') line[--ln] = 0;
    if (line[0] != '#') {
      /* columns: id, op, params, comment */
      char *col[4] = {line, NULL, NULL, NULL};
      for (int c = 1; c < 4; c++) {
        char *tab = col[c - 1] ? strchr(col[c - 1], '\t') : NULL;
        if (tab) *tab = 0, col[c] = tab + 1;
      }
      if (strlen(col[0]) == idn && memcmp(col[0], id, idn) == 0 && col[1]) {
        int m = snprintf(spec, n, "%s %s", col[1], col[2] ? col[2] : "");
        if (m < 0 || (size_t)m >= n)
          rc = cwm_fail(err, CWM_EPARSE, "suite entry '%.64s' is too long", id);
        else
          rc = 0;
        break;
      }
    }
    line = next;
  }
  free(text);
  return rc;
}

static void set_name(cwm_workload *w, const char *name, size_t n) {
  if (n >= sizeof w->name) n = sizeof w->name - 1;
  memcpy(w->name, name, n);
  w->name[n] = 0;
}

/* Parses and frees text (NULL: err is already set); a parse error is prefixed by where[0..n). */
static cwm_workload *parse_owned(char *text, const char *where, size_t n, cwm_err *err) {
  if (!text) return NULL;
  cwm_err perr = {0};
  cwm_workload *w = cwm_workload_parse(text, &perr);
  free(text);
  if (!w) cwm_fail(err, perr.code, "%.*s: %s", (int)n, where, perr.msg);
  return w;
}

cwm_workload *cwm_workload_from_spec(const char *spec, const char *suite_path, cwm_err *err) {
  if (!spec) spec = "";
  while (is_space(*spec)) spec++;
  if (spec[0] == '@') {
    const char *path = spec + 1;
    cwm_workload *w = parse_owned(cwm_read_text(path, err), path, strlen(path), err);
    if (!w) return NULL;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    set_name(w, base, dot && dot != base ? (size_t)(dot - base) : strlen(base));
    return w;
  }
  size_t wn = 0;
  while (spec[wn] && !is_space(spec[wn])) wn++;
  if (wn == 0) {
    cwm_fail(err, CWM_EPARSE, "empty workload spec");
    return NULL;
  }
  const char *rest = spec + wn;
  while (is_space(*rest)) rest++;
  char opspec[1024];
  const char *use = spec, *name = spec;
  size_t name_n = wn;
  /* A single word is a suite id. Suite ids may equal op names ("layernorm"), and a bare op
   * name is never a complete op spec (every op has required keys), so the suite wins; when
   * the lookup fails the word is read as an op spec, whose error then names the missing key. */
  if (!*rest) {
    char id[128];
    cwm_err lerr = {0};
    if (wn < sizeof id) {
      memcpy(id, spec, wn);
      id[wn] = 0;
      if (cwm_suite_lookup(suite_path, id, opspec, sizeof opspec, &lerr) == 0) use = opspec;
    } else {
      cwm_fail(&lerr, CWM_EPARSE, "unknown op or suite id '%.64s'", spec);
    }
    if (use != opspec && !find_op(spec, wn)) {
      cwm_fail(err, lerr.code, "%s", lerr.msg);
      return NULL;
    }
  }
  cwm_workload *w = parse_owned(cwm_op_to_text(use, err), name, name_n < 64 ? name_n : 64, err);
  if (!w) return NULL;
  set_name(w, name, name_n);
  return w;
}

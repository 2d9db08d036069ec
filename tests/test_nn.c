/* test_nn.c: the world model's neural-network core. Every backward is checked against double-sided
 * finite differences of a random projection of its output (the layers, the losses, the whole
 * encoder w.r.t. every parameter tensor); a tiny encoder learns a toy contrastive task with AdamW;
 * the same seed gives bitwise-identical results at any thread count; OpenBLAS agrees with the
 * portable loop and a missing OpenBLAS is CWM_EDEP; a forked child can still use the thread pool. */
#define _DEFAULT_SOURCE /* setenv, usleep, kill */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cwm/nn.h"
#include "testlib.h"

static cwm_rng g_rng;

static float urand(float lo, float hi) { return lo + (hi - lo) * (float)cwm_rng_unit(&g_rng); }
static void fill(float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) x[i] = urand(lo, hi);
}
static float *fnew(size_t n) { return cwm_xcalloc(n ? n : 1, sizeof(float)); }

/* ---- Thread pool --------------------------------------------------------------------------- */

typedef struct {
  int *owner; /* part + 1 that handled each index */
  int nested_parts;
} pool_ctx_t;

static void mark(void *ctx, int b, int e, int part) {
  pool_ctx_t *c = ctx;
  for (int i = b; i < e; i++) c->owner[i] += part + 1;
}
static void mark_nested(void *ctx, int b, int e, int part) {
  pool_ctx_t *c = ctx;
  mark(ctx, b, e, part);
  if (part == 1) { /* a call from inside a part runs on that thread, as part 0 */
    int own[4] = {0};
    pool_ctx_t in = {own, 0};
    cwm_parallel_for(4, 1L << 30, mark, &in);
    c->nested_parts = own[0] == 1 && own[1] == 1 && own[2] == 1 && own[3] == 1;
  }
}

/* 1 when every index was handled exactly once and the parts seen are exactly 0..want-1 */
static int covered(const int *owner, int n, int want) {
  int seen[17] = {0};
  for (int i = 0; i < n; i++) {
    if (owner[i] < 1 || owner[i] > 16) return 0;
    seen[owner[i]] = 1;
  }
  for (int p = 1; p <= 16; p++)
    if (seen[p] != (p <= want)) return 0;
  return 1;
}

static void test_pool_threads(void) {
  int saved = cwm_nn_threads(), n = 1001;
  int *owner = cwm_xcalloc((size_t)n, sizeof(int));
  pool_ctx_t c = {owner, 0};
  cwm_nn_set_threads(2);
  CHECK(cwm_nn_threads() == 2);
  cwm_parallel_for(n, 1L << 30, mark_nested, &c);
  CHECK(covered(owner, n, 2));
  CHECK(c.nested_parts == 1);
  memset(owner, 0, (size_t)n * sizeof(int));
  cwm_parallel_for(n, 100, mark, &c); /* too little work: the caller alone */
  CHECK(covered(owner, n, 1));
  memset(owner, 0, (size_t)n * sizeof(int));
  cwm_nn_set_threads(3); /* restarts the workers */
  cwm_parallel_for(n, 1L << 30, mark, &c);
  CHECK(covered(owner, n, 3));
  memset(owner, 0, 3 * sizeof(int));
  cwm_parallel_for(2, 1L << 30, mark, &c); /* fewer items than threads */
  CHECK(owner[0] == 1 && owner[1] == 2);
  cwm_nn_set_threads(1);
  memset(owner, 0, (size_t)n * sizeof(int));
  cwm_parallel_for(n, 1L << 30, mark, &c);
  CHECK(covered(owner, n, 1));
  /* after fork the child's pool starts its own workers */
  cwm_nn_set_threads(2);
  cwm_parallel_for(n, 1L << 30, mark, &c);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    memset(owner, 0, (size_t)n * sizeof(int));
    cwm_parallel_for(n, 1L << 30, mark, &c);
    _exit(covered(owner, n, 2) ? 0 : 3);
  }
  int status = 0, done = 0;
  for (int i = 0; i < 400 && !done; i++) { /* up to 20 s */
    if (waitpid(pid, &status, WNOHANG) == pid)
      done = 1;
    else
      usleep(20000);
  }
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  CHECKF(done && WIFEXITED(status) && WEXITSTATUS(status) == 0, "pool after fork: %s",
         done ? "wrong parts" : "hung");
  cwm_nn_set_threads(saved);
  free(owner);
}

/* ---- Finite differences -------------------------------------------------------------------- */

/* A function under test: writes nout floats; the probed scalar is sum(r * out). */
typedef struct {
  void (*f)(void *ctx, float *out);
  void *ctx;
  float *out;
  const float *r;
  size_t nout;
} probe;

static double probe_loss(probe *p) {
  p->f(p->ctx, p->out);
  double s = 0.0;
  for (size_t i = 0; i < p->nout; i++) s += (double)p->r[i] * p->out[i];
  return s;
}

/* Compares grad with (L(x+eps) - L(x-eps)) / 2eps at `samples` coordinates of x (all of them if
 * there are no more; drawn from idx[0..nidx) when idx is given). Passing: |num - ana| within
 * 3% of the larger plus 1e-3 of the tensor's largest gradient (float32 forward). */
static void fd_check(const char *what, probe *p, float *x, size_t n, const float *grad,
                     const int *idx, int nidx, int samples, float eps) {
  float scale = 0.0f;
  for (size_t i = 0; i < n; i++) scale = fmaxf(scale, fabsf(grad[i]));
  int all = !idx && n <= (size_t)samples;
  int cnt = all ? (int)n : samples;
  int bad = 0;
  double worst = 0.0;
  for (int s = 0; s < cnt; s++) {
    size_t i = all ? (size_t)s : idx ? (size_t)idx[cwm_rng_int(&g_rng, nidx)]
                                     : (size_t)cwm_rng_int(&g_rng, (int)n);
    float x0 = x[i];
    x[i] = x0 + eps;
    double lp = probe_loss(p);
    x[i] = x0 - eps;
    double lm = probe_loss(p);
    x[i] = x0;
    double num = (lp - lm) / (2.0 * eps), ana = grad[i];
    double err = fabs(num - ana), tol = 0.03 * fmax(fabs(num), fabs(ana)) + 1e-3 * scale + 1e-6;
    if (err / tol > worst) worst = err / tol;
    if (err > tol) {
      if (bad++ < 3)
        fprintf(stderr, "  %s[%zu]: numeric %.6g, analytic %.6g\n", what, i, num, ana);
    }
  }
  CHECKF(bad == 0, "%s: %d of %d coordinates off (worst err/tol %.2f)", what, bad, cnt, worst);
  probe_loss(p); /* leave out[] at the unperturbed value */
}

/* ---- BLAS ---------------------------------------------------------------------------------- */

static void test_blas(void) {
  /* A missing library is CWM_EDEP naming the package; the test's choice is restored after. */
  const char *old = getenv("CWM_OPENBLAS_LIB");
  cwm_blas_set_library("/nonexistent/libopenblas.so.0");
  cwm_err err = {0};
  int rc = cwm_blas_init(&err);
  CHECKF(rc == CWM_EDEP && err.code == CWM_EDEP, "rc %d", rc);
  CHECKF(strstr(err.msg, "libopenblas0") != NULL, "message: %s", err.msg);
  cwm_blas_set_library(old);
  rc = cwm_blas_init(&err);
  if (rc) fprintf(stderr, "note: %s; the products run on the portable loop\n", err.msg);
  CHECK(cwm_blas_active() == (rc == CWM_OK));

  /* cwm_sgemm (OpenBLAS when present) against the loop, every transpose, strided, alpha/beta. */
  int M = 13, N = 11, K = 17, ld = 21;
  float *A = fnew((size_t)ld * ld), *B = fnew((size_t)ld * ld), *C1 = fnew((size_t)M * ld),
        *C2 = fnew((size_t)M * ld);
  fill(A, (size_t)ld * ld, -1, 1);
  fill(B, (size_t)ld * ld, -1, 1);
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      fill(C1, (size_t)M * ld, -1, 1);
      memcpy(C2, C1, (size_t)M * ld * sizeof(float));
      cwm_sgemm(ta, tb, M, N, K, 0.7f, A, ld, B, ld, 0.3f, C1, ld);
      cwm_sgemm_ref(ta, tb, M, N, K, 0.7f, A, ld, B, ld, 0.3f, C2, ld);
      double worst = 0.0, worst_ref = 0.0;
      for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
          worst = fmax(worst, fabs(C1[i * ld + j] - C2[i * ld + j]));
        }
      for (int i = 0; i < M; i++)
        for (int j = N; j < ld; j++) worst_ref = fmax(worst_ref, fabs(C1[i * ld + j] - C2[i * ld + j]));
      CHECKF(worst < 1e-4, "sgemm ta %d tb %d: differs from the loop by %g", ta, tb, worst);
      CHECKF(worst_ref == 0.0, "sgemm wrote outside its N columns");
    }
  /* the loop against doubles, beta 0 overwriting NaN */
  for (int i = 0; i < M * ld; i++) C2[i] = NAN;
  cwm_sgemm_ref(0, 1, M, N, K, 1.0f, A, ld, B, ld, 0.0f, C2, ld);
  double worst = 0.0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0.0;
      for (int k = 0; k < K; k++) s += (double)A[i * ld + k] * B[j * ld + k];
      worst = fmax(worst, fabs(s - C2[i * ld + j]));
    }
  CHECKF(worst < 1e-5, "sgemm_ref off by %g", worst);
  free(A);
  free(B);
  free(C1);
  free(C2);
}

/* ---- Layers -------------------------------------------------------------------------------- */

typedef struct {
  int N, D, V;
  int *ids;
  float *table;
} emb_ctx;
static void emb_f(void *c, float *out) {
  emb_ctx *e = c;
  cwm_embedding_forward(out, e->ids, e->N, e->table, e->D);
}

static void test_embedding(void) {
  int ids[] = {3, 0, 3, 6, 2, 3};
  emb_ctx c = {6, 5, 7, ids, fnew(35)};
  fill(c.table, 35, -1, 1);
  float *out = fnew(30), *r = fnew(30), *dt = fnew(35);
  fill(r, 30, -1, 1);
  probe p = {emb_f, &c, out, r, 30};
  probe_loss(&p);
  cwm_embedding_backward(dt, r, ids, 6, 5);
  fd_check("embedding.table", &p, c.table, 35, dt, NULL, 0, 35, 1e-2f);
  free(c.table);
  free(out);
  free(r);
  free(dt);
}

typedef struct {
  int N, in, out;
  float *x, *W, *b;
} lin_ctx;
static void lin_f(void *c, float *out) {
  lin_ctx *l = c;
  cwm_linear_forward(out, l->x, l->W, l->b, l->N, l->in, l->out, 0);
}

static void test_linear(void) {
  lin_ctx c = {4, 6, 5, fnew(24), fnew(30), fnew(5)};
  fill(c.x, 24, -1, 1);
  fill(c.W, 30, -1, 1);
  fill(c.b, 5, -1, 1);
  float *y = fnew(20), *r = fnew(20), *dx = fnew(24), *dW = fnew(30), *db = fnew(5);
  fill(r, 20, -1, 1);
  probe p = {lin_f, &c, y, r, 20};
  probe_loss(&p);
  cwm_linear_backward(dx, dW, db, r, c.x, c.W, 4, 6, 5);
  fd_check("linear.x", &p, c.x, 24, dx, NULL, 0, 24, 1e-2f);
  fd_check("linear.W", &p, c.W, 30, dW, NULL, 0, 30, 1e-2f);
  fd_check("linear.b", &p, c.b, 5, db, NULL, 0, 5, 1e-2f);
  /* accumulate: y2 = y + (xW^T + b) */
  float *y2 = fnew(20);
  memcpy(y2, y, 20 * sizeof(float));
  cwm_linear_forward(y2, c.x, c.W, c.b, 4, 6, 5, 1);
  double worst = 0.0;
  for (int i = 0; i < 20; i++) worst = fmax(worst, fabs(y2[i] - 2.0f * y[i]));
  CHECKF(worst < 1e-5, "linear accumulate off by %g", worst);
  /* gradients accumulate: a second backward doubles them */
  float db1 = db[2];
  cwm_linear_backward(NULL, NULL, db, r, c.x, c.W, 4, 6, 5);
  CHECKF(fabsf(db[2] - 2.0f * db1) < 1e-5f, "backward does not accumulate: %g vs %g", db[2], db1);
  free(c.x);
  free(c.W);
  free(c.b);
  free(y);
  free(y2);
  free(r);
  free(dx);
  free(dW);
  free(db);
}

typedef struct {
  int N, D;
  float *x, *g, *b, *mean, *rstd;
} ln_ctx;
static void ln_f(void *c, float *out) {
  ln_ctx *l = c;
  cwm_layernorm_forward(out, l->mean, l->rstd, l->x, l->g, l->b, l->N, l->D);
}

static void test_layernorm(void) {
  int N = 4, D = 8;
  ln_ctx c = {N, D, fnew(32), fnew(8), fnew(8), fnew(4), fnew(4)};
  fill(c.x, 32, -2, 2);
  fill(c.g, 8, 0.5f, 1.5f);
  fill(c.b, 8, -0.5f, 0.5f);
  float *y = fnew(32), *r = fnew(32), *dx = fnew(32), *dg = fnew(8), *db = fnew(8);
  fill(r, 32, -1, 1);
  probe p = {ln_f, &c, y, r, 32};
  probe_loss(&p);
  /* the normalised rows have mean beta-ish, and the saved statistics are right */
  double m0 = 0.0;
  for (int j = 0; j < D; j++) m0 += c.x[j];
  CHECKF(fabs(m0 / D - c.mean[0]) < 1e-5, "mean %g vs %g", m0 / D, c.mean[0]);
  cwm_layernorm_backward(dx, dg, db, r, c.x, c.mean, c.rstd, c.g, N, D);
  fd_check("layernorm.x", &p, c.x, 32, dx, NULL, 0, 32, 1e-2f);
  fd_check("layernorm.gamma", &p, c.g, 8, dg, NULL, 0, 8, 1e-2f);
  fd_check("layernorm.beta", &p, c.b, 8, db, NULL, 0, 8, 1e-2f);
  free(c.x);
  free(c.g);
  free(c.b);
  free(c.mean);
  free(c.rstd);
  free(y);
  free(r);
  free(dx);
  free(dg);
  free(db);
}

typedef struct {
  size_t n;
  float *x;
} gelu_ctx;
static void gelu_f(void *c, float *out) {
  gelu_ctx *g = c;
  cwm_gelu_forward(out, g->x, g->n);
}

static void test_gelu(void) {
  gelu_ctx c = {24, fnew(24)};
  fill(c.x, 24, -3, 3);
  float *y = fnew(24), *r = fnew(24), *dx = fnew(24);
  fill(r, 24, -1, 1);
  probe p = {gelu_f, &c, y, r, 24};
  probe_loss(&p);
  CHECK(fabsf(y[0] - 0.5f * c.x[0] * (1.0f + erff(c.x[0] / sqrtf(2.0f)))) < 2e-3f); /* ~exact GELU */
  cwm_gelu_backward(dx, c.x, r, 24);
  fd_check("gelu.x", &p, c.x, 24, dx, NULL, 0, 24, 1e-3f);
  free(c.x);
  free(y);
  free(r);
  free(dx);
}

typedef struct {
  int T, D, H;
  float *qkv, *att, *scratch;
  const unsigned char *mask;
} att_ctx;
static void att_f(void *c, float *out) {
  att_ctx *a = c;
  cwm_attention_forward(out, a->att, a->qkv, a->mask, a->T, a->D, a->H, a->scratch);
}

static void test_attention(void) {
  int T = 6, D = 8, H = 2;
  static const unsigned char mask[6] = {1, 1, 0, 1, 1, 0};
  size_t nq = (size_t)T * 3 * D;
  float *scratch = fnew(cwm_attention_scratch(T, D, H));
  att_ctx c = {T, D, H, fnew(nq), fnew((size_t)H * T * T), scratch, mask};
  fill(c.qkv, nq, -1.5f, 1.5f);
  float *out = fnew((size_t)T * D), *r = fnew((size_t)T * D), *dq = fnew(nq);
  fill(r, (size_t)T * D, -1, 1);
  probe p = {att_f, &c, out, r, (size_t)T * D};
  probe_loss(&p);
  /* padded queries give zero rows; each real query's probabilities sum to 1 over real keys */
  int zero = 1;
  for (int j = 0; j < D; j++) zero &= out[2 * D + j] == 0.0f && out[5 * D + j] == 0.0f;
  CHECK(zero);
  for (int h = 0; h < H; h++)
    for (int t = 0; t < T; t++) {
      if (!mask[t]) continue;
      float s = 0.0f;
      for (int t2 = 0; t2 < T; t2++) s += c.att[(h * T + t) * T + t2];
      CHECKF(fabsf(s - 1.0f) < 1e-5f && c.att[(h * T + t) * T + 2] == 0.0f, "att row %d: %g", t, s);
    }
  /* the mask really masks: a padded key's k and v do not change anything */
  float *out2 = fnew((size_t)T * D);
  memcpy(out2, out, (size_t)T * D * sizeof(float));
  for (int j = D; j < 3 * D; j++) c.qkv[2 * 3 * D + j] += 5.0f;
  probe_loss(&p);
  CHECK(memcmp(out, out2, (size_t)T * D * sizeof(float)) == 0);
  /* ... while without the mask they do */
  c.mask = NULL;
  probe_loss(&p);
  CHECK(memcmp(out, out2, (size_t)T * D * sizeof(float)) != 0);
  c.mask = mask;
  probe_loss(&p);
  cwm_attention_backward(dq, r, c.qkv, c.att, mask, T, D, H, scratch);
  int zg = 1;
  for (int j = 0; j < 3 * D; j++) zg &= dq[2 * 3 * D + j] == 0.0f && dq[5 * 3 * D + j] == 0.0f;
  CHECK(zg);
  fd_check("attention.qkv", &p, c.qkv, nq, dq, NULL, 0, (int)nq, 1e-2f);
  /* unmasked as well */
  c.mask = NULL;
  memset(dq, 0, nq * sizeof(float));
  probe_loss(&p);
  cwm_attention_backward(dq, r, c.qkv, c.att, NULL, T, D, H, scratch);
  fd_check("attention.qkv (no mask)", &p, c.qkv, nq, dq, NULL, 0, 60, 1e-2f);
  free(c.qkv);
  free(c.att);
  free(out);
  free(out2);
  free(r);
  free(dq);
  free(scratch);

  /* Sizes that take every path of the blocked products (32 and 8 columns at a time, then single
   * ones): T 45 = 32 + 8 + 5, head size 40 = 32 + 8; a few padded positions. */
  T = 45, D = 80, H = 2;
  nq = (size_t)T * 3 * D;
  unsigned char *m2 = cwm_xmalloc((size_t)T);
  for (int t = 0; t < T; t++) m2[t] = t % 7 != 3;
  att_ctx b = {T, D, H, fnew(nq), fnew((size_t)H * T * T), fnew(cwm_attention_scratch(T, D, H)), m2};
  fill(b.qkv, nq, -1.0f, 1.0f);
  out = fnew((size_t)T * D);
  r = fnew((size_t)T * D);
  dq = fnew(nq);
  fill(r, (size_t)T * D, -1, 1);
  probe pb = {att_f, &b, out, r, (size_t)T * D};
  probe_loss(&pb);
  cwm_attention_backward(dq, r, b.qkv, b.att, m2, T, D, H, b.scratch);
  fd_check("attention.qkv (T 45, head 40)", &pb, b.qkv, nq, dq, NULL, 0, 150, 1e-2f);
  /* against a plain double-precision evaluation of one real query of head 1 */
  int t = 5, h = 1, hs = D / H;
  double sc[45], mx = -1e30, sum = 0.0, worst = 0.0;
  for (int t2 = 0; t2 < T; t2++) {
    if (!m2[t2]) continue;
    double d = 0.0;
    for (int i = 0; i < hs; i++) d += (double)b.qkv[t * 3 * D + h * hs + i] * b.qkv[t2 * 3 * D + D + h * hs + i];
    sc[t2] = d / sqrt((double)hs);
    if (sc[t2] > mx) mx = sc[t2];
  }
  for (int t2 = 0; t2 < T; t2++)
    if (m2[t2]) sum += exp(sc[t2] - mx);
  for (int i = 0; i < hs; i++) {
    double o = 0.0;
    for (int t2 = 0; t2 < T; t2++)
      if (m2[t2]) o += exp(sc[t2] - mx) / sum * b.qkv[t2 * 3 * D + 2 * D + h * hs + i];
    worst = fmax(worst, fabs(o - out[t * D + h * hs + i]));
  }
  CHECKF(worst < 1e-5, "attention output off by %g", worst);
  free(b.qkv);
  free(b.att);
  free(b.scratch);
  free(m2);
  free(out);
  free(r);
  free(dq);
}

typedef struct {
  int N, D;
  float *x;
  const unsigned char *mask;
} pool_ctx;
static void pool_f(void *c, float *out) {
  pool_ctx *p = c;
  cwm_meanpool_forward(out, p->x, p->mask, p->N, p->D);
}

static void test_pool(void) {
  static const unsigned char mask[5] = {1, 0, 1, 1, 0};
  pool_ctx c = {5, 4, fnew(20), mask};
  fill(c.x, 20, -1, 1);
  float *out = fnew(4), *r = fnew(4), *dx = fnew(20);
  fill(r, 4, -1, 1);
  probe p = {pool_f, &c, out, r, 4};
  probe_loss(&p);
  CHECK(fabsf(out[1] - (c.x[1] + c.x[9] + c.x[13]) / 3.0f) < 1e-6f);
  cwm_meanpool_backward(dx, r, mask, 5, 4);
  CHECK(dx[4] == 0.0f && dx[16] == 0.0f);
  fd_check("meanpool.x", &p, c.x, 20, dx, NULL, 0, 20, 1e-2f);
  static const unsigned char none[2] = {0, 0};
  cwm_meanpool_forward(out, c.x, none, 2, 4);
  CHECK(out[0] == 0.0f && out[3] == 0.0f);
  free(c.x);
  free(out);
  free(r);
  free(dx);
}

typedef struct {
  int N, D;
  float *z, *u, *d;
} th_ctx;
static void th_f(void *c, float *out) {
  th_ctx *t = c;
  cwm_transh_forward(out, t->z, t->u, t->d, t->N, t->D);
}

static void test_transh(void) {
  int N = 3, D = 6, n = N * D;
  th_ctx c = {N, D, fnew(n), fnew(n), fnew(n)};
  fill(c.z, n, -1, 1);
  fill(c.u, n, -1, 1);
  fill(c.d, n, -0.5f, 0.5f);
  float *out = fnew(n), *r = fnew(n), *dz = fnew(n), *du = fnew(n), *dd = fnew(n);
  fill(r, n, -1, 1);
  probe p = {th_f, &c, out, r, (size_t)n};
  probe_loss(&p);
  /* z' - d lies on the hyperplane: orthogonal to u */
  for (int i = 0; i < N; i++) {
    double s = 0.0;
    for (int j = 0; j < D; j++) s += (out[i * D + j] - c.d[i * D + j]) * c.u[i * D + j];
    CHECKF(fabs(s) < 1e-5, "row %d: (z'-d).u = %g", i, s);
  }
  cwm_transh_backward(dz, du, dd, r, c.z, c.u, N, D);
  fd_check("transh.z", &p, c.z, n, dz, NULL, 0, n, 1e-2f);
  fd_check("transh.u", &p, c.u, n, du, NULL, 0, n, 1e-2f);
  fd_check("transh.d", &p, c.d, n, dd, NULL, 0, n, 1e-2f);
  free(c.z);
  free(c.u);
  free(c.d);
  free(out);
  free(r);
  free(dz);
  free(du);
  free(dd);
}

/* ---- Losses -------------------------------------------------------------------------------- */

typedef struct {
  int B, D, sym;
  float *a, *p, tau;
  const int *groups;
} nce_ctx;
static void nce_f(void *c, float *out) {
  nce_ctx *n = c;
  out[0] = cwm_infonce(n->a, n->p, n->groups, n->B, n->D, n->tau, n->sym, 0.0f, NULL, NULL);
}

static void test_infonce(void) {
  int B = 5, D = 6;
  static const int groups[5] = {0, 1, 0, 2, 1};
  for (int variant = 0; variant < 3; variant++) {
    nce_ctx c = {B, D, variant != 1, fnew(30), fnew(30), 0.5f, variant == 2 ? groups : NULL};
    fill(c.a, 30, -1, 1);
    fill(c.p, 30, -1, 1);
    float out, r = 0.7f, *da = fnew(30), *dp = fnew(30);
    probe pr = {nce_f, &c, &out, &r, 1};
    probe_loss(&pr);
    float l = cwm_infonce(c.a, c.p, c.groups, B, D, c.tau, c.sym, 0.7f, da, dp);
    CHECK(l == out && l > 0.0f);
    char name[64];
    snprintf(name, sizeof name, "infonce(variant %d).anchor", variant);
    fd_check(name, &pr, c.a, 30, da, NULL, 0, 30, 1e-2f);
    snprintf(name, sizeof name, "infonce(variant %d).positive", variant);
    fd_check(name, &pr, c.p, 30, dp, NULL, 0, 30, 1e-2f);
    free(c.a);
    free(c.p);
    free(da);
    free(dp);
  }
  /* perfect pairs with a low temperature: loss near 0; scale invariance of cosine */
  float a[4] = {1, 0, 0, 1}, p[4] = {3, 0, 0, 2};
  CHECK(cwm_infonce(a, p, NULL, 2, 2, 0.05f, 1, 1.0f, NULL, NULL) < 1e-3f);
}

typedef struct {
  int D;
  float *a, *p, *n, gamma;
  int which; /* 0 sqdist, 1 margin */
} dist_ctx;
static void dist_f(void *c, float *out) {
  dist_ctx *d = c;
  out[0] = d->which ? cwm_margin_rank(d->a, d->p, d->n, d->D, d->gamma, 0, NULL, NULL, NULL)
                    : cwm_sqdist(d->a, d->p, d->D, 0, NULL, NULL);
}

static void test_distances(void) {
  int D = 7;
  dist_ctx c = {D, fnew(7), fnew(7), fnew(7), 0.0f, 0};
  fill(c.a, 7, -1, 1);
  fill(c.p, 7, -1, 1);
  fill(c.n, 7, -1, 1);
  float out, r = 1.3f, *da = fnew(7), *dp = fnew(7), *dn = fnew(7);
  probe pr = {dist_f, &c, &out, &r, 1};
  probe_loss(&pr);
  cwm_sqdist(c.a, c.p, D, 1.3f, da, dp);
  fd_check("sqdist.a", &pr, c.a, 7, da, NULL, 0, 7, 1e-2f);
  fd_check("sqdist.b", &pr, c.p, 7, dp, NULL, 0, 7, 1e-2f);

  /* margin ranking with the hinge active (gamma above the distance gap) */
  c.which = 1;
  float dap = cwm_sqdist(c.a, c.p, D, 0, NULL, NULL), dan = cwm_sqdist(c.a, c.n, D, 0, NULL, NULL);
  c.gamma = fabsf(dap - dan) + 1.0f;
  memset(da, 0, 7 * sizeof(float));
  memset(dp, 0, 7 * sizeof(float));
  float l = cwm_margin_rank(c.a, c.p, c.n, D, c.gamma, 1.3f, da, dp, dn);
  CHECK(fabsf(l - (c.gamma + dap - dan)) < 1e-5f);
  probe_loss(&pr);
  fd_check("margin.a", &pr, c.a, 7, da, NULL, 0, 7, 1e-3f);
  fd_check("margin.p", &pr, c.p, 7, dp, NULL, 0, 7, 1e-3f);
  fd_check("margin.n", &pr, c.n, 7, dn, NULL, 0, 7, 1e-3f);
  /* inactive: zero loss, no gradient */
  memset(da, 0, 7 * sizeof(float));
  CHECK(cwm_margin_rank(c.a, c.p, c.n, D, dan - dap - 1.0f, 1.0f, da, NULL, NULL) == 0.0f);
  CHECK(da[0] == 0.0f && da[6] == 0.0f);
  free(c.a);
  free(c.p);
  free(c.n);
  free(da);
  free(dp);
  free(dn);
}

typedef struct {
  float *s;
  const double *cost;
  int n;
} pair_ctx;
static void pair_f(void *c, float *out) {
  pair_ctx *p = c;
  out[0] = cwm_pair_logistic(p->s, p->cost, p->n, 0.05f, 0, NULL, NULL);
}

static void test_pair_logistic(void) {
  /* 6 items: two failures (inf, 0), a near-tie (1.0 vs 1.02: no pair) */
  double cost[6] = {1.0, 2.0, INFINITY, 1.02, 0.0, 5.0};
  pair_ctx c = {fnew(6), cost, 6};
  fill(c.s, 6, -2, 2);
  float out, r = 0.7f, *ds = fnew(6);
  probe pr = {pair_f, &c, &out, &r, 1};
  probe_loss(&pr);
  int np = 0;
  cwm_pair_logistic(c.s, cost, 6, 0.05f, 0.7f, ds, &np);
  /* valid-valid pairs with a gap: (1,2) (1,5) (1.02,2) (1.02,5) (2,5) = 5; each of the 4
   * valid ones against each of the 2 failures = 8; the near-tie and failure-failure are none */
  CHECKF(np == 13, "pairs %d", np);
  fd_check("pair_logistic.s", &pr, c.s, 6, ds, NULL, 0, 6, 1e-3f);
  /* scores in the right order lower the loss */
  float good[6] = {3, 1, -5, 3, -5, -1}, bad[6] = {-3, 1, 5, -3, 5, 1};
  CHECK(cwm_pair_logistic(good, cost, 6, 0.05f, 0, NULL, NULL) < cwm_pair_logistic(bad, cost, 6, 0.05f, 0, NULL, NULL));
  /* no pair at all: zero loss, no gradient */
  double same[2] = {1.0, 1.0};
  memset(ds, 0, 6 * sizeof(float));
  CHECK(cwm_pair_logistic(c.s, same, 2, 0.05f, 1.0f, ds, &np) == 0.0f && np == 0 && ds[0] == 0.0f);
  free(c.s);
  free(ds);
}

/* ---- Parameters, AdamW --------------------------------------------------------------------- */

static void test_params(void) {
  cwm_params ps;
  cwm_params_init(&ps);
  int s2[2] = {3, 4}, s1[1] = {4};
  CHECK(cwm_params_add(&ps, "w", 2, s2, 1) == 0);
  CHECK(cwm_params_add(&ps, "b", 1, s1, 0) == 1);
  cwm_params_alloc(&ps);
  CHECK(ps.total == 16 && ps.p[1].w == ps.p[0].w + 12 && ps.p[0].g == ps.block + 16);
  CHECK(cwm_params_find(&ps, "b") == &ps.p[1] && !cwm_params_find(&ps, "x"));
  cwm_param_init_const(&ps.p[0], 1.0f);
  cwm_param_init_const(&ps.p[1], 1.0f);
  /* clipping: norm of all-ones gradients over 16 floats is 4 */
  for (size_t i = 0; i < 16; i++) ps.p[0].g[i] = 1.0f; /* spans both tensors' gradients */
  float n = cwm_params_clip_grad(&ps, 2.0f);
  CHECKF(fabsf(n - 4.0f) < 1e-6f && fabsf(ps.p[1].g[3] - 0.5f) < 1e-6f, "norm %g", n);
  /* AdamW: first step moves each weight by lr (sign of g), decay only on "w" */
  cwm_adamw o = cwm_adamw_default();
  o.lr = 0.1f;
  o.weight_decay = 0.5f;
  cwm_adamw_step(&ps, &o);
  CHECKF(fabsf(ps.p[1].w[0] - 0.9f) < 1e-5f, "bias %g", ps.p[1].w[0]);
  CHECKF(fabsf(ps.p[0].w[0] - (1.0f - 0.1f - 0.05f)) < 1e-5f, "weight %g", ps.p[0].w[0]);
  CHECK(ps.step == 1);
  cwm_params_zero_grad(&ps);
  CHECK(ps.p[1].g[3] == 0.0f && ps.p[1].w[3] != 0.0f);
  cwm_params_free(&ps);
}

/* ---- Encoder ------------------------------------------------------------------------------- */

static const cwm_enc_config tiny = {.vocab = 20, .width = 16, .heads = 2, .layers = 2, .ff = 64,
                                    .window = 8, .overlap = 2};

typedef struct {
  cwm_encoder *e;
  const int *const *ids;
  const int *lens;
  int batch;
} enc_ctx;
static void enc_f(void *c, float *out) {
  enc_ctx *x = c;
  cwm_err err = {0};
  if (cwm_encoder_forward(x->e, x->ids, x->lens, x->batch, out, 1, &err))
    fprintf(stderr, "forward: %s\n", err.msg);
}

static void test_encoder_grad(void) {
  cwm_err err = {0};
  cwm_encoder *e = cwm_encoder_new(&tiny, 7, &err);
  CHECKF(e != NULL, "%s", err.msg);
  if (!e) return;
  /* Larger weights than the initialisation so that every path carries a visible gradient. */
  for (int i = 0; i < cwm_encoder_nparams(e); i++) {
    cwm_param *p = cwm_encoder_param(e, i);
    for (size_t k = 0; k < p->n; k++) p->w[k] += (float)(0.3 * cwm_rng_normal(&g_rng));
  }
  int t0[13], t1[5];
  for (int i = 0; i < 13; i++) t0[i] = cwm_rng_int(&g_rng, 20);
  for (int i = 0; i < 5; i++) t1[i] = cwm_rng_int(&g_rng, 20);
  t1[4] = t0[0];
  const int *ids[2] = {t0, t1};
  int lens[2] = {13, 5};
  int used[18];
  memcpy(used, t0, sizeof t0);
  memcpy(used + 13, t1, sizeof t1);
  enc_ctx c = {e, ids, lens, 2};
  float out[32], r[32];
  fill(r, 32, -1, 1);
  probe p = {enc_f, &c, out, r, 32};
  probe_loss(&p);
  cwm_encoder_zero_grad(e);
  CHECK(cwm_encoder_backward(e, r, &err) == CWM_OK);
  for (int i = 0; i < cwm_encoder_nparams(e); i++) {
    cwm_param *pa = cwm_encoder_param(e, i);
    float *g = fnew(pa->n);
    memcpy(g, pa->g, pa->n * sizeof(float));
    if (!strcmp(pa->name, "tok_emb")) { /* only the rows of tokens in the texts */
      int *idx = cwm_xmalloc(18 * 16 * sizeof(int));
      for (int k = 0; k < 18; k++)
        for (int j = 0; j < 16; j++) idx[k * 16 + j] = used[k] * 16 + j;
      fd_check(pa->name, &p, pa->w, pa->n, g, idx, 18 * 16, 12, 1e-2f);
      free(idx);
    } else {
      fd_check(pa->name, &p, pa->w, pa->n, g, NULL, 0, 8, 1e-2f);
    }
    free(g);
  }
  /* every tensor got some gradient (pos_emb: all 8 positions are used by the 13-token text) */
  for (int i = 0; i < cwm_encoder_nparams(e); i++) {
    cwm_param *pa = cwm_encoder_param(e, i);
    double s = 0.0;
    for (size_t k = 0; k < pa->n; k++) s += fabs(pa->g[k]);
    CHECKF(s > 0.0, "%s has no gradient", pa->name);
  }
  cwm_encoder_free(e);
}

static void test_encoder_api(void) {
  cwm_err err = {0};
  cwm_enc_config bad = tiny;
  bad.heads = 3;
  CHECK(!cwm_encoder_new(&bad, 1, &err) && err.code == CWM_EUSAGE);
  bad = tiny;
  bad.overlap = 8;
  CHECK(!cwm_encoder_new(&bad, 1, &err) && err.code == CWM_EUSAGE);
  cwm_enc_config dflt = {.vocab = 10};
  cwm_encoder *d = cwm_encoder_new(&dflt, 1, &err);
  CHECK(d != NULL);
  if (d) {
    const cwm_enc_config *c = cwm_encoder_config(d);
    CHECK(c->width == 128 && c->heads == 4 && c->layers == 2 && c->ff == 512 && c->window == 128 &&
          c->overlap == 32);
    CHECK(cwm_params_find(cwm_encoder_params(d), "l1.mlp.proj.w")->shape[1] == 512);
    cwm_encoder_free(d);
  }

  cwm_encoder *e = cwm_encoder_new(&tiny, 3, &err);
  int t0[30], t1[5] = {1, 2, 3, 4, 5}, t2[8] = {9, 8, 7, 6, 5, 4, 3, 2};
  for (int i = 0; i < 30; i++) t0[i] = (i * 7) % 20;
  const int *ids[4] = {t0, t1, NULL, t2};
  int lens[4] = {30, 5, 0, 8};
  float out[4 * 16], keep[4 * 16], one[16];
  CHECK(cwm_encoder_forward(e, ids, lens, 4, out, 0, &err) == CWM_OK);
  CHECK(cwm_encoder_backward(e, out, &err) == CWM_EUSAGE); /* no kept forward */
  CHECK(cwm_encoder_forward(e, ids, lens, 4, keep, 1, &err) == CWM_OK);
  CHECK(memcmp(out, keep, sizeof out) == 0); /* inference and training forwards agree bitwise */
  CHECK(out[2 * 16] == 0.0f && out[2 * 16 + 15] == 0.0f); /* the empty text */
  /* a text's vector does not depend on the rest of the batch */
  CHECK(cwm_encoder_forward(e, ids + 1, lens + 1, 1, one, 0, &err) == CWM_OK);
  double worst = 0.0;
  for (int j = 0; j < 16; j++) worst = fmax(worst, fabs(one[j] - out[16 + j]));
  CHECKF(worst < 1e-5, "batch dependence %g", worst);
  /* a bad id is an error naming the text and the token */
  t1[3] = 20;
  CHECK(cwm_encoder_forward(e, ids, lens, 4, out, 1, &err) == CWM_EMODEL);
  CHECKF(strstr(err.msg, "text 1 token 3") != NULL, "%s", err.msg);
  CHECK(cwm_encoder_backward(e, out, &err) == CWM_EUSAGE);
  t1[3] = 4;
  cwm_encoder_free(e);
}

static void test_encoder_determinism(void) {
  cwm_err err = {0};
  cwm_enc_config c = {.vocab = 50, .width = 32, .heads = 4, .layers = 2, .window = 16, .overlap = 4};
  cwm_encoder *a = cwm_encoder_new(&c, 42, &err), *b = cwm_encoder_new(&c, 42, &err);
  cwm_encoder *o = cwm_encoder_new(&c, 43, &err);
  cwm_params *pa = cwm_encoder_params(a), *pb = cwm_encoder_params(b), *po = cwm_encoder_params(o);
  CHECK(memcmp(pa->block, pb->block, pa->total * sizeof(float)) == 0);
  CHECK(memcmp(pa->block, po->block, pa->total * sizeof(float)) != 0);
  enum { B = 6 };
  int *ids[B], lens[B];
  for (int i = 0; i < B; i++) {
    lens[i] = 10 + 17 * i;
    ids[i] = cwm_xmalloc((size_t)lens[i] * sizeof(int));
    for (int k = 0; k < lens[i]; k++) ids[i][k] = cwm_rng_int(&g_rng, 50);
  }
  /* a, b (the same seed) at 2 threads, a at 1 thread, a again at 2 threads */
  float out[4][B * 32];
  float *gsave[4];
  int nthr = cwm_nn_threads();
  for (int run = 0; run < 4; run++) {
    cwm_encoder *e = run == 1 ? b : a;
    cwm_nn_set_threads(run == 2 ? 1 : 2);
    cwm_encoder_zero_grad(e);
    CHECK(cwm_encoder_forward(e, (const int *const *)ids, lens, B, out[run], 1, &err) == CWM_OK);
    CHECK(cwm_encoder_backward(e, out[run], &err) == CWM_OK);
    cwm_params *ps = cwm_encoder_params(e);
    gsave[run] = fnew(ps->total);
    memcpy(gsave[run], ps->block + ps->total, ps->total * sizeof(float));
  }
  cwm_nn_set_threads(nthr);
  CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0);
  CHECK(memcmp(gsave[0], gsave[1], pa->total * sizeof(float)) == 0);
  CHECK(memcmp(out[0], out[3], sizeof out[0]) == 0);
  CHECK(memcmp(gsave[0], gsave[3], pa->total * sizeof(float)) == 0);
  /* Another thread count: bitwise on the portable loop, to rounding with OpenBLAS. */
  double wo = 0.0, wg = 0.0, gmax = 0.0;
  for (int i = 0; i < B * 32; i++) wo = fmax(wo, fabs(out[0][i] - out[2][i]));
  for (size_t i = 0; i < pa->total; i++) {
    wg = fmax(wg, fabs(gsave[0][i] - gsave[2][i]));
    gmax = fmax(gmax, fabs(gsave[0][i]));
  }
  if (!cwm_blas_active()) {
    CHECKF(wo == 0.0 && wg == 0.0, "1 and 2 threads differ: outputs %g, gradients %g", wo, wg);
  } else {
    CHECKF(wo < 1e-5 && wg < 1e-5 * gmax, "1 and 2 threads differ: outputs %g, gradients %g", wo, wg);
  }
  for (int i = 0; i < 4; i++) free(gsave[i]);
  for (int i = 0; i < B; i++) free(ids[i]);
  cwm_encoder_free(a);
  cwm_encoder_free(b);
  cwm_encoder_free(o);
}

/* A forked child (the runner's) must be able to start threads after the parent's pool ran. */
static void test_fork_after_parallel(void) {
  cwm_err err = {0};
  cwm_encoder *e = cwm_encoder_new(&tiny, 5, &err);
  int t[400]; /* enough rows for the layers to use the pool */
  for (int i = 0; i < 400; i++) t[i] = i % 20;
  const int *ids[1] = {t};
  int lens[1] = {400};
  float out[16];
  cwm_nn_set_threads(2);
  CHECK(cwm_encoder_forward(e, ids, lens, 1, out, 1, &err) == CWM_OK);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    float o2[16];
    int rc = cwm_encoder_forward(e, ids, lens, 1, o2, 1, &err);
    _exit(rc == 0 && memcmp(o2, out, sizeof o2) == 0 ? 0 : 3);
  }
  int status = 0, done = 0;
  for (int i = 0; i < 400 && !done; i++) { /* up to 20 s */
    if (waitpid(pid, &status, WNOHANG) == pid)
      done = 1;
    else
      usleep(50000);
  }
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  CHECKF(done && WIFEXITED(status) && WEXITSTATUS(status) == 0,
         "child after fork: %s", done ? "failed" : "hung");
  cwm_encoder_free(e);
}

/* Toy contrastive task: 8 classes, each with its own 4 tokens mixed with 8 shared ones; anchor and
 * positive are two samples of one class, the other classes of the batch are the negatives. */
static void sample_text(int cls, int *ids, int len) {
  for (int k = 0; k < len; k++)
    ids[k] = cwm_rng_int(&g_rng, 2) ? cls * 4 + cwm_rng_int(&g_rng, 4) : 32 + cwm_rng_int(&g_rng, 8);
}

static void test_encoder_trains(void) {
  cwm_err err = {0};
  cwm_enc_config c = {.vocab = 40, .width = 32, .heads = 2, .layers = 1, .ff = 64, .window = 12,
                      .overlap = 4};
  cwm_encoder *e = cwm_encoder_new(&c, 11, &err);
  enum { B = 8, MAXL = 24, STEPS = 80 };
  int buf[2 * B][MAXL], lens[2 * B];
  const int *ids[2 * B];
  float out[2 * B * 32], dout[2 * B * 32];
  cwm_adamw opt = cwm_adamw_default();
  opt.lr = 3e-3f;
  double first = 0.0, last = 0.0;
  cwm_rng_seed(&g_rng, 99); /* this test's data do not depend on what the others drew */
  for (int step = 0; step < STEPS; step++) {
    for (int i = 0; i < 2 * B; i++) {
      lens[i] = 6 + cwm_rng_int(&g_rng, MAXL - 6);
      sample_text(i % B, buf[i], lens[i]);
      ids[i] = buf[i];
    }
    CHECK(cwm_encoder_forward(e, ids, lens, 2 * B, out, 1, &err) == CWM_OK);
    memset(dout, 0, sizeof dout);
    float loss = cwm_infonce(out, out + B * 32, NULL, B, 32, 0.1f, 1, 1.0f, dout, dout + B * 32);
    cwm_encoder_zero_grad(e);
    cwm_encoder_backward(e, dout, &err);
    cwm_params_clip_grad(cwm_encoder_params(e), 1.0f);
    cwm_adamw_step(cwm_encoder_params(e), &opt);
    if (step < 5) first += loss / 5.0;
    if (step >= STEPS - 10) last += loss / 10.0;
  }
  fprintf(stderr, "toy InfoNCE (8 classes, chance %.3f): mean loss %.3f over the first 5 steps, "
          "%.3f over the last 10\n", log(8.0), first, last);
  CHECKF(last < 0.5 * first, "loss did not fall: %.3f -> %.3f", first, last);
  cwm_encoder_free(e);
}

int main(void) {
  cwm_rng_seed(&g_rng, 20240601);
  test_pool_threads();
  test_blas();
  test_embedding();
  test_linear();
  test_layernorm();
  test_gelu();
  test_attention();
  test_pool();
  test_transh();
  test_infonce();
  test_distances();
  test_pair_logistic();
  test_params();
  test_encoder_api();
  test_encoder_grad();
  test_encoder_determinism();
  test_fork_after_parallel();
  test_encoder_trains();
  return test_done();
}

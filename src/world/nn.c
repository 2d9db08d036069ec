/* nn.c: the layers, losses, parameter registry and AdamW of the world model
 * (contract: nn.h). Plain loops over row-major float arrays; the products go through cwm_sgemm.
 * Loops over many rows are split over the thread pool (util/pool.c) so that each output element is owned by one
 * thread and summed in a fixed order, which keeps results independent of the thread count. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cwm/nn.h"

/* The hot loops are compiled twice, for AVX2+FMA and for the baseline, and the loader picks one
 * for the CPU (GCC's function multiversioning; the build passes no -march). Not under
 * ThreadSanitizer, whose instrumented ifunc resolver runs before its runtime and crashes. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    __GNUC__ >= 12 && !defined(__SANITIZE_THREAD__)
#define HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HOT
#endif

/* Without trapping math GCC may turn the clamps and selects of these loops into vector
 * min/max/blend, which is what lets it vectorize them; nothing here relies on FP traps. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

/* e^x to about 1e-7 relative error (Cephes' expf) in plain float operations that vectorize:
 * glibc's expf and tanhf are calls, and GELU spent most of its time in them. */
static inline float fast_expf(float x) {
  x = x > -87.0f ? x : -87.0f; /* NaN becomes -87: the float-to-int conversion stays defined */
  x = x < 88.0f ? x : 88.0f;
  float t = x * 1.44269504088896341f;
  float fn = (t + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 */
  int n = (int)fn;
  float r = x - fn * 0.693359375f;
  r = r + fn * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  union {
    int32_t i;
    float f;
  } u;
  u.i = (n + 127) * (1 << 23);
  return y * u.f;
}

/* tanh(u) = 1 - 2 / (e^{2u} + 1): exact at the ends, absolute error ~1e-7 near 0. */
static inline float fast_tanhf(float u) { return 1.0f - 2.0f / (fast_expf(2.0f * u) + 1.0f); }

/* ---- Threads ------------------------------------------------------------------------------- */

void cwm_nn_set_threads(int n) {
  cwm_pool_set_threads(n);
  cwm_blas_set_threads(cwm_pool_threads());
}

int cwm_nn_threads(void) { return cwm_pool_threads(); }

/* acc[j] += sum over rows i of X[i,j] (X [N,D]); threads own column ranges. */
typedef struct {
  float *acc;
  const float *X;
  int N, D;
} colsum_job;
HOT static void colsum_part(void *ctx, int j0, int j1, int part) {
  const colsum_job *c = ctx;
  for (int i = 0; i < c->N; i++) {
    const float *x = c->X + (size_t)i * c->D;
    for (int j = j0; j < j1; j++) c->acc[j] += x[j];
  }
}
static void colsum_acc(float *acc, const float *X, int N, int D) {
  colsum_job c = {acc, X, N, D};
  cwm_parallel_for(D, (long)N * D, colsum_part, &c);
}

/* ---- Parameters ---------------------------------------------------------------------------- */

void cwm_params_init(cwm_params *ps) { memset(ps, 0, sizeof *ps); }

int cwm_params_add(cwm_params *ps, const char *name, int ndim, const int *shape, int decay) {
  if (ps->n == ps->cap) {
    ps->cap = ps->cap ? 2 * ps->cap : 16;
    ps->p = cwm_xrealloc(ps->p, (size_t)ps->cap * sizeof *ps->p);
  }
  cwm_param *p = &ps->p[ps->n];
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  if (ndim > CWM_PARAM_MAXDIM) ndim = CWM_PARAM_MAXDIM;
  p->ndim = ndim;
  p->n = 1;
  for (int i = 0; i < ndim; i++) {
    p->shape[i] = shape[i];
    p->n *= (size_t)shape[i];
  }
  p->decay = decay;
  return ps->n++;
}

void cwm_params_alloc(cwm_params *ps) {
  size_t total = 0;
  for (int i = 0; i < ps->n; i++) total += ps->p[i].n;
  ps->total = total;
  free(ps->block);
  ps->block = cwm_xcalloc(4 * total + 1, sizeof(float));
  size_t off = 0;
  for (int i = 0; i < ps->n; i++) {
    cwm_param *p = &ps->p[i];
    p->w = ps->block + off;
    p->g = ps->block + total + off;
    p->m = ps->block + 2 * total + off;
    p->v = ps->block + 3 * total + off;
    off += p->n;
  }
  ps->step = 0;
}

void cwm_params_free(cwm_params *ps) {
  if (!ps) return;
  free(ps->p);
  free(ps->block);
  memset(ps, 0, sizeof *ps);
}

cwm_param *cwm_params_find(cwm_params *ps, const char *name) {
  for (int i = 0; i < ps->n; i++)
    if (!strcmp(ps->p[i].name, name)) return &ps->p[i];
  return NULL;
}

void cwm_params_zero_grad(cwm_params *ps) {
  if (ps->block) memset(ps->block + ps->total, 0, ps->total * sizeof(float));
}

float cwm_params_clip_grad(cwm_params *ps, float max_norm) {
  if (!ps->block) return 0.0f;
  const float *g = ps->block + ps->total;
  double ss = 0.0;
  for (size_t i = 0; i < ps->total; i++) ss += (double)g[i] * g[i];
  double norm = sqrt(ss);
  if (max_norm > 0.0f && norm > max_norm) {
    float s = (float)(max_norm / norm);
    float *gw = ps->block + ps->total;
    for (size_t i = 0; i < ps->total; i++) gw[i] *= s;
  }
  return (float)norm;
}

double cwm_rng_normal(cwm_rng *rng) {
  double u1 = 1.0 - cwm_rng_unit(rng); /* (0, 1] so the log is finite */
  double u2 = cwm_rng_unit(rng);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void cwm_param_init_normal(cwm_param *p, cwm_rng *rng, float stddev) {
  for (size_t i = 0; i < p->n; i++) p->w[i] = (float)(stddev * cwm_rng_normal(rng));
}

void cwm_param_init_const(cwm_param *p, float value) {
  for (size_t i = 0; i < p->n; i++) p->w[i] = value;
}

cwm_adamw cwm_adamw_default(void) {
  cwm_adamw o = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f};
  return o;
}

void cwm_adamw_step(cwm_params *ps, const cwm_adamw *o) {
  ps->step++;
  float bc1 = 1.0f - powf(o->beta1, (float)ps->step);
  float bc2 = 1.0f - powf(o->beta2, (float)ps->step);
  for (int k = 0; k < ps->n; k++) {
    cwm_param *p = &ps->p[k];
    float wd = p->decay ? o->weight_decay : 0.0f;
    for (size_t i = 0; i < p->n; i++) {
      float g = p->g[i];
      float m = o->beta1 * p->m[i] + (1.0f - o->beta1) * g;
      float v = o->beta2 * p->v[i] + (1.0f - o->beta2) * g * g;
      p->m[i] = m;
      p->v[i] = v;
      float mhat = m / bc1, vhat = v / bc2;
      p->w[i] -= o->lr * (mhat / (sqrtf(vhat) + o->eps) + wd * p->w[i]);
    }
  }
}

/* ---- Embedding, linear --------------------------------------------------------------------- */

typedef struct {
  float *out;
  const int *ids;
  const float *table;
  int D;
} emb_job;
static void emb_part(void *ctx, int i0, int i1, int part) {
  const emb_job *j = ctx;
  for (int i = i0; i < i1; i++)
    memcpy(j->out + (size_t)i * j->D, j->table + (size_t)j->ids[i] * j->D,
           (size_t)j->D * sizeof(float));
}

void cwm_embedding_forward(float *out, const int *ids, int N, const float *table, int D) {
  emb_job j = {out, ids, table, D};
  cwm_parallel_for(N, (long)N * D, emb_part, &j);
}

void cwm_embedding_backward(float *dtable, const float *dout, const int *ids, int N, int D) {
  if (!dtable) return;
  for (int i = 0; i < N; i++) { /* rows may repeat: one thread, row order */
    float *d = dtable + (size_t)ids[i] * D;
    const float *g = dout + (size_t)i * D;
    for (int j = 0; j < D; j++) d[j] += g[j];
  }
}

typedef struct {
  float *y;
  const float *b;
  int out, accumulate;
} bias_job;
static void bias_part(void *ctx, int i0, int i1, int part) {
  const bias_job *j = ctx;
  for (int i = i0; i < i1; i++) {
    float *r = j->y + (size_t)i * j->out;
    if (j->accumulate)
      for (int k = 0; k < j->out; k++) r[k] += j->b[k];
    else
      memcpy(r, j->b, (size_t)j->out * sizeof(float));
  }
}

void cwm_linear_forward(float *y, const float *x, const float *W, const float *b, int N, int in,
                        int out, int accumulate) {
  if (b) {
    bias_job j = {y, b, out, accumulate};
    cwm_parallel_for(N, (long)N * out, bias_part, &j);
  }
  cwm_sgemm(0, 1, N, out, in, 1.0f, x, in, W, in, (b || accumulate) ? 1.0f : 0.0f, y, out);
}

void cwm_linear_backward(float *dx, float *dW, float *db, const float *dy, const float *x,
                         const float *W, int N, int in, int out) {
  if (dx) cwm_sgemm(0, 0, N, in, out, 1.0f, dy, out, W, in, 1.0f, dx, in);
  if (dW) cwm_sgemm(1, 0, out, in, N, 1.0f, dy, out, x, in, 1.0f, dW, in);
  if (db) colsum_acc(db, dy, N, out);
}

/* ---- Layer norm, GELU ---------------------------------------------------------------------- */

#define LN_EPS 1e-5f

typedef struct {
  float *y, *mean, *rstd, *dx, *dgamma, *dbeta;
  const float *x, *gamma, *beta, *dy;
  int N, D;
} ln_job;

HOT static void ln_fwd_part(void *ctx, int i0, int i1, int part) {
  const ln_job *j = ctx;
  int D = j->D;
  for (int i = i0; i < i1; i++) {
    const float *r = j->x + (size_t)i * D;
    float m = 0.0f;
    for (int k = 0; k < D; k++) m += r[k];
    m /= (float)D;
    float v = 0.0f;
    for (int k = 0; k < D; k++) v += (r[k] - m) * (r[k] - m);
    v /= (float)D;
    float s = 1.0f / sqrtf(v + LN_EPS);
    float *o = j->y + (size_t)i * D;
    for (int k = 0; k < D; k++) o[k] = (r[k] - m) * s * j->gamma[k] + j->beta[k];
    j->mean[i] = m;
    j->rstd[i] = s;
  }
}

void cwm_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                           const float *beta, int N, int D) {
  ln_job j = {.y = y, .mean = mean, .rstd = rstd, .x = x, .gamma = gamma, .beta = beta, .D = D};
  cwm_parallel_for(N, 8L * N * D, ln_fwd_part, &j);
}

/* dx of rows [i0, i1) */
HOT static void ln_dx_part(void *ctx, int i0, int i1, int part) {
  const ln_job *j = ctx;
  int D = j->D;
  for (int i = i0; i < i1; i++) {
    const float *r = j->x + (size_t)i * D, *g = j->dy + (size_t)i * D;
    float m = j->mean[i], s = j->rstd[i];
    float dmean = 0.0f, dnorm = 0.0f;
    for (int k = 0; k < D; k++) {
      float dn = j->gamma[k] * g[k];
      dmean += dn;
      dnorm += dn * (r[k] - m) * s;
    }
    dmean /= (float)D;
    dnorm /= (float)D;
    float *o = j->dx + (size_t)i * D;
    for (int k = 0; k < D; k++) {
      float xh = (r[k] - m) * s;
      o[k] += (j->gamma[k] * g[k] - dmean - xh * dnorm) * s;
    }
  }
}

/* dgamma, dbeta of columns [k0, k1), summed over all rows */
HOT static void ln_dparam_part(void *ctx, int k0, int k1, int part) {
  const ln_job *j = ctx;
  int D = j->D, N = j->N;
  for (int i = 0; i < N; i++) {
    const float *r = j->x + (size_t)i * D, *g = j->dy + (size_t)i * D;
    float m = j->mean[i], s = j->rstd[i];
    for (int k = k0; k < k1; k++) {
      if (j->dgamma) j->dgamma[k] += g[k] * (r[k] - m) * s;
      if (j->dbeta) j->dbeta[k] += g[k];
    }
  }
}

void cwm_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                            const float *x, const float *mean, const float *rstd,
                            const float *gamma, int N, int D) {
  ln_job j = {.mean = (float *)mean, .rstd = (float *)rstd, .dx = dx, .dgamma = dgamma,
              .dbeta = dbeta, .x = x, .gamma = gamma, .dy = dy, .N = N, .D = D};
  if (dx) cwm_parallel_for(N, 10L * N * D, ln_dx_part, &j);
  if (dgamma || dbeta) cwm_parallel_for(D, 4L * N * D, ln_dparam_part, &j);
}

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

typedef struct {
  float *out;
  const float *x, *dy;
} gelu_job;

HOT static void gelu_fwd_part(void *ctx, int i0, int i1, int part) {
  const gelu_job *j = ctx;
  for (int i = i0; i < i1; i++) {
    float v = j->x[i];
    j->out[i] = 0.5f * v * (1.0f + fast_tanhf(GELU_K * (v + 0.044715f * v * v * v)));
  }
}

HOT static void gelu_bwd_part(void *ctx, int i0, int i1, int part) {
  const gelu_job *j = ctx;
  for (int i = i0; i < i1; i++) {
    float v = j->x[i];
    float th = fast_tanhf(GELU_K * (v + 0.044715f * v * v * v));
    float sech2 = 1.0f - th * th;
    float grad = 0.5f * (1.0f + th) + 0.5f * v * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
    j->out[i] += grad * j->dy[i];
  }
}

/* Elementwise loops over n floats go through the pool in chunks that fit an int. */
static void elementwise(cwm_range_fn fn, gelu_job *j, size_t n) {
  const size_t chunk = (size_t)1 << 30;
  for (size_t off = 0; off < n; off += chunk) {
    int m = (int)(n - off < chunk ? n - off : chunk);
    gelu_job jj = {j->out + off, j->x + off, j->dy ? j->dy + off : NULL};
    cwm_parallel_for(m, 20L * m, fn, &jj);
  }
}

void cwm_gelu_forward(float *y, const float *x, size_t n) {
  gelu_job j = {y, x, NULL};
  elementwise(gelu_fwd_part, &j, n);
}

void cwm_gelu_backward(float *dx, const float *x, const float *dy, size_t n) {
  gelu_job j = {dx, x, dy};
  elementwise(gelu_bwd_part, &j, n);
}

/* ---- Attention ----------------------------------------------------------------------------- */

/* Eight running sums (which the compiler keeps in vector registers), then a fixed combination:
 * the same order every time. */
static inline float dotf(const float *a, const float *b, int n) {
  float acc[8] = {0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) acc[k] += a[i + k] * b[i + k];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

/* Forward: the head's keys transposed [hs,T]. Backward: the values transposed [hs,T] and the
 * score gradients of every query [T,T]. */
size_t cwm_attention_scratch(int T, int D, int H) {
  size_t hT = (size_t)(D / H) * T, TT = (size_t)T * T;
  return hT + TT;
}

/* Eight floats as one value (GCC/Clang vector extension; two SSE registers or one AVX one),
 * loadable from any float address. */
typedef float v8f __attribute__((vector_size(32), aligned(4), may_alias));

/* y[0..m) = (or +=) sum over i < n of x[i*xs] * M[i*ld + 0..m). Columns go 32 at a time with the
 * sums in four vector registers (four independent chains); the order of the sum is fixed. This
 * one shape covers every product of the attention. */
static inline void comb(float *restrict y, int m, const float *restrict x, size_t xs,
                        const float *restrict M, size_t ld, int n, int accumulate) {
  int j = 0;
  for (; j + 32 <= m; j += 32) {
    v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (int i = 0; i < n; i++) {
      float xi = x[(size_t)i * xs];
      const v8f *r = (const v8f *)(M + (size_t)i * ld + j);
      a0 += xi * r[0];
      a1 += xi * r[1];
      a2 += xi * r[2];
      a3 += xi * r[3];
    }
    v8f *o = (v8f *)(y + j);
    if (accumulate) {
      o[0] += a0;
      o[1] += a1;
      o[2] += a2;
      o[3] += a3;
    } else {
      o[0] = a0;
      o[1] = a1;
      o[2] = a2;
      o[3] = a3;
    }
  }
  for (; j + 8 <= m; j += 8) {
    v8f a0 = {0};
    for (int i = 0; i < n; i++) a0 += x[(size_t)i * xs] * *(const v8f *)(M + (size_t)i * ld + j);
    v8f *o = (v8f *)(y + j);
    if (accumulate)
      *o += a0;
    else
      *o = a0;
  }
  for (; j < m; j++) {
    float acc = 0.0f;
    for (int i = 0; i < n; i++) acc += x[(size_t)i * xs] * M[(size_t)i * ld + j];
    y[j] = accumulate ? y[j] + acc : acc;
  }
}

/* dst[i*T + t] = src[t*ld + i] for i < hs: one head's keys or values as [hs, T] rows, so that the
 * loops over keys run over contiguous floats; masked keys become zeros. */
static void transpose_head(float *dst, const float *src, int ld, int T, int hs,
                           const unsigned char *mask) {
  for (int t = 0; t < T; t++) {
    const float *r = src + (size_t)t * ld;
    int real = !mask || mask[t];
    for (int i = 0; i < hs; i++) dst[(size_t)i * T + t] = real ? r[i] : 0.0f;
  }
}

HOT void cwm_attention_head_forward(float *out, float *att, const float *qkv,
                                    const unsigned char *mask, int T, int D, int H, int h,
                                    float *scratch) {
  int hs = D / H, D3 = 3 * D;
  size_t ho = (size_t)h * hs;
  float scale = 1.0f / sqrtf((float)hs);
  float *Kt = scratch, qs[512];
  transpose_head(Kt, qkv + D + ho, D3, T, hs, mask);
  for (int t = 0; t < T; t++) {
    float *o = out + (size_t)t * D + ho;
    float *a = att + (size_t)t * T;
    if (mask && !mask[t]) {
      memset(o, 0, (size_t)hs * sizeof(float));
      memset(a, 0, (size_t)T * sizeof(float));
      continue;
    }
    const float *q = qkv + (size_t)t * D3 + ho;
    for (int i0 = 0; i0 < hs; i0 += 512) { /* scores = (q * scale) K^T */
      int n = hs - i0 < 512 ? hs - i0 : 512;
      for (int i = 0; i < n; i++) qs[i] = q[i0 + i] * scale;
      comb(a, T, qs, 1, Kt + (size_t)i0 * T, (size_t)T, n, i0 > 0);
    }
    float mx = -INFINITY;
    for (int t2 = 0; t2 < T; t2++)
      if ((!mask || mask[t2]) && a[t2] > mx) mx = a[t2];
    for (int t2 = 0; t2 < T; t2++) a[t2] = fast_expf(a[t2] - mx);
    if (mask)
      for (int t2 = 0; t2 < T; t2++) a[t2] = mask[t2] ? a[t2] : 0.0f;
    float sum = 0.0f;
    for (int t2 = 0; t2 < T; t2++) sum += a[t2];
    float inv = 1.0f / sum; /* the query itself is a real key, so sum >= 1 */
    for (int t2 = 0; t2 < T; t2++) a[t2] *= inv;
    comb(o, hs, a, 1, qkv + 2 * D + ho, (size_t)D3, T, 0); /* out = P V */
  }
}

HOT void cwm_attention_head_backward(float *dqkv, const float *dout, const float *qkv,
                                     const float *att, const unsigned char *mask, int T, int D,
                                     int H, int h, float *scratch) {
  int hs = D / H, D3 = 3 * D;
  size_t ho = (size_t)h * hs;
  float scale = 1.0f / sqrtf((float)hs);
  float *Vt = scratch, *dS = Vt + (size_t)hs * T;
  transpose_head(Vt, qkv + 2 * D + ho, D3, T, hs, mask);
  for (int t = 0; t < T; t++) {
    float *ds = dS + (size_t)t * T;
    if (mask && !mask[t]) {
      memset(ds, 0, (size_t)T * sizeof(float));
      continue;
    }
    const float *a = att + (size_t)t * T;
    /* dP = dO V^T, then through the softmax: dS = P * (dP - sum(P * dP)), scaled */
    comb(ds, T, dout + (size_t)t * D + ho, 1, Vt, (size_t)T, hs, 0);
    float s = dotf(a, ds, T);
    for (int t2 = 0; t2 < T; t2++) ds[t2] = a[t2] * (ds[t2] - s) * scale; /* masked: P = 0 */
    comb(dqkv + (size_t)t * D3 + ho, hs, ds, 1, qkv + D + ho, (size_t)D3, T, 1); /* dQ = dS K */
  }
  for (int t2 = 0; t2 < T; t2++) {
    if (mask && !mask[t2]) continue;
    float *dk = dqkv + (size_t)t2 * D3 + D + ho;
    comb(dk, hs, dS + t2, (size_t)T, qkv + ho, (size_t)D3, T, 1);              /* dK = dS^T Q */
    comb(dk + D, hs, att + t2, (size_t)T, dout + ho, (size_t)D, T, 1);         /* dV = P^T dO */
  }
}

void cwm_attention_forward(float *out, float *att, const float *qkv, const unsigned char *mask,
                           int T, int D, int H, float *scratch) {
  for (int h = 0; h < H; h++)
    cwm_attention_head_forward(out, att + (size_t)h * T * T, qkv, mask, T, D, H, h, scratch);
}

void cwm_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
                            const unsigned char *mask, int T, int D, int H, float *scratch) {
  for (int h = 0; h < H; h++)
    cwm_attention_head_backward(dqkv, dout, qkv, att + (size_t)h * T * T, mask, T, D, H, h,
                                scratch);
}

/* ---- Pooling, TransH ----------------------------------------------------------------------- */

void cwm_meanpool_forward(float *out, const float *x, const unsigned char *mask, int N, int D) {
  memset(out, 0, (size_t)D * sizeof(float));
  int cnt = 0;
  for (int i = 0; i < N; i++) {
    if (mask && !mask[i]) continue;
    const float *r = x + (size_t)i * D;
    for (int j = 0; j < D; j++) out[j] += r[j];
    cnt++;
  }
  if (cnt)
    for (int j = 0; j < D; j++) out[j] /= (float)cnt;
}

void cwm_meanpool_backward(float *dx, const float *dout, const unsigned char *mask, int N, int D) {
  int cnt = 0;
  for (int i = 0; i < N; i++) cnt += !mask || mask[i];
  if (!cnt) return;
  float inv = 1.0f / (float)cnt;
  for (int i = 0; i < N; i++) {
    if (mask && !mask[i]) continue;
    float *r = dx + (size_t)i * D;
    for (int j = 0; j < D; j++) r[j] += dout[j] * inv;
  }
}

/* |u| is taken as sqrt(|u|^2 + eps) so that u = 0 gives w = 0 instead of NaN. */
#define TRANSH_EPS 1e-12f

void cwm_transh_forward(float *zout, const float *z, const float *u, const float *d, int N, int D) {
  for (int r = 0; r < N; r++) {
    const float *zr = z + (size_t)r * D, *ur = u + (size_t)r * D, *dr = d + (size_t)r * D;
    float *o = zout + (size_t)r * D;
    float nn = sqrtf(dotf(ur, ur, D) + TRANSH_EPS);
    float s = dotf(ur, zr, D) / nn; /* w.z */
    for (int j = 0; j < D; j++) o[j] = zr[j] - s * (ur[j] / nn) + dr[j];
  }
}

void cwm_transh_backward(float *dz, float *du, float *dd, const float *dzout, const float *z,
                         const float *u, int N, int D) {
  for (int r = 0; r < N; r++) {
    const float *zr = z + (size_t)r * D, *ur = u + (size_t)r * D, *g = dzout + (size_t)r * D;
    float nn = sqrtf(dotf(ur, ur, D) + TRANSH_EPS);
    float s = dotf(ur, zr, D) / nn;  /* w.z */
    float wg = dotf(ur, g, D) / nn;  /* w.g */
    /* z' = z - s w + d: dz = g - (w.g) w; dw = -(s g + (w.g) z); du = (dw - w (w.dw)) / |u|,
     * and w.dw = -2 s (w.g). */
    for (int j = 0; j < D; j++) {
      float w = ur[j] / nn;
      if (dz) dz[(size_t)r * D + j] += g[j] - wg * w;
      if (du) {
        float dw = -(s * g[j] + wg * zr[j]);
        du[(size_t)r * D + j] += (dw + 2.0f * s * wg * w) / nn;
      }
      if (dd) dd[(size_t)r * D + j] += g[j];
    }
  }
}

/* ---- Losses -------------------------------------------------------------------------------- */

float cwm_pair_logistic(const float *s, const double *cost, int n, float min_gap, float dloss, float *ds,
                        int *npairs) {
  double best = INFINITY;
  for (int i = 0; i < n; i++)
    if (isfinite(cost[i]) && cost[i] > 0 && cost[i] < best) best = cost[i];
  int np = 0;
  double loss = 0, wsum = 0;
  if (!isfinite(best)) {
    if (npairs) *npairs = 0;
    return 0.0f;
  }
  /* pass 1 counts the pairs and their weights (the mean's divisor), pass 2 adds the loss and
   * gradient */
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < n; i++) {
      if (!(isfinite(cost[i]) && cost[i] > 0)) continue; /* i must be the faster one */
      double li = log(cost[i]), ri = best / cost[i];
      for (int j = 0; j < n; j++) {
        if (j == i) continue;
        int vj = isfinite(cost[j]) && cost[j] > 0;
        if (vj && log(cost[j]) - li <= min_gap) continue;
        double wt = ri - (vj ? best / cost[j] : 0.0); /* the gain between them, as NDCG weighs it */
        if (pass == 0) {
          np++;
          wsum += wt;
          continue;
        }
        double x = (double)s[j] - (double)s[i]; /* loss log(1 + e^x) */
        double l = x > 30 ? x : log1p(exp(x));
        double sg = 1.0 / (1.0 + exp(-x)); /* dl/dx */
        loss += wt * l / wsum;
        if (ds) {
          ds[j] += (float)(dloss * wt * sg / wsum);
          ds[i] -= (float)(dloss * wt * sg / wsum);
        }
      }
    }
    if (np == 0 || !(wsum > 0)) break;
  }
  if (npairs) *npairs = np;
  return (float)loss;
}

float cwm_infonce(const float *anc, const float *pos, const int *groups, int B, int D,
                  float temperature, int symmetric, float dloss, float *danc, float *dpos) {
  if (B <= 0) return 0.0f;
  float *an = cwm_xmalloc((size_t)B * D * sizeof(float));
  float *pn = cwm_xmalloc((size_t)B * D * sizeof(float));
  float *na = cwm_xmalloc((size_t)B * sizeof(float)), *np = cwm_xmalloc((size_t)B * sizeof(float));
  double *S = cwm_xmalloc((size_t)B * B * sizeof(double));
  double *dS = cwm_xcalloc((size_t)B * B, sizeof(double));
  for (int i = 0; i < B; i++) {
    const float *a = anc + (size_t)i * D, *p = pos + (size_t)i * D;
    na[i] = sqrtf(dotf(a, a, D) + 1e-12f);
    np[i] = sqrtf(dotf(p, p, D) + 1e-12f);
    for (int j = 0; j < D; j++) {
      an[(size_t)i * D + j] = a[j] / na[i];
      pn[(size_t)i * D + j] = p[j] / np[i];
    }
  }
  for (int i = 0; i < B; i++)
    for (int j = 0; j < B; j++)
      S[(size_t)i * B + j] = (double)dotf(an + (size_t)i * D, pn + (size_t)j * D, D) / temperature;
  double w = symmetric ? 0.5 / B : 1.0 / B, loss = 0.0;
  for (int dir = 0; dir < (symmetric ? 2 : 1); dir++) {
    /* dir 0: row i of S (anchor i against every positive); dir 1: column i. */
    for (int i = 0; i < B; i++) {
      double mx = -INFINITY;
      for (int j = 0; j < B; j++) {
        if (j != i && groups && groups[j] == groups[i]) continue;
        double s = dir ? S[(size_t)j * B + i] : S[(size_t)i * B + j];
        if (s > mx) mx = s;
      }
      double sum = 0.0;
      for (int j = 0; j < B; j++) {
        if (j != i && groups && groups[j] == groups[i]) continue;
        sum += exp((dir ? S[(size_t)j * B + i] : S[(size_t)i * B + j]) - mx);
      }
      double lse = mx + log(sum);
      loss += w * (lse - S[(size_t)i * B + i]);
      for (int j = 0; j < B; j++) {
        if (j != i && groups && groups[j] == groups[i]) continue;
        size_t ij = dir ? (size_t)j * B + i : (size_t)i * B + j;
        dS[ij] += w * (exp(S[ij] - lse) - (i == j));
      }
    }
  }
  /* Through S = an pn^T / tau, then through the normalisations. */
  float *tmp = cwm_xmalloc((size_t)D * sizeof(float));
  for (int side = 0; side < 2; side++) {
    float *dst = side ? dpos : danc;
    if (!dst) continue;
    const float *self = side ? pn : an, *other = side ? an : pn, *nrm = side ? np : na;
    for (int i = 0; i < B; i++) {
      memset(tmp, 0, (size_t)D * sizeof(float));
      for (int j = 0; j < B; j++) {
        double g = side ? dS[(size_t)j * B + i] : dS[(size_t)i * B + j];
        float c = (float)(g / temperature);
        const float *o = other + (size_t)j * D;
        for (int k = 0; k < D; k++) tmp[k] += c * o[k];
      }
      const float *x = self + (size_t)i * D;
      float xd = dotf(x, tmp, D);
      for (int k = 0; k < D; k++) dst[(size_t)i * D + k] += dloss * (tmp[k] - x[k] * xd) / nrm[i];
    }
  }
  free(tmp);
  free(an);
  free(pn);
  free(na);
  free(np);
  free(S);
  free(dS);
  return (float)loss;
}

float cwm_sqdist(const float *a, const float *b, int D, float dloss, float *da, float *db) {
  float s = 0.0f;
  for (int j = 0; j < D; j++) {
    float d = a[j] - b[j];
    s += d * d;
    if (da) da[j] += dloss * 2.0f * d;
    if (db) db[j] -= dloss * 2.0f * d;
  }
  return s;
}

float cwm_margin_rank(const float *a, const float *p, const float *n, int D, float gamma,
                      float dloss, float *da, float *dp, float *dn) {
  float dap = 0.0f, dan = 0.0f;
  for (int j = 0; j < D; j++) {
    dap += (a[j] - p[j]) * (a[j] - p[j]);
    dan += (a[j] - n[j]) * (a[j] - n[j]);
  }
  float l = gamma + dap - dan;
  if (l <= 0.0f) return 0.0f;
  for (int j = 0; j < D; j++) {
    if (da) da[j] += dloss * 2.0f * (n[j] - p[j]);
    if (dp) dp[j] -= dloss * 2.0f * (a[j] - p[j]);
    if (dn) dn[j] += dloss * 2.0f * (a[j] - n[j]);
  }
  return l;
}

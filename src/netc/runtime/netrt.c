/* netrt.c: the glue of a compiled network, the operators that are not tuned kernels (pooling,
 * residual adds, reshapes, transposes, the embedding lookup ...). cwm compile copies this file
 * into every network library it writes, ahead of the generated code, which calls these functions
 * with the shapes of each node as constants. Plain loops over contiguous row-major arrays;
 * broadcasting through strides of 0. Only the C library and libm. */
#ifndef CWM_NETRT
#define CWM_NETRT
#include <math.h>
#include <stdint.h>
#include <string.h>

#define RT_MAXD 8
#define RT_PAR 65536 /* elements from which a loop is shared among OpenMP threads */

enum { RT_ADD, RT_SUB, RT_MUL, RT_DIV, RT_POW, RT_MAX, RT_MIN, RT_EQ, RT_LT, RT_GT, RT_AND, RT_OR };
enum { RT_RELU, RT_SQRT, RT_ERF, RT_TANH, RT_SIGMOID, RT_EXP, RT_LOG, RT_NEG, RT_ABS, RT_RECIP, RT_CLIP,
       RT_LEAKY, RT_HSIGMOID, RT_HSWISH, RT_GELU, RT_NOT };

static inline float rt_bin(int op, float a, float b) {
  switch (op) {
  case RT_ADD: return a + b;
  case RT_SUB: return a - b;
  case RT_MUL: return a * b;
  case RT_DIV: return a / b;
  case RT_POW: return b == 2.0f ? a * a : powf(a, b);
  case RT_MAX: return a > b ? a : b;
  case RT_MIN: return a < b ? a : b;
  case RT_EQ: return a == b;
  case RT_LT: return a < b;
  case RT_GT: return a > b;
  case RT_AND: return a != 0 && b != 0;
  default: return a != 0 || b != 0;
  }
}

/* Index of the flat output position i in an input with strides st (0 on broadcast dims). */
static inline int64_t rt_src(int nd, const int64_t *shape, const int64_t *st, int64_t i) {
  int64_t off = 0;
  for (int d = nd - 1; d >= 0; d--) {
    off += (i % shape[d]) * st[d];
    i /= shape[d];
  }
  return off;
}

/* out = a op b over the output shape; as/bs: the inputs' strides in output dims. */
static void rt_binary(int op, int nd, const int64_t *shape, const float *a, const int64_t *as, const float *b,
                      const int64_t *bs, float *out) {
  int64_t n = 1, ca = 1, cb = 1, sa = 1, sb = 1;
  for (int d = nd - 1; d >= 0; d--) {
    if (as[d] != (shape[d] == 1 ? as[d] : sa)) ca = 0;
    if (bs[d] != (shape[d] == 1 ? bs[d] : sb)) cb = 0;
    if (as[d] != 0) sa *= shape[d];
    if (bs[d] != 0) sb *= shape[d];
    n *= shape[d];
  }
  int bscalar = 1, ascalar = 1;
  for (int d = 0; d < nd; d++) bscalar &= bs[d] == 0 || shape[d] == 1, ascalar &= as[d] == 0 || shape[d] == 1;
  if (ca && cb) {
    if (op == RT_ADD) {
#pragma omp parallel for if (n > RT_PAR)
      for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
    } else if (op == RT_MUL) {
#pragma omp parallel for if (n > RT_PAR)
      for (int64_t i = 0; i < n; i++) out[i] = a[i] * b[i];
    } else {
#pragma omp parallel for if (n > RT_PAR)
      for (int64_t i = 0; i < n; i++) out[i] = rt_bin(op, a[i], b[i]);
    }
    return;
  }
  if (ca && bscalar) {
    float y = b[0];
    for (int64_t i = 0; i < n; i++) out[i] = rt_bin(op, a[i], y);
    return;
  }
  if (cb && ascalar) {
    float x = a[0];
    for (int64_t i = 0; i < n; i++) out[i] = rt_bin(op, x, b[i]);
    return;
  }
  /* the innermost dimension as a run, the rest through strides */
  int64_t inner = nd ? shape[nd - 1] : 1, outer = n / (inner ? inner : 1);
  int64_t ai = nd ? as[nd - 1] : 0, bi = nd ? bs[nd - 1] : 0;
  for (int64_t o = 0; o < outer; o++) {
    int64_t pa = nd > 1 ? rt_src(nd - 1, shape, as, o) : 0, pb = nd > 1 ? rt_src(nd - 1, shape, bs, o) : 0;
    float *po = out + o * inner;
    for (int64_t j = 0; j < inner; j++) po[j] = rt_bin(op, a[pa + j * ai], b[pb + j * bi]);
  }
}

static void rt_where(int nd, const int64_t *shape, const float *c, const int64_t *cs, const float *a, const int64_t *as,
                     const float *b, const int64_t *bs, float *out) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  for (int64_t i = 0; i < n; i++)
    out[i] = c[rt_src(nd, shape, cs, i)] != 0 ? a[rt_src(nd, shape, as, i)] : b[rt_src(nd, shape, bs, i)];
}

static inline float rt_erf(float x) { return erff(x); }

static void rt_unary(int op, int64_t n, const float *x, float *out, float p0, float p1) {
  switch (op) {
  case RT_RELU:
#pragma omp parallel for if (n > RT_PAR)
    for (int64_t i = 0; i < n; i++) out[i] = x[i] > 0 ? x[i] : 0.0f;
    break;
  case RT_SQRT:
    for (int64_t i = 0; i < n; i++) out[i] = sqrtf(x[i]);
    break;
  case RT_ERF:
    for (int64_t i = 0; i < n; i++) out[i] = rt_erf(x[i]);
    break;
  case RT_TANH:
    for (int64_t i = 0; i < n; i++) out[i] = tanhf(x[i]);
    break;
  case RT_SIGMOID:
    for (int64_t i = 0; i < n; i++) out[i] = 1.0f / (1.0f + expf(-x[i]));
    break;
  case RT_EXP:
    for (int64_t i = 0; i < n; i++) out[i] = expf(x[i]);
    break;
  case RT_LOG:
    for (int64_t i = 0; i < n; i++) out[i] = logf(x[i]);
    break;
  case RT_NEG:
    for (int64_t i = 0; i < n; i++) out[i] = -x[i];
    break;
  case RT_ABS:
    for (int64_t i = 0; i < n; i++) out[i] = fabsf(x[i]);
    break;
  case RT_RECIP:
    for (int64_t i = 0; i < n; i++) out[i] = 1.0f / x[i];
    break;
  case RT_CLIP:
    for (int64_t i = 0; i < n; i++) out[i] = x[i] < p0 ? p0 : x[i] > p1 ? p1 : x[i];
    break;
  case RT_LEAKY:
    for (int64_t i = 0; i < n; i++) out[i] = x[i] >= 0 ? x[i] : p0 * x[i];
    break;
  case RT_HSIGMOID:
    for (int64_t i = 0; i < n; i++) {
      float y = p0 * x[i] + p1;
      out[i] = y < 0 ? 0 : y > 1 ? 1 : y;
    }
    break;
  case RT_HSWISH:
    for (int64_t i = 0; i < n; i++) {
      float y = x[i] / 6.0f + 0.5f;
      out[i] = x[i] * (y < 0 ? 0 : y > 1 ? 1 : y);
    }
    break;
  case RT_GELU:
    for (int64_t i = 0; i < n; i++) out[i] = 0.5f * x[i] * (1.0f + rt_erf(x[i] * 0.70710678118654752f));
    break;
  default: /* RT_NOT */
    for (int64_t i = 0; i < n; i++) out[i] = x[i] == 0;
    break;
  }
}

/* out = in with its dims permuted: output dim d is input dim perm[d]. es: element size. */
static void rt_transpose(int nd, const int64_t *ishape, const int *perm, const void *in, void *out, int es) {
  int64_t ist[RT_MAXD], ost[RT_MAXD], oshape[RT_MAXD], n = 1;
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; d--) ist[d] = s, s *= ishape[d];
  for (int d = 0; d < nd; d++) oshape[d] = ishape[perm[d]], ost[d] = ist[perm[d]], n *= oshape[d];
  int64_t inner = nd ? oshape[nd - 1] : 1, istep = nd ? ost[nd - 1] : 1;
#pragma omp parallel for if (n > RT_PAR)
  for (int64_t o = 0; o < n / (inner ? inner : 1); o++) {
    int64_t src = nd > 1 ? rt_src(nd - 1, oshape, ost, o) : 0;
    if (es == 4) {
      const float *pi = (const float *)in + src;
      float *po = (float *)out + o * inner;
      for (int64_t j = 0; j < inner; j++) po[j] = pi[j * istep];
    } else {
      for (int64_t j = 0; j < inner; j++)
        memcpy((char *)out + (o * inner + j) * es, (const char *)in + (src + j * istep) * es, (size_t)es);
    }
  }
}

/* out[i] = in[broadcast source of i]: Expand, and strided reads in general. */
static void rt_bcast(int nd, const int64_t *shape, const void *in, const int64_t *st, void *out, int es) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  for (int64_t i = 0; i < n; i++) memcpy((char *)out + i * es, (const char *)in + rt_src(nd, shape, st, i) * es, (size_t)es);
}

/* Concatenation along an axis: outer blocks, each input contributing len[k] elements. */
static void rt_concat(int n, const void *const *in, const int64_t *len, int64_t outer, void *out, int es) {
  int64_t total = 0;
  for (int k = 0; k < n; k++) total += len[k];
  for (int64_t o = 0; o < outer; o++) {
    int64_t off = 0;
    for (int k = 0; k < n; k++) {
      memcpy((char *)out + (o * total + off) * es, (const char *)in[k] + o * len[k] * es, (size_t)(len[k] * es));
      off += len[k];
    }
  }
}

/* Slice: out[idx] = in[start + idx * step] per dim (the output shape given). */
static void rt_slice(int nd, const int64_t *ishape, const int64_t *start, const int64_t *step, const int64_t *oshape,
                     const void *in, void *out, int es) {
  int64_t ist[RT_MAXD], s = 1, base = 0, st[RT_MAXD];
  for (int d = nd - 1; d >= 0; d--) ist[d] = s, s *= ishape[d];
  for (int d = 0; d < nd; d++) base += start[d] * ist[d], st[d] = step[d] * ist[d];
  rt_bcast(nd, oshape, (const char *)in + base * es, st, out, es);
}

/* Gather along an axis: data [outer, dim, inner], indices (int64, negative from the end). 0: ok. */
static int rt_gather(const void *data, int64_t outer, int64_t dim, int64_t inner, const int64_t *idx, int64_t nidx,
                     void *out, int es) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < nidx; j++) {
      int64_t k = idx[j] < 0 ? idx[j] + dim : idx[j];
      if (k < 0 || k >= dim) return 1;
      memcpy((char *)out + ((o * nidx + j) * inner) * es, (const char *)data + ((o * dim + k) * inner) * es,
             (size_t)(inner * es));
    }
  return 0;
}

/* Max or average pooling over NCHW planes; pads top, left, bottom, right. Per output row, each
 * window offset (ky, kx) is one pass over the outputs whose input column is inside the image: no
 * branch in the inner loop, so it vectorizes (strided loads) instead of testing each tap. */
static void rt_pool2d(int is_max, int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, int kh, int kw, int sh,
                      int sw, int pt, int pl, int count_pad, const float *in, float *out) {
#pragma omp parallel for if (planes * OH * OW > RT_PAR)
  for (int64_t p = 0; p < planes; p++) {
    const float *x = in + p * H * W;
    float *y = out + p * OH * OW;
    for (int64_t oy = 0; oy < OH; oy++) {
      float *yr = y + oy * OW;
      for (int64_t ox = 0; ox < OW; ox++) yr[ox] = is_max ? -INFINITY : 0.0f;
      int rows = 0;
      for (int ky = 0; ky < kh; ky++) {
        int64_t iy = oy * sh - pt + ky;
        if (iy < 0 || iy >= H) continue;
        rows++;
        const float *xr = x + iy * W;
        for (int kx = 0; kx < kw; kx++) {
          /* outputs whose column ox * sw - pl + kx lies in [0, W) */
          int64_t d = kx - pl, lo = d >= 0 ? 0 : (-d + sw - 1) / sw, hi = (W - 1 - d) / sw + 1;
          if (W - 1 - d < 0) continue;
          if (hi > OW) hi = OW;
          const float *xs = xr + d;
          if (is_max)
            for (int64_t ox = lo; ox < hi; ox++) yr[ox] = xs[ox * sw] > yr[ox] ? xs[ox * sw] : yr[ox];
          else
            for (int64_t ox = lo; ox < hi; ox++) yr[ox] += xs[ox * sw];
        }
      }
      if (is_max) continue;
      for (int64_t ox = 0; ox < OW; ox++) {
        int cols = 0;
        for (int kx = 0; kx < kw; kx++) {
          int64_t ix = ox * sw - pl + kx;
          cols += ix >= 0 && ix < W;
        }
        int cnt = count_pad ? kh * kw : rows * cols;
        yr[ox] /= (float)(cnt ? cnt : 1);
      }
    }
  }
}

/* Reduction of the middle dim of [outer, n, inner]: 0 sum, 1 mean, 2 max. */
static void rt_reduce(int kind, int64_t outer, int64_t n, int64_t inner, const float *in, float *out) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      const float *x = in + o * n * inner + j;
      float acc = kind == 2 ? -INFINITY : 0.0f;
      for (int64_t k = 0; k < n; k++) acc = kind == 2 ? (x[k * inner] > acc ? x[k * inner] : acc) : acc + x[k * inner];
      out[o * inner + j] = kind == 1 ? acc / (float)n : acc;
    }
}

/* Softmax (or log-softmax) along the middle dim of [outer, n, inner]. */
static void rt_softmax(int logsm, int64_t outer, int64_t n, int64_t inner, const float *in, float *out) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      const float *x = in + o * n * inner + j;
      float *y = out + o * n * inner + j;
      float mx = -INFINITY, s = 0;
      for (int64_t k = 0; k < n; k++) mx = x[k * inner] > mx ? x[k * inner] : mx;
      for (int64_t k = 0; k < n; k++) s += expf(x[k * inner] - mx);
      for (int64_t k = 0; k < n; k++)
        y[k * inner] = logsm ? x[k * inner] - mx - logf(s) : expf(x[k * inner] - mx) / s;
    }
}

/* Inference batch norm over [N, C, inner]. */
static void rt_batchnorm(int64_t N, int64_t C, int64_t inner, const float *x, const float *scale, const float *bias,
                         const float *mean, const float *var, float eps, float *y) {
  for (int64_t b = 0; b < N; b++)
    for (int64_t c = 0; c < C; c++) {
      float a = scale[c] / sqrtf(var[c] + eps), t = bias[c] - mean[c] * a;
      const float *px = x + (b * C + c) * inner;
      float *py = y + (b * C + c) * inner;
      for (int64_t i = 0; i < inner; i++) py[i] = px[i] * a + t;
    }
}

/* Direct convolution, NCHW, groups, for the convolutions no task takes (asymmetric padding ...). */
static void rt_conv2d(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t OH, int64_t OW, int kh, int kw,
                      int sh, int sw, int pt, int pl, int64_t groups, const float *x, const float *w, const float *b,
                      float *y) {
  int64_t cg = C / groups, kg = K / groups;
  for (int64_t n = 0; n < N; n++)
    for (int64_t k = 0; k < K; k++) {
      int64_t g = k / kg;
      for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++) {
          float acc = b ? b[k] : 0.0f;
          for (int64_t c = 0; c < cg; c++)
            for (int ky = 0; ky < kh; ky++) {
              int64_t iy = oy * sh - pt + ky;
              if (iy < 0 || iy >= H) continue;
              for (int kx = 0; kx < kw; kx++) {
                int64_t ix = ox * sw - pl + kx;
                if (ix < 0 || ix >= W) continue;
                acc += x[((n * C + g * cg + c) * H + iy) * W + ix] * w[((k * cg + c) * kh + ky) * kw + kx];
              }
            }
          y[((n * K + k) * OH + oy) * OW + ox] = acc;
        }
    }
}

/* Batched product out[b] = A[b] x B[b] ([M, K] x [K, N]) with per-batch offsets (broadcast). */
static void rt_matmul(int64_t batch, const int64_t *aoff, const int64_t *boff, int64_t M, int64_t N, int64_t K,
                      const float *A, const float *B, float *out) {
  for (int64_t t = 0; t < batch; t++) {
    const float *a = A + aoff[t], *b = B + boff[t];
    float *o = out + t * M * N;
    for (int64_t i = 0; i < M; i++) {
      for (int64_t j = 0; j < N; j++) o[i * N + j] = 0;
      for (int64_t k = 0; k < K; k++) {
        float x = a[i * K + k];
        for (int64_t j = 0; j < N; j++) o[i * N + j] += x * b[k * N + j];
      }
    }
  }
}

/* Gemm: out = alpha * op(A) op(B) + beta * C (C broadcast through strides over [M, N]). */
static void rt_gemm(int64_t M, int64_t N, int64_t K, int ta, int tb, float alpha, float beta, const float *A,
                    const float *B, const float *C, int64_t cs0, int64_t cs1, float *out) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      float acc = 0;
      for (int64_t k = 0; k < K; k++) acc += A[ta ? k * M + i : i * K + k] * B[tb ? j * K + k : k * N + j];
      out[i * N + j] = alpha * acc + (C ? beta * C[i * cs0 + j * cs1] : 0.0f);
    }
}

/* Element type conversion: kinds 1 float, 7 int64, 9 bool (stored as float 0 or 1 here). */
static void rt_cast(int64_t n, const void *in, int from, void *out, int to) {
  for (int64_t i = 0; i < n; i++) {
    double v = from == 7 ? (double)((const int64_t *)in)[i] : ((const float *)in)[i];
    if (to == 7) ((int64_t *)out)[i] = (int64_t)v;
    else if (to == 9) ((float *)out)[i] = v != 0;
    else ((float *)out)[i] = (float)v;
  }
}
#endif

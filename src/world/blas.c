/* blas.c: single-precision matrix products for the world model. OpenBLAS is loaded at run time
 * with dlopen, so the build never links it and a machine without it still runs everything on the
 * portable loop (slowly); cwm_blas_init is how model code learns that and tells the user. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/nn.h"

/* cblas_sgemm with its enums as ints (CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112), so
 * no cblas.h is needed at build time. */
typedef void (*sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc);

static sgemm_fn g_sgemm;
static void (*g_set_threads)(int);
static pthread_once_t g_lazy_once = PTHREAD_ONCE_INIT;

static sgemm_fn load_sgemm(const char *lib, char *why, size_t why_len, void (**set_threads)(int)) {
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(why, why_len, "%s", e ? e : "cannot be loaded");
    return NULL;
  }
  void *sym = dlsym(h, "cblas_sgemm");
  if (!sym) {
    snprintf(why, why_len, "%s has no cblas_sgemm", lib);
    dlclose(h);
    return NULL;
  }
  sgemm_fn f;
  memcpy(&f, &sym, sizeof f); /* object pointer to function pointer, as POSIX allows */
  void *st = dlsym(h, "openblas_set_num_threads"); /* absent in the reference BLAS */
  *set_threads = NULL;
  if (st) memcpy(set_threads, &st, sizeof *set_threads);
  return f; /* the handle stays open for the life of the process */
}

/* The caller's choice of library, copied so the caller's string need not outlive the call. */
static char g_chosen[4096];

void cwm_blas_set_library(const char *path) { snprintf(g_chosen, sizeof g_chosen, "%s", path ? path : ""); }

int cwm_blas_init(cwm_err *err) {
  char why[256] = "";
  const char *env = g_chosen;
  sgemm_fn f = NULL;
  void (*st)(int) = NULL;
  if (env && *env) {
    f = load_sgemm(env, why, sizeof why, &st);
    if (!f)
      return cwm_fail(err, CWM_EDEP,
                      "OpenBLAS: %s cannot be used (%s); unset it or point it at "
                      "libopenblas.so.0 (Debian package libopenblas0)",
                      env, why);
  } else {
    f = load_sgemm("libopenblas.so.0", why, sizeof why, &st);
    if (!f) f = load_sgemm("libblas.so.3", why, sizeof why, &st);
    if (!f)
      return cwm_fail(err, CWM_EDEP,
                      "OpenBLAS not found: libopenblas.so.0 cannot be loaded; install it with "
                      "apt-get install libopenblas0 (or libopenblas-dev)");
  }
  g_set_threads = st;
  g_sgemm = f;
  if (st) st(cwm_pool_threads());
  return CWM_OK;
}

void cwm_blas_set_threads(int n) {
  if (g_set_threads && n > 0) g_set_threads(n);
}

static void lazy_init(void) {
  if (!g_sgemm) cwm_blas_init(NULL);
}

int cwm_blas_active(void) {
  pthread_once(&g_lazy_once, lazy_init);
  return g_sgemm != NULL;
}

typedef struct {
  int transA, transB, N, K, lda, ldb, ldc;
  float alpha, beta;
  const float *A, *B;
  float *C;
} ref_job;

/* Rows [i0, i1) of C; each row is one thread's, summed in a fixed order. */
static void ref_rows(void *ctx, int i0, int i1, int part) {
  const ref_job *jb = ctx;
  int transA = jb->transA, transB = jb->transB, N = jb->N, K = jb->K, lda = jb->lda,
      ldb = jb->ldb;
  float alpha = jb->alpha, beta = jb->beta;
  const float *A = jb->A, *B = jb->B;
  for (int i = i0; i < i1; i++) {
    float *c = jb->C + (size_t)i * jb->ldc;
    if (beta == 0.0f)
      for (int j = 0; j < N; j++) c[j] = 0.0f; /* beta 0 overwrites, NaN included, as BLAS does */
    else if (beta != 1.0f)
      for (int j = 0; j < N; j++) c[j] *= beta;
    if (!transB) {
      for (int p = 0; p < K; p++) {
        float a = alpha * (transA ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p]);
        const float *b = B + (size_t)p * ldb;
        for (int j = 0; j < N; j++) c[j] += a * b[j];
      }
    } else {
      for (int j = 0; j < N; j++) {
        const float *b = B + (size_t)j * ldb;
        float s = 0.0f;
        if (!transA) {
          const float *a = A + (size_t)i * lda;
          for (int p = 0; p < K; p++) s += a[p] * b[p];
        } else {
          for (int p = 0; p < K; p++) s += A[(size_t)p * lda + i] * b[p];
        }
        c[j] += alpha * s;
      }
    }
  }
}

void cwm_sgemm_ref(int transA, int transB, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  if (M <= 0 || N <= 0) return;
  ref_job jb = {transA, transB, N, K, lda, ldb, ldc, alpha, beta, A, B, C};
  cwm_parallel_for(M, 2L * M * N * (K + 1), ref_rows, &jb);
}

void cwm_sgemm(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc) {
  if (M <= 0 || N <= 0) return;
  pthread_once(&g_lazy_once, lazy_init);
  sgemm_fn f = g_sgemm;
  if (!f || K <= 0) { /* K 0 is only the beta scaling, which BLAS may reject for its ld checks */
    cwm_sgemm_ref(transA, transB, M, N, K > 0 ? K : 0, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  f(101, transA ? 112 : 111, transB ? 112 : 111, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

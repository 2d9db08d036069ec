/* nn.h: the neural-network core of the compiler world model, in plain C over flat float arrays
 * (llm.c style). Matrices are row-major; a layer is a forward and a backward function.
 *
 * Gradient convention, for every backward function here: gradients ACCUMULATE (+=) into both
 * the parameter gradients and the input gradients, so callers zero them first (zero_grad, or a
 * memset of their scratch) and a tensor used twice simply gets both contributions. Any gradient
 * pointer a backward takes may be NULL to skip that gradient.
 *
 * Threads: layers that work on many rows split them over a small pool of threads so that each
 * output element is computed by one thread in a fixed order, so results are bitwise identical
 * for a given thread count, and for any thread count on the portable product loop (OpenBLAS
 * sums in another order at another thread count: the last bits differ). The pool, not
 * OpenMP: idle workers sleep instead of spinning (libgomp's spinning made a loaded two-core
 * machine 20x slower) and it survives fork() (a libgomp child hangs in its first parallel region
 * once the parent has used one, and the runner forks). Nothing here prints or exits. */
#ifndef CWM_NN_H
#define CWM_NN_H

#include <stddef.h>
#include <stdint.h>

#include "cwm/util.h"

/* ---- Threads ------------------------------------------------------------------------------- */

/* Threads the layers (the pool of util.h, and OpenBLAS when loaded) use; n <= 0: the online
 * CPUs (at most 16). Not while another thread runs a model. */
void cwm_nn_set_threads(int n);
int cwm_nn_threads(void);
/* (the layers split their loops with cwm_parallel_for, util.h) */

/* ---- BLAS ---------------------------------------------------------------------------------- */

/* Loads OpenBLAS at run time (dlopen; nothing is linked at build time): the library named by
 * cwm_blas_set_library if set, else libopenblas.so.0, else libblas.so.3, and resolves cblas_sgemm.
 * Returns CWM_EDEP with one line naming the library and the Debian package when none loads;
 * a library loaded by an earlier successful call then stays in use. Call it once before
 * building models, from one thread, before any other thread calls cwm_sgemm. */
int cwm_blas_init(cwm_err *err);
/* The BLAS library cwm_blas_init loads instead of the Debian sonames (NULL or "": those); the
 * path is copied. Call it before cwm_blas_init, from one thread. */
void cwm_blas_set_library(const char *path);
/* 1 when cwm_sgemm goes to the loaded BLAS, 0 when it uses the portable loop. */
int cwm_blas_active(void);
/* C = alpha * op(A) op(B) + beta * C, row-major, op(X) = X^T when transX; op(A) is [M,K],
 * op(B) is [K,N], C is [M,N]; lda/ldb/ldc are row strides. Uses the BLAS when cwm_blas_init
 * succeeded (or, if it was never called, when the first call finds one), else cwm_sgemm_ref. */
void cwm_sgemm(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc);
/* Sets OpenBLAS's own thread count (no-op without OpenBLAS); cwm_nn_set_threads calls it. */
void cwm_blas_set_threads(int n);
/* The portable loop behind cwm_sgemm (also the reference the tests compare OpenBLAS with). */
void cwm_sgemm_ref(int transA, int transB, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* ---- Parameters and the optimizer ---------------------------------------------------------- */

#define CWM_PARAM_NAME 64
#define CWM_PARAM_MAXDIM 4

/* One parameter tensor. w (value), g (gradient), m and v (AdamW moments) each point at n floats
 * inside the registry's single block. decay: AdamW applies weight decay (matrices and
 * embeddings yes; biases and layer-norm gains/biases no). */
typedef struct {
  char name[CWM_PARAM_NAME];
  int ndim;
  int shape[CWM_PARAM_MAXDIM];
  size_t n;
  float *w, *g, *m, *v;
  int decay;
} cwm_param;

/* A model's parameters: add every tensor, then alloc, which places all of them in one block laid
 * out as [all w | all g | all m | all v] (so zero-grad and clipping are one sweep) and zeroes it.
 * step counts AdamW updates (bias correction). */
typedef struct {
  cwm_param *p;
  int n, cap;
  float *block;
  size_t total; /* floats per section (sum of n) */
  long step;
} cwm_params;

void cwm_params_init(cwm_params *ps);
/* Returns the index of the new tensor; only before cwm_params_alloc. */
int cwm_params_add(cwm_params *ps, const char *name, int ndim, const int *shape, int decay);
void cwm_params_alloc(cwm_params *ps);
void cwm_params_free(cwm_params *ps);
cwm_param *cwm_params_find(cwm_params *ps, const char *name); /* NULL if absent */
void cwm_params_zero_grad(cwm_params *ps);
/* Scales all gradients so their global L2 norm is at most max_norm (max_norm <= 0: no scaling);
 * returns the norm before scaling. */
float cwm_params_clip_grad(cwm_params *ps, float max_norm);

/* Deterministic initialisation (the same rng state gives the same values). */
void cwm_param_init_normal(cwm_param *p, cwm_rng *rng, float stddev);
void cwm_param_init_const(cwm_param *p, float value);
double cwm_rng_normal(cwm_rng *rng); /* standard normal (Box-Muller) */

typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
} cwm_adamw;
/* lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01. */
cwm_adamw cwm_adamw_default(void);
/* One AdamW update of every tensor (decoupled weight decay, w -= lr*wd*w, only on tensors with
 * decay set; bias-corrected moments); increments ps->step. Gradients are left as they are. */
void cwm_adamw_step(cwm_params *ps, const cwm_adamw *opt);

/* ---- Layers (N rows) ----------------------------------------------------------------------- */

/* out[i,:] = table[ids[i],:]; ids must lie in [0, rows of table). */
void cwm_embedding_forward(float *out, const int *ids, int N, const float *table, int D);
void cwm_embedding_backward(float *dtable, const float *dout, const int *ids, int N, int D);

/* y[N,out] = x[N,in] W^T + b, W [out,in], b [out] or NULL; accumulate: y += instead of y =. */
void cwm_linear_forward(float *y, const float *x, const float *W, const float *b, int N, int in,
                        int out, int accumulate);
void cwm_linear_backward(float *dx, float *dW, float *db, const float *dy, const float *x,
                         const float *W, int N, int in, int out);

/* Layer norm over the last dimension, eps 1e-5; saves mean[N] and rstd[N] for the backward. */
void cwm_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                           const float *beta, int N, int D);
void cwm_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                            const float *x, const float *mean, const float *rstd,
                            const float *gamma, int N, int D);

/* GELU, tanh approximation, elementwise (tanh through a vectorizable exp, ~1e-7 absolute). */
void cwm_gelu_forward(float *y, const float *x, size_t n);
void cwm_gelu_backward(float *dx, const float *x, const float *dy, size_t n);

/* Multi-head self-attention over one sequence of T tokens. qkv [T,3D] holds q | k | v per row
 * (head h owns columns h*D/H .. (h+1)*D/H - 1 of each); out [T,D]; att [H,T,T] keeps the
 * softmax probabilities for the backward. mask [T] (NULL: all real): keys with mask 0 are left
 * out of every softmax, and queries with mask 0 produce zero output rows (and zero att rows).
 * scratch: cwm_attention_scratch(T, D, H) floats (one head's keys or values transposed, and
 * the backward's [T,T] score gradients). */
size_t cwm_attention_scratch(int T, int D, int H);
void cwm_attention_forward(float *out, float *att, const float *qkv, const unsigned char *mask,
                           int T, int D, int H, float *scratch);
void cwm_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
                            const unsigned char *mask, int T, int D, int H, float *scratch);
/* One head h of the above (att is that head's [T,T]); heads write disjoint columns, so callers
 * may run them in parallel, each with its own scratch. */
void cwm_attention_head_forward(float *out, float *att, const float *qkv,
                                const unsigned char *mask, int T, int D, int H, int h,
                                float *scratch);
void cwm_attention_head_backward(float *dqkv, const float *dout, const float *qkv,
                                 const float *att, const unsigned char *mask, int T, int D,
                                 int H, int h, float *scratch);

/* out[D] = mean of the rows i of x [N,D] with mask[i] != 0 (mask NULL: all rows); zeros if none. */
void cwm_meanpool_forward(float *out, const float *x, const unsigned char *mask, int N, int D);
void cwm_meanpool_backward(float *dx, const float *dout, const unsigned char *mask, int N, int D);

/* TransH step, per row of N: w = u/|u|, z' = z - (w.z) w + d. z, u, d, z' are [N,D]. */
void cwm_transh_forward(float *zout, const float *z, const float *u, const float *d, int N, int D);
void cwm_transh_backward(float *dz, float *du, float *dd, const float *dzout, const float *z,
                         const float *u, int N, int D);

/* ---- Losses: each returns the loss and accumulates dloss * its gradient --------------------- */

/* InfoNCE over a batch of B pairs with cosine similarity / temperature: row i's positive is
 * pos[i], every other pos[j] is a negative (except those with groups[j] == groups[i] when groups
 * is not NULL: those are left out of the denominator). One-sided (anchors against positives)
 * when symmetric is 0; symmetric adds positives against anchors and averages the two. The loss
 * is the mean over rows. Gradients into danc [B,D] and dpos [B,D] (either may be NULL). */
float cwm_infonce(const float *anc, const float *pos, const int *groups, int B, int D,
                  float temperature, int symmetric, float dloss, float *danc, float *dpos);
/* ||a - b||^2 */
float cwm_sqdist(const float *a, const float *b, int D, float dloss, float *da, float *db);
/* max(0, gamma + ||a-p||^2 - ||a-n||^2); the gradient is zero where the hinge is not active. */
float cwm_margin_rank(const float *a, const float *p, const float *n, int D, float gamma,
                      float dloss, float *da, float *dp, float *dn);

/* Pairwise logistic ranking loss over one group of n items with scores s (higher = predicted
 * faster) and measured costs (seconds; a cost that is not finite and positive is a failed
 * program, worse than every valid one, with throughput 0): over ordered pairs (i faster than j
 * by more than min_gap in log cost; two failures are no pair), the mean of log(1 + exp(s_j - s_i))
 * weighted by the difference of their throughputs relative to the group's best (so the pairs
 * near the top count most, as NDCG weighs them). Accumulates dloss * the gradient into ds [n];
 * returns the loss and the number of pairs in *npairs (may be NULL). */
float cwm_pair_logistic(const float *s, const double *cost, int n, float min_gap, float dloss, float *ds,
                        int *npairs);

/* ---- Encoder -------------------------------------------------------------------------------- */

/* Transformer encoder of token texts into one vector each. Fields left 0 get the defaults:
 * width 128, heads 4, layers 2, ff 4*width, window 128, overlap window/4 (32); a negative
 * overlap means none. vocab has no default. An encoder is used by one thread at a time. */
typedef struct {
  int vocab, width, heads, layers, ff, window, overlap;
} cwm_enc_config;

typedef struct cwm_encoder cwm_encoder;

/* Parameters are named "tok_emb" [vocab,width], "pos_emb" [window,width],
 * "l<i>.ln1.g|b", "l<i>.attn.qkv.w" [3w,w], "l<i>.attn.qkv.b", "l<i>.attn.proj.w|b",
 * "l<i>.ln2.g|b", "l<i>.mlp.fc.w" [ff,w], "l<i>.mlp.fc.b", "l<i>.mlp.proj.w" [w,ff],
 * "l<i>.mlp.proj.b", "lnf.g|b"; initialised from seed (normal 0.02, residual projections
 * 0.02/sqrt(2*layers), biases 0, gains 1). Fails (CWM_EUSAGE) on an invalid config. */
cwm_encoder *cwm_encoder_new(const cwm_enc_config *cfg, uint64_t seed, cwm_err *err);
void cwm_encoder_free(cwm_encoder *e);
const cwm_enc_config *cwm_encoder_config(const cwm_encoder *e); /* with defaults filled in */
cwm_params *cwm_encoder_params(cwm_encoder *e);
int cwm_encoder_nparams(const cwm_encoder *e);
cwm_param *cwm_encoder_param(cwm_encoder *e, int i);

/* Encodes batch texts (ids[b] has lens[b] token ids) into out [batch,width]. A text is cut into
 * windows of `window` tokens with stride window-overlap (positions restart in each window; the
 * last window holds what is left); token embedding + position embedding, pre-norm blocks
 * x += MHSA(LN(x)); x += MLP_GELU(LN(x)), a final LN, and the mean over every token of every
 * window of the text (tokens in an overlap count once per window they are in). An empty text
 * gives zeros. Windows are never padded: a short window simply has fewer rows, which is the same
 * as padding it and masking the padding out. keep_for_backward: keep the activations for
 * cwm_encoder_backward; 0 (inference) reuses a smaller workspace. Memory grows to the largest
 * batch seen and is then reused. Fails (CWM_EMODEL) on a token id outside the vocabulary. */
int cwm_encoder_forward(cwm_encoder *e, const int *const *ids, const int *lens, int batch,
                        float *out, int keep_for_backward, cwm_err *err);
/* dout [batch,width]: gradient of the loss w.r.t. the last forward's out. Accumulates into the
 * parameter gradients; needs the last forward to have kept its activations (else CWM_EUSAGE). */
int cwm_encoder_backward(cwm_encoder *e, const float *dout, cwm_err *err);
void cwm_encoder_zero_grad(cwm_encoder *e);

#endif

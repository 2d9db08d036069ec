/* Vendor speed anchors for the benchmarks: oneDNN (C API, float32, constant weights
 * pre-reordered to oneDNN's chosen layout) and PyTorch eager (via bench/torch_anchor.py).
 * Implemented in bench/lib/anchors.c, compiled once into the benches' helper library; the
 * oneDNN and PyTorch parts exist when the benches are built with CWM_HAVE_DNNL. */
#ifndef CWM_BENCH_ANCHORS_H
#define CWM_BENCH_ANCHORS_H

#include <stddef.h>

/* oneDNN's timing protocol: ANCHOR_REPEATS windows of at least ANCHOR_MIN_REPEAT_S seconds each. */
#define ANCHOR_REPEATS 7
#define ANCHOR_MIN_REPEAT_S 0.05

/* ---------------------------------------------------------------- op spec */

typedef enum {
  ANCHOR_DENSE,
  ANCHOR_BATCH_MATMUL,
  ANCHOR_MATMUL,
  ANCHOR_CONV2D,
  ANCHOR_DWCONV2D,
  ANCHOR_SOFTMAX,
  ANCHOR_LAYERNORM
} anchor_kind;

typedef enum { ANCHOR_ACT_NONE, ANCHOR_ACT_RELU, ANCHOR_ACT_GELU } anchor_act;

typedef struct {
  anchor_kind kind;
  long B, M, N, K;       /* matmul-like, softmax, layernorm */
  long C, H, W, R, S;    /* conv (K = output channels for conv2d) */
  long stride, pad;      /* conv; defaults 1, 0 */
  int bias;              /* default 0 */
  anchor_act act;        /* default none */
} anchor_op;

#ifdef CWM_HAVE_DNNL
/* Parses "op k=v k=v ..." (suite columns 2 and 3 joined by a space). Returns 0, or -1 on
 * an unknown op/key, a malformed value, or a missing/non-positive required size. */
int anchor_parse_spec(const char *spec, anchor_op *op);
long anchor_conv_oh(const anchor_op *op);
long anchor_conv_ow(const anchor_op *op);
/* Floating-point operations of one call (multiply-add = 2); bias and activation not counted. */
double anchor_flops(const anchor_op *op);
/* The median of the finite positive values of v[0..n); `none` when there are none. */
double anchor_median(const double *v, int n, double none);
/* Median seconds per call of the op with oneDNN on `threads` threads; negative with err. */
double anchor_dnnl_seconds(const anchor_op *op, int threads, char *err, size_t errn);
/* Path of bench/torch_anchor.py. */
void anchor_torch_script(char *out, size_t n);
/* Median seconds per call of suite row `id` with PyTorch eager; negative with err. */
double anchor_torch_seconds(const char *suite_path, const char *id, int threads, char *err,
                            size_t errn);
#endif

/* An anchor measured in a child process, because neither libgomp (which oneDNN loads) nor python
 * may live in a process that forks the runner: torch = 0 times oneDNN on the op spec, 1 PyTorch on
 * the suite row id. Seconds per call, negative when unavailable (the reason on stderr). */
double anchor_seconds_child(int torch, const char *suite, const char *id, const char *spec, int threads);

#endif /* CWM_BENCH_ANCHORS_H */

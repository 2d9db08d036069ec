/* codegen.h: lowering a state to code. Bound inference for attached stages, guards for uneven
 * splits, local buffers for cache stages, OpenMP for parallel loops, simd/unroll pragmas, and
 * Ansor's layout rewrite: an input marked `const` (a weight) that one reduction stage reads is
 * taken by the kernel in the order that stage's loops walk it, with a conversion function run
 * once outside the kernel. The same walk prints the TensorIR-like text of cwm_state_print,
 * where such an input's placeholder line shows its layout. */
#ifndef CWM_CODEGEN_H
#define CWM_CODEGEN_H

#include "cwm/state.h"

/* The printed state: deterministic TensorIR-like text (what the world model's encoder reads).
 * Owned string. */
char *cwm_state_print(const cwm_state *s);

typedef struct {
  int reference;        /* straightforward kernel, double accumulation (initial state only) */
  const char *fn_name;  /* name of the typed function; default "cwm_k_<hash>" */
  int vec_lanes;        /* widest vector of a register tile: 8 or 16 floats; 0: cwm_codegen_lanes() */
} cwm_codegen_opts;

/* The vector width of this machine's CPU: 16 floats where it has AVX-512F, else 8. */
int cwm_codegen_host_lanes(void);
/* The vector width register tiles target where no vec_lanes is given (kernels, the sampler's
 * max_vectorize default, the hand schedules): the one set by cwm_codegen_set_lanes, else
 * cwm_codegen_host_lanes(). A 16-lane kernel still compiles and runs right without AVX-512 (the
 * compiler splits each vector in two). */
int cwm_codegen_lanes(void);
/* Sets that width for the process: 8 or 16; anything else goes back to the CPU's. Call it before
 * any other thread generates code. */
void cwm_codegen_set_lanes(int lanes);

typedef struct {
  char *body;                        /* C fragment: typed function + `void <entry>(float *const *args)`
                                        (+ the pack functions below) */
  char fn[80];                       /* typed function: void fn(const float *restrict A, ..., float *restrict out) */
  char entry[96];                    /* wrapper taking args[] */
  int nargs;                         /* inputs in workload order, then the output */
  long arg_len[CWM_MAX_ARGS];        /* floats per argument as the kernel takes it */
  char arg_name[CWM_MAX_ARGS][CWM_MAX_NAME];
  int arg_tid[CWM_MAX_ARGS];
  long red_len;                      /* longest reduction in the workload (check tolerance) */
  /* Layout rewrite: inputs marked `const` that the kernel takes in the layout its loops read
   * (src/codegen/layout.c says which). For such an argument a, `void pack_fn[a](const float *src, float *dst)`
   * converts the workload's layout (src_len[a] floats) into the kernel's (arg_len[a] floats);
   * pack_entry converts all of them at once: `void <pack_entry>(float *const *src,
   * float *const *dst)` with the kernel's argument order. Empty names and 0 when none is. */
  int npacked;
  long src_len[CWM_MAX_ARGS];
  char pack_fn[CWM_MAX_ARGS][128];
  char layout[CWM_MAX_ARGS][320];    /* e.g. "[48, 3, 256, 16] by (j.0, k.0, k.1, j.3): W[16*j.0 + j.3, ...]" */
  char pack_entry[112];
} cwm_kernel;

int cwm_codegen(const cwm_state *s, const cwm_codegen_opts *o, cwm_kernel *out, cwm_err *err);
/* s with every byte outside [A-Za-z0-9_.+=-] replaced by '_' (at most n-1 bytes): how a
 * workload's name (a file name, a suite or record field: any bytes) goes into comments of
 * generated code, so that no `*' '/' or newline from it reaches a compiler. */
void cwm_codegen_safe_name(const char *s, char *out, size_t n);
void cwm_kernel_free(cwm_kernel *k);
/* Appends the definition of `const char *fn(void)`: the first instruction-set extension the file
 * was compiled for (by the compiler's own macros: __AVX512F__ ...) that this CPU lacks ("avx512f"),
 * or NULL. It is compiled for the architecture's baseline so that the check itself cannot fault.
 * Built with -DCWM_PRETEND_MISSING='"name"' it reports that name (how the check is tested). */
void cwm_codegen_cpu_check(cwm_buf *c, const char *fn);

/* The stores of a lowered state with their enclosing loops and accesses: what Ansor-style
 * program features are computed from. Loops run outer to inner, through attach points. */
#define CWM_STORE_MAX_LOOPS 32
#define CWM_STORE_MAX_ACC 16
typedef struct {
  int tid;
  int is_local, is_write, is_read;
  long elems;                          /* size of the buffer in floats */
  long stride[CWM_STORE_MAX_LOOPS];    /* flattened-index stride per enclosing loop; -1 unknown */
} cwm_access;

typedef struct {
  int stage, tid, is_init, reduce;     /* reduce: cwm_reduce of the stage */
  int auto_unroll;
  int nloops;
  int extent[CWM_STORE_MAX_LOOPS];
  int ann[CWM_STORE_MAX_LOOPS];        /* cwm_ann */
  int unrolled[CWM_STORE_MAX_LOOPS];   /* unrolled by annotation or auto_unroll_max_step */
  int is_reduce[CWM_STORE_MAX_LOOPS];
  int fadd, fmul, fdiv, fmath, fcmp, select, int_ops, bool_ops; /* per execution of the store */
  int nacc;
  cwm_access acc[CWM_STORE_MAX_ACC];   /* acc[0] is the store itself */
} cwm_store;

int cwm_lower_stores(const cwm_state *s, cwm_store **out, int *n, cwm_err *err);

/* How much work the loops of a complete state do, from bound inference alone (no code): loop-body
 * executions summed over the computed stages, the same for their ops' domains (what computing
 * every element once costs), and the executions in reductions whose innermost loop is a
 * reduction loop (a serial accumulation chain). CWM_ESTEP for a sketch. */
typedef struct {
  double execs, minimal, serial;
  /* The register tile of the reduction stage with the most executions (0s when there is none):
   * spatial iterations inside its innermost reduction loop (the accumulators), elements its reads
   * touch per execution of that loop (the loads), and that loop's extent. */
  double tile_acc, tile_loads, red_inner;
} cwm_work;
int cwm_lower_work(const cwm_state *s, cwm_work *w);

#endif

/* lower_internal.h: what the files of src/codegen share (not a public contract): the lowering
 * context one walk of a state fills, linear forms over its loop variables, and the functions each
 * file offers the others. One walk has three uses: C code (cwm_codegen), the TensorIR-like text
 * (cwm_state_print) and the analyses (cwm_lower_stores, cwm_lower_work). */
#ifndef CWM_LOWER_INTERNAL_H
#define CWM_LOWER_INTERNAL_H

#include "cwm/codegen.h"
#include "../state/state_internal.h"

/* ---- linear forms over loop variables (lower.c) ---- */

typedef struct {
  int stage, node;
  long div, mod; /* value = (var / div) % mod; mod 0 = none */
} atom_t;

#define LIN_MAX 32
typedef struct {
  int ok;
  long c0;
  int n;
  long coef[LIN_MAX];
  atom_t a[LIN_MAX];
} lin_t;

static inline lin_t lin_const(long c) { lin_t l = {.ok = 1, .c0 = c}; return l; }
static inline lin_t lin_bad(void) { lin_t l = {.ok = 0}; return l; }

/* ---- the lowering context ---- */

typedef struct {
  cwm_stage st;                 /* lowered copy: domain from bound inference, extents recomputed */
  int local;                    /* attached: its buffer lives at the attach point */
  int dims[CWM_MAX_DIMS];       /* storage dims of its buffer */
  lin_t base[CWM_MAX_DIMS];     /* attached: offset of the region per output dim */
  int gguard[CWM_MAX_DIMS];     /* attached: base + local may leave the tensor */
  int nguard;
  int guard[CWM_MAX_NODES];     /* split nodes whose value may exceed their extent */
  /* C code only: a guard whose innermost loop variable enters with a positive coefficient and
   * every other variable of it belongs to an outer loop bounds that loop instead of an if around
   * the statement (the loop stops where the value reaches the extent; no per-element test) */
  int absorbed[CWM_MAX_NODES];
  int gabsorbed[CWM_MAX_DIMS];  /* the same for a region guard (gguard) */
  int nbound[CWM_MAX_ITERS];
  int bound[CWM_MAX_ITERS][4];  /* guards bounding the loop at that position: g < CWM_MAX_NODES a
                                 * split guard, CWM_MAX_NODES + r the region guard of root r */
} lstage;

typedef struct {
  const cwm_state *s;
  lstage L[CWM_MAX_STAGES];
  int text, ref;
  cwm_buf *b;
  int par_depth, simd_depth;
  int nbounds; /* named loop bounds emitted so far (unique names) */
  int used_vec;  /* bit 0: 8-lane vectors, bit 1: 16-lane; bits 2, 3: their stride-2 loads */
  int vw;        /* lanes of the register tile being emitted (8 or 16) */
  int max_lanes; /* widest vector the tiles may use: 16 with AVX-512, else 8 */
  int used_math; /* cwm_expf / cwm_erff: the definitions go before the kernel */
  int used_tr8;  /* cwm_tr8, the 8 x 8 transpose of runtime packs */
  struct cse_s *cse;
  /* a padded edge tile being planned or emitted (lower_register_tile_plan, mode TILE_PADDED):
   * bit r set: the reads take spatial root r clamped into its tensor's range */
  unsigned clamp;
  /* store collection (cwm_lower_stores): the open loops and the stores seen */
  int collect, last_unroll;
  int work_only; /* cwm_lower_work: bound inference only */
  int nloop;
  struct { int stage, node, extent, ann, unroll, reduce; } loop[CWM_STORE_MAX_LOOPS];
  cwm_store *stores;
  int nstores, capstores;
  int nov, ov_stage;          /* leaves replaced by constants (register tiles) */
  int ov_node[CWM_MAX_ITERS];
  long ov_val[CWM_MAX_ITERS];
  int tmp;
  cwm_err *err;
  int failed;
  struct rewrite_s *rw[CWM_MAX_OPS]; /* constant inputs stored in the layout their reader reads */
  int cur_stage;                     /* the stage whose statement is being emitted, or -1 */
  /* a reduction accumulating in a local scalar (accum.c) while acc_on: its stage, the loop
   * position that carries `omp simd reduction` (-1: none) and the scalar's name */
  int acc_on, acc_stage, acc_vpos;
  char acc_name[32];
} ctx_t;

static inline const cwm_op *tensor_op(ctx_t *c, int tid) { return cwm_dag_tensor(c->s->dag, tid); }
static inline const cwm_op *body_op(ctx_t *c, int p) { return cwm_dag_tensor(c->s->dag, c->L[p].st.body_tid); }
static inline int is_leaf(const cwm_stage *st, int node) { return stage_iter_pos(st, node) >= 0; }
static inline int is_output(const cwm_state *s, int p) {
  return s->stages[p].tid == cwm_dag_workload(s->dag)->output;
}

/* ---- a rewritten layout of an input (layout.c says when and why) ---- */

#define RW_MAX_DIMS 16
typedef struct rewrite_s {
  int stage;                    /* the only stage whose body reads the tensor */
  int ndim;
  int node[RW_MAX_DIMS];        /* terminal split parts of that stage, loop order, extent > 1 */
  long extent[RW_MAX_DIMS];     /* before bound inference: the whole tensor is converted */
  long stride[RW_MAX_DIMS];     /* row-major strides of the new layout */
  lin_t val[RW_MAX_DIMS];       /* each dim's index in the kernel, over the lowered loops */
  long size;                    /* floats of the new layout */
  int runtime;                  /* not a weight: converted inside the kernel on every call */
  int root_dim[CWM_MAX_DIMS * 2]; /* tensor dim indexed by root axis r of the stage, or -1 */
  long fixed[CWM_MAX_DIMS];       /* the position read in a dim no axis indexes */
} rewrite_t;

/* A register tile at loop position pos of stage p: the reduction loops pos..first-1 enclose the
 * spatial tile loops first..last (the last vectorized, VW lanes), nacc vector accumulators, the
 * store target's stride sst along the vector leaf. */
typedef struct {
  int first, last, vw;
  long nacc, sst;
  unsigned clamp; /* TILE_PADDED: the spatial roots its reads clamp (bit r) */
} rtile_t;

/* Floats allocated past the end of every intermediate buffer at root: a padded edge tile's
 * vector reads of such a buffer may run past its last row by up to two vectors of 16 (a stride-2
 * read) less one element; those lanes belong to outputs it throws away (tile.c). */
#define LOWER_ROOT_SLACK 32

/* ---- lower.c: bound inference, guards ---- */

/* Fills c->L from c->s (bound inference, guards, loop bounds for C, layout rewrites); the mode
 * flags of c (text, ref, collect, work_only) are set before. */
void lower_all(ctx_t *c);
void lower_ctx_free(ctx_t *c);

/* ---- lin.c: linear forms and the nest arithmetic on them ---- */

void lower_lin_addterm(lin_t *l, long coef, atom_t a);
lin_t lower_lin_add(lin_t x, const lin_t *y, long scale); /* x + scale * y */
/* Adds the range of coef * a over its loop's values to [*lo, *hi]. */
void lower_term_range(ctx_t *c, long coef, const atom_t *a, long *lo, long *hi);
long lower_split_stride(const cwm_stage *st, const cwm_node *n, int k);
long lower_fuse_stride(const cwm_stage *st, int fused, int src);
lin_t lower_node_lin(ctx_t *c, int p, int node, int depth);
lin_t lower_root_lin(ctx_t *c, int p, int r);
lin_t lower_expr_lin(ctx_t *c, const cwm_expr *e, const lin_t *env);
int lower_lin_div(ctx_t *c, const lin_t *l, long d, lin_t *out);
int lower_lin_mod(ctx_t *c, const lin_t *l, long m, lin_t *out);
long lower_node_max(const cwm_stage *st, int node, int depth);
int lower_first_reduce_pos(const cwm_stage *st);
int lower_guard_bound_term(ctx_t *c, int p, int g, lin_t *l, long *ext);

/* ---- layout.c: layout rewrite and the conversions ---- */

void lower_plan_rewrites(ctx_t *c);
int lower_read_index(ctx_t *c, int p, const cwm_expr *e, const lin_t *env, lin_t *idx, long *dims);
void lower_layout_text(const cwm_state *s, const rewrite_t *rw, const cwm_op *in, char *out, size_t n);
void lower_emit_pack(ctx_t *c, const rewrite_t *rw, const cwm_op *in, const char *fn, cwm_buf *o);
void lower_emit_runtime_pack(ctx_t *c, const rewrite_t *rw, const cwm_op *in, cwm_buf *o);

/* ---- expr.c: names, index values and expressions ---- */

void lower_sanitize(const char *in, char *out, size_t n);
void lower_buf_name(ctx_t *c, int tid, char *out, size_t n);
void lower_var_name(ctx_t *c, int p, int node, char *out, size_t n);
void lower_emit_node_value(ctx_t *c, int p, int node, cwm_buf *o, int depth);
void lower_emit_lin(ctx_t *c, const lin_t *l, cwm_buf *o);
char *lower_root_value(ctx_t *c, int p, int r, int global);
void lower_emit_float(ctx_t *c, double v, cwm_buf *o);
void lower_emit_read(ctx_t *c, const cwm_expr *e, char **env, cwm_buf *o, int depth);
const char *lower_fn_c(ctx_t *c, int fn);
void lower_emit_expr(ctx_t *c, const cwm_expr *e, char **env, cwm_buf *o, int depth);

/* ---- loops.c: the pieces of a nest (statements, one loop) ---- */

void lower_line(ctx_t *c, int depth, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void lower_append_split_guard(ctx_t *c, int p, int node, cwm_buf *o);
/* The guard condition of stage p's statement (spatial roots only when init), or empty; owned. */
char *lower_guard_cond(ctx_t *c, int p, int init);
void lower_emit_store_target(ctx_t *c, int p, cwm_buf *o);
const char *lower_init_value(ctx_t *c, cwm_reduce r);
void lower_emit_init_stmt(ctx_t *c, int p, int depth);
void lower_emit_update_stmt(ctx_t *c, int p, int depth);
void lower_emit_update_stmt_with(ctx_t *c, int p, int depth, const cwm_expr *body);
int lower_open_loop(ctx_t *c, int p, int pos, int depth, int in_init);
void lower_close_loop(ctx_t *c, int depth, int par);

/* ---- stage.c: a stage's nest with what is attached in it ---- */

void lower_emit_alloc_and_stage(ctx_t *c, int q, int depth);
void lower_emit_stage(ctx_t *c, int p, int depth);
void lower_emit_stage_ref(ctx_t *c, int p, int depth);

/* ---- tile.c: register tiles ---- */

int lower_reduction_outside_is_trivial(const cwm_stage *st, int pos);
/* Flattened-index stride of leaf node `leaf` of stage p in an index over dims, or -1 if unknown. */
long lower_flat_stride(int p, int leaf, const lin_t *idx, const long *dims, int nidx);
/* The modes of a register tile: a stage without guards; a guarded stage's tile where it lies
 * wholly inside the guards (tested at run time: lower_tile_inside_cond); a guarded stage's tile
 * run whole where it crosses the edge (padded: see tile.c). */
enum { TILE_PLAIN = 0, TILE_INSIDE = 1, TILE_PADDED = 2 };
int lower_register_tile_plan(ctx_t *c, int p, int pos, rtile_t *rt, int mode);
char *lower_tile_inside_cond(ctx_t *c, int p, const rtile_t *rt);
int lower_try_register_tile(ctx_t *c, int p, int pos, int depth, int mode);
/* Whether stage p's buffer must start zeroed: a padded tile of p accumulates into it from a
 * reduction split outside the tile, and reads the padding the init nest leaves unset. */
int lower_padded_needs_zero(ctx_t *c, int p);
/* Whether some stage is attached in stage p at one of its loop positions from..to. */
int lower_attached_in_loops(const ctx_t *c, int p, int from, int to);

/* ---- accum.c: a reduction's innermost loops around a local scalar ---- */

/* The position where stage p's trailing reduction loops start accumulating in a local scalar,
 * or -1 (see accum.c); *vpos: the loop that gets `omp simd reduction`, or -1. */
int lower_accum_plan(ctx_t *c, int p, int *vpos);
/* Before the loop at position start: declares the scalar, loaded from the store target. */
void lower_accum_begin(ctx_t *c, int p, int vpos, int depth);
/* After that loop closed: stores the scalar back. */
void lower_accum_end(ctx_t *c, int p, int depth);

/* ---- partition.c: a select's innermost loop split where its condition holds ---- */

/* At the innermost position pos of stage p: emits the three loops and returns 1, or 0 (nothing
 * emitted) when the stage is not a select or its condition is not linear in the loop. */
int lower_try_partition(ctx_t *c, int p, int pos, int depth);

/* ---- stores.c: the stores collected in collect mode (analysis.c reads them) ---- */

void lower_collect_store(ctx_t *c, int p, int is_init);

/* ---- cdefs.c: definitions the generated C uses ---- */

/* used_vec, used_tr8, used_math as in ctx_t. */
void lower_put_defs(cwm_buf *b, int used_vec, int used_tr8, int used_math);

#endif

/* state.h: the loop-nest state of a workload and Ansor's schedule steps.
 * A cwm_dag wraps a parsed workload plus the tensors that steps create (cache stages, rfactor
 * stages); a cwm_state is the schedule: stages, their iterator graphs, where each is computed.
 * States are built from the initial state by applying steps; every step validates itself and
 * fails with a message. Printing a state and lowering it to code are the code generator's
 * (codegen.h: cwm_state_print, cwm_codegen), because both walk the lowered loop nest. */
#ifndef CWM_STATE_H
#define CWM_STATE_H

#include "cwm/te.h"

#define CWM_MAX_STAGES 16
#define CWM_MAX_NODES 48
#define CWM_MAX_ITERS 24
#define CWM_MAX_SPLIT 6   /* lengths per SP */
#define CWM_MAX_STEPS 96
#define CWM_MAX_FUSE 10

typedef enum { CWM_IT_SPATIAL = 0, CWM_IT_REDUCE = 1, CWM_IT_MIXED = 2 } cwm_iter_kind;
/* Annotation codes as in Ansor's records. */
typedef enum { CWM_ANN_NONE = 0, CWM_ANN_UNROLL = 1, CWM_ANN_VECTORIZE = 2, CWM_ANN_PARALLEL = 3 } cwm_ann;
typedef enum { CWM_LOC_ROOT = 0, CWM_LOC_INLINE = 1, CWM_LOC_ITER = 2 } cwm_loc;

typedef enum {
  CWM_S_AN, CWM_S_FU, CWM_S_PR, CWM_S_RE, CWM_S_SP, CWM_S_FSP, CWM_S_FFSP, CWM_S_SA,
  CWM_S_CA, CWM_S_CI, CWM_S_CR, CWM_S_CHR, CWM_S_CHW, CWM_S_RF, CWM_S__COUNT
} cwm_step_kind;

/* One schedule step with Ansor's record fields.
 *  AN   [stage, iter, ann]                    a = ann
 *  FU   [stage, [ids]]                        v[0..n) = ids
 *  PR   [stage, iter, "auto_unroll_max_step$N"]  a = N
 *  RE   [stage, [order]]                      v = order
 *  SP   [stage, iter, extent, [lengths], inner_to_outer]   v = lengths (0 = unknown: a sketch's
 *       split; it applies as length 1 and cwm_state_is_complete() reports the state as a sketch)
 *  FSP  [stage, iter, src_step_id, n_split]   a = src_step, b = n_split
 *  FFSP [stage, iter, [src_step_ids], level, factor_or_nparts]  v = ids, a = level, b = flag
 *  SA   [stage, iter, factor, offset]         a = factor, b = offset
 *  CA   [stage, target_stage, target_iter]    a = target_stage, b = target_iter
 *  CI   [stage]       CR [stage]
 *  CHR  [stage, "scope", [reader_stage_ids]]  v = readers, scope
 *  CHW  [stage, "scope"]                      scope
 *  RF   [stage, iter, factor_iter_id]         a = factor_iter_id */
typedef struct {
  cwm_step_kind kind;
  int stage, iter, extent, inner_to_outer;
  int a, b;
  int n;
  int v[CWM_MAX_ITERS];
  char scope[16];
} cwm_step;

typedef struct cwm_dag cwm_dag;

/* Builds the DAG context of a workload (copies it). */
cwm_dag *cwm_dag_new(const cwm_workload *w, cwm_err *err);
void cwm_dag_free(cwm_dag *d);
const cwm_workload *cwm_dag_workload(const cwm_dag *d);
/* The workload's key (cwm_workload_key), computed once when the DAG is built. */
const char *cwm_dag_key(const cwm_dag *d);
/* Tensor table: the workload's ops first, then stages created by steps. Stable ids ("tid"). */
int cwm_dag_ntensors(const cwm_dag *d);
const cwm_op *cwm_dag_tensor(const cwm_dag *d, int tid);

/* An iterator node: root axis, a part of a split, or a fuse of others. Leaves are loops. */
typedef struct {
  int extent;
  int kind;      /* cwm_iter_kind */
  int ann;       /* cwm_ann, leaves only */
  int root;      /* >= 0: root axis index of the stage's body op (spatial first, then reduce) */
  int parent;    /* split parent, -1 if none */
  int part;      /* index among parent's parts, 0 = outermost */
  int factor;    /* fixed length of this split part; 0 for the implicit outermost part */
  int fused;     /* node this was fused into, -1 if none */
  int is_fuse;   /* this node is a fuse of sub[] */
  int nsub;      /* fused sources, outer to inner */
  int sub[CWM_MAX_FUSE];
  int nparts;    /* split parts, outer to inner; 0 if not split */
  int parts[CWM_MAX_SPLIT + 1];
} cwm_node;

typedef struct {
  int tid;       /* the tensor this stage writes */
  int body_tid;  /* the op giving axes/body/reduction (differs for rfactor stages) */
  int nnodes;
  cwm_node nodes[CWM_MAX_NODES];
  int niters;
  int iters[CWM_MAX_ITERS]; /* leaf node ids, outer to inner */
  int nout;
  int out_node[CWM_MAX_DIMS]; /* nodes whose values index the output tensor */
  int loc;                    /* cwm_loc */
  int attach_stage, attach_node;
  int auto_unroll;            /* auto_unroll_max_step, 0 = off */
  int domain[CWM_MAX_DIMS * 2]; /* root extents before bound inference */
} cwm_stage;

typedef struct cwm_state {
  const cwm_dag *dag;
  int nstages;
  cwm_stage stages[CWM_MAX_STAGES];
  int nsteps;
  cwm_step steps[CWM_MAX_STEPS];
} cwm_state;

cwm_state *cwm_state_init(const cwm_dag *d);
cwm_state *cwm_state_clone(const cwm_state *s);
void cwm_state_free(cwm_state *s);
/* Validates step against s and applies it (appending it to s->steps); on failure s is unchanged
 * and err says which step and why. */
int cwm_state_apply(cwm_state *s, const cwm_step *st, cwm_err *err);
/* 0 if some SP step still has an unknown (0) length: a sketch, not a program. */
int cwm_state_is_complete(const cwm_state *s);
/* The program's family: a hash of its sketch, compute locations and annotations (each step's
 * kind and stage, a CA's target stage and loop, an AN's kind: parallel, vectorize, unroll),
 * blind to tile sizes, how many loops a fuse takes, which loop an annotation lands on and unroll
 * depths. Programs of one family differ only in those numbers. */
uint64_t cwm_state_family(const cwm_state *s);
/* Replays steps from the initial state; on success *out is the final state. If trace is
 * non-NULL it receives n+1 owned states (initial, after step 1, ...). */
int cwm_state_replay(const cwm_dag *d, const cwm_step *steps, int n, cwm_state **out,
                     cwm_state ***trace, cwm_err *err);

/* A random walk of nsteps valid steps from the initial state (steps that do not fit are
 * redrawn). For property tests and `cwm sample`; deterministic for the rng's seed. */
int cwm_sample_steps(const cwm_dag *d, cwm_rng *r, int nsteps, cwm_state **out, cwm_err *err);

/* Name of a node as Ansor prints it ("i.0", "i.1@j.0"), into buf. */
const char *cwm_node_name(const cwm_state *s, int stage, int node, char *buf, size_t n);
const char *cwm_stage_name(const cwm_state *s, int stage);
/* Recomputes the loop extents of a stage from its domain and split factors, inner parts first by
 * ceil-division. tight (for a domain bound inference shrank, as TVM does): a split part is at most
 * what is left of its parent after the parts inside it (min(factor, rest)), so a tile's outer parts
 * do not loop over slots a guard would reject; values are unchanged, a part is tightened only when
 * every part outside it has extent 1. */
void cwm_stage_extents(cwm_stage *st, int tight);
/* The stages that are not inlined and read stage p's tensor, directly or through inlined stages,
 * into out (CWM_MAX_STAGES entries); their count. */
int cwm_stage_consumers(const cwm_state *s, int p, int *out);
/* The original axis a loop node of a stage comes from (following splits to their source; a fuse
 * node has none): its index in the stage's op, or -1. */
int cwm_node_root(const cwm_stage *st, int node);
/* Attach chains: q, the stage q is attached in, the stage that one is attached in, ... The chain's
 * stage attached directly at a loop of stage t, every stage up to it numbered above `after`
 * (-1: any); -1 if none. */
int cwm_attach_in(const cwm_state *s, int q, int t, int after);
/* The root stage q's chain ends in (q itself when q is at root), every attached stage of it
 * numbered above `after`; *top is the chain's stage attached directly in it (-1 when q is at
 * root). -1 when the chain ends otherwise (inlined) or breaks the numbering. */
int cwm_attach_root(const cwm_state *s, int q, int after, int *top);
int cwm_stage_is_placeholder(const cwm_state *s, int stage);
const cwm_op *cwm_stage_op(const cwm_state *s, int stage);      /* the tensor written */
const cwm_op *cwm_stage_body_op(const cwm_state *s, int stage); /* axes and body */

/* A step of kind k on stage, every other field zero. */
cwm_step cwm_step_of(cwm_step_kind k, int stage);
/* Steps as text: one JSON array per step (Ansor's record layout), and a list as "[step, ...]". */
void cwm_step_print(const cwm_step *st, cwm_buf *out);
void cwm_steps_print(const cwm_step *steps, int n, cwm_buf *out);
const char *cwm_step_kind_name(cwm_step_kind k);
/* Parses one step or a list. Errors name the column and the field. steps is malloc'ed. */
int cwm_step_parse(const char *text, cwm_step *st, cwm_err *err);
int cwm_steps_parse(const char *text, cwm_step **steps, int *n, cwm_err *err);

#endif

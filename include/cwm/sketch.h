/* sketch.h: Ansor's CPU search space on cwm states. Sketches are step lists whose tile sizes are
 * still unknown (SP lengths 0); random annotation turns a sketch into a complete program; mutation
 * moves a complete program to a neighbour. Every state handed out replays from its step list. */
#ifndef CWM_SKETCH_H
#define CWM_SKETCH_H

#include "cwm/state.h"

/* Ansor's CPU sketches of a workload: owned states whose SP steps have unknown lengths (0).
 * The set depends on the workload alone (see sketch.c for the one hardware number it uses). */
int cwm_sketches(const cwm_dag *d, cwm_state ***out, int *n, cwm_err *err);
void cwm_states_free(cwm_state **s, int n);

/* cores: sets the parallel degree sought (16 * cores); max_innermost: largest innermost split
 * factor; max_vectorize: largest fused extent that is vectorized; vectorize_reorder: a tiled
 * stage may vectorize another loop of its innermost tile level, moved innermost (annotate.c);
 * register_tile: the register-tile prior of annotate.c (default 1; 0 turns it off). */
typedef struct {
  int cores;
  int max_innermost;
  int max_vectorize;
  int vectorize_reorder;
  int register_tile; /* beyond Ansor: half of the multi-level tiles drawn as register blocks */
} cwm_space_opts;
void cwm_space_opts_default(cwm_space_opts *o); /* 2, 64, 2 x cwm_codegen_host_lanes() (16 or 32), 1, 1 */
/* o, or the defaults written into *def when o is NULL */
const cwm_space_opts *cwm_space_opts_or_default(const cwm_space_opts *o, cwm_space_opts *def);

/* Random annotation of a sketch (InitFillTileSize, InitChangeComputeLocation, InitParallel,
 * InitUnroll, InitVectorization), returning a complete valid state, or an error when this draw
 * did not produce one (caller retries). Deterministic for the rng state. */
int cwm_annotate(const cwm_state *sketch, const cwm_space_opts *o, cwm_rng *r, cwm_state **out,
                 cwm_err *err);

/* One mutation with Ansor's CPU weights (tile size 0.90, auto-unroll 0.04, compute location 0.05,
 * parallel 0.01); returns a complete valid state that prints differently from s, or an error
 * (caller retries). */
int cwm_mutate(const cwm_state *s, const cwm_space_opts *o, cwm_rng *r, cwm_state **out,
               cwm_err *err);

/* Samples up to n distinct complete candidates (dedup by cwm_state_print text) from the
 * sketches; *nout may be less than n when the space is small. Error when none was found. */
int cwm_sample_initial(const cwm_dag *d, const cwm_space_opts *o, cwm_rng *r, int n,
                       cwm_state ***out, int *nout, cwm_err *err);

/* ---- analyses shared by sketch.c, annotate.c and mutate.c (Ansor's access analyzer) ---- */

/* Ansor's NeedsMultiLevelTiling: input buffers read without some spatial axis of extent > 1;
 * >= 2 of them, or >= 1 for a reduction. */
int cwm_needs_tiling(const cwm_state *s, int stage);
/* The stage has more loops than its op has axes (Ansor's IsTiled). */
int cwm_stage_is_tiled(const cwm_state *s, int stage);
/* The stage computes an rfactor partial result (it cannot be attached or inlined). */
int cwm_stage_is_rfactor(const cwm_state *s, int stage);
/* The only non-inlined consumer of a stage (through inlined stages), or -1. */
int cwm_single_consumer(const cwm_state *s, int stage);
/* Stages attached at leaf iter position `iter` of stage. */
int cwm_attached_count(const cwm_state *s, int stage, int iter);
/* Ansor's GetComputeLocationCandidates restricted to what CA accepts here (the only consumer):
 * fills iters (positions in the consumer) and returns their number; *target gets the consumer. */
int cwm_compute_location_candidates(const cwm_state *s, int stage, int *target, int *iters);
/* Two or more parallel loops on one path from a root stage through its attached stages. */
int cwm_has_nested_parallel(const cwm_state *s);
/* Step `step` of s's step list is the split of a reduction axis in a multi-level tiling (a
 * one-length SP of a stage whose spatial axes have three-length SPs, over an extent one of its
 * op's reduction axes has): the split whose inner length may hold the whole reduction. */
int cwm_splits_reduction(const cwm_state *s, int step);

#endif

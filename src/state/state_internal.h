/* state_internal.h: helpers shared by the files of src/state (not a public contract). */
#ifndef CWM_STATE_INTERNAL_H
#define CWM_STATE_INTERNAL_H

#include "cwm/state.h"

enum { MEMO_CHW_LOCAL = 1, MEMO_CHW_ORIG, MEMO_CHR_COPY, MEMO_CHR_READER, MEMO_RF_TENSOR,
       MEMO_RF_ORIG };

int dag_memo(const cwm_dag *d, int kind, int a, int b, int c, int e,
             cwm_op *(*make)(const cwm_dag *, const void *), const void *ctx, cwm_err *err);

/* Recomputes every node extent of a stage from its domain (forward pass in creation order). */
/* Index of the stage writing tensor tid, or -1. */
int state_stage_of_tid(const cwm_state *s, int tid);
/* Position of node in the stage's loop order, or -1. */
int stage_iter_pos(const cwm_stage *st, int node);
/* Resets a stage to the untransformed loops of body (state.c). */
void stage_reset(cwm_stage *st, const cwm_op *body);
/* Validates and applies one step to s in place (steps.c); cwm_state_apply runs it on a copy. */
int state_apply_step(cwm_state *s, const cwm_step *st, cwm_err *err);
/* Every attached stage still where its readers allow (steps.c); a later step may break that. */
int state_attachments_valid(const cwm_state *s, cwm_err *err);

#endif

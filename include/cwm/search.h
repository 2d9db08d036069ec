/* search.h: measuring states (codegen + build + run + records), and the search policy.
 * Everything here sits on top of state, codegen, measure and record. */
#ifndef CWM_SEARCH_H
#define CWM_SEARCH_H

#include "cwm/codegen.h"
#include "cwm/measure.h"
#include "cwm/record.h"

/* A workload being measured: its DAG, its reference output, the target and options. */
typedef struct cwm_task cwm_task;

cwm_task *cwm_task_new(const cwm_workload *w, const cwm_measure_opts *o, cwm_err *err);
void cwm_task_free(cwm_task *t);
const cwm_dag *cwm_task_dag(const cwm_task *t);
const cwm_measure_opts *cwm_task_opts(const cwm_task *t);
double cwm_task_flops(const cwm_task *t);
/* Computes (or loads from the cache) the reference output; done lazily by measure too. */
int cwm_task_reference(cwm_task *t, cwm_err *err);

/* Generates, builds, checks and times the states; fills one record per state (recs[i] is
 * initialised here and owned by the caller). Candidate failures become error records. */
int cwm_task_measure(cwm_task *t, cwm_state *const *states, int n, cwm_record *recs, cwm_err *err);

/* Hand-written schedules ("matmul_1024", "conv_s1_3x3"); steps are malloc'ed. */
int cwm_hand_schedule(const char *id, cwm_step **steps, int *n, cwm_err *err);

#endif

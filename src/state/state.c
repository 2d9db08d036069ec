/* state.c: the initial state of a DAG, copies, families, and the application of schedule steps (the
 * steps themselves are steps.c). A step that does not fit fails with a message and leaves the
 * state untouched: it runs on a copy that is committed only when it succeeds. */
#include "state_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cwm_state *cwm_state_init(const cwm_dag *d) {
  cwm_state *s = cwm_xcalloc(1, sizeof *s);
  s->dag = d;
  const cwm_workload *w = cwm_dag_workload(d);
  s->nstages = w->nops;
  for (int i = 0; i < w->nops; i++) {
    cwm_stage *st = &s->stages[i];
    st->tid = st->body_tid = i;
    st->loc = CWM_LOC_ROOT;
    st->attach_stage = st->attach_node = -1;
    stage_reset(st, &w->ops[i]);
  }
  return s;
}

cwm_state *cwm_state_clone(const cwm_state *s) {
  cwm_state *c = cwm_xmalloc(sizeof *c);
  memcpy(c, s, sizeof *c);
  return c;
}
void cwm_state_free(cwm_state *s) { free(s); }

int cwm_state_is_complete(const cwm_state *s) {
  for (int i = 0; i < s->nsteps; i++)
    if (s->steps[i].kind == CWM_S_SP)
      for (int k = 0; k < s->steps[i].n; k++)
        if (s->steps[i].v[k] == 0) return 0;
  return 1;
}

uint64_t cwm_state_family(const cwm_state *s) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a over (kind, stage, CA target stage and loop, AN kind) */
  for (int i = 0; i < s->nsteps; i++) {
    const cwm_step *st = &s->steps[i];
    int ca = st->kind == CWM_S_CA, an = st->kind == CWM_S_AN;
    int v[4] = {(int)st->kind, st->stage, ca || an ? st->a : 0, ca ? st->b : 0};
    for (int k = 0; k < 4; k++) h = (h ^ (uint64_t)(unsigned)v[k]) * 1099511628211ULL;
  }
  return h;
}

int cwm_state_apply(cwm_state *s, const cwm_step *st, cwm_err *err) {
  if (s->nsteps >= CWM_MAX_STEPS) return cwm_fail(err, CWM_ESTEP, "too many steps (max %d)", CWM_MAX_STEPS);
  /* Steps that add stages work on a full copy; the others touch one stage plus the attach
   * fields of the rest, which are saved and restored on failure (a state is ~100 KB). */
  if (st->kind == CWM_S_CHW || st->kind == CWM_S_CHR || st->kind == CWM_S_RF) {
    cwm_state *tmp = cwm_state_clone(s);
    int rc = state_apply_step(tmp, st, err);
    if (rc == 0) {
      tmp->steps[tmp->nsteps++] = *st;
      memcpy(s, tmp, sizeof *s);
    }
    cwm_state_free(tmp);
    return rc;
  }
  int k = st->stage >= 0 && st->stage < s->nstages ? st->stage : 0;
  cwm_stage saved = s->stages[k];
  int loc[CWM_MAX_STAGES][3];
  for (int i = 0; i < s->nstages; i++) {
    loc[i][0] = s->stages[i].loc;
    loc[i][1] = s->stages[i].attach_stage;
    loc[i][2] = s->stages[i].attach_node;
  }
  int rc = state_apply_step(s, st, err);
  if (rc == 0) rc = state_attachments_valid(s, err);
  if (rc == 0) {
    s->steps[s->nsteps++] = *st;
  } else {
    s->stages[k] = saved;
    for (int i = 0; i < s->nstages; i++) {
      s->stages[i].loc = loc[i][0];
      s->stages[i].attach_stage = loc[i][1];
      s->stages[i].attach_node = loc[i][2];
    }
  }
  return rc;
}

int cwm_state_replay(const cwm_dag *d, const cwm_step *steps, int n, cwm_state **out,
                     cwm_state ***trace, cwm_err *err) {
  cwm_state *s = cwm_state_init(d);
  cwm_state **tr = NULL;
  if (trace) {
    tr = cwm_xcalloc((size_t)n + 1, sizeof *tr);
    tr[0] = cwm_state_clone(s);
  }
  for (int i = 0; i < n; i++) {
    cwm_err e = {0};
    if (cwm_state_apply(s, &steps[i], &e)) {
      cwm_fail(err, e.code, "step %d: %s", i, e.msg);
      if (tr) {
        for (int k = 0; k <= i; k++) cwm_state_free(tr[k]);
        free(tr);
      }
      cwm_state_free(s);
      return err ? err->code : CWM_ESTEP;
    }
    if (tr) tr[i + 1] = cwm_state_clone(s);
  }
  if (trace) *trace = tr;
  if (out) *out = s;
  else cwm_state_free(s);
  return 0;
}

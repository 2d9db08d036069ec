/* mutate.c: Ansor's CPU mutation rules (tile size, auto-unroll, compute location, parallel
 * granularity) as edits of a complete state's step list followed by a replay, so a mutant is
 * valid exactly when its steps are. */
#include "cwm/sketch.h"
#include "cwm/codegen.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const int UNROLL_STEPS[] = {0, 16, 64, 512};
#define N_UNROLL ((int)(sizeof UNROLL_STEPS / sizeof UNROLL_STEPS[0]))

#define FAIL_NO(...) cwm_fail(err, CWM_ESTEP, __VA_ARGS__)

/* MutateTileSize: move a divisor of one level's length to another level of one SP step; the
 * outermost level is implicit (extent / product). The innermost length stays within
 * max_innermost, except a reduction's split in a multi-level tiling, whose inner level may
 * hold the whole reduction (annotate.c draws it so). */
static long inner_cap(const cwm_state *s, const cwm_space_opts *o, int id) {
  return cwm_splits_reduction(s, id) ? s->steps[id].extent : o->max_innermost;
}

static int mutate_tile(const cwm_state *s, const cwm_space_opts *o, cwm_rng *r, cwm_step *steps,
                       cwm_err *err) {
  int ids[CWM_MAX_STEPS], n = 0;
  for (int i = 0; i < s->nsteps; i++) {
    const cwm_step *st = &s->steps[i];
    if (st->kind == CWM_S_SP && st->extent > 0 && st->n > 0 && st->v[st->n - 1] > 0 &&
        st->v[st->n - 1] <= inner_cap(s, o, i))
      ids[n++] = i;
  }
  if (n == 0) return FAIL_NO("no split to mutate");
  int id = -1;
  for (int tries = 0; tries < 4 * n; tries++) {
    id = ids[cwm_rng_int(r, n)];
    if (s->steps[id].extent > 1) break;
  }
  const cwm_step *ps = &s->steps[id];
  if (ps->extent <= 1) return FAIL_NO("no split of extent > 1");
  int nl = ps->n + 1, len[CWM_MAX_SPLIT + 1];
  long prod = 1;
  for (int i = 0; i < ps->n; i++) len[i + 1] = ps->v[i], prod *= ps->v[i];
  len[0] = (int)((ps->extent + prod - 1) / prod); /* a split that does not divide: the padded count */
  int perm[CWM_MAX_SPLIT + 1];
  for (int i = 0; i < nl; i++) perm[i] = i;
  for (int i = nl - 1; i > 0; i--) {
    int j = cwm_rng_int(r, i + 1), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (int i = 0; i < nl; i++) {
    int src = perm[i], dst = perm[(i + 1) % nl];
    if (len[src] <= 1) continue;
    int f[2048], nf = cwm_divisors(len[src], INT_MAX, f, 2048), divide;
    if (dst == nl - 1) {
      /* keep the innermost length within its cap */
      int top = nf - 1;
      long cap = inner_cap(s, o, id);
      while (top >= 1 && (long)f[top] * len[dst] > cap) top--;
      if (top == 0) continue;
      divide = f[1 + cwm_rng_int(r, top)];
    } else {
      divide = f[1 + cwm_rng_int(r, nf - 1)];
    }
    cwm_step *st = &steps[id];
    for (int j = 1; j < nl; j++)
      st->v[j - 1] = j == src ? len[j] / divide : j == dst ? len[j] * divide : len[j];
    return 0;
  }
  return FAIL_NO("no tile size could move");
}

/* MutateAutoUnroll: a new auto_unroll_max_step for one PR step. */
static int mutate_unroll(const cwm_state *s, cwm_rng *r, cwm_step *steps, cwm_err *err) {
  int ids[CWM_MAX_STEPS], n = 0;
  for (int i = 0; i < s->nsteps; i++)
    if (s->steps[i].kind == CWM_S_PR) ids[n++] = i;
  if (n == 0) return FAIL_NO("no auto-unroll pragma to mutate");
  int id = ids[cwm_rng_int(r, n)];
  steps[id].a = UNROLL_STEPS[cwm_rng_int(r, N_UNROLL)];
  return 0;
}

/* Stage id, in the final state, of the stage that step i's stage id names when it is applied:
 * later CHW/RF insert a stage at their id, CHR after it. */
static int final_stage_id(const cwm_state *s, int i, int stage) {
  for (int k = i + 1; k < s->nsteps; k++) {
    const cwm_step *st = &s->steps[k];
    if ((st->kind == CWM_S_CHW || st->kind == CWM_S_RF) && stage >= st->stage) stage++;
    else if (st->kind == CWM_S_CHR && stage > st->stage) stage++;
  }
  return stage;
}

static int step_stage_id(const cwm_state *s, int i, int final) {
  for (int p = 0; p <= final; p++)
    if (final_stage_id(s, i, p) == final) return p;
  return -1;
}

/* MutateComputeLocation: re-target one CA of an untiled stage to another loop of its consumer,
 * drawn from the candidates of the final state, and replay. */
static int mutate_location(const cwm_state *s, cwm_rng *r, cwm_step *steps, cwm_err *err) {
  int ids[CWM_MAX_STEPS], n = 0;
  for (int i = 0; i < s->nsteps; i++) {
    if (s->steps[i].kind != CWM_S_CA) continue;
    int p = final_stage_id(s, i, s->steps[i].stage);
    if (p >= s->nstages || cwm_stage_is_tiled(s, p) || cwm_needs_tiling(s, p)) continue;
    ids[n++] = i;
  }
  if (n == 0) return FAIL_NO("no compute location to mutate");
  int id = ids[cwm_rng_int(r, n)];
  int p = final_stage_id(s, id, s->steps[id].stage);
  int target, cand[CWM_MAX_ITERS];
  int nc = cwm_compute_location_candidates(s, p, &target, cand);
  if (nc == 0) return FAIL_NO("no other compute location");
  int t = step_stage_id(s, id, target);
  if (t < 0) return FAIL_NO("consumer did not exist at the compute_at step");
  steps[id].a = t;
  steps[id].b = cand[cwm_rng_int(r, nc)];
  return 0;
}

/* MutateParallel: change how many outer loops the FU before a parallel AN fuses. Later AN/PR/FU
 * steps of that stage shift their loop positions; Ansor gives up on a later FU, this shifts it
 * too, as the vectorized inner loop sits after the parallel one. */
static int mutate_parallel(const cwm_state *s, cwm_rng *r, cwm_step *steps, cwm_err *err) {
  int ids[CWM_MAX_STEPS], n = 0;
  for (int i = 1; i < s->nsteps; i++) {
    const cwm_step *st = &s->steps[i], *prev = &s->steps[i - 1];
    if (st->kind == CWM_S_AN && st->a == CWM_ANN_PARALLEL && st->iter == 0 &&
        prev->kind == CWM_S_FU && prev->stage == st->stage && prev->n > 0 && prev->v[0] == 0)
      ids[n++] = i;
  }
  if (n == 0) return FAIL_NO("no fused parallel loop to mutate");
  int id = ids[cwm_rng_int(r, n)];
  const cwm_step *fu = &s->steps[id - 1];
  int p = fu->stage;
  cwm_state *pre = NULL;
  int rc = cwm_state_replay(s->dag, s->steps, id - 1, &pre, NULL, err);
  if (rc) return rc;
  const cwm_stage *sg = &pre->stages[p];
  int max = 0;
  for (; max < sg->niters; max++) {
    const cwm_node *nd = &sg->nodes[sg->iters[max]];
    if (nd->kind != CWM_IT_SPATIAL || nd->ann != CWM_ANN_NONE) break;
    if (cwm_attached_count(pre, p, max)) break;
  }
  cwm_state_free(pre);
  if (max == 0) return FAIL_NO("no loop to fuse");
  int to = 1 + cwm_rng_int(r, max);
  int offset = fu->v[fu->n - 1] - (to - 1);
  if (offset == 0) return FAIL_NO("parallel granularity unchanged");
  steps[id - 1].n = to;
  for (int k = 0; k < to; k++) steps[id - 1].v[k] = k;
  for (int i = id + 1; i < s->nsteps; i++) {
    cwm_step *st = &steps[i];
    int k = st->kind;
    if (k == CWM_S_CHW || k == CWM_S_CHR || k == CWM_S_RF) return FAIL_NO("stage ids change later");
    if (st->stage != p) continue;
    if (k == CWM_S_AN || k == CWM_S_PR) {
      if (st->iter != 0) st->iter += offset;
    } else if (k == CWM_S_FU) {
      for (int j = 0; j < st->n; j++) st->v[j] += offset;
    } else {
      return FAIL_NO("later %s step on the parallel stage", cwm_step_kind_name(st->kind));
    }
  }
  return 0;
}

int cwm_mutate(const cwm_state *s, const cwm_space_opts *o, cwm_rng *r, cwm_state **out,
               cwm_err *err) {
  cwm_space_opts def;
  o = cwm_space_opts_or_default(o, &def);
  *out = NULL;
  if (!cwm_state_is_complete(s)) return cwm_fail(err, CWM_ESTEP, "cannot mutate a sketch");
  cwm_step *steps = cwm_xmalloc(sizeof *steps * (size_t)(s->nsteps ? s->nsteps : 1));
  memcpy(steps, s->steps, sizeof *steps * (size_t)s->nsteps);
  int rc;
  /* Ansor's CPU weights: tile size 0.90, auto-unroll 0.04, compute location 0.05, parallel 0.01 */
  double u = cwm_rng_unit(r);
  if (u < 0.90) rc = mutate_tile(s, o, r, steps, err);
  else if (u < 0.94) rc = mutate_unroll(s, r, steps, err);
  else if (u < 0.99) rc = mutate_location(s, r, steps, err);
  else rc = mutate_parallel(s, r, steps, err);
  cwm_state *m = NULL;
  if (rc == 0) rc = cwm_state_replay(s->dag, steps, s->nsteps, &m, NULL, err);
  free(steps);
  if (rc) return rc;
  if (cwm_has_nested_parallel(m)) {
    cwm_state_free(m);
    return cwm_fail(err, CWM_ESTEP, "mutation made nested parallel loops");
  }
  char *a = cwm_state_print(s), *b = cwm_state_print(m);
  int same = !strcmp(a, b);
  free(a);
  free(b);
  if (same) {
    cwm_state_free(m);
    return cwm_fail(err, CWM_ESTEP, "mutation did not change the program");
  }
  *out = m;
  return 0;
}

/* sample.c: random valid step lists (a random walk over the step kinds). Not Ansor's sketch
 * sampler: its job is to reach odd corners (uneven splits, strange orders, nested attachments)
 * so that property tests can check the code generator against the reference everywhere. */
#include "state_internal.h"

#include <string.h>

static int pick_compute(const cwm_state *s, cwm_rng *r) {
  int ids[CWM_MAX_STAGES], n = 0;
  for (int i = 0; i < s->nstages; i++)
    if (!cwm_stage_is_placeholder(s, i) && s->stages[i].loc != CWM_LOC_INLINE) ids[n++] = i;
  return n ? ids[cwm_rng_int(r, n)] : -1;
}

static int rand_factor(cwm_rng *r, int extent) {
  if (extent <= 1) return 1;
  if (cwm_rng_int(r, 3)) {
    /* a divisor */
    int divs[64], n = 0;
    for (int d = 1; d <= extent && n < 64; d++)
      if (extent % d == 0 && d <= 64) divs[n++] = d;
    return divs[cwm_rng_int(r, n)];
  }
  int hi = extent < 32 ? extent : 32;
  return 1 + cwm_rng_int(r, hi); /* uneven on purpose */
}

static void random_step(const cwm_state *s, cwm_rng *r, cwm_step *st) {
  memset(st, 0, sizeof *st);
  int p = pick_compute(s, r);
  st->stage = p < 0 ? 0 : p;
  const cwm_stage *sg = &s->stages[st->stage];
  int ni = sg->niters ? sg->niters : 1;
  int k = cwm_rng_int(r, 100);
  if (k < 30) {
    st->kind = CWM_S_SP;
    st->iter = cwm_rng_int(r, ni);
    int ext = sg->niters ? sg->nodes[sg->iters[st->iter]].extent : 1;
    st->extent = ext;
    st->n = 1 + cwm_rng_int(r, 3);
    st->inner_to_outer = cwm_rng_int(r, 5) != 0;
    int rem = ext;
    for (int i = st->n - 1; i >= 0; i--) {
      st->v[i] = rand_factor(r, rem);
      rem = (rem + st->v[i] - 1) / st->v[i];
    }
  } else if (k < 42) {
    st->kind = CWM_S_RE;
    st->n = sg->niters;
    for (int i = 0; i < st->n; i++) st->v[i] = i;
    for (int i = st->n - 1; i > 0; i--) {
      int j = cwm_rng_int(r, i + 1), t = st->v[i];
      st->v[i] = st->v[j];
      st->v[j] = t;
    }
  } else if (k < 52) {
    st->kind = CWM_S_FU;
    int a = cwm_rng_int(r, ni), len = 2 + cwm_rng_int(r, 2);
    if (a + len > ni) len = ni - a;
    st->n = len < 1 ? 1 : len;
    for (int i = 0; i < st->n; i++) st->v[i] = a + i;
  } else if (k < 70) {
    st->kind = CWM_S_AN;
    int inner = cwm_rng_int(r, 2);
    st->iter = inner ? ni - 1 - cwm_rng_int(r, ni < 2 ? 1 : 2) : cwm_rng_int(r, ni < 2 ? 1 : 2);
    if (st->iter < 0) st->iter = 0;
    st->a = inner ? (cwm_rng_int(r, 3) ? CWM_ANN_VECTORIZE : CWM_ANN_UNROLL) : CWM_ANN_PARALLEL;
  } else if (k < 76) {
    static const int vals[] = {0, 16, 64, 512};
    st->kind = CWM_S_PR;
    st->a = vals[cwm_rng_int(r, 4)];
  } else if (k < 86) {
    st->kind = CWM_S_CA;
    /* target: a later non-placeholder stage */
    st->a = st->stage + 1 + cwm_rng_int(r, s->nstages - st->stage > 1 ? s->nstages - st->stage - 1 : 1);
    if (st->a < s->nstages) st->b = cwm_rng_int(r, s->stages[st->a].niters ? s->stages[st->a].niters : 1);
  } else if (k < 91) {
    st->kind = CWM_S_CI;
  } else if (k < 93) {
    st->kind = CWM_S_CR;
  } else if (k < 97) {
    st->kind = CWM_S_CHW;
    strcpy(st->scope, "local");
  } else {
    st->kind = CWM_S_RF;
    st->iter = cwm_rng_int(r, ni);
    const cwm_op *b = cwm_stage_body_op(s, st->stage);
    st->a = cwm_rng_int(r, b->ndim + 1);
  }
}

int cwm_sample_steps(const cwm_dag *d, cwm_rng *r, int nsteps, cwm_state **out, cwm_err *err) {
  cwm_state *s = cwm_state_init(d);
  for (int i = 0; i < nsteps && s->nsteps < CWM_MAX_STEPS; i++) {
    for (int tries = 0; tries < 50; tries++) {
      cwm_step st;
      random_step(s, r, &st);
      cwm_err e;
      if (cwm_state_apply(s, &st, &e) == 0) break;
    }
  }
  *out = s;
  return 0;
}

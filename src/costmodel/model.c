/* model.c: the cost-model interface (dispatch through the struct) and the random model, the
 * baseline every learned model must beat: uniform scores, deterministic for its seed; sketches
 * and other states that cannot be lowered score CWM_SCORE_INVALID as with every model. */
#include <stdlib.h>

#include "cwm/costmodel.h"

int cwm_costmodel_update(cwm_costmodel *m, cwm_state *const *states, const cwm_record *recs, int n, cwm_err *err) {
  if (!m) return cwm_fail(err, CWM_EINTERNAL, "cost model is NULL");
  if (n <= 0 || !m->update) return CWM_OK;
  return m->update(m, states, recs, n, err);
}

int cwm_costmodel_predict(cwm_costmodel *m, cwm_state *const *states, int n, double *scores, cwm_err *err) {
  if (!m) return cwm_fail(err, CWM_EINTERNAL, "cost model is NULL");
  if (n <= 0) return CWM_OK;
  return m->predict(m, states, n, scores, err);
}

void cwm_costmodel_free(cwm_costmodel *m) {
  if (m && m->free) m->free(m);
}

/* ------------------------------------------------------------------ random model */

typedef struct {
  cwm_costmodel base;
  cwm_rng rng;
} random_model;

static int random_update(cwm_costmodel *m, cwm_state *const *states, const cwm_record *recs, int n, cwm_err *err) {
  return CWM_OK;
}

static int random_predict(cwm_costmodel *m, cwm_state *const *states, int n, double *scores, cwm_err *err) {
  random_model *r = (random_model *)m;
  for (int i = 0; i < n; i++) {
    double u = cwm_rng_unit(&r->rng); /* drawn for every state, so the stream does not depend on validity */
    scores[i] = states[i] && cwm_state_is_complete(states[i]) ? u : CWM_SCORE_INVALID;
  }
  return CWM_OK;
}

static void random_free(cwm_costmodel *m) { free(m); }

cwm_costmodel *cwm_costmodel_random(uint64_t seed) {
  random_model *r = cwm_xcalloc(1, sizeof *r);
  r->base.name = "random";
  r->base.update = random_update;
  r->base.predict = random_predict;
  r->base.save = NULL;
  r->base.free = random_free;
  cwm_rng_seed(&r->rng, seed);
  return &r->base;
}

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
  uint64_t seed;
} random_model;

static int random_update(cwm_costmodel *m, cwm_state *const *states, const cwm_record *recs, int n, cwm_err *err) {
  return CWM_OK;
}

static int random_predict(cwm_costmodel *m, cwm_state *const *states, int n, double *scores, cwm_err *err) {
  random_model *r = (random_model *)m;
  cwm_buf b;
  cwm_buf_init(&b);
  for (int i = 0; i < n; i++) {
    if (!states[i] || !cwm_state_is_complete(states[i])) {
      scores[i] = CWM_SCORE_INVALID;
      continue;
    }
    b.len = 0;
    if (b.s) b.s[0] = 0;
    cwm_steps_print(states[i]->steps, states[i]->nsteps, &b);
    uint64_t h = cwm_hash64(b.s ? b.s : "", b.len) ^ (r->seed * 0x9e3779b97f4a7c15ULL);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 29;
    scores[i] = (double)(h >> 11) / 9007199254740992.0;
  }
  cwm_buf_free(&b);
  return CWM_OK;
}

static void random_free(cwm_costmodel *m) { free(m); }

cwm_costmodel *cwm_costmodel_random(uint64_t seed) {
  random_model *r = cwm_xcalloc(1, sizeof *r);
  r->base = (cwm_costmodel){.name = "random", .update = random_update, .predict = random_predict, .free = random_free,
                            .ignores_measurements = 1};
  r->seed = seed;
  return &r->base;
}

/* sample.c: unmeasured trajectories from the real search sampler: random annotations of
 * Ansor's sketches (cwm_sample_initial) plus chains of mutations of them (cwm_mutate), kept
 * distinct by their printed final state. Only the steps are kept; states are replayed on demand. */
#include "cwm/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_MAX 64 /* states kept as mutation bases (a state is ~100 KB) */

void cwm_trajs_free(cwm_traj *t, int n) {
  if (!t) return;
  for (int i = 0; i < n; i++) cwm_traj_free(&t[i]);
  free(t);
}

typedef struct {
  uint64_t *h;
  int n, cap;
} hlist;

static int seen_add(hlist *l, uint64_t h) {
  for (int i = 0; i < l->n; i++)
    if (l->h[i] == h) return 0;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 64;
    l->h = cwm_xrealloc(l->h, sizeof *l->h * (size_t)l->cap);
  }
  l->h[l->n++] = h;
  return 1;
}

static void fill_traj(cwm_traj *t, const cwm_state *s, const char *key, const char *name, const char *text,
                      uint64_t final) {
  memset(t, 0, sizeof *t);
  memcpy(t->key, key, 17);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->workload = cwm_xstrdup(text);
  t->nsteps = s->nsteps;
  t->steps = cwm_xmalloc(sizeof *t->steps * (size_t)(s->nsteps ? s->nsteps : 1));
  memcpy(t->steps, s->steps, sizeof *t->steps * (size_t)s->nsteps);
  cwm_hash_hex(final, t->final);
  t->cost = CWM_FAILED_COST;
}

static uint64_t print_hash(const cwm_state *s) {
  char *p = cwm_state_print(s);
  uint64_t h = cwm_hash64(p, strlen(p));
  free(p);
  return h;
}

int cwm_traj_sample(const cwm_dag *d, const cwm_space_opts *o, uint64_t seed, int n, cwm_traj **out,
                    int *nout, cwm_err *err) {
  *out = NULL;
  *nout = 0;
  if (n <= 0) return 0;
  cwm_space_opts def;
  o = cwm_space_opts_or_default(o, &def);
  cwm_rng r;
  cwm_rng_seed(&r, seed);
  const cwm_workload *w = cwm_dag_workload(d);
  char key[17];
  cwm_workload_key(w, key);
  char *text = cwm_workload_print(w);
  cwm_state **init = NULL;
  int ninit = 0;
  int rc = cwm_sample_initial(d, o, &r, (n + 1) / 2, &init, &ninit, err);
  if (rc) {
    free(text);
    return rc;
  }
  cwm_traj *v = cwm_xcalloc((size_t)n, sizeof *v);
  int cnt = 0;
  hlist seen = {0};
  cwm_state *pool[POOL_MAX];
  int npool = 0;
  for (int i = 0; i < ninit; i++) {
    uint64_t h = print_hash(init[i]);
    seen_add(&seen, h); /* distinct already (cwm_sample_initial dedups by print) */
    fill_traj(&v[cnt++], init[i], key, w->name, text, h);
    if (npool < POOL_MAX) pool[npool++] = init[i];
    else cwm_state_free(init[i]);
  }
  free(init);
  /* mutation chains from the pool; a fruitless run of draws ends it (small spaces) */
  int misses = 0;
  while (cnt < n && misses < 20 + 4 * n) {
    const cwm_state *base = pool[cwm_rng_int(&r, npool)];
    int chain = 1 + cwm_rng_int(&r, 3);
    cwm_state *cur = NULL;
    for (int k = 0; k < chain; k++) {
      cwm_state *m = NULL;
      cwm_err e = {0};
      if (cwm_mutate(cur ? cur : base, o, &r, &m, &e)) continue; /* this link failed: try again */
      cwm_state_free(cur);
      cur = m;
    }
    if (!cur) {
      misses++;
      continue;
    }
    uint64_t h = print_hash(cur);
    if (!seen_add(&seen, h)) {
      misses++;
      cwm_state_free(cur);
      continue;
    }
    misses = 0;
    fill_traj(&v[cnt++], cur, key, w->name, text, h);
    if (npool < POOL_MAX) pool[npool++] = cur;
    else cwm_state_free(cur);
  }
  for (int i = 0; i < npool; i++) cwm_state_free(pool[i]);
  free(seen.h);
  free(text);
  *out = v;
  *nout = cnt;
  return 0;
}

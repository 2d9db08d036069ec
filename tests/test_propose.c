/* test_propose.c: the search pinned. For a fixed seed and a fixed model (cwm_costmodel_random: a
 * hash of the seed and each program's step list, so the scores do not depend on the machine), one
 * search round over each workload below proposes a list of candidates without measuring any; their
 * step lists must equal tests/golden/propose_<case>.txt line for line. The vector width is fixed at
 * 16 lanes so that the search space is the same on every CPU. Refactors of the sampler, the
 * mutations, the evolutionary search or the step code must leave the lists unchanged; a
 * deliberate change regenerates them with CWM_GOLDEN_WRITE=1. The same round is proposed twice
 * (nothing in a proposal changes the tuner) and with 1 and 2 threads (the thread count does not
 * change the search). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/codegen.h"
#include "cwm/costmodel.h"
#include "cwm/search.h"
#include "testlib.h"

typedef struct {
  const char *name, *spec;
} pcase;

static const pcase CASES[] = {
    {"dense", "dense M=16 N=48 K=32 bias=1 act=gelu"},
    {"bmm", "batch_matmul B=2 M=16 N=32 K=16"},
    {"conv", "conv2d C=8 H=10 W=10 K=16 R=3 S=3 stride=2 pad=1 bias=1 act=relu"},
    {"dwconv", "dwconv2d C=16 H=12 W=12 R=3 S=3 stride=1 pad=1"},
    {"softmax", "softmax B=2 M=4 N=40"},
    {"layernorm", "layernorm M=4 N=64"},
    {"matmul", "matmul M=31 N=33 K=17"},
};

enum { WANT = 24 };

static const char *golden_path(const char *name, char *buf, size_t n) {
  const char *src = getenv("CWM_SOURCE_DIR");
  snprintf(buf, n, "%s/tests/golden/propose_%s.txt", src ? src : ".", name);
  return buf;
}

/* The proposed candidates' step lists, one JSON list a line; NULL on an error (reported). */
static char *propose(const pcase *c, uint64_t seed) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(c->spec, NULL, &e);
  CHECKF(w != NULL, "%s: %s", c->name, e.msg);
  if (!w) return NULL;
  cwm_task *t = cwm_task_new(w, NULL, &e);
  cwm_costmodel *m = cwm_costmodel_random(seed);
  cwm_tune_opts o;
  cwm_tune_opts_default(&o);
  o.seed = seed;
  o.population = 512;
  o.generations = 2;
  cwm_tuner *tu = t ? cwm_tuner_new(t, m, &o, &e) : NULL;
  CHECKF(tu != NULL, "%s: %s", c->name, e.msg);
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_state **picks = NULL;
  int np = 0, ok = tu != NULL;
  if (ok && cwm_tuner_propose(tu, WANT, &picks, &np, &e) != 0) {
    CHECKF(0, "%s: propose: %s", c->name, e.msg);
    ok = 0;
  }
  for (int i = 0; i < np; i++) {
    cwm_steps_print(picks[i]->steps, picks[i]->nsteps, &b);
    cwm_buf_putc(&b, '\n');
    cwm_state_free(picks[i]);
  }
  free(picks);
  /* a second proposal of the same tuner is the same list: proposing changes nothing */
  if (ok) {
    cwm_buf again;
    cwm_buf_init(&again);
    CHECK(cwm_tuner_propose(tu, WANT, &picks, &np, &e) == 0);
    for (int i = 0; i < np; i++) {
      cwm_steps_print(picks[i]->steps, picks[i]->nsteps, &again);
      cwm_buf_putc(&again, '\n');
      cwm_state_free(picks[i]);
    }
    free(picks);
    CHECKF(again.s && !strcmp(again.s, b.s), "%s: a second proposal differs", c->name);
    cwm_buf_free(&again);
  }
  cwm_tuner_free(tu);
  cwm_costmodel_free(m);
  cwm_task_free(t);
  cwm_workload_free(w);
  if (!ok || !b.s) {
    cwm_buf_free(&b);
    return NULL;
  }
  return b.s;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* the first line where a and b differ, 1-based */
static int first_diff(const char *a, const char *b) {
  int line = 1;
  for (; *a && *a == *b; a++, b++) line += *a == '\n';
  return line;
}

/* A model that ranks every tiled program above every untiled one (no SP step): a model trained
 * on other workloads, blind to the family that wins on this one. */
static int tiling_predict(cwm_costmodel *m, cwm_state *const *states, int n, double *scores, cwm_err *err) {
  (void)m;
  (void)err;
  for (int i = 0; i < n; i++) {
    int tiled = 0;
    for (int k = 0; k < states[i]->nsteps; k++) tiled |= states[i]->steps[k].kind == CWM_S_SP;
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_steps_print(states[i]->steps, states[i]->nsteps, &b);
    uint64_t h = b.s ? cwm_hash64(b.s, strlen(b.s)) : 0;
    cwm_buf_free(&b);
    scores[i] = tiled ? 1.0 + (double)(h % 1000) / 1000.0 : 0.0;
  }
  return 0;
}
static int tiling_update(cwm_costmodel *m, cwm_state *const *s, const cwm_record *r, int n, cwm_err *err) {
  (void)m, (void)s, (void)r, (void)n, (void)err;
  return 0;
}
static void tiling_free(cwm_costmodel *m) { (void)m; }

/* Whether the first round over decode-time attention proposes its untiled program (the vector dot
 * product) under a model that ranks it last, with the family quota quota (-1: the model's). */
static int proposes_untiled(double model_quota, double quota) {
  cwm_costmodel m = {.name = "tiling", .update = tiling_update, .predict = tiling_predict,
                     .free = tiling_free, .family_quota = model_quota};
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec("batch_matmul B=2 M=1 N=20 K=37", NULL, &e);
  cwm_task *t = w ? cwm_task_new(w, NULL, &e) : NULL;
  cwm_tune_opts o;
  cwm_tune_opts_default(&o);
  o.population = 256;
  o.generations = 1;
  o.eps_greedy = 0; /* no random picks: only the search's own choices */
  o.family_quota = quota;
  cwm_tuner *tu = t ? cwm_tuner_new(t, &m, &o, &e) : NULL;
  CHECKF(tu != NULL, "%s", e.msg);
  cwm_state **picks = NULL;
  int np = 0, found = 0;
  if (tu) CHECKF(cwm_tuner_propose(tu, WANT, &picks, &np, &e) == 0, "%s", e.msg);
  for (int i = 0; i < np; i++) {
    int sp = 0;
    for (int k = 0; k < picks[i]->nsteps; k++) sp |= picks[i]->steps[k].kind == CWM_S_SP;
    found += !sp;
    cwm_state_free(picks[i]);
  }
  free(picks);
  cwm_tuner_free(tu);
  cwm_task_free(t);
  cwm_workload_free(w);
  return found;
}

/* The world model's search (a family quota) measures the model's best program of every sketch in
 * its first round, so a family the model ranks last is measured once; TVM's search (no quota)
 * does not. */
static void test_sketch_coverage(void) {
  CHECKF(proposes_untiled(0.25, -1) == 1, "with the quota: %d untiled programs proposed", proposes_untiled(0.25, -1));
  CHECKF(proposes_untiled(0, -1) == 0, "without the quota: %d untiled programs proposed", proposes_untiled(0, -1));
  CHECKF(proposes_untiled(0.25, 0) == 0, "quota turned off: %d untiled programs proposed", proposes_untiled(0.25, 0));
}

int main(void) {
  cwm_codegen_set_lanes(16);
  int write = getenv("CWM_GOLDEN_WRITE") != NULL;
  for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
    const pcase *c = &CASES[k];
    cwm_pool_set_threads(2);
    char *got = propose(c, 7 + k);
    if (!got) continue;
    CHECKF(count_lines(got) > WANT / 2, "%s: only %d candidates proposed", c->name, count_lines(got));
    cwm_pool_set_threads(1);
    char *one = propose(c, 7 + k);
    CHECKF(one && !strcmp(one, got), "%s: 1 thread proposes otherwise than 2 (line %d)", c->name,
           one ? first_diff(one, got) : 0);
    free(one);
    char path[4096];
    golden_path(c->name, path, sizeof path);
    if (write) {
      cwm_err e = {0};
      CHECKF(cwm_write_file_atomic(path, got, strlen(got), &e) == 0, "%s", e.msg);
    } else {
      char *want = cwm_read_file(path, NULL, NULL);
      CHECKF(want != NULL, "%s: missing (CWM_GOLDEN_WRITE=1 writes it)", path);
      if (want)
        CHECKF(!strcmp(want, got), "%s: the search proposes otherwise than the committed list (line %d)", path,
               first_diff(want, got));
      free(want);
    }
    free(got);
  }
  cwm_pool_set_threads(0);
  test_sketch_coverage();
  return test_done();
}

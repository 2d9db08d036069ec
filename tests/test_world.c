/* test_world.c: the world model end to end on tiny workloads: a tiny model is built from sampled
 * trajectories, its encoder and transition train and their losses fall, the ranker trains on
 * measured records, the model file round-trips (same scores) and every corruption of it fails
 * with CWM_EMODEL, the cost model "world" tunes a small workload, and the offline evaluation
 * runs. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cwm/dataset.h"
#include "cwm/train.h"
#include "cwm/sketch.h"
#include "cwm/search.h"
#include "cwm/world.h"
#include "testlib.h"

static char dir[64];
static const char *SPECS[] = {
    "dense M=8 N=16 K=16 bias=1 act=relu", "matmul M=12 N=8 K=20", "dense M=4 N=24 K=8 bias=0 act=none",
    "matmul M=6 N=10 K=14", "dense M=10 N=8 K=12 bias=1 act=gelu",
};
#define NSPEC ((int)(sizeof SPECS / sizeof SPECS[0]))

static double last_transition_loss[2], value_loss[2];
static double loss_seen[64]; /* the transition's loss lines in order (the first 64) */
static int nloss, nvalue, ncache_read;
static long enc_trajs, enc_states, enc_all; /* the last "encoding training states" line's counts */
static void grab(void *ud, const char *line) {
  (void)ud;
  if (strstr(line, "targets of") && strstr(line, "read from")) ncache_read++;
  const char *q = strstr(line, "encoding training states: ");
  if (q)
    sscanf(q + strlen("encoding training states: "), "%ld/%*d trajectories, %ld of their %ld states", &enc_trajs,
           &enc_states, &enc_all);
  const char *v = strstr(line, "value head: training loss ");
  if (v) {
    if (nvalue++ == 0) value_loss[0] = atof(v + 26);
    value_loss[1] = atof(v + 26);
  }
  const char *p = strstr(line, "train loss ");
  if (p) {
    if (nloss < 64) loss_seen[nloss] = atof(p + 11);
    if (nloss++ == 0) last_transition_loss[0] = atof(p + 11);
    last_transition_loss[1] = atof(p + 11);
  }
  if (getenv("CWM_TEST_VERBOSE")) fprintf(stderr, "  %s\n", line);
}

static int write_trajectories(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  for (int i = 0; i < NSPEC; i++) {
    cwm_err e = {0};
    cwm_workload *w = cwm_workload_from_spec(SPECS[i], NULL, &e);
    CHECKF(w != NULL, "%s: %s", SPECS[i], e.msg);
    if (!w) continue;
    cwm_dag *d = cwm_dag_new(w, &e);
    cwm_space_opts so;
    cwm_space_opts_default(&so);
    cwm_traj *t = NULL;
    int n = 0;
    CHECK(cwm_traj_sample(d, &so, 7 + (uint64_t)i, 24, &t, &n, &e) == 0);
    for (int k = 0; k < n; k++) {
      cwm_buf b;
      cwm_buf_init(&b);
      cwm_traj_to_json(&t[k], &b);
      fprintf(f, "%s\n", b.s);
      cwm_buf_free(&b);
    }
    cwm_trajs_free(t, n);
    cwm_dag_free(d);
    cwm_workload_free(w);
  }
  fclose(f);
  return 0;
}

static int measure_records(const char *path) {
  cwm_wl_entry *wl = calloc(NSPEC, sizeof *wl);
  for (int i = 0; i < NSPEC; i++) {
    snprintf(wl[i].id, sizeof wl[i].id, "w%d", i);
    snprintf(wl[i].spec, sizeof wl[i].spec, "%s", SPECS[i]);
  }
  cwm_collect_opts o;
  cwm_collect_opts_default(&o);
  test_env_measure(&o.measure);
  o.per_workload = 12;
  o.population = 64;
  o.generations = 1;
  o.log_path = path;
  o.measure.repeats = 1;
  o.measure.min_repeat_ms = 1;
  cwm_collect_result r;
  cwm_err e = {0};
  int rc = cwm_dataset_measure(wl, NSPEC, &o, &r, &e);
  CHECKF(rc == 0, "dataset measure: %s", e.msg);
  free(wl);
  return rc;
}

static void corrupt_cases(const char *model) {
  size_t n = 0;
  cwm_err e = {0};
  char *data = cwm_read_file(model, &n, &e);
  CHECK(data != NULL && n > 100);
  if (!data) return;
  char bad[160];
  snprintf(bad, sizeof bad, "%s/bad.cwm", dir);
  /* truncations */
  size_t cuts[] = {0, 7, 16, n / 3, n / 2, n - 9, n - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    CHECK(cwm_write_file_atomic(bad, data, cuts[i], &e) == 0);
    cwm_world *w = cwm_world_load(bad, &e);
    CHECKF(w == NULL && e.code == CWM_EMODEL, "truncated at %zu: loaded or code %d", cuts[i], e.code);
    cwm_world_free(w);
  }
  /* altered bytes */
  size_t at[] = {9, n / 4, n / 2, n - 20};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    data[at[i]] ^= 0x5a;
    CHECK(cwm_write_file_atomic(bad, data, n, &e) == 0);
    cwm_world *w = cwm_world_load(bad, &e);
    CHECKF(w == NULL && e.code == CWM_EMODEL, "byte %zu altered: loaded or code %d", at[i], e.code);
    cwm_world_free(w);
    data[at[i]] ^= 0x5a;
  }
  free(data);
  /* not a model file at all */
  CHECK(cwm_write_file_atomic(bad, "hello\n", 6, &e) == 0);
  cwm_world *w = cwm_world_load(bad, &e);
  CHECK(w == NULL && e.code == CWM_EMODEL);
  cwm_world_free(w);
  w = cwm_world_load("/nonexistent/model.cwm", &e);
  CHECK(w == NULL && e.code != 0);
}

/* A model file of another world version: rewrite world.config through the container. */
#include "cwm/modelfile.h"
static void version_case(const char *model, char ver) {
  cwm_err e = {0};
  cwm_mfile *f = cwm_mfile_load(model, &e);
  CHECK(f != NULL);
  if (!f) return;
  cwm_mfile_writer *mw = cwm_mfile_writer_new();
  for (int i = 0; i < cwm_mfile_count(f); i++) {
    const char *name = cwm_mfile_section_name(f, i);
    int kind = cwm_mfile_section_kind(f, i);
    if (!strcmp(name, "world.config")) {
      char *t = cwm_xstrdup(cwm_mfile_text(f, name));
      char *p = strstr(t, "world_version=");
      if (p) p[14] = ver;
      char *ar = strstr(t, "act_round=1\n"); /* version 4 files had no act_round: floor buckets */
      if (ar && ver < '5') memmove(ar, ar + 12, strlen(ar + 12) + 1);
      cwm_mfile_add_text(mw, name, t, &e);
      free(t);
    } else if (kind == CWM_MFILE_TEXT) {
      cwm_mfile_add_text(mw, name, cwm_mfile_text(f, name), &e);
    } else if (kind == CWM_MFILE_BYTES) {
      size_t n;
      const void *b = cwm_mfile_bytes(f, name, &n);
      cwm_mfile_add_bytes(mw, name, b, n, &e);
    } else {
      int shape[CWM_MFILE_MAX_DIMS], nd;
      const float *t = cwm_mfile_tensor(f, name, shape, &nd);
      cwm_mfile_add_tensor(mw, name, t, nd, shape, &e);
    }
  }
  char path[160];
  snprintf(path, sizeof path, "%s/v%c.cwm", dir, ver);
  CHECK(cwm_mfile_write(mw, path, &e) == 0);
  cwm_mfile_writer_free(mw);
  cwm_mfile_free(f);
  cwm_world *w = cwm_world_load(path, &e);
  if (ver == '4') {
    /* version 5 changed no row: a version-4 model keeps its ranker (and its floor buckets) */
    CHECKF(w != NULL && cwm_world_ranker(w) != NULL, "version 4: %s", e.msg);
    cwm_world_free(w);
    return;
  }
  if (ver == '2') {
    /* an older model loads without its ranker, whose rows had fewer action features; the cost
     * model then asks for a retrained one */
    CHECKF(w != NULL && cwm_world_ranker(w) == NULL, "version 2: %s", e.msg);
    cwm_costmodel *m = w ? cwm_costmodel_world(w, NULL, &e) : NULL; /* frees w on failure */
    CHECKF(m == NULL && strstr(e.msg, "cwm train ranker"), "version 2 cost model: %s", e.msg);
    cwm_costmodel_free(m);
    return;
  }
  CHECKF(w == NULL && e.code == CWM_EMODEL && strstr(e.msg, "version 7"), "version: %s", e.msg);
  cwm_world_free(w);
}

/* Tunes a small workload with the world model w (owned by the cost model, freed here): n trials
 * in rounds of 8, every one measured. */
static void tune_small(cwm_world *w, const char *spec, int trials, uint64_t seed, const char *what) {
  cwm_err e = {0};
  cwm_costmodel *m = cwm_costmodel_world(w, NULL, &e);
  CHECKF(m != NULL, "%s: %s", what, e.msg);
  cwm_workload *tw = cwm_workload_from_spec(spec, NULL, &e);
  cwm_measure_opts mo = test_measure_opts(1);
  cwm_task *task = cwm_task_new(tw, &mo, &e);
  cwm_tune_opts o;
  cwm_tune_opts_default(&o);
  o.trials = trials;
  o.per_round = 8;
  o.population = 64;
  o.generations = 2;
  o.init_min_population = 16;
  o.seed = seed;
  cwm_tune_result res;
  int rc = m ? cwm_tune(task, m, &o, &res, &e) : -1;
  CHECKF(rc == 0, "tune with %s: %s", what, e.msg);
  if (rc == 0) {
    CHECKF(res.measured == trials && res.best_cost < 1, "%s: %d measured", what, res.measured);
    cwm_tune_result_free(&res);
  }
  cwm_task_free(task);
  cwm_workload_free(tw);
  cwm_costmodel_free(m);
}

/* States of n sampled candidates of spec (owned by the caller, with *dag). */
static cwm_state **sample_states(const char *spec, int want, int *n, cwm_dag **dag) {
  cwm_err e = {0};
  cwm_workload *wl = cwm_workload_from_spec(spec, NULL, &e);
  *dag = wl ? cwm_dag_new(wl, &e) : NULL;
  cwm_workload_free(wl);
  *n = 0;
  if (!*dag) return NULL;
  cwm_space_opts so;
  cwm_space_opts_default(&so);
  cwm_traj *t = NULL;
  int nt = 0;
  if (cwm_traj_sample(*dag, &so, 7, want, &t, &nt, &e)) return NULL;
  cwm_state **s = calloc((size_t)(nt ? nt : 1), sizeof *s);
  for (int i = 0; i < nt; i++)
    if (cwm_state_replay(*dag, t[i].steps, t[i].nsteps, &s[*n], NULL, &e) == 0) (*n)++;
  cwm_trajs_free(t, nt);
  return s;
}

/* The ablations the search runs (cwm train ranker --mode): the mode survives the model file, the
 * cost model scores by the mode's rows, and the rows differ from the rollout's. */
static void ablation_modes(cwm_world *w, cwm_train_opts *to, const char *spec) {
  cwm_err e = {0};
  int n = 0;
  cwm_dag *d = NULL;
  cwm_state **s = sample_states(spec, 10, &n, &d);
  CHECK(n >= 4);
  int nf = cwm_world_nfeat(w);
  const cwm_step **st = calloc((size_t)n, sizeof *st);
  int *ns = calloc((size_t)n, sizeof *ns);
  for (int i = 0; i < n; i++) st[i] = s[i]->steps, ns[i] = s[i]->nsteps;
  float *roll = calloc((size_t)n * nf, sizeof(float)), *rows = calloc((size_t)n * nf, sizeof(float)),
        *mine = calloc((size_t)n * nf, sizeof(float));
  CHECK(cwm_world_record_rows(w, d, st, ns, NULL, n, 0, roll, &e) == 0);
  int modes[4] = {CWM_MODE_NO_TRANSITION, CWM_MODE_STATIC, CWM_MODE_VALUE, CWM_MODE_PAPER};
  for (int k = 0; k < 4; k++) {
    char path[160];
    snprintf(path, sizeof path, "%s/ablation%d.cwm", dir, k);
    cwm_world_set_mode(w, modes[k]);
    CHECK(cwm_world_mode(w) == modes[k]);
    CHECKF(cwm_world_train_ranker(w, to, &e) == 0, "%s", e.msg);
    CHECKF(cwm_world_save(w, path, &e) == 0, "%s", e.msg);
    cwm_world *a = cwm_world_load(path, &e);
    CHECKF(a != NULL, "%s", e.msg);
    if (!a) continue;
    CHECKF(cwm_world_mode(a) == modes[k], "mode %d read back as %d", modes[k], cwm_world_mode(a));
    /* mode 0 means the model's own mode: the same rows as asking for that mode */
    CHECK(cwm_world_record_rows(a, d, st, ns, NULL, n, 0, mine, &e) == 0);
    CHECK(cwm_world_record_rows(a, d, st, ns, NULL, n, modes[k], rows, &e) == 0);
    CHECK(memcmp(mine, rows, sizeof(float) * (size_t)n * nf) == 0);
    CHECK(memcmp(mine, roll, sizeof(float) * (size_t)nf) != 0);
    if (modes[k] == CWM_MODE_VALUE) {
      /* [z_0 | the rollout's value | the action features]: z_0 is the workload's (one here), the
       * value and the action features are the rollout rows' */
      int D = nf - 1 - CWM_ACT_NFEAT;
      for (int i = 0; i < n; i++) {
        const float *r = mine + (size_t)i * nf, *q = roll + (size_t)i * nf;
        CHECKF(memcmp(r, mine, sizeof(float) * (size_t)D) == 0, "value mode: candidate %d's z_0 columns", i);
        CHECKF(fabsf(r[D] - q[D]) < 1e-5f, "value mode: candidate %d's value %g, the rollout's %g", i, r[D], q[D]);
        CHECK(memcmp(r + D + 1, q + D + 1, sizeof(float) * CWM_ACT_NFEAT) == 0);
      }
    }
    /* the search's scores are the ranker's on those rows */
    double *p1 = calloc((size_t)n, sizeof(double)), *p2 = calloc((size_t)n, sizeof(double));
    CHECK(cwm_ranker_predict(cwm_world_ranker(a), rows, n, nf, p1, &e) == 0);
    cwm_costmodel *cm = cwm_costmodel_world(a, NULL, &e);
    CHECKF(cm != NULL, "%s", e.msg);
    if (cm) {
      CHECKF(cwm_costmodel_predict(cm, s, n, p2, &e) == 0, "%s", e.msg);
      for (int i = 0; i < n; i++) CHECKF(fabs(p1[i] - p2[i]) < 1e-5, "mode %d candidate %d: %g vs %g", modes[k], i, p1[i], p2[i]);
      /* scored again (static: from the encoding cache), reversed and with a duplicate: the same scores */
      cwm_state **rev = calloc((size_t)n + 1, sizeof *rev);
      for (int i = 0; i < n; i++) rev[i] = s[n - 1 - i];
      rev[n] = s[0];
      double *p3 = calloc((size_t)n + 1, sizeof(double));
      CHECKF(cwm_costmodel_predict(cm, rev, n + 1, p3, &e) == 0, "%s", e.msg);
      for (int i = 0; i < n; i++) CHECKF(fabs(p3[i] - p2[n - 1 - i]) < 1e-5, "mode %d again, candidate %d: %g vs %g", modes[k], i, p3[i], p2[n - 1 - i]);
      CHECK(fabs(p3[n] - p2[0]) < 1e-5); /* the value head's GEMM rounds by batch size */
      free(p3);
      free(rev);
      cwm_costmodel_free(cm);
    }
    free(p1);
    free(p2);
  }
  cwm_world_set_mode(w, CWM_MODE_ROLLOUT);
  CHECK(cwm_world_mode_parse("static") == CWM_MODE_STATIC && cwm_world_mode_parse("bogus") < 0);
  CHECK(cwm_world_mode_parse("value") == CWM_MODE_VALUE && !strcmp(cwm_world_mode_name(CWM_MODE_VALUE), "value"));
  CHECK(cwm_world_mode_parse("paper") == CWM_MODE_PAPER && !strcmp(cwm_world_mode_name(CWM_MODE_PAPER), "paper"));
  for (int m = CWM_MODE_ROLLOUT; m <= CWM_MODE_PAPER; m++) CHECK(cwm_world_mode_parse(cwm_world_mode_name(m)) == m);
  free(roll);
  free(rows);
  free(mine);
  free(st);
  free(ns);
  for (int i = 0; i < n; i++) cwm_state_free(s[i]);
  free(s);
  cwm_dag_free(d);
}

/* The (state) columns of ranker.h: computed from the final program. */
static const int STATE_COLS[] = {CWM_ACT_PAR_EXTENT, CWM_ACT_PAR_EFF,   CWM_ACT_VEC_LEN,    CWM_ACT_VEC_EFF,
                                 CWM_ACT_STAGES,     CWM_ACT_REDUNDANCY, CWM_ACT_SCALAR_RED, CWM_ACT_TILE_ACC,
                                 CWM_ACT_TILE_REUSE, CWM_ACT_RED_INNER};
#define NSTATE_COLS ((int)(sizeof STATE_COLS / sizeof STATE_COLS[0]))

/* The paper mode's row: the predicted z_T, the value (with paper_margin), the step-list features
 * and the hardware; nothing of the final program, so the same row with or without it. */
static void paper_rows(cwm_world *w, const char *spec) {
  cwm_err e = {0};
  int n = 0, D = cwm_world_width(w), nf = cwm_world_nfeat(w);
  cwm_dag *d = NULL;
  cwm_state **s = sample_states(spec, 6, &n, &d);
  CHECK(n >= 2);
  if (n < 2) return;
  cwm_state *s0 = cwm_state_init(d);
  char *text = cwm_state_print(s0);
  const char *t1[1] = {text};
  float *z0 = calloc((size_t)D, sizeof(float)), *zT = calloc((size_t)D, sizeof(float));
  float *zU = calloc((size_t)D, sizeof(float));
  float *a = calloc((size_t)nf, sizeof(float)), *b = calloc((size_t)nf, sizeof(float));
  CHECKF(cwm_world_encode(w, t1, 1, z0, &e) == 0, "%s", e.msg);
  cwm_world_rollout(w, z0, s[0]->steps, s[0]->nsteps, zT, NULL);
  cwm_world_rollout(w, z0, s[1]->steps, s[1]->nsteps, zU, NULL);
  const cwm_hwinfo hw = {.cores = 2, .vector_floats = 8, .l1_kib = 48, .l2_kib = 2048, .l3_kib = 32768};
  cwm_world_set_paper_margin(w, 1);
  cwm_world_row(w, z0, zT, CWM_MODE_PAPER, s[0]->steps, s[0]->nsteps, s[0], &hw, a);
  cwm_world_row(w, z0, zT, CWM_MODE_PAPER, s[0]->steps, s[0]->nsteps, NULL, &hw, b);
  CHECK(memcmp(a, b, sizeof(float) * (size_t)nf) == 0);
  CHECK(memcmp(a, zT, sizeof(float) * (size_t)D) == 0);
  CHECK(isfinite(a[D])); /* paper_margin: the value head's score */
  const float *act = a + D + 1;
  for (int k = 0; k < NSTATE_COLS; k++) CHECKF(isnan(act[STATE_COLS[k]]), "paper row: (state) column %d", STATE_COLS[k]);
  int nonzero = 0;
  for (int k = 0; k < CWM_ACT_NFEAT; k++) {
    int state = 0;
    for (int j = 0; j < NSTATE_COLS; j++) state |= STATE_COLS[j] == k;
    if (!state) CHECKF(isfinite(act[k]), "paper row: column %d", k);
    nonzero += k < CWM_ACT_LEN && act[k] > 0;
  }
  CHECK(nonzero > 0 && act[CWM_ACT_LEN] == (float)s[0]->nsteps);
  CHECK(act[CWM_ACT_CORES] == 2 && act[CWM_ACT_VEC_WIDTH] == 8 && act[CWM_ACT_L2] == 2048);
  /* the rollout mode reads the final program: there the two rows differ */
  cwm_world_row(w, z0, zT, CWM_MODE_ROLLOUT, s[0]->steps, s[0]->nsteps, s[0], &hw, b);
  CHECK(isfinite(b[D + 1 + CWM_ACT_STAGES]));
  /* another z_T, the same steps: only the latent columns (and the value) change */
  cwm_world_row(w, z0, zU, CWM_MODE_PAPER, s[0]->steps, s[0]->nsteps, NULL, &hw, b);
  CHECK(memcmp(a, b, sizeof(float) * (size_t)D) != 0);
  CHECK(memcmp(a + D + 1, b + D + 1, sizeof(float) * CWM_ACT_NFEAT) == 0);
  /* without the margin the value column is missing */
  cwm_world_set_paper_margin(w, 0);
  cwm_world_row(w, z0, zT, CWM_MODE_PAPER, s[0]->steps, s[0]->nsteps, NULL, &hw, b);
  CHECK(isnan(b[D]) && memcmp(a, b, sizeof(float) * (size_t)D) == 0);
  free(z0);
  free(zT);
  free(zU);
  free(a);
  free(b);
  free(text);
  cwm_state_free(s0);
  for (int i = 0; i < n; i++) cwm_state_free(s[i]);
  free(s);
  cwm_dag_free(d);
}

/* The hardware columns from the record's target: its threads as the cores, its vector width; a
 * record without a target, and a model file from before version 6 (old), this machine's. */
static void target_hardware(cwm_world *w, cwm_world *old, const char *log, const char *spec) {
  static const char *T1 = "c -keys=cpu -mcpu=X -isa=avx2 -threads=1 -vec=32 -cc=gcc -cflags=-O3";
  static const char *T2 = "c -keys=cpu -mcpu=X -isa=avx512 -threads=2 -vec=64 -cc=gcc -cflags=-O3";
  const cwm_hwinfo *host = cwm_hwinfo_host();
  cwm_hwinfo h1, h2, h0;
  cwm_hwinfo_of_target(&h1, T1);
  cwm_hwinfo_of_target(&h2, T2);
  cwm_hwinfo_of_target(&h0, NULL);
  CHECK(h1.cores == 1 && h1.vector_floats == 8 && h2.cores == 2 && h2.vector_floats == 16);
  CHECK(h1.l2_kib == host->l2_kib && h0.cores == host->cores && h0.vector_floats == host->vector_floats);
  cwm_hwinfo_of_target(&h0, "c -keys=cpu -mcpu=X -threads=3 -vec=16 -cc=gcc"); /* no -isa=: by -vec= */
  CHECK(h0.cores == 3 && h0.vector_floats == 4);
  /* the measured log's records carry their target into the trajectories the ranker trains on */
  FILE *f = fopen(log, "r");
  char line[1 << 16];
  cwm_traj t = {0};
  cwm_err e = {0};
  CHECK(f && fgets(line, sizeof line, f) && cwm_traj_parse(line, &t, &e) == 0);
  if (f) fclose(f);
  CHECKF(t.target && strstr(t.target, "-threads=1"), "record target %s", t.target ? t.target : "(none)");
  cwm_traj_free(&t);
  /* rows: the same schedule measured with 1 and with 2 threads */
  int n = 0, nf = cwm_world_nfeat(w);
  cwm_dag *d = NULL;
  cwm_state **s = sample_states(spec, 2, &n, &d);
  CHECK(n >= 1);
  if (n < 1) return;
  const cwm_step *st[2] = {s[0]->steps, s[0]->steps};
  int ns[2] = {s[0]->nsteps, s[0]->nsteps};
  const char *tg[2] = {T1, T2};
  float *r = calloc(2 * (size_t)nf, sizeof(float));
  int c = nf - CWM_ACT_NFEAT + CWM_ACT_CORES, v = nf - CWM_ACT_NFEAT + CWM_ACT_VEC_WIDTH;
  CHECKF(cwm_world_record_rows(w, d, st, ns, tg, 2, 0, r, &e) == 0, "%s", e.msg);
  CHECKF(r[c] == 1 && r[nf + c] == 2 && r[v] == 8 && r[nf + v] == 16, "cores %g %g", r[c], r[nf + c]);
  CHECK(cwm_world_record_rows(w, d, st, ns, NULL, 2, 0, r, &e) == 0);
  CHECK(r[c] == host->cores && r[nf + c] == host->cores);
  if (old) {
    int onf = cwm_world_nfeat(old), oc = onf - CWM_ACT_NFEAT + CWM_ACT_CORES;
    float *ro = calloc(2 * (size_t)onf, sizeof(float));
    CHECKF(cwm_world_record_rows(old, d, st, ns, tg, 2, 0, ro, &e) == 0, "%s", e.msg);
    CHECK(ro[oc] == host->cores && ro[onf + oc] == host->cores);
    free(ro);
  }
  free(r);
  for (int i = 0; i < n; i++) cwm_state_free(s[i]);
  free(s);
  cwm_dag_free(d);
}

/* cwm train ansor: Ansor's model trained on the records' training workloads, saved, and loaded
 * back as the pre-trained baseline scores candidates of an unseen workload. */
static void pretrained_ansor(const char *log, double vf, const char *spec) {
  cwm_err e = {0};
  char path[160];
  snprintf(path, sizeof path, "%s/ansor.bin", dir);
  CHECKF(cwm_ansor_pretrain(log, vf, 1, path, NULL, NULL, &e) == 0, "%s", e.msg);
  cwm_costmodel *m = cwm_costmodel_ansor(1, path, &e);
  CHECKF(m != NULL, "%s", e.msg);
  int n = 0;
  cwm_dag *d = NULL;
  cwm_state **s = sample_states(spec, 10, &n, &d);
  if (m && n >= 4) {
    double *p = calloc((size_t)n, sizeof(double));
    CHECKF(cwm_costmodel_predict(m, s, n, p, &e) == 0, "%s", e.msg);
    int differ = 0;
    for (int i = 1; i < n; i++) differ |= p[i] != p[0];
    CHECKF(differ, "the pre-trained model gives every candidate the same score");
    free(p);
  }
  cwm_costmodel_free(m);
  for (int i = 0; i < n; i++) cwm_state_free(s[i]);
  free(s);
  if (d) cwm_dag_free(d);
  char missing[160];
  snprintf(missing, sizeof missing, "%s/none.jsonl", dir);
  CHECK(cwm_ansor_pretrain(missing, vf, 1, path, NULL, NULL, &e) != 0 && e.code == CWM_EIO);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/cwm-test-world-XXXXXX");
  if (!mkdtemp(dir)) return 1;
  char traj[128], log[128], model[128];
  snprintf(traj, sizeof traj, "%s/traj.jsonl", dir);
  snprintf(log, sizeof log, "%s/measured.jsonl", dir);
  snprintf(model, sizeof model, "%s/model.cwm", dir);
  CHECK(write_trajectories(traj) == 0);
  CHECK(measure_records(log) == 0);

  cwm_err e = {0};
  cwm_vocab *v = NULL;
  CHECKF(cwm_world_build_vocab(traj, 0, 1, &v, &e) == 0, "%s", e.msg);
  cwm_world_config c;
  cwm_world_config_default(&c);
  c.enc.width = 16;
  c.enc.heads = 2;
  c.enc.layers = 1;
  c.enc.window = 32;
  c.enc.overlap = 8;
  cwm_world *w = cwm_world_new(&c, v, 3, &e);
  CHECKF(w != NULL, "%s", e.msg);
  if (!w) return test_done();

  cwm_train_opts to;
  cwm_train_opts_default(&to);
  to.traj_path = traj;
  to.log_path = log;
  /* a split with held-out workloads on both sides */
  to.valid_fraction = 0;
  for (double f = 0.3; f < 0.8 && to.valid_fraction == 0; f += 0.05) {
    int nv = 0;
    for (int i = 0; i < NSPEC; i++) {
      cwm_workload *x = cwm_workload_from_spec(SPECS[i], NULL, &e);
      char key[17];
      cwm_workload_key(x, key);
      nv += cwm_split_part(key, f) == CWM_SPLIT_VALID;
      cwm_workload_free(x);
    }
    if (nv >= 1 && nv < NSPEC - 1) to.valid_fraction = f;
  }
  CHECK(to.valid_fraction > 0);
  to.epochs = 1;
  to.batch = 8;
  to.max_traj = 64;
  to.ranker_rounds = 30;
  to.lr = 3e-3f;
  to.progress = grab;
  CHECKF(cwm_world_train_encoder(w, &to, &e) == 0, "%s", e.msg);
  nloss = 0;
  to.epochs = 3; /* 12 transition epochs */
  CHECKF(cwm_world_train_transition(w, &to, &e) == 0, "%s", e.msg);
  CHECKF(last_transition_loss[1] < last_transition_loss[0] * 0.8, "transition training loss %g -> %g",
         last_transition_loss[0], last_transition_loss[1]);
  /* the value head learns to rank the measured records through the rollout */
  CHECKF(nvalue == 12 && value_loss[1] < value_loss[0] * 0.9, "value head loss over %d epochs: %g -> %g", nvalue,
         value_loss[0], value_loss[1]);
  CHECK(ncache_read == 0);
  /* the encoder targets kept in the cache are read back by the next training of the same
   * encoder on the same trajectories (training and validation parts) */
  {
    char tc[160];
    snprintf(tc, sizeof tc, "%s/targets", dir);
    to.targets_cache = tc;
    to.epochs = 1;
    CHECKF(cwm_world_train_transition(w, &to, &e) == 0, "%s", e.msg);
    CHECK(ncache_read == 0);
    CHECKF(cwm_world_train_transition(w, &to, &e) == 0, "%s", e.msg);
    CHECKF(ncache_read == 2, "cache read %d times", ncache_read);
    /* targets of 3 states a trajectory (the first, the last, one between): 3 encodings each, the
     * cache of every state is not read for them, and the rollout loss still falls */
    to.target_states = 3;
    to.epochs = 6;
    nloss = 0;
    CHECKF(cwm_world_train_transition(w, &to, &e) == 0, "%s", e.msg);
    CHECKF(ncache_read == 2, "cache of every state read for 3: %d reads", ncache_read);
    CHECKF(enc_trajs > 4 && enc_states == 3 * enc_trajs && enc_all > enc_states + enc_trajs,
           "%ld trajectories, %ld of %ld states encoded", enc_trajs, enc_states, enc_all);
    /* the loss moves by 10-15% from epoch to epoch (the measured records under it differ from
     * run to run) and falls by 12-15% over 24 epochs (0.85-0.88 in 6 runs): the mean of the
     * last four epochs against that of the first four */
    double first4 = 0, last4 = 0;
    for (int i = 0; i < 4 && nloss == 24; i++) {
      first4 += loss_seen[i] / 4;
      last4 += loss_seen[20 + i] / 4;
    }
    CHECKF(nloss == 24 && last4 < first4 * 0.95, "3-state targets: transition loss %g -> %g (means of 4 lines of %d)",
           first4, last4, nloss);
    to.target_states = 0;
    to.targets_cache = NULL;
  }
  double vf = to.valid_fraction;
  CHECKF(cwm_world_train_ranker(w, &to, &e) == 0, "%s", e.msg);
  CHECK(cwm_world_ranker(w) != NULL);
  CHECKF(cwm_world_save(w, model, &e) == 0, "%s", e.msg);

  /* the same scores after a round trip */
  cwm_workload *wl = cwm_workload_from_spec(SPECS[0], NULL, &e);
  cwm_dag *d = cwm_dag_new(wl, &e);
  cwm_space_opts so;
  cwm_space_opts_default(&so);
  cwm_traj *t = NULL;
  int n = 0;
  CHECK(cwm_traj_sample(d, &so, 99, 12, &t, &n, &e) == 0 && n > 4);
  const cwm_step **st = calloc((size_t)n, sizeof *st);
  int *ns = calloc((size_t)n, sizeof *ns);
  for (int i = 0; i < n; i++) st[i] = t[i].steps, ns[i] = t[i].nsteps;
  int nf = cwm_world_nfeat(w);
  float *r1 = calloc((size_t)n * nf, sizeof(float)), *r2 = calloc((size_t)n * nf, sizeof(float));
  CHECK(cwm_world_record_rows(w, d, st, ns, NULL, n, 0, r1, &e) == 0);
  cwm_world *w2 = cwm_world_load(model, &e);
  CHECKF(w2 != NULL, "%s", e.msg);
  if (w2) {
    CHECK(cwm_world_record_rows(w2, d, st, ns, NULL, n, 0, r2, &e) == 0);
    CHECK(memcmp(r1, r2, sizeof(float) * (size_t)n * nf) == 0);
    double *p1 = calloc((size_t)n, sizeof(double)), *p2 = calloc((size_t)n, sizeof(double));
    CHECK(cwm_ranker_predict(cwm_world_ranker(w), r1, n, nf, p1, &e) == 0);
    CHECK(cwm_ranker_predict(cwm_world_ranker(w2), r2, n, nf, p2, &e) == 0);
    CHECK(memcmp(p1, p2, sizeof(double) * (size_t)n) == 0);
    /* the rollout moves the latent state: different schedules, different z_T */
    CHECK(memcmp(r1, r1 + nf, sizeof(float) * (size_t)cwm_world_width(w)) != 0);
    free(p1);
    free(p2);
  }
  free(r1);
  free(r2);
  free(st);
  free(ns);
  cwm_trajs_free(t, n);
  cwm_dag_free(d);
  cwm_workload_free(wl);
  corrupt_cases(model);
  version_case(model, '7');
  version_case(model, '2');
  version_case(model, '4');
  {
    /* action numbers: round(log2) puts a shape one off a power of two with it, floor(log2) not */
    cwm_step a = {0}, b = {0};
    a.kind = b.kind = CWM_S_SP;
    a.stage = b.stage = 2;
    a.n = b.n = 2;
    a.v[0] = b.v[0] = 32;
    a.v[1] = b.v[1] = 4;
    a.extent = 1024;
    b.extent = 1023;
    int ia[CWM_ACT_MAXF], ib[CWM_ACT_MAXF];
    int na = cwm_action_ids(&a, 1, ia), nb = cwm_action_ids(&b, 1, ib);
    CHECK(na == nb && memcmp(ia, ib, sizeof(int) * (size_t)na) == 0);
    na = cwm_action_ids(&a, 0, ia), nb = cwm_action_ids(&b, 0, ib);
    CHECK(na == nb && memcmp(ia, ib, sizeof(int) * (size_t)na) != 0);
    b.extent = 512; /* a factor of two apart still differs */
    na = cwm_action_ids(&a, 1, ia), nb = cwm_action_ids(&b, 1, ib);
    CHECK(memcmp(ia, ib, sizeof(int) * (size_t)na) != 0);
  }

  /* the offline evaluation runs on held-out workloads */
  cwm_eval_opts eo = {0};
  eo.records = log;
  eo.valid_fraction = vf;
  eo.seed = 1;
  cwm_buf rep;
  cwm_buf_init(&rep);
  int erc = cwm_world_eval_ranking(w, &eo, &rep, &e);
  CHECKF(erc == 0 || e.code == CWM_EIO, "eval: %s", e.msg);
  if (erc == 0) CHECK(strstr(rep.s, "| world |") && strstr(rep.s, "| ansor"));
  cwm_buf_free(&rep);
  ablation_modes(w, &to, SPECS[1]);
  paper_rows(w, SPECS[2]);
  pretrained_ansor(log, vf, SPECS[1]);

  /* --model world tunes a small workload */
  if (w2) tune_small(w2, "dense M=8 N=20 K=12 bias=1 act=relu", 24, 5, "the trained model");
  /* the shipped default model loads and tunes a small workload (what `cwm tune --model world`
   * does right after install) */
  const char *dp = cwm_world_default_path();
  CHECKF(dp != NULL, "no default model (models/default.cwm)");
  cwm_world *dw = dp ? cwm_world_load(dp, &e) : NULL;
  CHECKF(dw != NULL, "default model %s: %s", dp ? dp : "-", e.msg);
  target_hardware(w, dw, log, SPECS[3]);
  cwm_world_free(w);
  if (dw) {
    CHECK(cwm_world_ranker(dw) != NULL);
    tune_small(dw, "dense M=16 N=24 K=32 bias=1 act=gelu", 16, 3, "the default model");
  }
  {
    /* syntactic noise by scores: a workload against itself correlates perfectly; against the
     * shape one off, the same schedules fit and the correlation is a number in [-1, 1] */
    cwm_world *nw = dp ? cwm_world_load(dp, &e) : NULL;
    cwm_costmodel *cm = nw ? cwm_costmodel_world(nw, NULL, &e) : NULL;
    CHECKF(cm != NULL, "%s", e.msg);
    cwm_workload *a = cwm_workload_from_spec("matmul M=32 N=32 K=32", NULL, &e);
    cwm_workload *b = cwm_workload_from_spec("matmul M=31 N=31 K=31", NULL, &e);
    cwm_buf out;
    cwm_buf_init(&out);
    double tau = NAN;
    if (cm && a && b) {
      CHECKF(cwm_eval_noise(cm, a, a, 40, 1, NULL, &out, &tau, &e) == 0, "%s", e.msg);
      CHECKF(tau == 1.0, "self tau %g", tau);
      CHECKF(cwm_eval_noise(cm, a, b, 40, 1, NULL, &out, &tau, &e) == 0, "%s", e.msg);
      CHECKF(tau >= -1 && tau <= 1, "tau %g", tau);
      CHECKF(out.s && strstr(out.s, "| 8/8 |") && strstr(out.s, " of "), "%s", out.s ? out.s : "");
      /* the candidates of a log: its records of a (20), not those of another workload (1) */
      int ns = 0;
      cwm_dag *d = NULL;
      cwm_state **s = sample_states("matmul M=32 N=32 K=32", 20, &ns, &d);
      char lp[128];
      snprintf(lp, sizeof lp, "%s/noise.jsonl", dir);
      cwm_log *lg = cwm_log_open(lp, &e);
      CHECKF(lg && ns == 20, "%s (%d states)", e.msg, ns);
      for (int i = 0; lg && i <= ns; i++) {
        cwm_record r;
        cwm_record_init(&r);
        snprintf(r.key, sizeof r.key, "%s", i < ns ? cwm_dag_key(d) : "0123456789abcdef");
        r.steps = i < ns ? s[i]->steps : s[0]->steps;
        r.nsteps = i < ns ? s[i]->nsteps : s[0]->nsteps;
        r.ncosts = 1;
        r.costs[0] = 1e-5 * (i + 1);
        CHECKF(cwm_log_append(lg, &r, &e) == 0, "%s", e.msg);
      }
      cwm_log_close(lg);
      cwm_buf_free(&out);
      cwm_buf_init(&out);
      CHECKF(cwm_eval_noise(cm, a, a, 0, 1, lp, &out, &tau, &e) == 0, "%s", e.msg);
      CHECKF(tau == 1.0 && out.s && strstr(out.s, "| 20 of 20 |"), "self tau %g: %s", tau, out.s ? out.s : "");
      CHECKF(cwm_eval_noise(cm, a, b, 0, 1, lp, &out, &tau, &e) == 0 && tau >= -1 && tau <= 1, "%s", e.msg);
      /* a log with no record of the workload is an error that names the log */
      CHECK(cwm_eval_noise(cm, b, a, 0, 1, lp, &out, &tau, &e) != 0 && strstr(e.msg, "noise.jsonl"));
      for (int i = 0; i < ns; i++) cwm_state_free(s[i]);
      free(s);
      cwm_dag_free(d);
    }
    cwm_buf_free(&out);
    cwm_workload_free(a);
    cwm_workload_free(b);
    cwm_costmodel_free(cm);
  }
  if (dp) {
    /* the hand-off: once a workload has 128 measured records, the score blends Ansor's online
     * model with the world model's (ranks in [0, 1]); before, and with the hand-off off, it is
     * the world model's own */
    int n = 0;
    cwm_dag *d = NULL;
    cwm_state **s = sample_states("dense M=16 N=24 K=32 bias=1 act=gelu", 400, &n, &d);
    CHECKF(n >= 200, "%d sampled states", n);
    cwm_record *recs = calloc((size_t)(n ? n : 1), sizeof *recs);
    for (int i = 0; i < n; i++) {
      cwm_record_init(&recs[i]);
      memcpy(recs[i].key, cwm_dag_key(d), 17);
      recs[i].ncosts = 1;
      recs[i].costs[0] = 1e-5 * (1 + s[i]->nsteps % 7 + (i % 5)); /* any order to learn */
    }
    int q = n - 150; /* the states scored: 150, beside the measured ones */
    cwm_costmodel *cm[3];
    double *p[3];
    for (int k = 0; k < 3; k++) {
      cwm_world_cm_opts wo = {.handoff = k != 2};
      cwm_world *hw = cwm_world_load(dp, &e);
      cm[k] = hw ? cwm_costmodel_world(hw, &wo, &e) : NULL;
      CHECKF(cm[k] != NULL, "%s", e.msg);
      p[k] = calloc(150, sizeof(double));
      int feed = k == 1 ? 100 : q; /* model 1 stays under the threshold */
      if (cm[k] && n >= 200) {
        CHECKF(cwm_costmodel_update(cm[k], s, recs, feed, &e) == 0, "%s", e.msg);
        CHECKF(cwm_costmodel_predict(cm[k], s + q, 150, p[k], &e) == 0, "%s", e.msg);
      }
    }
    int in01 = 1, differ = 0, same_off = 1, same_under = 1;
    cwm_costmodel *fresh = NULL;
    {
      cwm_world_cm_opts wo = {.handoff = 0};
      cwm_world *fw = cwm_world_load(dp, &e);
      fresh = fw ? cwm_costmodel_world(fw, &wo, &e) : NULL;
    }
    double *p0 = calloc(150, sizeof(double));
    if (fresh && n >= 200) {
      /* the world model boosted on 100 records, without the hand-off: what model 1 should give */
      CHECKF(cwm_costmodel_update(fresh, s, recs, 100, &e) == 0, "%s", e.msg);
      CHECKF(cwm_costmodel_predict(fresh, s + q, 150, p0, &e) == 0, "%s", e.msg);
      for (int i = 0; i < 150; i++) {
        if (p[0][i] > CWM_SCORE_INVALID) in01 &= p[0][i] >= 0 && p[0][i] <= 1;
        differ |= p[0][i] != p[2][i];
        same_under &= p[1][i] == p0[i];
      }
      /* off: the world model alone, boosted on the same records, in its own scale */
      for (int i = 0; i < 150; i++) same_off &= !(p[2][i] >= 0 && p[2][i] <= 1 && p[2][i] == p[0][i]);
      CHECK(in01 && differ && same_under && same_off);
    }
    free(p0);
    cwm_costmodel_free(fresh);
    /* a family the online model never saw (here: the first scored state's) is ranked by the world
     * model alone; measured families blend: fed the same records without that family, the scores
     * of its candidates are the world model's own ranks, and some other candidate's are not */
    if (n >= 200) {
      uint64_t f0 = cwm_state_family(s[q]);
      cwm_state **fs = calloc((size_t)q, sizeof *fs);
      cwm_record *fr = calloc((size_t)q, sizeof *fr);
      int nf = 0;
      for (int i = 0; i < q; i++)
        if (cwm_state_family(s[i]) != f0) fs[nf] = s[i], fr[nf++] = recs[i];
      CHECKF(nf >= 128, "%d records outside the family", nf);
      double *pf[2];
      for (int k = 0; k < 2; k++) {
        cwm_world_cm_opts wo = {.handoff = !k};
        cwm_world *hw = cwm_world_load(dp, &e);
        cwm_costmodel *c = hw ? cwm_costmodel_world(hw, &wo, &e) : NULL;
        CHECKF(c != NULL, "%s", e.msg);
        pf[k] = calloc(150, sizeof(double));
        if (c) {
          CHECKF(cwm_costmodel_update(c, fs, fr, nf, &e) == 0, "%s", e.msg);
          CHECKF(cwm_costmodel_predict(c, s + q, 150, pf[k], &e) == 0, "%s", e.msg);
        }
        cwm_costmodel_free(c);
      }
      int unseen = 0, own = 1, blended = 0;
      for (int i = 0; i < 150; i++) {
        if (!(pf[1][i] > CWM_SCORE_INVALID)) continue;
        int below = 0, valid = 0, tie = 0; /* the world model's own rank of i among the 150 */
        for (int j = 0; j < 150; j++)
          if (pf[1][j] > CWM_SCORE_INVALID) valid++, below += pf[1][j] < pf[1][i], tie += j != i && pf[1][j] == pf[1][i];
        double r = valid > 1 ? (double)below / (valid - 1) : 1.0;
        if (cwm_state_family(s[q + i]) == f0 && !tie) unseen++, own &= fabs(pf[0][i] - r) < 1e-9;
        else blended |= fabs(pf[0][i] - r) > 1e-6;
      }
      CHECKF(unseen >= 1 && own && blended, "unseen %d own %d blended %d", unseen, own, blended);
      for (int k = 0; k < 2; k++) free(pf[k]);
      free(fs);
      free(fr);
    }
    for (int k = 0; k < 3; k++) {
      cwm_costmodel_free(cm[k]);
      free(p[k]);
    }
    for (int i = 0; i < n; i++) {
      cwm_record_free(&recs[i]);
      cwm_state_free(s[i]);
    }
    free(recs);
    free(s);
    if (d) cwm_dag_free(d);
  }
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
  return test_done();
}

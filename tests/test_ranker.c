/* test_ranker.c: the world model's ranker and what surrounds it: ranking metrics on hand-computed
 * groups (ties, k beyond the group, failures, all-equal groups), relevance grades, the action and
 * hardware features of step lists, XGBoost missing at run time (in child processes, before this
 * process opens the library), and LambdaMART on a synthetic ranking problem: held-out workloads
 * ranked clearly better than at random, boosting with new data, determinism, byte round trip. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cwm/costmodel.h"
#include "cwm/ranker.h"
#include "cwm/xgb.h"
#include "testlib.h"

static int near(double a, double b) { return fabs(a - b) < 1e-9 * (1 + fabs(b)); }

/* ------------------------------------------------------------------ metrics */

static void test_topk(void) {
  const double costs[] = {4, 1, 2, 8};
  const double good[] = {0.1, 0.9, 0.5, 0.0}, bad[] = {0.9, 0.1, 0.5, 1.0}, flat[] = {1, 1, 1, 1};
  CHECK(near(cwm_topk_score(costs, good, 4, 1), 1.0));
  CHECK(near(cwm_topk_score(costs, bad, 4, 1), 1.0 / 8));
  CHECK(near(cwm_topk_score(costs, bad, 4, 2), 1.0 / 4));
  CHECK(near(cwm_topk_score(costs, bad, 4, 3), 1.0 / 2));
  CHECK(near(cwm_topk_score(costs, bad, 4, 4), 1.0));
  CHECK(near(cwm_topk_score(costs, bad, 4, 10), 1.0)); /* k beyond the group: all of it */
  CHECK(near(cwm_topk_score(costs, bad, 4, 0), 1.0 / 8)); /* k clamped to 1 */
  /* ties count against the model: equal scores put the slowest first */
  CHECK(near(cwm_topk_score(costs, flat, 4, 1), 1.0 / 8));
  CHECK(near(cwm_topk_score(costs, flat, 4, 3), 1.0 / 2));
  const double tie2[] = {0.5, 0.9, 0.5, 0.9}; /* best (1) tied with the worst (8) at the top */
  CHECK(near(cwm_topk_score(costs, tie2, 4, 1), 1.0 / 8));
  CHECK(near(cwm_topk_score(costs, tie2, 4, 2), 1.0));
  /* NaN scores rank last */
  const double nan_s[] = {NAN, 0.0, 0.5, 0.2};
  CHECK(near(cwm_topk_score(costs, nan_s, 4, 1), 1.0 / 2));
  CHECK(near(cwm_topk_score(costs, nan_s, 4, 3), 1.0));
  /* failures: the slowest possible; a group without a valid candidate has no score */
  const double fc[] = {1e10, 2, INFINITY, -1, 0, NAN};
  const double fs[] = {6, 1, 5, 4, 3, 2};
  CHECK(cwm_topk_score(fc, fs, 6, 1) < 1e-9);
  CHECK(near(cwm_topk_score(fc, fs, 6, 5), 2.0 / 1e10));
  CHECK(near(cwm_topk_score(fc, fs, 6, 6), 1.0));
  const double allf[] = {1e10, INFINITY};
  CHECK(isnan(cwm_topk_score(allf, fs, 2, 1)));
  /* all equal costs: any order is perfect */
  const double eq[] = {3, 3, 3};
  CHECK(near(cwm_topk_score(eq, bad, 3, 1), 1.0));
  CHECK(isnan(cwm_topk_score(eq, bad, 0, 1)));
}

static void test_ndcg(void) {
  /* grades {0,1,2} ranked in input order: DCG = 1/log2(3) + 3/2, IDCG = 3 + 1/log2(3) */
  const float g[] = {0, 1, 2};
  const double s[] = {3, 2, 1};
  double dcg = 1 / log2(3.0) + 1.5, idcg = 3 + 1 / log2(3.0);
  CHECK(near(cwm_ndcg_at_k(g, s, 3, 3), dcg / idcg));
  CHECK(near(cwm_ndcg_at_k(g, s, 3, 10), dcg / idcg));
  CHECK(near(cwm_ndcg_at_k(g, s, 3, 1), 0.0));
  CHECK(near(cwm_ndcg_at_k(g, s, 3, 2), (1 / log2(3.0)) / (3 + 1 / log2(3.0))));
  const double perfect[] = {0, 1, 2};
  CHECK(near(cwm_ndcg_at_k(g, perfect, 3, 1), 1.0));
  CHECK(near(cwm_ndcg_at_k(g, perfect, 3, 3), 1.0));
  /* ties against the model: grades {2,0} under equal scores come out as 0 then 2 */
  const float g2[] = {2, 0};
  const double t2[] = {1, 1};
  CHECK(near(cwm_ndcg_at_k(g2, t2, 2, 2), (3 / log2(3.0)) / 3));
  /* all grades equal and positive: every order is ideal; all zero: undefined */
  const float same[] = {2, 2, 2}, zero[] = {0, 0, 0};
  CHECK(near(cwm_ndcg_at_k(same, s, 3, 2), 1.0));
  CHECK(isnan(cwm_ndcg_at_k(zero, s, 3, 2)));
}

static void test_tau(void) {
  const double a[] = {1, 2, 3, 4}, rev[] = {4, 3, 2, 1};
  CHECK(near(cwm_kendall_tau_b(a, a, 4), 1.0));
  CHECK(near(cwm_kendall_tau_b(a, rev, 4), -1.0));
  const double x3[] = {1, 2, 3}, y3[] = {1, 3, 2};
  CHECK(near(cwm_kendall_tau_b(x3, y3, 3), 1.0 / 3));
  /* one tie in x: 5 concordant of 6 pairs, tau-b = 5 / sqrt(5 * 6) (scipy: 0.9128709) */
  const double xt[] = {1, 2, 2, 3};
  CHECK(near(cwm_kendall_tau_b(xt, a, 4), 5 / sqrt(30.0)));
  CHECK(fabs(cwm_kendall_tau_b(xt, a, 4) - 0.9128709) < 1e-6);
  /* ties on both sides: x {1,1,2,2}, y {1,2,1,2}: no concordant or discordant pairs left */
  const double xb[] = {1, 1, 2, 2}, yb[] = {1, 2, 1, 2};
  CHECK(near(cwm_kendall_tau_b(xb, yb, 4), 0.0));
  const double flat[] = {5, 5, 5, 5};
  CHECK(isnan(cwm_kendall_tau_b(flat, a, 4)));
  CHECK(isnan(cwm_kendall_tau_b(a, a, 1)));
  /* against throughput: lower cost = higher throughput; failures are throughput 0 */
  const double costs[] = {1, 2, 4, 1e10}, sc[] = {3, 2, 1, 0};
  CHECK(near(cwm_rank_tau(costs, sc, 4), 1.0));
  const double sc2[] = {0, 1, 2, 3};
  CHECK(near(cwm_rank_tau(costs, sc2, 4), -1.0));
}

static void test_grades(void) {
  const double c[] = {1, 2, 1e10, 0, INFINITY, 1.5, 4, NAN};
  float g[8];
  cwm_relevance_grades(c, 8, 5, g);
  const float want[] = {4, 2, 0, 0, 0, 3, 1, 0};
  for (int i = 0; i < 8; i++) CHECKF(g[i] == want[i], "grade %d: %g, want %g", i, g[i], want[i]);
  /* relative, so the scale of the latencies does not matter */
  double c2[8];
  float h[8];
  for (int i = 0; i < 8; i++) c2[i] = c[i] * 1e-3;
  cwm_relevance_grades(c2, 8, 5, h);
  CHECK(!memcmp(g, h, sizeof g));
  cwm_relevance_grades(c, 8, 100, g); /* clamped to 31 grades */
  CHECK(g[0] == 30 && g[1] == 15);
  cwm_relevance_grades(c, 8, 1, g); /* at least 2 */
  CHECK(g[0] == 1 && g[2] == 0);
  const double fails[] = {1e10, -1};
  cwm_relevance_grades(fails, 2, 16, g);
  CHECK(g[0] == 0 && g[1] == 0);
}

static void test_eval(void) {
  /* group 0: {4,1,2,8} with perfect scores; group 1: {1,2} reversed; group 2: all failed */
  const double costs[] = {4, 1, 2, 8, 1, 2, 1e10, 1e10};
  const double scores[] = {2, 4, 3, 1, 0, 1, 5, 6};
  const int sizes[] = {4, 2, 2};
  cwm_rank_metrics m;
  CHECK(cwm_rank_metrics_eval(costs, scores, sizes, 3, NULL, 16, &m) == 0);
  CHECK(m.ngroups == 3 && m.nvalid == 2);
  CHECK(near(m.top1, (1.0 + 0.5) / 2));
  CHECK(near(m.top5, 1.0));
  CHECK(near(m.tenset_top1, (1.0 + 1.0) / (1.0 + 2.0)));
  CHECK(near(m.tau, (1.0 + -1.0) / 2));
  CHECK(near(m.ndcg10, (1.0 + cwm_ndcg_at_k((const float[]){15, 8}, (const double[]){0, 1}, 2, 10)) / 2));
  const double w[] = {3, 1, 1};
  CHECK(cwm_rank_metrics_eval(costs, scores, sizes, 3, w, 16, &m) == 0);
  CHECK(near(m.tenset_top1, (3 * 1.0 + 1.0) / (3 * 1.0 + 2.0)));
  const int bad[] = {4, -1};
  CHECK(cwm_rank_metrics_eval(costs, scores, bad, 2, NULL, 16, &m) == -1);
}

/* ------------------------------------------------------------------ action features */

static cwm_state *replay(const cwm_dag *d, const char *text, cwm_step **steps, int *n) {
  cwm_err e = {0};
  if (cwm_steps_parse(text, steps, n, &e)) {
    fprintf(stderr, "parse %s: %s\n", text, e.msg);
    return NULL;
  }
  cwm_state *s = NULL;
  if (cwm_state_replay(d, *steps, *n, &s, NULL, &e)) fprintf(stderr, "replay %s: %s\n", text, e.msg);
  return s;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

static void test_hwinfo(void) {
  char dir[] = "/tmp/cwm_test_cacheXXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  const char *rows[][3] = {{"1", "Data", "48K"}, {"1", "Instruction", "64K"}, {"2", "Unified", "2048K"},
                           {"3", "Unified", "32M"}};
  char p[256];
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s/index%d", dir, i);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/index%d/level", dir, i);
    write_file(p, rows[i][0]);
    snprintf(p, sizeof p, "%s/index%d/type", dir, i);
    write_file(p, rows[i][1]);
    snprintf(p, sizeof p, "%s/index%d/size", dir, i);
    write_file(p, rows[i][2]);
  }
  cwm_hwinfo hw;
  cwm_hwinfo_read(&hw, dir);
  CHECKF(hw.l1_kib == 48 && hw.l2_kib == 2048 && hw.l3_kib == 32768, "%g %g %g", hw.l1_kib, hw.l2_kib, hw.l3_kib);
  CHECK(hw.cores >= 1 && (hw.vector_floats == 4 || hw.vector_floats == 8 || hw.vector_floats == 16));
  for (int i = 0; i < 4; i++) {
    const char *f[] = {"level", "type", "size"};
    for (int k = 0; k < 3; k++) {
      snprintf(p, sizeof p, "%s/index%d/%s", dir, i, f[k]);
      unlink(p);
    }
    snprintf(p, sizeof p, "%s/index%d", dir, i);
    rmdir(p);
  }
  rmdir(dir);
  /* nothing to read: sysconf or the defaults, never 0 */
  cwm_hwinfo_read(&hw, "/nonexistent/cache");
  CHECK(hw.l1_kib > 0 && hw.l2_kib > 0 && hw.l3_kib > 0);
  const cwm_hwinfo *h = cwm_hwinfo_host();
  CHECK(h->cores >= 1 && h->l1_kib > 0 && h->l2_kib > 0 && h->l3_kib > 0);
  fprintf(stderr, "host: %d cores, %d floats per vector, L1 %g KiB, L2 %g KiB, L3 %g KiB\n", h->cores,
          h->vector_floats, h->l1_kib, h->l2_kib, h->l3_kib);
}

static void test_action_features(void) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec("matmul M=64 N=64 K=64", NULL, &e);
  CHECKF(w != NULL, "%s", e.msg);
  if (!w) return;
  cwm_dag *d = cwm_dag_new(w, &e);
  cwm_workload_free(w);
  CHECKF(d != NULL, "%s", e.msg);
  if (!d) return;
  const cwm_hwinfo hw = {.cores = 3, .vector_floats = 8, .l1_kib = 32, .l2_kib = 512, .l3_kib = 4096};
  float row[CWM_ACT_NFEAT];

  /* vectorized inner j.1 (16), parallel outer i (64) */
  cwm_step *st = NULL;
  int n = 0;
  cwm_state *s = replay(d, "[[\"SP\",2,1,64,[16],1],[\"RE\",2,[0,1,3,2]],[\"AN\",2,3,2],[\"AN\",2,0,3]]", &st, &n);
  CHECK(s != NULL);
  if (s) {
    cwm_action_features(st, n, s, &hw, row);
    CHECK(row[CWM_ACT_KIND + CWM_S_SP] == 1 && row[CWM_ACT_KIND + CWM_S_RE] == 1 && row[CWM_ACT_KIND + CWM_S_AN] == 2);
    CHECK(row[CWM_ACT_KIND + CWM_S_CA] == 0 && row[CWM_ACT_LEN] == 4);
    CHECKF(row[CWM_ACT_PAR_EXTENT] == 64 && row[CWM_ACT_PAR_LOOPS] == 1, "par %g", row[CWM_ACT_PAR_EXTENT]);
    CHECKF(near(row[CWM_ACT_PAR_EFF], (float)(64.0 / 66.0)), "eff %g", row[CWM_ACT_PAR_EFF]); /* 22 rounds of 3 */
    CHECKF(row[CWM_ACT_VEC_LEN] == 16 && row[CWM_ACT_VEC_LOOPS] == 1 && row[CWM_ACT_VEC_EFF] == 1, "vec %g",
           row[CWM_ACT_VEC_LEN]);
    CHECK(row[CWM_ACT_UNROLL] == 0 && row[CWM_ACT_COMPUTE_AT] == 0 && row[CWM_ACT_INLINED] == 0);
    CHECK(row[CWM_ACT_STAGES] == 1);
    /* no recomputation, and the innermost loop is spatial */
    CHECKF(row[CWM_ACT_REDUNDANCY] == 0 && row[CWM_ACT_SCALAR_RED] == 0, "work %g %g", row[CWM_ACT_REDUNDANCY],
           row[CWM_ACT_SCALAR_RED]);
    CHECK(row[CWM_ACT_CORES] == 3 && row[CWM_ACT_VEC_WIDTH] == 8 && row[CWM_ACT_L1] == 32 && row[CWM_ACT_L2] == 512 &&
          row[CWM_ACT_L3] == 4096);
    /* register tile: j.1 (16 accumulators) inside k (64); per k: A[i, k] one element, B[k, j] 16 */
    CHECKF(near(row[CWM_ACT_TILE_ACC], 4) && near(row[CWM_ACT_TILE_REUSE], 16.0f / 17.0f) &&
               near(row[CWM_ACT_RED_INNER], 6),
           "tile %g %g %g", row[CWM_ACT_TILE_ACC], row[CWM_ACT_TILE_REUSE], row[CWM_ACT_RED_INNER]);
    /* without the state: the state's columns are missing, the rest from the steps */
    float r2[CWM_ACT_NFEAT];
    cwm_action_features(st, n, NULL, &hw, r2);
    CHECK(isnan(r2[CWM_ACT_PAR_EXTENT]) && isnan(r2[CWM_ACT_VEC_LEN]) && isnan(r2[CWM_ACT_STAGES]));
    CHECK(r2[CWM_ACT_PAR_LOOPS] == 1 && r2[CWM_ACT_VEC_LOOPS] == 1 && r2[CWM_ACT_LEN] == 4);
    CHECK(!memcmp(r2, row, sizeof(float) * CWM_ACT_PAR_EXTENT));
    cwm_state_free(s);
  }
  free(st);

  /* cache write computed at the consumer's loop, fused parallel loop, auto-unroll 16 */
  s = replay(d,
             "[[\"CHW\",2,\"local\"],[\"SP\",2,0,64,[4,8],1],[\"SP\",2,3,64,[16],1],"
             "[\"SP\",2,5,64,[8],1],[\"RE\",2,[0,3,1,5,2,6,4]],[\"FSP\",3,0,1,1],"
             "[\"FSP\",3,2,2,1],[\"RE\",3,[0,2,1,3]],[\"CA\",2,3,1],[\"FU\",3,[0,1]],"
             "[\"AN\",3,0,3],[\"PR\",2,0,\"auto_unroll_max_step$16\"],[\"AN\",2,6,2]]",
             &st, &n);
  CHECK(s != NULL);
  if (s) {
    cwm_action_features(st, n, s, &hw, row);
    CHECK(row[CWM_ACT_KIND + CWM_S_CHW] == 1 && row[CWM_ACT_KIND + CWM_S_FSP] == 2 && row[CWM_ACT_LEN] == 13);
    CHECKF(row[CWM_ACT_UNROLL] == 16 && row[CWM_ACT_COMPUTE_AT] == 1 && row[CWM_ACT_STAGES] == 2, "%g %g %g",
           row[CWM_ACT_UNROLL], row[CWM_ACT_COMPUTE_AT], row[CWM_ACT_STAGES]);
    /* the fused outer loop i.0 x j.0: 64/(4*8)=2 times 64/16=4 */
    CHECKF(row[CWM_ACT_PAR_EXTENT] == 8 && row[CWM_ACT_PAR_LOOPS] == 1, "par %g", row[CWM_ACT_PAR_EXTENT]);
    CHECKF(row[CWM_ACT_VEC_LOOPS] == 1 && row[CWM_ACT_VEC_LEN] > 0, "vec %g", row[CWM_ACT_VEC_LEN]);
    /* a cache write at the consumer's tile computes every element once */
    CHECKF(fabsf(row[CWM_ACT_REDUNDANCY]) < 1e-3f, "redundancy %g", row[CWM_ACT_REDUNDANCY]);
    /* the local stage's loops i.0 j.0 i.1 k.0 i.2 k.1 j.1: 16 accumulators inside k.1 (8) */
    CHECKF(near(row[CWM_ACT_TILE_ACC], 4) && near(row[CWM_ACT_TILE_REUSE], 16.0f / 17.0f) &&
               near(row[CWM_ACT_RED_INNER], 3),
           "tile %g %g %g", row[CWM_ACT_TILE_ACC], row[CWM_ACT_TILE_REUSE], row[CWM_ACT_RED_INNER]);
    for (int i = 0; i < CWM_ACT_NFEAT; i++) CHECK(isfinite(row[i]));
    cwm_state_free(s);
  }
  free(st);
  cwm_dag_free(d);

  /* layer norm: the two row reductions are serial chains in the initial state (2 of 3 equal
   * parts of the work); var computed inside the output's column tile (12 of them per row)
   * recomputes it 12 times */
  w = cwm_workload_from_spec("layernorm M=16 N=96", NULL, &e);
  d = w ? cwm_dag_new(w, &e) : NULL;
  cwm_workload_free(w);
  CHECKF(d != NULL, "%s", e.msg);
  if (!d) return;
  s = replay(d, "[]", &st, &n);
  CHECK(s != NULL);
  if (s) {
    cwm_action_features(st, n, s, &hw, row);
    CHECKF(row[CWM_ACT_REDUNDANCY] == 0 && fabsf(row[CWM_ACT_SCALAR_RED] - 2.0f / 3.0f) < 1e-5f, "layernorm %g %g",
           row[CWM_ACT_REDUNDANCY], row[CWM_ACT_SCALAR_RED]);
    cwm_state_free(s);
  }
  free(st);
  s = replay(d, "[[\"SP\",5,1,96,[8],1],[\"CA\",4,5,1]]", &st, &n);
  CHECK(s != NULL);
  if (s) {
    cwm_action_features(st, n, s, &hw, row);
    /* var: 16 x 96 x 12 executions instead of 16 x 96; total (12 + 2) / 3 of the minimum */
    CHECKF(fabsf(row[CWM_ACT_REDUNDANCY] - (float)log2(14.0 / 3.0)) < 1e-4f, "redundancy %g", row[CWM_ACT_REDUNDANCY]);
    cwm_state_free(s);
  }
  free(st);
  /* no steps at all */
  cwm_action_features(NULL, 0, NULL, &hw, row);
  CHECK(row[CWM_ACT_LEN] == 0 && row[CWM_ACT_CORES] == 3);
  cwm_dag_free(d);
}

/* ------------------------------------------------------------------ XGBoost missing */

/* In a child, so this process has not opened XGBoost yet (the library is opened once). */
static int child_without_xgboost(const char *lib) {
  pid_t pid = fork();
  if (pid == 0) {
    cwm_xgb_set_library(lib);
    int bad = 0;
    cwm_err e = {0};
    if (cwm_xgb(&e) != NULL || e.code != CWM_EDEP || !strstr(e.msg, lib) || strchr(e.msg, '\n')) bad |= 1;
    fprintf(stderr, "  (child, library %s) %s\n", lib, e.msg);
    cwm_err e2 = {0};
    if (cwm_ranker_new(NULL, &e2) != NULL || e2.code != CWM_EDEP || strcmp(e2.msg, e.msg)) bad |= 2;
    cwm_err e3 = {0};
    if (cwm_costmodel_ansor(1, NULL, &e3) != NULL || e3.code != CWM_EDEP) bad |= 4;
    cwm_err e4 = {0};
    if (cwm_ranker_load("CWMRANK1", 8, &e4) != NULL || e4.code == CWM_OK) bad |= 8;
    _exit(bad);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void test_missing_xgboost(void) {
  int rc = child_without_xgboost("/nonexistent/libxgboost.so.0");
  CHECKF(rc == 0, "child without XGBoost: %d", rc);
  /* a library that is there but is not XGBoost */
  rc = child_without_xgboost("libm.so.6");
  CHECKF(rc == 0, "child with libm as XGBoost: %d", rc);
}

/* ------------------------------------------------------------------ the ranker */

#define NF 8
#define GROUPS 30
#define PER 60

typedef struct {
  float X[GROUPS * PER * NF];
  double cost[GROUPS * PER];
  float grade[GROUPS * PER];
  int sizes[GROUPS];
} problem;

static double gauss(cwm_rng *r) {
  double u = cwm_rng_unit(r) + 1e-12, v = cwm_rng_unit(r);
  return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* Features -> latent throughput with noise; each group (workload) has its own scale, so absolute
 * throughput is not comparable across groups; about 5% of candidates fail. */
static void make_problem(problem *p, uint64_t seed) {
  cwm_rng r;
  cwm_rng_seed(&r, seed);
  for (int g = 0; g < GROUPS; g++) {
    p->sizes[g] = PER;
    double scale = exp(4 * cwm_rng_unit(&r));
    for (int i = 0; i < PER; i++) {
      int k = g * PER + i;
      float *x = p->X + (size_t)k * NF;
      for (int f = 0; f < NF; f++) x[f] = (float)cwm_rng_unit(&r);
      x[NF - 1] = (float)g / GROUPS; /* a workload feature: constant within the group */
      double lt = 1.5 * x[0] - 1.0 * x[1] + 1.2 * x[2] * x[3] + 0.5 * sin(6 * x[4]) + 0.1 * gauss(&r);
      p->cost[k] = cwm_rng_unit(&r) < 0.05 ? 1e10 : 1.0 / (scale * exp(lt));
    }
    cwm_relevance_grades(p->cost + g * PER, PER, CWM_RANKER_GRADES, p->grade + g * PER);
  }
}

static void metrics_of(const problem *p, int g0, int ng, const double *scores, cwm_rank_metrics *m) {
  cwm_rank_metrics_eval(p->cost + g0 * PER, scores, p->sizes + g0, ng, NULL, CWM_RANKER_GRADES, m);
}

static void test_ranker(void) {
  static problem P;
  make_problem(&P, 7);
  const int TRAIN = 20, TEST = 10; /* groups 0..19 train, 20..29 held out */
  const float *Xte = P.X + (size_t)TRAIN * PER * NF;
  int nte = TEST * PER;
  cwm_err e = {0};
  cwm_ranker_params prm;
  cwm_ranker_params_default(&prm);
  prm.max_depth = 4;
  prm.rounds = 60;
  prm.seed = 3;
  cwm_ranker *r = cwm_ranker_new(&prm, &e);
  CHECKF(r != NULL, "%s", e.msg);
  if (!r) return;
  double *s = calloc((size_t)nte, sizeof *s), *s2 = calloc((size_t)nte, sizeof *s2);

  /* misuse */
  CHECK(cwm_ranker_predict(r, Xte, nte, NF, s, &e) == CWM_EMODEL);
  CHECK(cwm_ranker_rounds(r) == 0);
  int bad_sizes[] = {PER, PER - 1};
  CHECK(cwm_ranker_train(r, P.X, 2 * PER, NF, P.grade, bad_sizes, 2, 5, &e) != 0);
  float bad_labels[4] = {0, 1.5f, 2, 3};
  int four[] = {4};
  CHECK(cwm_ranker_train(r, P.X, 4, NF, bad_labels, four, 1, 5, &e) != 0);
  bad_labels[1] = 40;
  CHECK(cwm_ranker_train(r, P.X, 4, NF, bad_labels, four, 1, 5, &e) != 0);
  CHECK(cwm_ranker_rounds(r) == 0);

  double t0 = cwm_now();
  int rc = cwm_ranker_train(r, P.X, TRAIN * PER, NF, P.grade, P.sizes, TRAIN, 0, &e);
  CHECKF(rc == 0, "train: %s", e.msg);
  CHECK(cwm_ranker_rounds(r) == 60 && cwm_ranker_ncols(r) == NF);
  CHECKF(cwm_ranker_predict(r, Xte, nte, NF, s, &e) == 0, "%s", e.msg);
  double t_train = cwm_now() - t0;
  CHECK(cwm_ranker_predict(r, Xte, nte, NF - 1, s2, &e) == CWM_EMODEL);

  cwm_rank_metrics m, mr;
  metrics_of(&P, TRAIN, TEST, s, &m);
  /* the random scorer, averaged over draws */
  double rt1 = 0, rn10 = 0;
  cwm_rng rng;
  cwm_rng_seed(&rng, 99);
  for (int rep = 0; rep < 50; rep++) {
    for (int i = 0; i < nte; i++) s2[i] = cwm_rng_unit(&rng);
    metrics_of(&P, TRAIN, TEST, s2, &mr);
    rt1 += mr.top1 / 50;
    rn10 += mr.ndcg10 / 50;
  }
  fprintf(stderr, "ranker (%.2f s): held-out top1 %.3f top5 %.3f ndcg@10 %.3f tau %.3f; random top1 %.3f ndcg@10 %.3f\n",
          t_train, m.top1, m.top5, m.ndcg10, m.tau, rt1, rn10);
  CHECK(m.nvalid == TEST);
  CHECKF(m.top1 > rt1 + 0.2 && m.top1 > 0.7, "top1 %g vs random %g", m.top1, rt1);
  CHECKF(m.ndcg10 > rn10 + 0.2, "ndcg@10 %g vs random %g", m.ndcg10, rn10);
  CHECKF(m.tau > 0.4, "tau %g", m.tau);

  /* the same seed and data: the same trees */
  cwm_ranker *r2 = cwm_ranker_new(&prm, &e);
  CHECK(r2 && cwm_ranker_train(r2, P.X, TRAIN * PER, NF, P.grade, P.sizes, TRAIN, 0, &e) == 0);
  if (r2) {
    CHECK(cwm_ranker_predict(r2, Xte, nte, NF, s2, &e) == 0);
    CHECK(!memcmp(s, s2, sizeof *s * (size_t)nte));
  }

  /* save, load: identical predictions; the bytes of the loaded ranker are the same */
  void *buf = NULL, *buf2 = NULL;
  size_t len = 0, len2 = 0;
  CHECKF(cwm_ranker_save(r, &buf, &len, &e) == 0, "%s", e.msg);
  cwm_ranker *l = buf ? cwm_ranker_load(buf, len, &e) : NULL;
  CHECKF(l != NULL, "load: %s", e.msg);
  if (l) {
    CHECK(cwm_ranker_rounds(l) == 60 && cwm_ranker_ncols(l) == NF);
    CHECK(cwm_ranker_predict(l, Xte, nte, NF, s2, &e) == 0);
    CHECK(!memcmp(s, s2, sizeof *s * (size_t)nte));
    CHECK(cwm_ranker_save(l, &buf2, &len2, &e) == 0 && len2 == len && !memcmp(buf, buf2, len));
    free(buf2);
  }
  /* damaged bytes: every truncation, a flipped byte, foreign bytes */
  if (buf) {
    int all_refused = 1;
    for (size_t cut = 0; cut < len; cut += (cut < 128 ? 1 : len / 64 + 1)) {
      cwm_err le = {0};
      cwm_ranker *t = cwm_ranker_load(buf, cut, &le);
      if (t || le.code != CWM_EMODEL) all_refused = 0;
      cwm_ranker_free(t);
    }
    CHECK(all_refused);
    unsigned char *c = malloc(len);
    memcpy(c, buf, len);
    c[len / 2] ^= 0x40;
    cwm_err le = {0};
    CHECK(cwm_ranker_load(c, len, &le) == NULL && le.code == CWM_EMODEL && strstr(le.msg, "checksum"));
    memcpy(c, "CWMANSOR", 8);
    CHECK(cwm_ranker_load(c, len, &le) == NULL && le.code == CWM_EMODEL && strstr(le.msg, "magic"));
    /* altered on purpose (the checksum recomputed): refused or loaded, never a crash. In this
     * process: a forked child would hang in XGBoost's OpenMP pool, which does not survive fork. */
    int bad = 0, refused = 0, tries = 0;
    for (size_t pos = 8; pos < len - 8; pos += (len - 16) / 100 + 1)
      for (int v = 0; v < 3; v++) {
        memcpy(c, buf, len);
        c[pos] = v == 0 ? (unsigned char)(c[pos] ^ 0x01) : v == 1 ? 0xff : 0x00;
        uint64_t h = cwm_hash64(c, len - 8);
        for (int i = 0; i < 8; i++) c[len - 8 + i] = (unsigned char)(h >> (8 * i));
        cwm_err fe = {0};
        cwm_ranker *t = cwm_ranker_load(c, len, &fe);
        tries++;
        if (!t && fe.code != CWM_EMODEL) bad++;
        refused += !t;
        if (t) {
          double one;
          cwm_ranker_predict(t, Xte, 1, NF, &one, &fe);
        }
        cwm_ranker_free(t);
      }
    CHECKF(bad == 0, "%d altered copies failed with another code than CWM_EMODEL", bad);
    fprintf(stderr, "altered ranker bytes: %d of %d refused, none crashed\n", refused, tries);
    free(c);
  }
  /* an untrained ranker round-trips too */
  cwm_ranker *u = cwm_ranker_new(&prm, &e);
  void *ub = NULL;
  size_t ul = 0;
  if (u && cwm_ranker_save(u, &ub, &ul, &e) == 0) {
    cwm_ranker *ul2 = cwm_ranker_load(ub, ul, &e);
    CHECK(ul2 && cwm_ranker_rounds(ul2) == 0);
    cwm_ranker_free(ul2);
  }
  free(ub);
  cwm_ranker_free(u);

  /* boosting with the held-out groups' data changes the predictions and keeps the ranking good;
   * boosting the loaded copy does exactly the same */
  double *s3 = calloc((size_t)nte, sizeof *s3);
  const float *Xnew = P.X + (size_t)10 * PER * NF;
  rc = cwm_ranker_boost(r, Xnew, 10 * PER, NF, P.grade + 10 * PER, P.sizes, 10, 20, &e);
  CHECKF(rc == 0, "boost: %s", e.msg);
  CHECK(cwm_ranker_rounds(r) == 80);
  CHECK(cwm_ranker_predict(r, Xte, nte, NF, s3, &e) == 0);
  int changed = 0;
  for (int i = 0; i < nte; i++) changed += s3[i] != s[i];
  CHECKF(changed > nte / 2, "%d of %d predictions changed", changed, nte);
  metrics_of(&P, TRAIN, TEST, s3, &mr);
  CHECKF(mr.ndcg10 > rn10 + 0.2 && mr.top1 > rt1 + 0.2, "after boosting: ndcg@10 %g top1 %g", mr.ndcg10, mr.top1);
  if (l) {
    CHECK(cwm_ranker_boost(l, Xnew, 10 * PER, NF, P.grade + 10 * PER, P.sizes, 10, 20, &e) == 0);
    CHECK(cwm_ranker_predict(l, Xte, nte, NF, s2, &e) == 0);
    CHECK(!memcmp(s3, s2, sizeof *s * (size_t)nte));
    /* the parameters came along: the default boost is params.rounds / 4 trees */
    CHECK(cwm_ranker_boost(l, Xnew, 10 * PER, NF, P.grade + 10 * PER, P.sizes, 10, 0, &e) == 0 &&
          cwm_ranker_rounds(l) == 95);
  }
  /* boosting on the held-out groups themselves: the ranker must learn them */
  rc = cwm_ranker_boost(r, Xte, nte, NF, P.grade + TRAIN * PER, P.sizes, TEST, 40, &e);
  CHECKF(rc == 0, "%s", e.msg);
  CHECK(cwm_ranker_predict(r, Xte, nte, NF, s3, &e) == 0);
  cwm_rank_metrics mb;
  metrics_of(&P, TRAIN, TEST, s3, &mb);
  CHECKF(mb.ndcg10 >= m.ndcg10, "seen groups: ndcg@10 %g, before %g", mb.ndcg10, m.ndcg10);
  CHECK(cwm_ranker_boost(r, Xte, nte, NF - 1, P.grade, P.sizes, TEST, 1, &e) == CWM_EMODEL);
  /* an untrained ranker's boost trains */
  cwm_ranker *b = cwm_ranker_new(&prm, &e);
  CHECK(b && cwm_ranker_boost(b, P.X, TRAIN * PER, NF, P.grade, P.sizes, TRAIN, 5, &e) == 0 &&
        cwm_ranker_rounds(b) == 5);
  cwm_ranker_free(b);

  free(buf);
  free(s);
  free(s2);
  free(s3);
  cwm_ranker_free(l);
  cwm_ranker_free(r2);
  cwm_ranker_free(r);
}

int main(void) {
  test_missing_xgboost(); /* first: this process must not have opened XGBoost yet */
  test_topk();
  test_ndcg();
  test_tau();
  test_grades();
  test_eval();
  test_hwinfo();
  test_action_features();
  test_ranker();
  return test_done();
}

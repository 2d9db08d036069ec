/* test_sketch.c: the search space. Sketch counts against Ansor's own examples, the shape of the
 * cache-write sketch, determinism for a seed, and the property test: sampled and mutated
 * candidates of every op kind replay, compile and compute what the reference computes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/search.h"
#include "cwm/sketch.h"
#include "testlib.h"

static cwm_dag *dag_of(const char *spec) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
  if (!w) {
    fprintf(stderr, "%s: %s\n", spec, e.msg);
    exit(1);
  }
  cwm_dag *d = cwm_dag_new(w, &e);
  cwm_workload_free(w);
  return d;
}

static char *steps_text(const cwm_state *s) {
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_steps_print(s->steps, s->nsteps, &b);
  return b.s ? cwm_buf_take(&b) : cwm_xstrdup("[]");
}

static int sketch_count(const char *spec) {
  cwm_dag *d = dag_of(spec);
  cwm_state **sk;
  int n;
  cwm_err e = {0};
  int rc = cwm_sketches(d, &sk, &n, &e);
  CHECKF(rc == 0, "%s: %s", spec, e.msg);
  for (int i = 0; rc == 0 && i < n; i++) {
    /* a sketch replays from its own steps */
    cwm_state *again = NULL;
    CHECKF(cwm_state_replay(d, sk[i]->steps, sk[i]->nsteps, &again, NULL, &e) == 0, "%s: %s", spec, e.msg);
    cwm_state_free(again);
  }
  if (rc == 0) cwm_states_free(sk, n);
  cwm_dag_free(d);
  return rc ? -1 : n;
}

/* Whether a sketch of spec has a step list that begins with prefix ("[]" matches only the
 * empty list: any other begins "[["). */
static int has_sketch(const char *spec, const char *prefix) {
  cwm_dag *d = dag_of(spec);
  cwm_state **sk;
  int n, found = 0;
  cwm_err e = {0};
  if (cwm_sketches(d, &sk, &n, &e) == 0) {
    for (int i = 0; i < n; i++) {
      char *t = steps_text(sk[i]);
      found |= !strncmp(t, prefix, strlen(prefix));
      free(t);
    }
    cwm_states_free(sk, n);
  }
  cwm_dag_free(d);
  return found;
}

static void test_sketch_counts(void) {
  /* Ansor's test_cpu_matmul_sketch: plain tiling, and cache write fused at level 1 or 2 */
  CHECKF(sketch_count("matmul M=512 N=512 K=512") == 3, "got %d", sketch_count("matmul M=512 N=512 K=512"));
  /* ... plus the two rfactor variants when the space is small and the reduction long */
  CHECKF(sketch_count("matmul M=8 N=8 K=512") == 5, "got %d", sketch_count("matmul M=8 N=8 K=512"));

  /* The cache-write sketch at level 2 has the step shape of Ansor's example record. */
  cwm_dag *d = dag_of("matmul M=512 N=512 K=512");
  cwm_state **sk;
  int n;
  cwm_err e = {0};
  CHECK(cwm_sketches(d, &sk, &n, &e) == 0);
  const char *want =
      "[[\"CHW\",2,\"local\"],[\"SP\",2,0,512,[null,null,null],1],[\"SP\",2,4,512,[null,null,null],1],"
      "[\"SP\",2,8,512,[null],1],[\"RE\",2,[0,4,1,5,8,2,6,9,3,7]],[\"FSP\",3,0,1,2],"
      "[\"FSP\",3,3,2,2],[\"RE\",3,[0,3,1,4,2,5]],[\"CA\",2,3,3]]";
  int found = 0;
  for (int i = 0; i < n; i++) {
    CHECK(!cwm_state_is_complete(sk[i]));
    char *t = steps_text(sk[i]);
    found |= !strcmp(t, want);
    free(t);
  }
  CHECKF(found, "no sketch has the steps %s", want);
  cwm_states_free(sk, n);
  cwm_dag_free(d);

  /* A layer norm's output reads two broadcast pairs (mean and variance by row, gamma and beta
   * by column) and reduces nothing: it is tiled as Ansor tiles it, and also kept whole (the
   * sketch with no steps at all, every stage as written); a product is always tiled. */
  CHECKF(has_sketch("layernorm M=8 N=40", "[]"), "layer norm: no sketch keeps the output untiled");
  CHECKF(has_sketch("layernorm M=8 N=40", "[[\"CHW\",5,\"local\"]"), "layer norm: no tiled sketch");
  CHECKF(!has_sketch("dense M=16 N=32 K=24 bias=1 act=gelu", "[]"), "dense: an untiled sketch");
  /* Decode-time attention (one query row; the keys [B, N, K] read across N with a stride, each
   * key by one output only) also keeps its untiled form: a vector dot product over K that reads
   * the keys in place. Not where the keys serve several rows (M = 16), nor for a weight, which is
   * packed ahead of time (a decode-time dense layer, M = 1), nor when K is shorter than a vector. */
  CHECKF(has_sketch("batch_matmul B=2 M=1 N=20 K=37", "[]"), "decode attention: no untiled sketch");
  CHECKF(has_sketch("batch_matmul B=2 M=1 N=20 K=37", "[[\"CHW\""), "decode attention: no tiled sketch");
  CHECKF(!has_sketch("batch_matmul B=2 M=16 N=20 K=37", "[]"), "attention over 16 rows: an untiled sketch");
  CHECKF(!has_sketch("dense M=1 N=64 K=48 bias=0 act=none", "[]"), "decode dense: an untiled sketch");
  CHECKF(!has_sketch("batch_matmul B=2 M=1 N=20 K=4", "[]"), "K = 4: an untiled sketch");

  static const char *kinds[] = {
      "dense M=16 N=32 K=24 bias=1 act=gelu", "dense M=8 N=8 K=256 bias=0 act=none",
      "matmul M=32 N=24 K=16", "batch_matmul B=2 M=16 N=8 K=12", "softmax B=2 M=4 N=24",
      "layernorm M=8 N=40", "conv2d C=4 H=10 W=10 K=8 R=3 S=3 stride=1 pad=1 bias=1 act=relu",
      "conv2d C=3 H=12 W=12 K=4 R=3 S=3 stride=2 pad=1 bias=1 act=relu",
      "conv2d C=6 H=7 W=7 K=8 R=1 S=1 stride=1 pad=0 bias=0 act=none",
      "dwconv2d C=4 H=10 W=10 R=3 S=3 stride=1 pad=1"};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    fprintf(stderr, "sketches %-66s %d\n", kinds[i], sketch_count(kinds[i]));
}

/* Every sketch of these workloads has a random annotation that is valid. */
static void test_annotations_valid(void) {
  static const char *specs[] = {"softmax B=2 M=4 N=24", "layernorm M=8 N=40",
                                "conv2d C=4 H=10 W=10 K=8 R=3 S=3 stride=1 pad=1 bias=1 act=relu",
                                "dwconv2d C=4 H=10 W=10 R=3 S=3 stride=1 pad=1",
                                "dense M=16 N=32 K=24 bias=1 act=gelu", "matmul M=8 N=8 K=512"};
  cwm_space_opts o;
  cwm_space_opts_default(&o);
  for (size_t w = 0; w < sizeof specs / sizeof specs[0]; w++) {
    cwm_dag *d = dag_of(specs[w]);
    cwm_state **sk;
    int n, good_sketches = 0;
    cwm_err e = {0};
    CHECK(cwm_sketches(d, &sk, &n, &e) == 0);
    cwm_rng r;
    cwm_rng_seed(&r, 7 + w);
    for (int i = 0; i < n; i++) {
      int ok = 0;
      for (int k = 0; k < 20; k++) {
        cwm_state *s = NULL;
        if (cwm_annotate(sk[i], &o, &r, &s, &e)) continue;
        ok++;
        CHECK(cwm_state_is_complete(s));
        CHECK(!cwm_has_nested_parallel(s));
        cwm_state *again = NULL;
        CHECKF(cwm_state_replay(d, s->steps, s->nsteps, &again, NULL, &e) == 0, "%s: %s", specs[w], e.msg);
        if (again) {
          char *p1 = cwm_state_print(s), *p2 = cwm_state_print(again);
          CHECKF(!strcmp(p1, p2), "%s: replay prints differently", specs[w]);
          free(p1);
          free(p2);
          cwm_state_free(again);
        }
        cwm_state_free(s);
      }
      CHECKF(ok > 0, "%s: sketch %d: no valid annotation in 20 draws (%s)", specs[w], i, e.msg);
      good_sketches += ok > 0;
    }
    CHECKF(good_sketches >= 1, "%s: no sketch annotates", specs[w]);
    cwm_states_free(sk, n);
    cwm_dag_free(d);
  }
}

static char **sample_texts(const char *spec, uint64_t seed, int n, int *got) {
  cwm_dag *d = dag_of(spec);
  cwm_space_opts o;
  cwm_space_opts_default(&o);
  cwm_rng r;
  cwm_rng_seed(&r, seed);
  cwm_state **c;
  cwm_err e = {0};
  *got = 0;
  char **t = calloc((size_t)n * 2, sizeof *t);
  if (cwm_sample_initial(d, &o, &r, n, &c, got, &e) == 0) {
    for (int i = 0; i < *got; i++) t[i] = cwm_state_print(c[i]);
    /* mutations draw from the same rng, so they are part of the sequence checked */
    for (int i = 0; i < *got; i++) {
      cwm_state *m = NULL;
      for (int k = 0; k < 50 && !m; k++) cwm_mutate(c[i], &o, &r, &m, &e);
      t[n + i] = m ? cwm_state_print(m) : cwm_xstrdup("-");
      cwm_state_free(m);
    }
    cwm_states_free(c, *got);
  }
  cwm_dag_free(d);
  return t;
}

static void test_determinism(void) {
  const char *spec = "conv2d C=4 H=10 W=10 K=8 R=3 S=3 stride=1 pad=1 bias=1 act=relu";
  int n1, n2, n = 10;
  char **a = sample_texts(spec, 42, n, &n1), **b = sample_texts(spec, 42, n, &n2);
  CHECK(n1 == n && n2 == n);
  int same = n1 == n2;
  for (int i = 0; same && i < n1; i++) same = !strcmp(a[i], b[i]) && !strcmp(a[n + i], b[n + i]);
  CHECK(same);
  /* and distinct within one draw */
  for (int i = 0; i < n1; i++)
    for (int j = 0; j < i; j++) CHECKF(strcmp(a[i], a[j]), "candidates %d and %d are equal", j, i);
  for (int i = 0; i < 2 * n; i++) free(a[i]), free(b[i]);
  free(a);
  free(b);
}

/* Mutation reaches each of its rules (told apart by which step kind changed). */
static void test_mutation_rules(void) {
  cwm_dag *d = dag_of("conv2d C=4 H=10 W=10 K=8 R=3 S=3 stride=1 pad=1 bias=1 act=relu");
  cwm_space_opts o;
  cwm_space_opts_default(&o);
  cwm_rng r;
  cwm_rng_seed(&r, 5);
  cwm_state **c;
  int n;
  cwm_err e = {0};
  CHECK(cwm_sample_initial(d, &o, &r, 16, &c, &n, &e) == 0);
  int seen[CWM_S__COUNT] = {0}, ok = 0;
  for (int k = 0; k < 3000; k++) {
    const cwm_state *s = c[k % n];
    cwm_state *m = NULL;
    if (cwm_mutate(s, &o, &r, &m, &e)) continue;
    ok++;
    CHECK(cwm_state_is_complete(m));
    for (int i = 0; i < s->nsteps && i < m->nsteps; i++)
      if (memcmp(&s->steps[i], &m->steps[i], sizeof s->steps[i])) {
        seen[m->steps[i].kind]++;
        break;
      }
    /* every split stays even with the innermost length within bounds */
    for (int i = 0; i < m->nsteps; i++) {
      const cwm_step *st = &m->steps[i];
      if (st->kind != CWM_S_SP) continue;
      long prod = 1;
      for (int j = 0; j < st->n; j++) prod *= st->v[j];
      CHECK(st->extent % prod == 0 && st->v[st->n - 1] <= o.max_innermost);
    }
    cwm_state_free(m);
  }
  fprintf(stderr, "mutations: %d of 3000 valid; changed SP %d, PR %d, CA %d, FU %d\n", ok,
          seen[CWM_S_SP], seen[CWM_S_PR], seen[CWM_S_CA], seen[CWM_S_FU]);
  CHECK(seen[CWM_S_SP] > 0 && seen[CWM_S_PR] > 0 && seen[CWM_S_CA] > 0 && seen[CWM_S_FU] > 0);
  cwm_states_free(c, n);
  cwm_dag_free(d);
}

/* Sample, mutate, measure: every candidate compiles and matches the reference. */
static void run_workload(const char *spec, uint64_t seed) {
  enum { NS = 12 };
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
  CHECKF(w != NULL, "%s: %s", spec, e.msg);
  if (!w) return;
  cwm_measure_opts mo = test_measure_opts(0);
  mo.batch = 8;
  cwm_task *t = cwm_task_new(w, &mo, &e);
  CHECK(t != NULL);
  cwm_space_opts o;
  cwm_space_opts_default(&o);
  cwm_rng r;
  cwm_rng_seed(&r, seed);
  cwm_state **cand = NULL, *all[2 * NS];
  int n = 0, m = 0;
  CHECKF(cwm_sample_initial(cwm_task_dag(t), &o, &r, NS, &cand, &n, &e) == 0, "%s: %s", spec, e.msg);
  CHECKF(n == NS, "%s: %d candidates", spec, n);
  for (int i = 0; i < n; i++) all[m++] = cand[i];
  for (int i = 0; i < n; i++) {
    cwm_state *mu = NULL;
    for (int k = 0; k < 1000 && !mu; k++) cwm_mutate(cand[i], &o, &r, &mu, &e);
    if (!mu) {
      char *stx = steps_text(cand[i]);
      CHECKF(mu != NULL, "%s: no mutation of candidate %d (%s): %s", spec, i, e.msg, stx);
      free(stx);
    }
    if (mu) all[m++] = mu;
  }
  cwm_record *recs = calloc((size_t)m + 1, sizeof *recs);
  int rc = cwm_task_measure(t, all, m, recs, &e);
  CHECKF(rc == 0, "%s: measure failed: %s", spec, e.msg);
  int bad = 0;
  for (int i = 0; i < m && rc == 0; i++) {
    if (recs[i].error) {
      char *st = steps_text(all[i]);
      CHECKF(recs[i].error == 0, "%s: %s %d: %s: %s\n  steps: %s", spec, i < n ? "candidate" : "mutant",
             i < n ? i : i - n, cwm_merr_name(recs[i].error), recs[i].msg, st);
      free(st);
      bad++;
    }
    cwm_record_free(&recs[i]);
  }
  for (int i = 0; i < m; i++) cwm_state_free(all[i]);
  fprintf(stderr, "measured %-66s %d, %d failed\n", spec, m, bad);
  free(cand);
  free(recs);
  cwm_task_free(t);
  cwm_workload_free(w);
}

/* The register-tile prior: with it, a large share of a convolution's sampled candidates have
 * an innermost tile level that is a register block (a vectorized innermost loop of whole
 * vectors, 4 to 3/4 of the vector registers' worth of accumulators); without it, Ansor's
 * uniform draws rarely do. */
static int register_blocked(const cwm_state *s, int lanes) {
  int regs = lanes >= 16 ? 32 : 16;
  for (int p = 0; p < s->nstages; p++) {
    const cwm_stage *sg = &s->stages[p];
    int has_reduce = 0;
    for (int i = 0; i < sg->niters; i++) has_reduce |= sg->nodes[sg->iters[i]].kind != CWM_IT_SPATIAL;
    if (!has_reduce || sg->niters < 2) continue;
    const cwm_node *last = &sg->nodes[sg->iters[sg->niters - 1]];
    /* at 16 lanes, a loop of whole 8-lane vectors is a block of 8-lane ones (56 columns) */
    int vw = last->extent % lanes == 0 ? lanes : lanes > 8 && last->extent % 8 == 0 ? 8 : 0;
    if (last->ann != CWM_ANN_VECTORIZE || !vw) return 0;
    long acc = last->extent / vw;
    for (int i = sg->niters - 2; i >= 0 && sg->nodes[sg->iters[i]].kind == CWM_IT_SPATIAL; i--)
      acc *= sg->nodes[sg->iters[i]].extent;
    return acc >= 4 && acc <= regs * 3 / 4;
  }
  return 0;
}

static void test_register_tile(void) {
  cwm_dag *d = dag_of("conv2d C=64 H=56 W=56 K=64 R=3 S=3 stride=1 pad=1 bias=1 act=relu");
  int blocked[2] = {0, 0}, got[2] = {0, 0};
  for (int on = 0; on < 2; on++) {
    cwm_space_opts o;
    cwm_space_opts_default(&o);
    o.register_tile = on;
    cwm_rng r;
    cwm_rng_seed(&r, 11);
    cwm_state **c = NULL;
    cwm_err e = {0};
    CHECKF(cwm_sample_initial(d, &o, &r, 400, &c, &got[on], &e) == 0, "%s", e.msg);
    for (int i = 0; i < got[on]; i++) blocked[on] += register_blocked(c[i], o.max_vectorize / 2);
    cwm_states_free(c, got[on]);
  }
  fprintf(stderr, "register-blocked candidates: %d of %d with the prior, %d of %d without\n",
          blocked[1], got[1], blocked[0], got[0]);
  CHECK(got[0] >= 300 && got[1] >= 300);
  CHECKF(blocked[1] * 5 >= got[1], "only %d of %d register-blocked with the prior", blocked[1], got[1]);
  CHECKF(blocked[1] >= 3 * blocked[0] + 10, "the prior does not change the draws (%d vs %d)", blocked[1],
         blocked[0]);
  cwm_dag_free(d);
}

/* Samples 300 programs of spec, picks up to 8 whose generated code contains `marker`, and
 * measures them and one mutant of each: all must compute the right thing. Returns the number
 * picked; *split_rem counts the samples with a split that does not divide its extent. */
static int check_sampled_where(const char *spec, uint64_t seed, const char *marker,
                               int (*pred)(const cwm_state *), int *split_rem);
static int check_sampled_with(const char *spec, uint64_t seed, const char *marker, int *split_rem) {
  return check_sampled_where(spec, seed, marker, NULL, split_rem);
}
/* the same, picking the programs pred accepts where marker is NULL */
static int check_sampled_where(const char *spec, uint64_t seed, const char *marker,
                               int (*pred)(const cwm_state *), int *split_rem) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
  cwm_measure_opts mo = test_measure_opts(0);
  cwm_task *t = w ? cwm_task_new(w, &mo, &e) : NULL;
  CHECKF(t != NULL, "%s: %s", spec, e.msg);
  if (!t) return 0;
  cwm_space_opts o;
  cwm_space_opts_default(&o);
  cwm_rng r;
  cwm_rng_seed(&r, seed);
  cwm_state **cand = NULL, *pick[16];
  int n = 0, np = 0;
  *split_rem = 0;
  CHECKF(cwm_sample_initial(cwm_task_dag(t), &o, &r, 300, &cand, &n, &e) == 0, "%s", e.msg);
  for (int i = 0; i < n; i++) {
    cwm_kernel k;
    if (cwm_codegen(cand[i], NULL, &k, &e)) {
      CHECKF(0, "candidate %d: %s", i, e.msg);
      continue;
    }
    int rem = 0;
    for (int j = 0; j < cand[i]->nsteps; j++) {
      const cwm_step *st = &cand[i]->steps[j];
      long prod = 1;
      for (int q = 0; q < st->n && st->kind == CWM_S_SP; q++) prod *= st->v[q];
      rem |= st->kind == CWM_S_SP && st->extent % prod != 0;
    }
    *split_rem += rem;
    if ((marker ? strstr(k.body, marker) != NULL : pred(cand[i])) && np < 8) pick[np++] = cand[i];
    cwm_kernel_free(&k);
  }
  int m = np;
  for (int i = 0; i < np; i++) {
    cwm_state *mu = NULL;
    for (int k = 0; k < 1000 && !mu; k++) cwm_mutate(pick[i], &o, &r, &mu, &e);
    if (mu) pick[m++] = mu;
  }
  cwm_record recs[16];
  memset(recs, 0, sizeof recs);
  CHECKF(cwm_task_measure(t, pick, m, recs, &e) == 0, "%s", e.msg);
  for (int i = 0; i < m; i++) {
    char *st = steps_text(pick[i]);
    CHECKF(recs[i].error == 0, "%s: %s: %s\n  steps: %s", spec, cwm_merr_name(recs[i].error), recs[i].msg, st);
    free(st);
    cwm_record_free(&recs[i]);
  }
  fprintf(stderr, "%s: %d of %d samples with a split that does not divide, %d picked with '%s'\n", spec,
          *split_rem, n, np, marker ? marker : "the predicate");
  for (int i = np; i < m; i++) cwm_state_free(pick[i]);
  cwm_states_free(cand, n);
  cwm_task_free(t);
  cwm_workload_free(w);
  return np;
}

/* A matrix product none of whose axes is a whole number of vectors (133 = 7 x 19): the prior
 * draws the column tiles one or two vectors wide with a remainder, and codegen runs the register
 * tile on the full tiles and guarded loops on the last (an if/else on the tile's position, with
 * vector accumulators). Such programs are drawn, and they compute the right thing. */
static void test_padded_tile(void) {
  int rem, np = check_sampled_with("matmul M=20 N=133 K=12", 9, "at the edge */", &rem);
  CHECKF(rem * 10 >= 300, "only %d of 300 candidates padded", rem);
  CHECKF(np >= 4, "only %d candidates with a guarded register tile", np);
}

/* The padded edge: where the tile's stage computes into a local buffer and the reduction lies
 * inside the tile, the tile that crosses the edge runs whole (its reads of the clamped rows and
 * of the zero-padded packs stay in bounds, its overshoot stays in the buffer). 37 rows and 133
 * columns, both prime or without a vector's multiple: the prior draws padded row tiles too. Such
 * programs are drawn, and they compute the right thing. */
static void test_padded_edge(void) {
  int rem, np = check_sampled_with("matmul M=37 N=133 K=12", 13, "padded at the edge */", &rem);
  CHECKF(np >= 4, "only %d candidates with a padded edge tile", np);
  /* a reduction split outside the tile: the buffer starts zeroed */
  np = check_sampled_with("matmul M=37 N=133 K=12", 14, "past the tensor's edge */", &rem);
  CHECKF(np >= 2, "only %d candidates with a padded edge tile inside a split reduction", np);
  /* 48 columns: a whole number of vectors at 8 and at 16 lanes, so the prior draws on both ISAs */
  np = check_sampled_with("dense M=41 N=48 K=9 bias=1 act=relu", 17, "padded at the edge */", &rem);
  CHECKF(np >= 2, "only %d dense candidates with a padded edge tile", np);
}

/* Stride-2 reads in a register tile: a strided convolution vectorized along its output width
 * reads every other input element, two loads and a shuffle (CWM_LOADE). 32 output columns: a
 * whole number of vectors at 8 and 16 lanes. Such programs are drawn, and they compute the right
 * thing. */
static void test_strided_tile(void) {
  int rem, np = check_sampled_with("dwconv2d C=16 H=20 W=64 R=3 S=3 stride=2 pad=1", 23, "CWM_LOADE", &rem);
  CHECKF(np >= 2, "only %d depthwise candidates with stride-2 vector loads", np);
  np = check_sampled_with("conv2d C=4 H=12 W=64 K=16 R=3 S=3 stride=2 pad=1 bias=1 act=relu", 29, "CWM_LOADE", &rem);
  CHECKF(np >= 2, "only %d convolution candidates with stride-2 vector loads", np);
}

/* Outputs 7 and 14 wide (the last stages of MobileNet and EfficientNet): the prior draws one
 * 8-lane vector padded by a seventh, the cache-write buffer holds the whole 8 lanes, and the
 * padded edge tile reads its vectors from the padded input (a root stage's own buffer, with
 * slack past its end for the lanes past the last row). Such programs are drawn, stride 2
 * included, and they and their mutants compute the right thing. */
static void test_short_rows(void) {
  int rem, np = check_sampled_with("dwconv2d C=16 H=7 W=7 R=3 S=3 stride=1 pad=1", 43, "padded at the edge */", &rem);
  CHECKF(np >= 2, "only %d 7-wide depthwise candidates with a padded edge tile", np);
  np = check_sampled_with("dwconv2d C=24 H=28 W=28 R=5 S=5 stride=2 pad=2", 47, "padded at the edge */", &rem);
  CHECKF(np >= 2, "only %d strided 14-wide depthwise candidates with a padded edge tile", np);
}

/* Reductions over the innermost loops accumulate in a local scalar under `omp simd reduction`
 * (codegen accum.c): a softmax's maximum and sum over a row of prime length, a layer norm's
 * sums, and the dot products of a decode-time attention (one row, the reduction contiguous).
 * Such programs are drawn, and they and their mutants compute the right thing. */
static void test_simd_reduction(void) {
  int rem, np = check_sampled_with("softmax B=3 M=5 N=37", 31, "omp simd reduction(max:", &rem);
  CHECKF(np >= 4, "only %d softmax candidates with a vectorized maximum", np);
  np = check_sampled_with("layernorm M=6 N=41", 37, "omp simd reduction(+:", &rem);
  CHECKF(np >= 4, "only %d layer norm candidates with a vectorized sum", np);
  np = check_sampled_with("batch_matmul B=2 M=1 N=20 K=37", 41, "omp simd reduction(+:", &rem);
  CHECKF(np >= 2, "only %d single-row batch matmul candidates with a vectorized dot product", np);
}

/* The register-tile prior on a 197 x 1001 x 389 product (197 and 389 prime, 1001 = 7 x 11 x 13):
 * the row tile is drawn padded (2 to 8 rows with a remainder), so a share of the candidates has
 * a register block of several rows instead of one row of vectors. */
static void test_padded_rows(void) {
  cwm_dag *d = dag_of("matmul M=197 N=1001 K=389");
  cwm_space_opts o;
  cwm_space_opts_default(&o);
  cwm_rng r;
  cwm_rng_seed(&r, 3);
  cwm_state **c = NULL;
  int n = 0, rows = 0;
  cwm_err e = {0};
  CHECKF(cwm_sample_initial(d, &o, &r, 200, &c, &n, &e) == 0, "%s", e.msg);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < c[i]->nsteps; j++) {
      const cwm_step *st = &c[i]->steps[j];
      if (st->kind == CWM_S_SP && st->iter == 0 && st->extent == 197 && st->n == 3 && st->v[2] >= 2 && st->v[2] <= 8)
        rows++;
    }
  fprintf(stderr, "matmul 197 x 1001 x 389: %d of %d candidates with a row tile of 2 to 8\n", rows, n);
  CHECKF(rows * 10 >= n, "only %d of %d candidates tile the prime rows", rows, n);
  cwm_states_free(c, n);
  cwm_dag_free(d);
}

/* The split of a product's reduction holding all of it in the inner level (its outer loop runs
 * once), where the reduction is longer than Ansor's innermost bound of 64; the tile size of
 * the stage (the product of its three-length splits' inner lengths) in *tile and its
 * auto-unroll step in *unroll. */
static int whole_reduction(const cwm_state *s, long *tile, int *unroll) {
  int found = 0;
  for (int j = 0; j < s->nsteps; j++) {
    const cwm_step *st = &s->steps[j];
    if (!cwm_splits_reduction(s, j) || st->extent <= 64 || st->v[0] != st->extent) continue;
    found = 1;
    *tile = 1;
    *unroll = -1;
    for (int q = 0; q < s->nsteps; q++) {
      const cwm_step *u = &s->steps[q];
      if (u->stage != st->stage) continue;
      if (u->kind == CWM_S_SP && u->n == 3) *tile *= u->v[2];
      if (u->kind == CWM_S_PR) *unroll = u->a;
    }
  }
  return found;
}
static int whole_reduction_pred(const cwm_state *s) {
  long tile;
  int unroll;
  return whole_reduction(s, &tile, &unroll);
}

/* The register-tile prior keeps the whole reduction inside the tile half the time, past Ansor's
 * bound of 64 on innermost lengths (389, prime: the accumulators are stored once, not every 64
 * or fewer FMAs), and then unrolls the whole tile (codegen keeps a tile in registers only then).
 * Mutation keeps such a split valid. Such programs are drawn, and they and their mutants compute
 * the right thing. */
static void test_whole_reduction(void) {
  cwm_dag *d = dag_of("matmul M=197 N=1001 K=389");
  cwm_space_opts o;
  cwm_space_opts_default(&o);
  cwm_rng r;
  cwm_rng_seed(&r, 19);
  cwm_state **c = NULL;
  int n = 0, whole = 0, unrolled = 0, mutants = 0, long_inner = 0;
  cwm_err e = {0};
  CHECKF(cwm_sample_initial(d, &o, &r, 300, &c, &n, &e) == 0, "%s", e.msg);
  for (int i = 0; i < n; i++) {
    long tile;
    int unroll;
    if (!whole_reduction(c[i], &tile, &unroll)) continue;
    whole++;
    unrolled += tile <= 512 && unroll >= tile;
    CHECKF(tile > 512 || unroll >= tile, "candidate %d: a %ld-element tile unrolled up to %d", i, tile, unroll);
    for (int k = 0; k < 20; k++) {
      cwm_state *m = NULL;
      if (cwm_mutate(c[i], &o, &r, &m, &e)) continue;
      mutants++;
      for (int j = 0; j < m->nsteps; j++)
        if (cwm_splits_reduction(m, j)) {
          CHECKF(m->steps[j].v[0] >= 1 && m->steps[j].v[0] <= m->steps[j].extent, "a mutant splits %d by %d",
                 m->steps[j].extent, m->steps[j].v[0]);
          long_inner += m->steps[j].v[0] > 64;
        }
      cwm_state_free(m);
    }
  }
  fprintf(stderr, "matmul 197 x 1001 x 389: %d of %d candidates keep the whole reduction inside, %d of them "
          "unroll their tile; %d of %d mutants keep an inner reduction over 64\n", whole, n, unrolled, long_inner,
          mutants);
  CHECKF(whole * 20 >= n, "only %d of %d candidates hold the whole reduction", whole, n);
  CHECKF(long_inner * 2 >= mutants, "mutation undid the long reduction in %d of %d mutants", mutants - long_inner,
         mutants);
  cwm_states_free(c, n);
  cwm_dag_free(d);
  int rem, np = check_sampled_where("dense M=20 N=48 K=97 bias=1 act=relu", 53, NULL, whole_reduction_pred, &rem);
  CHECKF(np >= 2, "only %d candidates with the whole reduction inside the tile", np);
}

/* A batch matrix product whose second operand is given as [B,N,K]: programs that vectorize N
 * copy it into [.., K, N] panels per call, in 8 x 8 blocks transposed in registers (cwm_tr8) */
static void test_transposed_pack(void) {
  int rem, np = check_sampled_with("batch_matmul B=2 M=8 N=32 K=24", 4, "cwm_tr8(r__)", &rem);
  CHECKF(np >= 2, "only %d candidates with a transposed runtime pack", np);
  /* 77 columns in padded panels: the blocks inside are transposed, those across the edge copied
   * with the padding's condition */
  np = check_sampled_with("batch_matmul B=2 M=12 N=77 K=16", 5, "inside__", &rem);
  CHECKF(np >= 2, "only %d candidates with a padded transposed runtime pack", np);
}

/* Ansor's common-root compute location: a softmax's exponentials (read by the sum and by the
 * division) can be computed inside the division's row loop once the sum is attached there; the
 * sampler draws such programs and they compute the right thing. */
static void test_common_root(void) {
  const char *spec = "softmax B=2 M=4 N=24";
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
  cwm_measure_opts mo = test_measure_opts(0);
  cwm_task *t = cwm_task_new(w, &mo, &e);
  CHECK(t != NULL);
  if (!t) return;
  cwm_space_opts o;
  cwm_space_opts_default(&o);
  cwm_rng r;
  cwm_rng_seed(&r, 5);
  cwm_state **cand = NULL, *pick[12];
  int n = 0, np = 0;
  CHECKF(cwm_sample_initial(cwm_task_dag(t), &o, &r, 300, &cand, &n, &e) == 0, "%s", e.msg);
  int nrf = 0;
  for (int i = 0; i < n && np < 12; i++) {
    const cwm_state *s = cand[i];
    int e_in = 0, rf_in = 0;
    for (int p = 0; p < s->nstages; p++) {
      if (s->stages[p].loc != CWM_LOC_ITER) continue;
      e_in |= !strcmp(cwm_stage_name(s, p), "e");
      rf_in |= cwm_stage_is_rfactor(s, p);
    }
    /* half the picks with an attached rfactor stage, where there are */
    if (e_in && (rf_in || np < 6)) pick[np++] = cand[i], nrf += rf_in;
  }
  fprintf(stderr, "softmax candidates with the exponentials attached: %d kept (%d with an attached rfactor "
          "stage), of %d\n", np, nrf, n);
  CHECKF(np >= 4, "only %d of %d softmax candidates attach the exponentials", np, n);
  /* the attach-chain helpers: every chain ends in a root stage, its top stage is attached directly
   * there, and cwm_attach_in finds that top; a stage numbered at or below `after` breaks a chain */
  int chains = 0;
  for (int i = 0; i < n; i++) {
    const cwm_state *s = cand[i];
    for (int q = 0; q < s->nstages; q++) {
      int top, r = cwm_attach_root(s, q, -1, &top);
      if (s->stages[q].loc == CWM_LOC_ROOT) {
        CHECKF(r == q && top == -1, "candidate %d stage %d: root %d top %d", i, q, r, top);
      } else if (s->stages[q].loc == CWM_LOC_ITER) {
        chains++;
        CHECKF(r >= 0 && s->stages[r].loc == CWM_LOC_ROOT, "candidate %d stage %d: chain ends in %d", i, q, r);
        CHECKF(top >= 0 && s->stages[top].loc == CWM_LOC_ITER && s->stages[top].attach_stage == r,
               "candidate %d stage %d: top %d", i, q, top);
        CHECKF(r < 0 || cwm_attach_in(s, q, r, -1) == top, "candidate %d stage %d: attach_in", i, q);
        CHECK(cwm_attach_in(s, q, q, -1) == -1);
        CHECK(cwm_attach_root(s, q, q, &top) == -1 && cwm_attach_in(s, q, s->stages[q].attach_stage, q) == -1);
      }
    }
  }
  CHECKF(chains > n, "only %d attached stages in %d candidates", chains, n);
  CHECKF(nrf >= 2, "only %d softmax candidates attach an rfactor stage", nrf);
  cwm_record recs[12];
  memset(recs, 0, sizeof recs);
  CHECKF(cwm_task_measure(t, pick, np, recs, &e) == 0, "%s", e.msg);
  for (int i = 0; i < np; i++) {
    char *st = steps_text(pick[i]);
    CHECKF(recs[i].error == 0, "%s: %s: %s\n  steps: %s", spec, cwm_merr_name(recs[i].error), recs[i].msg, st);
    free(st);
    cwm_record_free(&recs[i]);
  }
  cwm_states_free(cand, n);
  cwm_task_free(t);
  cwm_workload_free(w);
}

int main(void) {
  test_sketch_counts();
  test_annotations_valid();
  test_determinism();
  test_mutation_rules();
  test_register_tile();
  test_common_root();
  test_padded_tile();
  test_padded_edge();
  test_padded_rows();
  test_whole_reduction();
  test_strided_tile();
  test_simd_reduction();
  test_short_rows();
  test_transposed_pack();
  static const char *specs[] = {
      "dense M=16 N=32 K=24 bias=1 act=gelu", "matmul M=32 N=24 K=16",
      "batch_matmul B=2 M=16 N=8 K=12", "softmax B=2 M=4 N=24", "layernorm M=8 N=40",
      "conv2d C=4 H=10 W=10 K=8 R=3 S=3 stride=1 pad=1 bias=1 act=relu",
      "conv2d C=3 H=12 W=12 K=4 R=3 S=3 stride=2 pad=1 bias=1 act=relu",
      "dwconv2d C=4 H=10 W=10 R=3 S=3 stride=1 pad=1"};
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) run_workload(specs[i], 100 + i);
  return test_done();
}

/* test_layout.c: the layout rewrite of constant inputs (src/codegen/layout.c). The `const` marking round-trips
 * through the workload text; the op library marks weights; a rewritten kernel reads its weight in
 * the loop order of the stage that reads it, and for dense, conv2d and dwconv2d workloads with
 * odd sizes many sampled schedules (sketch + annotation, mutation, random step walks, uneven
 * hand-made splits) compile and match the reference computed on the original layout; the
 * exported kernel ships the conversion and its example checks itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cwm/search.h"
#include "testlib.h"

static cwm_workload *parse(const char *text) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_parse(text, &e);
  CHECKF(w != NULL, "%s", e.msg);
  return w;
}

static void test_text(void) {
  const char *text = "input A[4, 3]\ninput W[5, 3] const\nout[i:4, j:5] = sum(k:3 : A[i, k] * W[j, k])\noutput out\n";
  cwm_workload *w = parse(text);
  if (!w) return;
  CHECK(!w->ops[0].is_const && w->ops[1].is_const);
  char *p = cwm_workload_print(w);
  CHECKF(!strcmp(p, text), "printed:\n%s", p);
  cwm_workload *w2 = parse(p);
  char *p2 = w2 ? cwm_workload_print(w2) : NULL;
  CHECK(p2 && !strcmp(p, p2));
  /* the marking is part of the workload's identity */
  cwm_workload *plain = parse("input A[4, 3]\ninput W[5, 3]\nout[i:4, j:5] = sum(k:3 : A[i, k] * W[j, k])\n");
  char k1[17], k2[17];
  cwm_workload_key(w, k1);
  if (plain) cwm_workload_key(plain, k2);
  CHECK(plain && strcmp(k1, k2));
  free(p);
  free(p2);
  cwm_workload_free(w);
  cwm_workload_free(w2);
  cwm_workload_free(plain);

  static const char *bad[] = {
      "input W[5] constant\nout[i:5] = W[i]\n", "input W[5] const const\nout[i:5] = W[i]\n",
      "input W[5] const 3\nout[i:5] = W[i]\n", "input const W[5]\nout[i:5] = W[i]\n",
      "input W[5]\nout[i:5] = W[i] const\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cwm_err e = {0};
    cwm_workload *b = cwm_workload_parse(bad[i], &e);
    CHECKF(b == NULL && e.msg[0], "accepted: %s", bad[i]);
    cwm_workload_free(b);
  }

  /* the op library: weights and biases are constant, activations are not */
  static const struct { const char *spec, *want, *not_want; } ops[] = {
      {"dense M=4 N=8 K=6 bias=1 act=none", "input W[8, 6] const\ninput bias[8] const\n", "input A[4, 6] const"},
      {"conv2d C=3 H=8 W=8 K=4 R=3 S=3 stride=1 pad=1 bias=1 act=relu", "input Wt[4, 3, 3, 3] const\ninput bias[4] const\n",
       "input I[1, 3, 8, 8] const"},
      {"dwconv2d C=4 H=8 W=8 R=3 S=3 stride=1 pad=1", "input Wt[4, 1, 3, 3] const\n", "I[1, 4, 8, 8] const"},
      {"matmul M=4 N=4 K=4", "input B[4, 4]\n", "const"},
      {"batch_matmul B=2 M=4 N=4 K=4", "input Bt[2, 4, 4]\n", "const"},
  };
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    cwm_err e = {0};
    char *t = cwm_op_to_text(ops[i].spec, &e);
    CHECKF(t && strstr(t, ops[i].want) && !strstr(t, ops[i].not_want), "%s:\n%s", ops[i].spec, t ? t : e.msg);
    free(t);
  }
}

static cwm_state *replay(const cwm_dag *d, const char *steps_text) {
  cwm_err e = {0};
  cwm_step *st = NULL;
  int n = 0;
  cwm_state *s = NULL;
  int rc = cwm_steps_parse(steps_text, &st, &n, &e);
  if (!rc) rc = cwm_state_replay(d, st, n, &s, NULL, &e);
  CHECKF(rc == 0, "%s: %s", steps_text, e.msg);
  free(st);
  return s;
}

/* MultiLevelTilingWithFusion on dense with bias (stages A W bias D out), as hand.c writes it. */
#define DENSE_FUSED(M, IS, N, JS, K, KS)                                                               \
  "[[\"SP\",3,0," #M ",[" IS "],1],[\"SP\",3,4," #N ",[" JS "],1],[\"SP\",3,8," #K ",[" KS "],1],"       \
  "[\"RE\",3,[0,4,1,5,8,2,6,9,3,7]],[\"FSP\",4,0,0,2],[\"FSP\",4,3,1,2],[\"RE\",4,[0,3,1,4,2,5]],"     \
  "[\"CA\",3,4,3],[\"FU\",4,[0,1,2,3]],[\"AN\",4,0,3],[\"PR\",3,0,\"auto_unroll_max_step$64\"],"       \
  "[\"AN\",3,9,2],[\"AN\",4,2,2]]"

static void test_print_and_stores(void) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec("dense M=16 N=64 K=32 bias=1 act=none", NULL, &e);
  cwm_dag *d = w ? cwm_dag_new(w, &e) : NULL;
  CHECK(d != NULL);
  if (!d) return;
  /* the initial state reads W in its own layout: nothing to rewrite */
  cwm_state *s0 = cwm_state_init(d);
  char *p0 = cwm_state_print(s0);
  CHECKF(strstr(p0, "placeholder W[64, 32] const\n") && !strstr(p0, "layout"), "%s", p0);
  cwm_kernel k0;
  CHECK(cwm_codegen(s0, NULL, &k0, &e) == 0 && k0.npacked == 0 && !k0.pack_entry[0] && !strstr(k0.body, "_packed"));
  cwm_kernel_free(&k0);
  free(p0);
  cwm_state_free(s0);

  cwm_state *s = replay(d, DENSE_FUSED(16, "1,4,4", 64, "1,1,16", 32, "8"));
  if (!s) return;
  char *p = cwm_state_print(s);
  CHECKF(strstr(p, "placeholder W[64, 32] const layout(j.0:4, k.0:4, k.1:8, j.3:16)\n") &&
         strstr(p, "placeholder bias[64] const\n") && strstr(p, "* W[(i.0@j.0@i.1@j.1 % 4), k.0, k.1, j.3])"),
         "%s", p);
  cwm_kernel k, k2;
  cwm_codegen_opts o8 = {.vec_lanes = 8};
  CHECK(cwm_codegen(s, &o8, &k, &e) == 0);
  CHECK(cwm_codegen(s, &o8, &k2, &e) == 0);
  CHECK(!strcmp(k.body, k2.body)); /* deterministic: the same name for the same state */
  CHECK(k.npacked == 1 && k.src_len[1] == 64 * 32 && k.arg_len[1] == 64 * 32 && k.src_len[0] == 0 && k.src_len[2] == 0);
  CHECKF(strstr(k.layout[1], "[4, 4, 8, 16] by (j.0, k.0, k.1, j.3): W[16*j.0 + j.3, 8*k.0 + k.1]"), "%s", k.layout[1]);
  CHECK(strstr(k.body, "const float *restrict W__packed") && strstr(k.body, k.pack_entry) && strstr(k.body, k.pack_fn[1]));
  /* the vectorized loop reads whole vectors: the register tile applies */
  CHECKF(strstr(k.body, "cwm_v8f acc__0") && strstr(k.body, "CWM_LOADU(&W__packed["), "%s", k.body);
  CHECKF(strstr(k.body, "cwm_v8f acc__1") && !strstr(k.body, "cwm_v16f"), "%s", k.body); /* 16 = 2 x 8 lanes */
  cwm_kernel_free(&k);
  cwm_kernel_free(&k2);
  /* 16 lanes (AVX-512): one accumulator per row of the 4 x 16 tile, each a 16-lane vector */
  cwm_codegen_opts o16 = {.vec_lanes = 16};
  CHECK(cwm_codegen(s, &o16, &k, &e) == 0);
  CHECKF(strstr(k.body, "cwm_v16f acc__3") && !strstr(k.body, "acc__4") && strstr(k.body, "CWM_LOADU16(&W__packed[") &&
         strstr(k.body, "CWM_INREG16(") && !strstr(k.body, "cwm_v8f acc"), "%s", k.body);
  cwm_kernel_free(&k);

  /* the program features see the new layout: W is contiguous in the vectorized loop */
  cwm_store *st = NULL;
  int n = 0;
  CHECK(cwm_lower_stores(s, &st, &n, &e) == 0);
  int found = 0;
  for (int i = 0; i < n; i++)
    for (int a = 0; a < st[i].nacc; a++) {
      if (st[i].acc[a].tid != 1 || st[i].is_init) continue;
      for (int l = 0; l < st[i].nloops; l++)
        if (st[i].ann[l] == CWM_ANN_VECTORIZE) {
          CHECKF(st[i].acc[a].stride[l] == 1, "stride %ld", st[i].acc[a].stride[l]);
          found = 1;
        }
    }
  CHECK(found);
  free(st);
  free(p);
  cwm_state_free(s);
  cwm_dag_free(d);
  cwm_workload_free(w);

  /* a weight read by two stages keeps its layout; so does one read elementwise */
  w = parse("input X[4, 8]\ninput W[8, 8] const\ninput b[8] const\n"
            "D[i:4, j:8] = sum(k:8 : X[i, k] * W[j, k])\nE[i:4, j:8] = sum(k:8 : D[i, k] * W[k, j])\n"
            "F[i:4, j:8] = E[i, j] + b[j]\n");
  d = w ? cwm_dag_new(w, &e) : NULL;
  if (d) {
    cwm_state *t = replay(d, "[[\"RE\",3,[1,0,2]],[\"RE\",4,[2,1,0]],[\"RE\",5,[1,0]]]");
    char *pt = t ? cwm_state_print(t) : NULL;
    CHECKF(pt && !strstr(pt, "layout"), "%s", pt ? pt : "");
    free(pt);
    cwm_state_free(t);
  }
  cwm_dag_free(d);
  cwm_workload_free(w);
}

/* 1 if a kernel holds a register tile (8- or 16-lane accumulators) */
static int body_has_tile(const char *body) {
  return strstr(body, "cwm_v8f acc__0") != NULL || strstr(body, "cwm_v16f acc__0") != NULL;
}

/* Bytes of the root buffers (random walks of rfactor can ask for more than the runner allows). */
static double root_bytes(const cwm_state *s) {
  double b = 0;
  for (int p = 0; p < s->nstages; p++) {
    const cwm_op *op = cwm_stage_op(s, p);
    if (op->is_input || s->stages[p].loc != CWM_LOC_ROOT) continue;
    double n = 4;
    for (int d = 0; d < op->ndim; d++) n *= op->shape[d];
    b += n;
  }
  return b;
}

/* An input that is not a weight copied into the layout the loops walk, inside the kernel. */
static int is_runtime_pack(const cwm_kernel *k) {
  return !k->npacked && strstr(k->body, "__packed = (float *)aligned_alloc") != NULL;
}

/* 1 if the kernel of s reaches a register tile; *rt += 1 if it copies an input at run time */
static int has_tile_rt(const cwm_state *s, int *rt) {
  cwm_kernel k;
  cwm_err e = {0};
  if (cwm_codegen(s, NULL, &k, &e)) return 0;
  int t = body_has_tile(k.body);
  if (rt) *rt += is_runtime_pack(&k);
  cwm_kernel_free(&k);
  return t;
}

static int has_tile(const cwm_state *s) { return has_tile_rt(s, NULL); }

/* Sketch candidates, their mutants, random step walks and the extra lists: all must compile and
 * match the reference. Reports how many read a rewritten weight and how many reach a register
 * tile, beside the same step lists on the workload without the `const` marking. */
static void run_workload(const char *spec, int count, uint64_t seed, const char *const *extra, int nextra) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
  CHECKF(w != NULL, "%s: %s", spec, e.msg);
  if (!w) return;
  cwm_measure_opts mo = test_measure_opts(0);
  mo.batch = 8;
  mo.cflags = "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -fPIC -shared -Wall -Wextra -Wno-maybe-uninitialized -Werror";
  cwm_task *t = cwm_task_new(w, &mo, &e);
  CHECK(t != NULL);
  if (!t) return;
  const cwm_dag *d = cwm_task_dag(t);
  char *text = cwm_workload_print(w);
  int has_const = strstr(text, " const") != NULL;
  for (char *q; (q = strstr(text, " const"));) memmove(q, q + 6, strlen(q + 6) + 1);
  cwm_workload *plain_w = parse(text);
  free(text);
  cwm_dag *plain = plain_w ? cwm_dag_new(plain_w, &e) : NULL;

  cwm_space_opts so;
  cwm_space_opts_default(&so);
  cwm_rng r;
  cwm_rng_seed(&r, seed);
  int cap = 3 * count + nextra, m = 0, nsk = 0;
  cwm_state **all = calloc((size_t)cap, sizeof *all), **cand = NULL;
  CHECKF(cwm_sample_initial(d, &so, &r, count, &cand, &nsk, &e) == 0, "%s: %s", spec, e.msg);
  for (int i = 0; i < nsk; i++) all[m++] = cand[i];
  for (int i = 0; i < nsk; i++) {
    cwm_state *mu = NULL;
    for (int k = 0; k < 100 && !mu; k++) cwm_mutate(cand[i], &so, &r, &mu, &e);
    if (mu) all[m++] = mu;
  }
  int nsampled = m;
  for (int i = 0; i < count; i++) {
    cwm_state *s = NULL;
    for (int k = 0; k < 20 && (!s || root_bytes(s) > 1e8); k++) {
      cwm_state_free(s);
      s = NULL;
      cwm_sample_steps(d, &r, 1 + cwm_rng_int(&r, 24), &s, &e);
    }
    if (s) all[m++] = s;
  }
  for (int i = 0; i < nextra; i++) {
    cwm_state *s = replay(d, extra[i]);
    if (s) all[m++] = s;
  }
  int rewritten = 0, tiles = 0, plain_tiles = 0, sampled_rw = 0, runtime = 0, sampled_rt = 0;
  for (int i = 0; i < m; i++) {
    cwm_kernel k;
    if (cwm_codegen(all[i], NULL, &k, &e) == 0) {
      if (k.npacked) {
        rewritten++;
        if (i < nsampled) sampled_rw++;
      }
      if (is_runtime_pack(&k)) {
        runtime++;
        if (i < nsampled) sampled_rt++;
      }
      if (i < nsampled && body_has_tile(k.body)) tiles++;
      cwm_kernel_free(&k);
    }
    if (i < nsampled && plain) {
      /* the same steps without the marking: no rewrite */
      cwm_state *ps = NULL;
      if (cwm_state_replay(plain, all[i]->steps, all[i]->nsteps, &ps, NULL, &e) == 0) {
        plain_tiles += has_tile(ps);
        cwm_state_free(ps);
      }
    }
  }
  cwm_record *recs = calloc((size_t)m + 1, sizeof *recs);
  int rc = cwm_task_measure(t, all, m, recs, &e);
  CHECKF(rc == 0, "%s: measure failed: %s", spec, e.msg);
  int bad = 0;
  for (int i = 0; i < m && rc == 0; i++) {
    if (recs[i].error) {
      cwm_buf b;
      cwm_buf_init(&b);
      cwm_steps_print(all[i]->steps, all[i]->nsteps, &b);
      CHECKF(recs[i].error == 0, "%s: list %d: %s: %s\n  steps: %s", spec, i, cwm_merr_name(recs[i].error),
             recs[i].msg, b.s);
      cwm_buf_free(&b);
      bad++;
    }
    cwm_record_free(&recs[i]);
  }
  if (has_const)
    CHECKF(count == 0 || sampled_rw > 0, "%s: no sampled candidate rewrites its weight", spec);
  else
    CHECKF(count == 0 || sampled_rt > 0, "%s: no sampled candidate packs an input at run time", spec);
  fprintf(stderr, "%-62s %3d lists, %3d rewritten, %3d packed at run time, %d failed; register tiles among %d "
                  "sketch samples: %d (%d without const)\n", spec, m, rewritten, runtime, bad, nsampled, tiles,
          plain_tiles);
  for (int i = 0; i < m; i++) cwm_state_free(all[i]);
  free(all);
  free(cand);
  free(recs);
  cwm_dag_free(plain);
  cwm_workload_free(plain_w);
  cwm_task_free(t);
  cwm_workload_free(w);
}

static void test_export(void) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec("dense M=7 N=24 K=19 bias=1 act=gelu", NULL, &e);
  cwm_dag *d = w ? cwm_dag_new(w, &e) : NULL;
  if (!d) { CHECK(d != NULL); return; }
  /* uneven everywhere: 24 rows in tiles of 5 and 19 columns in tiles of 4 pad the new layout */
  cwm_state *s = replay(d, DENSE_FUSED(7, "1,2,2", 24, "1,1,5", 19, "4"));
  if (!s) return;
  char dir[256], cmd[1024];
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(dir, sizeof dir, "%s/cwm_test_layout_%d", tmp, (int)getpid());
  CHECKF(cwm_export(s, dir, "dense_rw", &e) == 0, "%s", e.msg);
  snprintf(cmd, sizeof cmd,
           "cd %s && grep -q 'void dense_rw_pack_W(const float \\*restrict W, float \\*restrict W__packed);' dense_rw.h && "
           "grep -q 'W__packed: 500 floats, \\[5, 5, 4, 5\\] by (j.0, k.0, k.1, j.3): W\\[5\\*j.0 + j.3, 4\\*k.0 + k.1\\]' dense_rw.h && "
           "cc -O2 -fopenmp -Wall -Wextra -Werror dense_rw.c dense_rw_example.c -lm -o ex 2>&1 && ./ex | grep -q ': OK$'",
           dir);
  CHECKF(system(cmd) == 0, "exported example failed: %s", cmd);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  cwm_state_free(s);
  cwm_dag_free(d);
  cwm_workload_free(w);
}

/* The runner alone, on hand-written kernels: out[i] = sum_j M[i][j] * x[j] with M taken transposed
 * (and padded to 9 columns) by the kernel. The conversion runs once on the seeded original,
 * outside the timing; a wrong conversion is a wrong answer; a missing one fails to instantiate. */
static void test_runner(void) {
  static const char *ref_body =
      "void lt_ref(float *const *a) { for (int i = 0; i < 8; i++) { double s = 0;"
      " for (int j = 0; j < 6; j++) s += (double)a[0][i * 6 + j] * a[1][j]; a[2][i] = (float)s; } }\n";
  static const char *body =
      "void lt_k(float *const *a) { for (int i = 0; i < 8; i++) { float s = 0;"
      " for (int j = 0; j < 6; j++) s += a[0][j * 9 + i] * a[1][j]; a[2][i] = s; } }\n"
      "void lt_k_pack(float *const *src, float *const *dst) { for (int j = 0; j < 6; j++)"
      " for (int i = 0; i < 9; i++) dst[0][j * 9 + i] = i < 8 ? src[0][i * 6 + j] : 0.0f; }\n";
  static const char *bad_body =
      "void lt_b(float *const *a) { for (int i = 0; i < 8; i++) { float s = 0;"
      " for (int j = 0; j < 6; j++) s += a[0][j * 9 + i] * a[1][j]; a[2][i] = s; } }\n"
      "void lt_b_pack(float *const *src, float *const *dst) { for (int j = 0; j < 6; j++)"
      " for (int i = 0; i < 9; i++) dst[0][j * 9 + i] = i < 8 ? src[0][j * 8 + i] : 0.0f; }\n";
  cwm_measure_opts o;
  cwm_measure_opts_default(&o);
  test_env_measure(&o);
  o.repeats = 2;
  o.min_repeat_ms = 1;
  cwm_candidate rc = {.body = ref_body, .entry = "lt_ref", .nargs = 3, .arg_len = {48, 6, 8}};
  cwm_reference *ref = NULL;
  cwm_err e = {0};
  CHECKF(cwm_reference_compute(&o, &rc, 6, &ref, &e) == 0, "%s", e.msg);
  if (!ref) return;
  cwm_candidate c[3] = {
      {.body = body, .entry = "lt_k", .nargs = 3, .arg_len = {54, 6, 8}, .pack_entry = "lt_k_pack", .src_len = {48}},
      {.body = bad_body, .entry = "lt_b", .nargs = 3, .arg_len = {54, 6, 8}, .pack_entry = "lt_b_pack", .src_len = {48}},
      {.body = body, .entry = "lt_k", .nargs = 3, .arg_len = {54, 6, 8}, .pack_entry = "lt_k_nopack", .src_len = {48}},
  };
  cwm_result res[3];
  CHECKF(cwm_measure(&o, c, 3, ref, res, &e) == 0, "%s", e.msg);
  CHECKF(res[0].error == CWM_MERR_NONE && res[0].ncosts == 2, "%s: %s", cwm_merr_name(res[0].error), res[0].msg);
  CHECKF(res[1].error == CWM_MERR_WRONG_ANSWER, "%s: %s", cwm_merr_name(res[1].error), res[1].msg);
  CHECKF(res[2].error == CWM_MERR_INSTANTIATION && strstr(res[2].msg, "lt_k_nopack"), "%s: %s",
         cwm_merr_name(res[2].error), res[2].msg);
  cwm_reference_free(ref);
}

/* Without measuring: how often Ansor's sampler reaches a register tile on a real dense shape, with
 * and without the weight's layout rewritten (a vectorized j loop over W[j, k] has stride K). */
static void test_sampler_tiles(const char *spec, int n) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
  char *text = w ? cwm_workload_print(w) : NULL;
  if (!text) { CHECK(text != NULL); return; }
  for (char *q; (q = strstr(text, " const"));) memmove(q, q + 6, strlen(q + 6) + 1);
  cwm_workload *pw = parse(text);
  cwm_dag *d = cwm_dag_new(w, &e), *pd = pw ? cwm_dag_new(pw, &e) : NULL;
  cwm_space_opts so;
  cwm_space_opts_default(&so);
  cwm_rng r;
  cwm_rng_seed(&r, 5);
  cwm_state **c = NULL;
  int nc = 0, tiles = 0, plain = 0, rw = 0, rt = 0;
  CHECK(d && pd && cwm_sample_initial(d, &so, &r, n, &c, &nc, &e) == 0);
  for (int i = 0; i < nc; i++) {
    cwm_kernel k;
    if (cwm_codegen(c[i], NULL, &k, &e) == 0) {
      tiles += body_has_tile(k.body);
      rw += k.npacked > 0;
      cwm_kernel_free(&k);
    }
    cwm_state *ps = NULL;
    if (cwm_state_replay(pd, c[i]->steps, c[i]->nsteps, &ps, NULL, &e) == 0) plain += has_tile_rt(ps, &rt);
    cwm_state_free(ps);
  }
  fprintf(stderr, "%s: %d sampled candidates, %d rewritten, register tiles %d (%d without const, %d of those "
          "candidates packing W at run time)\n", spec, nc, rw, tiles, plain, rt);
  /* without the marking, a vectorized j loop over W[j, k] copies W at run time instead, and so
   * reaches the register tile about as often */
  CHECK(rw > nc / 2 && tiles > 0 && rt > 0 && plain * 4 >= tiles * 3);
  cwm_states_free(c, nc);
  cwm_dag_free(d);
  cwm_dag_free(pd);
  cwm_workload_free(w);
  cwm_workload_free(pw);
  free(text);
}

/* The sampler's reordered innermost tiles: a conv that vectorizes its output channels reaches a
 * register tile whose stores are strided (CWM_STORES); those kernels compute the right result. */
static void test_strided_tiles(const char *spec, int n) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
  if (!w) { CHECKF(w != NULL, "%s: %s", spec, e.msg); return; }
  cwm_measure_opts mo = test_measure_opts(0);
  mo.cflags = "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -fPIC -shared -Wall -Wextra -Wno-maybe-uninitialized -Werror";
  cwm_task *t = cwm_task_new(w, &mo, &e);
  if (!t) { CHECKF(t != NULL, "%s", e.msg); cwm_workload_free(w); return; }
  cwm_space_opts so;
  cwm_space_opts_default(&so);
  cwm_rng r;
  cwm_rng_seed(&r, 21);
  cwm_state **c = NULL, *pick[8];
  int nc = 0, np = 0, reordered = 0;
  CHECK(cwm_sample_initial(cwm_task_dag(t), &so, &r, n, &c, &nc, &e) == 0);
  for (int i = 0; i < nc; i++) {
    cwm_kernel k;
    if (cwm_codegen(c[i], NULL, &k, &e)) continue;
    if (strstr(k.body, "CWM_STORES(&") && np < 8) pick[np++] = c[i];
    cwm_kernel_free(&k);
    for (int j = 0; j < c[i]->nsteps; j++) reordered += c[i]->steps[j].kind == CWM_S_RE;
  }
  fprintf(stderr, "%s: %d sampled, %d RE steps (sketch and annotation), %d strided register tiles measured\n", spec, nc, reordered, np);
  CHECKF(np > 0, "%s: no sampled candidate reaches a strided register tile", spec);
  cwm_record recs[8];
  memset(recs, 0, sizeof recs);
  CHECKF(np == 0 || cwm_task_measure(t, pick, np, recs, &e) == 0, "%s", e.msg);
  for (int i = 0; i < np; i++) {
    CHECKF(recs[i].error == 0, "%s: strided tile %d: %s: %s", spec, i, cwm_merr_name(recs[i].error), recs[i].msg);
    cwm_record_free(&recs[i]);
  }
  cwm_states_free(c, nc);
  cwm_task_free(t);
  cwm_workload_free(w);
}

int main(void) {
  test_text();
  test_runner();
  test_print_and_stores();
  test_export();
  test_sampler_tiles("dense M=128 N=768 K=768 bias=1 act=none", 300);
  test_strided_tiles("conv2d C=5 H=9 W=11 K=16 R=3 S=3 stride=2 pad=1 bias=1 act=relu", 300);
  int count = getenv("CWM_LAYOUT_COUNT") ? atoi(getenv("CWM_LAYOUT_COUNT")) : 8;
  static const char *dense_extra[] = {
      DENSE_FUSED(7, "1,2,2", 24, "1,1,5", 19, "4"),  /* uneven j and k: padded layout */
      DENSE_FUSED(7, "1,1,8", 24, "1,2,8", 19, "19"), /* a j part overshooting inside the tile */
      DENSE_FUSED(7, "2,1,1", 24, "3,1,8", 19, "1"),
  };
  run_workload("dense M=7 N=24 K=19 bias=1 act=none", count, 11, dense_extra, 3);
  run_workload("dense M=16 N=40 K=24 bias=0 act=none", count, 12, NULL, 0);
  run_workload("dense M=9 N=16 K=12 bias=1 act=gelu", count, 13, NULL, 0);
  run_workload("conv2d C=5 H=9 W=11 K=6 R=3 S=3 stride=1 pad=1 bias=1 act=relu", count, 14, NULL, 0);
  run_workload("conv2d C=3 H=12 W=12 K=8 R=3 S=3 stride=2 pad=0 bias=0 act=none", count, 15, NULL, 0);
  run_workload("dwconv2d C=4 H=12 W=10 R=3 S=3 stride=1 pad=1", count, 16, NULL, 0);
  run_workload("dwconv2d C=6 H=9 W=9 R=5 S=5 stride=2 pad=2 bias=1 act=relu", count, 17, NULL, 0);
  /* no weight: the second operand b[B, N, K] is packed inside the kernel when j is vectorized */
  run_workload("batch_matmul B=3 M=8 N=24 K=7", count, 18, NULL, 0);
  run_workload("batch_matmul B=2 M=5 N=17 K=9", count, 19, NULL, 0);
  return test_done();
}

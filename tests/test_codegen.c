/* test_codegen.c: the property test of the code generator. For every op kind of the suite
 * (small shapes, odd sizes included), seeded random step lists must replay, print
 * deterministically, compile, and compute what the reference computes.
 * CWM_PROPERTY_COUNT sets the lists per workload (default 100); CWM_PROPERTY_FULL=1 uses the
 * real suite shapes instead (the long target). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cwm/codegen.h"
#include "cwm/search.h"
#include "testlib.h"

static const char *SMALL[] = {
    "dense M=7 N=24 K=19 bias=1 act=none",
    "dense M=9 N=16 K=12 bias=1 act=gelu",
    "dense M=5 N=12 K=8 bias=1 act=relu",
    "matmul M=16 N=16 K=16",
    "matmul M=15 N=17 K=13",
    "batch_matmul B=3 M=8 N=9 K=7",
    "batch_matmul B=2 M=1 N=10 K=21",
    "softmax B=2 M=5 N=17",
    "layernorm M=6 N=33",
    "conv2d C=3 H=15 W=13 K=4 R=7 S=7 stride=2 pad=3 bias=1 act=relu",
    "conv2d C=5 H=9 W=11 K=6 R=3 S=3 stride=1 pad=1 bias=1 act=relu",
    "conv2d C=6 H=7 W=7 K=8 R=1 S=1 stride=1 pad=0 bias=1 act=none",
    "dwconv2d C=4 H=12 W=10 R=3 S=3 stride=1 pad=1",
    /* padding loops of 16 and more: partitioned where the select's condition holds */
    "conv2d C=3 H=9 W=20 K=4 R=3 S=3 stride=2 pad=1 bias=1 act=relu",
    "dwconv2d C=3 H=7 W=33 R=5 S=5 stride=2 pad=2",
};

/* Bytes of the intermediate buffers a state allocates at root: random rfactors of full-size
 * workloads can ask for gigabytes, which the runner rightly refuses; such draws are redrawn. */
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

static void run_workload(const char *spec, int count, uint64_t seed, int full) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
  CHECKF(w != NULL, "%s: %s", spec, e.msg);
  if (!w) return;
  cwm_measure_opts mo = test_measure_opts(0);
  /* random schedules of full-size workloads can take seconds per call: check, do not time */
  if (full) mo.run_timeout_s = 120;
  mo.batch = 8;
  /* the generated C must compile warning-free under -Wall -Wextra; -Wmaybe-uninitialized is off
   * because GCC cannot see that a guarded read of a local buffer only touches elements its
   * equally guarded producer wrote (the reference check proves every value) */
  mo.cflags = "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -fPIC -shared -Wall -Wextra -Wno-maybe-uninitialized -Werror";
  cwm_task *t = cwm_task_new(w, &mo, &e);
  CHECK(t != NULL);
  cwm_rng r;
  cwm_rng_seed(&r, seed);
  cwm_state **states = calloc((size_t)count, sizeof *states);
  for (int i = 0; i < count; i++) {
    cwm_sample_steps(cwm_task_dag(t), &r, 1 + cwm_rng_int(&r, 24), &states[i], &e);
    while (root_bytes(states[i]) > 1e9) {
      cwm_state_free(states[i]);
      cwm_sample_steps(cwm_task_dag(t), &r, 1 + cwm_rng_int(&r, 24), &states[i], &e);
    }
    /* steps print, parse back and replay to the same printed state */
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_steps_print(states[i]->steps, states[i]->nsteps, &b);
    cwm_step *steps = NULL;
    int n = 0;
    int rc = cwm_steps_parse(b.s ? b.s : "[]", &steps, &n, &e);
    CHECKF(rc == 0 && n == states[i]->nsteps, "%s: steps do not parse back: %s", spec, e.msg);
    cwm_state *again = NULL;
    rc = rc ? rc : cwm_state_replay(cwm_task_dag(t), steps, n, &again, NULL, &e);
    CHECKF(rc == 0, "%s: replay failed: %s (%s)", spec, e.msg, b.s);
    if (again) {
      char *p1 = cwm_state_print(states[i]), *p2 = cwm_state_print(again);
      CHECKF(!strcmp(p1, p2), "%s: replayed state prints differently: %s", spec, b.s);
      free(p1);
      free(p2);
      cwm_state_free(again);
    }
    free(steps);
    cwm_buf_free(&b);
  }
  cwm_record *recs = calloc((size_t)count, sizeof *recs);
  int rc = cwm_task_measure(t, states, count, recs, &e);
  CHECKF(rc == 0, "%s: measure failed: %s", spec, e.msg);
  int bad = 0;
  int slow = 0;
  for (int i = 0; i < count && rc == 0; i++) {
    if (full && recs[i].error == CWM_MERR_RUN_TIMEOUT) {
      /* at full size a random schedule can be correct yet take minutes (e.g. a stage attached
       * where bound inference falls back to the whole tensor): not checkable, not a failure */
      slow++;
    } else if (recs[i].error) {
      cwm_buf b;
      cwm_buf_init(&b);
      cwm_steps_print(recs[i].steps, recs[i].nsteps, &b);
      CHECKF(recs[i].error == 0, "%s: list %d: %s: %s\n  steps: %s", spec, i, cwm_merr_name(recs[i].error),
             recs[i].msg, b.s);
      cwm_buf_free(&b);
      bad++;
    }
    cwm_record_free(&recs[i]);
    cwm_state_free(states[i]);
  }
  fprintf(stderr, "%-70s %d lists, %d failed, %d too slow to check\n", spec, count, bad, slow);
  free(recs);
  free(states);
  cwm_task_free(t);
  cwm_workload_free(w);
}

/* Uneven splits (a schedule of 1024 replayed on 1023, tiles that overshoot) end in loop bounds,
 * not an if around every statement, and the kernel still computes the reference. */
static void uneven_bounds(void) {
  static const char *cases[][2] = {
      {"matmul M=15 N=17 K=13",
       "[[\"CHW\",2,\"local\"],[\"SP\",2,0,15,[1,4,1],1],[\"SP\",2,4,17,[2,2,8],1],[\"SP\",2,8,13,[4],1],"
       "[\"RE\",2,[0,4,1,5,8,2,6,9,3,7]],[\"FSP\",3,0,1,1],[\"FSP\",3,2,2,1],[\"RE\",3,[0,2,1,3]],"
       "[\"CA\",2,3,1],[\"FU\",3,[0,1]],[\"AN\",3,0,3],[\"PR\",2,0,\"auto_unroll_max_step$64\"],[\"AN\",2,9,2]]"},
      {"dense M=9 N=20 K=11 bias=1 act=relu",
       "[[\"SP\",3,0,9,[4],1],[\"SP\",3,2,20,[8],1],[\"SP\",3,4,11,[3],1],[\"RE\",3,[0,2,4,1,5,3]],"
       "[\"AN\",3,5,2]]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cwm_err e = {0};
    cwm_workload *w = cwm_workload_from_spec(cases[i][0], NULL, &e);
    cwm_measure_opts mo = test_measure_opts(0);
    cwm_task *t = w ? cwm_task_new(w, &mo, &e) : NULL;
    cwm_step *steps = NULL;
    int n = 0;
    cwm_state *s = NULL;
    CHECKF(t && cwm_steps_parse(cases[i][1], &steps, &n, &e) == 0 &&
               cwm_state_replay(cwm_task_dag(t), steps, n, &s, NULL, &e) == 0,
           "%s: %s", cases[i][0], e.msg);
    if (s) {
      cwm_kernel k;
      CHECKF(cwm_codegen(s, NULL, &k, &e) == 0, "%s", e.msg);
      CHECKF(strstr(k.body, "_n0 = ") != NULL, "%s: no loop took its guard as a bound:\n%s", cases[i][0], k.body);
      /* no guard is left on the update statement: every "if (" line is gone, but for the test of
       * whether a register tile lies inside the guards (one per tile, not per element) */
      int left = 0;
      for (const char *q = strstr(k.body, "if (("); q; q = strstr(q + 1, "if ((")) {
        const char *nl = q; /* the end of the line before, which ends the comment src/codegen/loops.c puts there */
        while (nl > k.body && *nl != '\n') nl--;
        left += !(nl - k.body > 7 && !strncmp(nl - 7, "edge */", 7));
      }
      CHECKF(left == 0, "%s: a per-element guard is left:\n%s", cases[i][0], k.body);
      cwm_kernel_free(&k);
      cwm_record rec;
      memset(&rec, 0, sizeof rec);
      CHECKF(cwm_task_measure(t, &s, 1, &rec, &e) == 0 && rec.error == 0, "%s: %s %s", cases[i][0], e.msg, rec.msg);
      cwm_record_free(&rec);
      cwm_state_free(s);
    }
    free(steps);
    cwm_task_free(t);
    cwm_workload_free(w);
  }
}

/* Writes workload text to a new temporary file made from the template path; spec = "@path". */
static void write_workload(const char *text, char *path, char *spec, size_t n) {
  int fd = mkstemp(path);
  CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  if (fd >= 0) close(fd);
  snprintf(spec, n, "@%s", path);
}

/* User names that the generator once used for itself (its accumulators, temporaries, pack loop
 * counters, macro locals): the generator's own names all hold a double underscore, which a user
 * name cannot, so these compile and pass the reference check. */
static void names_of_the_generator(int count) {
  static const char *text = "input q_[16, 24]\n"
                            "input o[32, 24] const\n"
                            "input t0[32]\n"
                            "acc[i_:16, d0:32] = sum(l_:24 : q_[i_, l_] * o[d0, l_])\n"
                            "x_0[s_:16, p_:32] = gelu(acc[s_, p_] + t0[p_])\n"
                            "r_[v_:16, acc0:32] = max(x_0[v_, acc0], 0)\n";
  char path[] = "/tmp/cwm-names-XXXXXX", spec[64];
  write_workload(text, path, spec, sizeof spec);
  run_workload(spec, count, 77, 0);
  unlink(path);
}

/* A select's innermost loop split where its condition holds (src/codegen/partition.c): conditions
 * with coefficients 2 and -1 and none on the loop variable, in random schedules and in the
 * initial state, whose code must hold the split loops. */
static void partitioned_selects(int count) {
  static const char *text =
      "input I[2, 37]\n"
      "P[c:2, p:2, j:19] = select(j * 2 + p >= 1 && j * 2 + p < 38 && c < 2, I[c, j * 2 + p - 1], 0)\n"
      "Q[c:2, j:20] = select(20 - j > 2 && j > 1, P[c, 1, 19 - j], 0)\n"
      "R[c:2, j:40] = select(c >= 1, I[c, j % 37], 1)\n"
      "out[c:2, x:18] = P[c, 0, x] + P[c, 1, x + 1] * Q[c, x] + R[c, x * 2]\n";
  char path[] = "/tmp/cwm-part-XXXXXX", spec[64];
  write_workload(text, path, spec, sizeof spec);
  run_workload(spec, count, 91, 0);
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
  cwm_measure_opts mo = test_measure_opts(0);
  cwm_task *t = w ? cwm_task_new(w, &mo, &e) : NULL;
  cwm_state *s = NULL;
  CHECKF(t && cwm_state_replay(cwm_task_dag(t), NULL, 0, &s, NULL, &e) == 0, "%s", e.msg);
  if (s) {
    cwm_kernel k;
    CHECKF(cwm_codegen(s, NULL, &k, &e) == 0, "%s", e.msg);
    int n = 0;
    for (const char *q = strstr(k.body, "condition holds"); q; q = strstr(q + 1, "condition holds")) n++;
    /* P's j (19), Q's j (20) and R's j (40), whose condition (c >= 1) does not hold j: the whole
     * row takes one branch */
    CHECKF(n == 3, "%d partitioned loops, not 3:\n%s", n, k.body);
    cwm_kernel_free(&k);
    cwm_record rec;
    memset(&rec, 0, sizeof rec);
    CHECKF(cwm_task_measure(t, &s, 1, &rec, &e) == 0 && rec.error == 0, "%s %s", e.msg, rec.msg);
    cwm_record_free(&rec);
    cwm_state_free(s);
  }
  cwm_task_free(t);
  cwm_workload_free(w);
  unlink(path);
}

/* exp and erf as generated kernels define them (cwm_expf, cwm_erff), compiled as the builder
 * compiles kernels (-O3, trapping math off) so that the loop below vectorizes them: their range is
 * handled without selects, by the exponent alone, so the edges are asserted here: 0 for -inf and
 * far below, inf above the float range, NaN kept, and the relative error on a sweep of the range
 * and the erf's absolute error against libm's. */
static void math_edges(void) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec("dense M=1 N=16 K=4 bias=1 act=gelu", NULL, &e);
  cwm_dag *d = w ? cwm_dag_new(w, &e) : NULL;
  cwm_state *s = NULL;
  CHECKF(d && cwm_state_replay(d, NULL, 0, &s, NULL, &e) == 0, "%s", e.msg);
  cwm_kernel k;
  cwm_codegen_opts co = {.vec_lanes = 8};
  if (!s || cwm_codegen(s, &co, &k, &e)) {
    CHECKF(0, "codegen: %s", e.msg);
    cwm_state_free(s);
    cwm_dag_free(d);
    cwm_workload_free(w);
    return;
  }
  char dir[256], path[300], cmd[1024];
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(dir, sizeof dir, "%s/cwm_test_math_XXXXXX", tmp);
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/m.c", dir);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f) {
    const char *defs = strstr(k.body, "#ifndef CWM_MATH_DEFS"), *end = defs ? strstr(defs, "#endif\n") : NULL;
    CHECK(end != NULL);
    fprintf(f, "#include <math.h>\n#include <stdio.h>\n%.*s#endif\n", end ? (int)(end - defs) : 0, defs ? defs : "");
    fputs("static float x[4096], y[4096], z[4096];\n"
          "int main(void) {\n"
          "  int n = 0, bad = 0;\n"
          "  for (float v = -87.3f; v < 88.3f && n < 4096; v += 0.0431f) x[n++] = v;\n"
          "  for (int i = 0; i < n; i++) { y[i] = cwm_expf(x[i]); z[i] = cwm_erff(x[i] / 20); }\n"
          "  for (int i = 0; i < n; i++) {\n"
          "    double t = exp((double)x[i]), u = erf((double)x[i] / 20);\n"
          "    if (fabs(y[i] - t) > 2e-7 * t) { printf(\"exp(%g) = %g, not %g\\n\", x[i], y[i], t); bad++; }\n"
          "    if (fabs(z[i] - u) > 2e-6) { printf(\"erf(%g) = %g, not %g\\n\", x[i] / 20, z[i], u); bad++; }\n"
          "  }\n"
          "  volatile float edge[] = {-INFINITY, -1000.0f, -88.5f, 89.0f, 1000.0f, INFINITY, NAN};\n"
          "  float want[] = {0.0f, 0.0f, 0.0f, INFINITY, INFINITY, INFINITY, NAN};\n"
          "  for (int i = 0; i < 7; i++) {\n"
          "    float r = cwm_expf(edge[i]);\n"
          "    if (isnan(want[i]) ? !isnan(r) : r != want[i]) { printf(\"exp(%g) = %g, not %g\\n\", edge[i], r, want[i]); bad++; }\n"
          "  }\n"
          "  if (cwm_erff(INFINITY) != 1.0f || cwm_erff(-INFINITY) != -1.0f) { printf(\"erf(+-inf)\\n\"); bad++; }\n"
          "  return bad != 0;\n"
          "}\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cd %s && cc -O3 -march=native -fno-math-errno -fno-trapping-math m.c -lm -o m && ./m", dir);
    CHECKF(system(cmd) == 0, "the kernels' exp or erf is off (%s)", cmd);
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
  cwm_kernel_free(&k);
  cwm_state_free(s);
  cwm_dag_free(d);
  cwm_workload_free(w);
}

int main(void) {
  int count = getenv("CWM_PROPERTY_COUNT") ? atoi(getenv("CWM_PROPERTY_COUNT")) : 100;
  if (getenv("CWM_PROPERTY_FULL")) {
    static const char *ids[] = {"dense_qkv", "dense_ffn1", "dense_ffn2", "bmm_qk", "bmm_av",
                                "softmax_attn", "layernorm", "conv_stem", "conv_s1_3x3", "conv_s1_1x1",
                                "conv_s2_3x3", "conv_s3_3x3", "conv_s4_3x3", "dwconv_mbv2",
                                "matmul_1024", "matmul_1023"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) run_workload(ids[i], count, 1000 + i, 1);
  } else {
    for (size_t i = 0; i < sizeof SMALL / sizeof SMALL[0]; i++) run_workload(SMALL[i], count, 1 + i, 0);
    uneven_bounds();
    names_of_the_generator(count);
    partitioned_selects(count);
    math_edges();
  }
  return test_done();
}

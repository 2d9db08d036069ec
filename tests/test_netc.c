/* test_netc.c: whole networks from ONNX to a running library. The small models of tests/models
 * (a ResNet-style CNN and a 2-layer BERT-style encoder, exported from PyTorch by
 * scripts/export-models.py with PyTorch's outputs beside them) are imported, partitioned,
 * compiled (untuned, and with random schedules from a log, which exercises the kernels' weight
 * layouts), built with the C compiler, run by the generated runner on the reference inputs, and
 * compared with PyTorch's outputs. Also: the partition fuses what it should, the arena is smaller
 * than the tensors' sum, a weights file of another compile is refused. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cwm/netc.h"
#include "cwm/record.h"
#include "cwm/sketch.h"
#include "testlib.h"

extern char **environ;
static char tmpdir[64];

static const char *source_dir(void) {
  const char *d = getenv("CWM_SOURCE_DIR");
  return d && *d ? d : ".";
}

/* Runs argv (stderr into errpath when given); its exit status, -1 if it did not exit. */
static int run_err(char *const argv[], const char *errpath) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (errpath) posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc) return -1;
  int st;
  if (waitpid(pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int run(char *const argv[]) { return run_err(argv, NULL); }

static float *read_floats(const char *path, long *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  float *d = calloc((size_t)len + 8, 1); /* NUL after the data: also read as text */
  *n = (long)fread(d, 1, (size_t)len, f) / 4;
  fclose(f);
  return d;
}

/* max |a - b| / max |b|; -1 when the sizes differ or a file is missing */
static double rel_err(const char *got, const char *want, double *maxabs) {
  long n1 = 0, n2 = 0;
  float *a = read_floats(got, &n1), *b = read_floats(want, &n2);
  double r = -1;
  if (a && b && n1 == n2 && n1 > 0) {
    double mx = 0, ref = 0;
    for (long i = 0; i < n1; i++) {
      double d = fabs((double)a[i] - b[i]);
      if (!(d <= mx)) mx = d; /* NaN counts as worst */
      if (fabs(b[i]) > ref) ref = fabs(b[i]);
    }
    *maxabs = mx;
    r = mx / (ref > 0 ? ref : 1);
  }
  free(a);
  free(b);
  return r;
}

static int count_glue(const cwm_partition *p, const char *op) {
  int n = 0;
  for (int s = 0; s < p->nsteps; s++)
    if (p->steps[s].kind == CWM_GS_NODE && !strcmp(p->g->nodes[p->steps[s].node].op_type, op)) n++;
  return n;
}

static int count_tasks(const cwm_partition *p, const char *op) {
  int n = 0;
  for (int t = 0; t < p->ntasks; t++) n += !strcmp(p->tasks[t].op, op);
  return n;
}

/* A log with one random complete schedule per task. */
static int write_random_log(const cwm_partition *p, const char *path, uint64_t seed) {
  cwm_err e = {0};
  cwm_log *log = cwm_log_open(path, &e);
  if (!log) return 1;
  cwm_rng r;
  cwm_rng_seed(&r, seed);
  cwm_space_opts so;
  cwm_space_opts_default(&so);
  int rc = 0;
  for (int t = 0; t < p->ntasks && !rc; t++) {
    cwm_dag *d = cwm_dag_new(p->tasks[t].w, &e);
    cwm_state **st = NULL;
    int n = 0;
    if (!d || cwm_sample_initial(d, &so, &r, 1, &st, &n, &e) || n < 1) {
      fprintf(stderr, "task %s: %s\n", p->tasks[t].name, e.msg);
      rc = 1;
    } else {
      cwm_record rec;
      cwm_record_init(&rec);
      cwm_workload_key(p->tasks[t].w, rec.key);
      cwm_record_set_steps(&rec, st[0]->steps, st[0]->nsteps);
      rec.ncosts = 1;
      rec.costs[0] = 1e-4;
      rc = cwm_log_append(log, &rec, &e);
      cwm_record_free(&rec);
    }
    cwm_states_free(st, n);
    cwm_dag_free(d);
  }
  cwm_log_close(log);
  return rc;
}

/* Compiles the model (schedules from log, or untuned), builds the runner, runs it on the
 * reference inputs and returns the relative error against PyTorch's outputs (-1: a step failed). */
static double compile_and_run(const cwm_partition *p, const char *model, const char *log, const char *tag,
                              cwm_netc_result *res) {
  char dir[512], in[1024], ref[1024], out[600], csrc[600], rsrc[600], exe[600];
  snprintf(dir, sizeof dir, "%s/%s_%s", tmpdir, model, tag);
  snprintf(in, sizeof in, "%s/tests/models/%s.in.bin", source_dir(), model);
  snprintf(ref, sizeof ref, "%s/tests/models/%s.out.bin", source_dir(), model);
  cwm_netc_sched *sched = calloc((size_t)p->ntasks + 1, sizeof *sched);
  cwm_err e = {0};
  int nbad = -1;
  int rc = cwm_netc_schedules(p, log, sched, &nbad, &e);
  CHECKF(rc == 0, "%s", e.msg);
  if (log)
    for (int t = 0; t < p->ntasks; t++) CHECKF(sched[t].from_log, "%s: task %s has no schedule from the log", model, p->tasks[t].name);
  cwm_netc_opts o;
  cwm_netc_opts_default(&o);
  o.prefix = "net";
  rc = rc ? rc : cwm_netc_write(p, sched, dir, &o, res, &e);
  CHECKF(rc == 0, "%s: %s", model, e.msg);
  cwm_netc_schedules_free(sched, p->ntasks);
  free(sched);
  if (rc) return -1;
  CHECK(res->tuned == (log ? p->ntasks : 0));
  snprintf(csrc, sizeof csrc, "%s/net.c", dir);
  snprintf(rsrc, sizeof rsrc, "%s/net_runner.c", dir);
  snprintf(exe, sizeof exe, "%s/runner", dir);
  char *cc[] = {"cc", "-O2", "-march=native", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-Wall", "-Werror",
                "-Wno-unused-function", "-Wno-unused-variable", "-Wno-unused-but-set-variable", csrc, rsrc, "-lm", "-o",
                exe, NULL};
  rc = run(cc);
  CHECKF(rc == 0, "%s: building the generated library failed", dir);
  if (rc) return -1;
  char weights[600];
  snprintf(weights, sizeof weights, "%s/net_weights.bin", dir);
  snprintf(out, sizeof out, "%s/out.bin", dir);
  char *rn[] = {exe, weights, "-i", in, "-o", out, NULL};
  rc = run(rn);
  CHECKF(rc == 0, "%s: the runner failed (%d)", dir, rc);
  double mx = 0, r = rel_err(out, ref, &mx);
  fprintf(stderr, "test_netc: %s %s: max abs error %.3g, relative to max |ref| %.3g\n", model, tag, mx, r);
  return r;
}

static void test_model(const char *model, int is_cnn) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/models/%s.onnx", source_dir(), model);
  cwm_err e = {0};
  cwm_graph *g = cwm_onnx_load(path, &e);
  CHECKF(g != NULL, "%s", e.msg);
  if (!g) return;
  int rc = cwm_graph_infer(g, &e);
  CHECKF(rc == 0, "%s", e.msg);
  cwm_partition *p = rc ? NULL : cwm_graph_partition(g, &e);
  CHECKF(p != NULL, "%s", e.msg);
  if (!p) {
    cwm_graph_free(g);
    return;
  }
  if (is_cnn) {
    /* stem, 2 blocks of 2 convs, a projection, a depthwise conv; BN folded, ReLU fused */
    CHECK(count_tasks(p, "conv2d") >= 3);
    CHECK(count_tasks(p, "dwconv2d") == 1);
    CHECK(count_tasks(p, "dense") == 1);
    CHECK(count_glue(p, "BatchNormalization") == 0);
    CHECK(count_glue(p, "Conv") == 0);
    CHECK(count_glue(p, "MaxPool") == 1);
    /* both residual adds (with their ReLU) are conv epilogues */
    CHECK(count_glue(p, "Add") == 0 && count_glue(p, "Relu") == 0);
    int res = 0;
    for (int t = 0; t < p->ntasks; t++) res += strstr(p->tasks[t].spec, "+residual") != NULL;
    CHECK(res == 2);
  } else {
    /* q, k, v, output, two FFN denses per layer; LayerNorm and GELU patterns taken whole */
    CHECK(count_tasks(p, "dense") >= 3);
    /* QK^T and AV have one shape here (sequence 16 = head size 16): one task run 4 times */
    CHECK(count_tasks(p, "batch_matmul") == 1);
    for (int t = 0; t < p->ntasks; t++)
      if (!strcmp(p->tasks[t].op, "batch_matmul")) CHECK(p->tasks[t].weight == 4);
    CHECK(count_tasks(p, "softmax") == 1);
    CHECK(count_tasks(p, "layernorm") == 1);
    CHECK(count_glue(p, "ReduceMean") == 0);
    CHECK(count_glue(p, "Erf") == 0);
    CHECK(count_glue(p, "MatMul") == 0);
    /* k's Transpose went into the product's layout step, q's and the output's stay glue */
    CHECK(count_glue(p, "Transpose") == 4);
    CHECK(count_glue(p, "Softmax") == 0);
    int gelu_fused = 0;
    for (int t = 0; t < p->ntasks; t++) gelu_fused += strstr(p->tasks[t].spec, "act=gelu") != NULL;
    CHECK(gelu_fused == 1);
    double w = 0;
    for (int t = 0; t < p->ntasks; t++) w += !strcmp(p->tasks[t].op, "layernorm") ? p->tasks[t].weight : 0;
    CHECK(w == 5); /* the embeddings' and two per layer */
  }
  cwm_netc_result res;
  double tol = 2e-4;
  double r = compile_and_run(p, model, NULL, "untuned", &res);
  CHECKF(r >= 0 && r <= tol, "%s untuned: relative error %g", model, r);
  CHECKF(res.arena_bytes > 0 && res.arena_bytes < res.naive_bytes, "arena %lld, naive %lld", res.arena_bytes,
         res.naive_bytes);
  char log[600];
  snprintf(log, sizeof log, "%s/%s.jsonl", tmpdir, model);
  CHECK(write_random_log(p, log, 7) == 0);
  r = compile_and_run(p, model, log, "random", &res);
  CHECKF(r >= 0 && r <= tol, "%s with random schedules: relative error %g", model, r);
  if (is_cnn) {
    /* a CPU without an instruction set the library was compiled for is named, not a SIGILL: the
     * library built to pretend avx512f is missing refuses to create the model */
    char csrc[700], rsrc[700], exe[700], errf[700], wts[700];
    snprintf(csrc, sizeof csrc, "%s/%s_untuned/net.c", tmpdir, model);
    snprintf(rsrc, sizeof rsrc, "%s/%s_untuned/net_runner.c", tmpdir, model);
    snprintf(exe, sizeof exe, "%s/%s_untuned/nocpu", tmpdir, model);
    snprintf(errf, sizeof errf, "%s/%s_untuned/nocpu.err", tmpdir, model);
    snprintf(wts, sizeof wts, "%s/%s_untuned/net_weights.bin", tmpdir, model);
    char *cc[] = {"cc", "-O1", "-march=native", "-fopenmp", "-DCWM_PRETEND_MISSING=\"avx512f\"", csrc, rsrc, "-lm", "-o", exe, NULL};
    CHECK(run(cc) == 0);
    char *rn[] = {exe, wts, NULL};
    CHECK(run_err(rn, errf) == 1);
    long n = 0;
    float *txt = read_floats(errf, &n); /* the bytes of the message */
    CHECKF(txt && strstr((const char *)txt, "lacks avx512f"), "message: %s", txt ? (const char *)txt : "(none)");
    free(txt);
  }
  if (is_cnn) {
    /* a weights file of another compile (here: one byte changed) is refused */
    char wpath[700], exe[700], in[1024];
    snprintf(wpath, sizeof wpath, "%s/%s_random/net_weights.bin", tmpdir, model);
    snprintf(exe, sizeof exe, "%s/%s_random/runner", tmpdir, model);
    snprintf(in, sizeof in, "%s/tests/models/%s.in.bin", source_dir(), model);
    FILE *f = fopen(wpath, "r+b");
    CHECK(f != NULL);
    if (f) {
      fseek(f, 200, SEEK_SET);
      int ch = fgetc(f);
      fseek(f, 200, SEEK_SET);
      fputc(ch ^ 0x40, f);
      fclose(f);
      char *rn[] = {exe, wpath, "-i", in, NULL};
      CHECK(run(rn) == 1);
    }
  }
  cwm_partition_free(p);
  cwm_graph_free(g);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cwm-netc-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  test_model("tiny_cnn", 1);
  test_model("tiny_bert", 0);
  char *rm[] = {"rm", "-rf", tmpdir, NULL};
  if (!test_failures) run(rm);
  return test_done();
}

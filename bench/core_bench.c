/* core_bench.c: can the code generator be fast when the schedule is right? Times, in one run,
 * the hand-written schedules of matmul_1024, dense_qkv and conv_s1_3x3 (src/search/hand.c), the
 * naive loop nest and oneDNN on the same shapes at 1 and 2 threads, and prints GFLOP/s and the
 * ratio to oneDNN; then how many candidates per second the builder compiles for dense_qkv.
 * usage: core_bench [--threads 1,2] [--skip-builder] [--skip-speed]  (run on a quiet machine) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cwm/search.h"
#include "env.h"
#include "anchors.h"


static int speed(const char *id, int threads) {
  cwm_err e = {0};
  char spec[512];
  if (cwm_suite_lookup(NULL, id, spec, sizeof spec, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return 1;
  }
  cwm_workload *w = cwm_workload_from_spec(id, NULL, &e);
  cwm_step *steps;
  int n;
  if (!w || cwm_hand_schedule(id, &steps, &n, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return 1;
  }
  cwm_measure_opts mo;
  cwm_measure_opts_default(&mo);
  cli_env_measure(&mo);
  mo.threads = threads;
  mo.repeats = 7;
  mo.min_repeat_ms = 50;
  cwm_task *t = cwm_task_new(w, &mo, &e);
  cwm_state *st[2];
  st[0] = cwm_state_init(cwm_task_dag(t));
  if (cwm_state_replay(cwm_task_dag(t), steps, n, &st[1], NULL, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return 1;
  }
  cwm_record rec[2];
  if (cwm_task_measure(t, st, 2, rec, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return 1;
  }
  double flops = cwm_task_flops(t);
  double naive = rec[0].error ? -1 : cwm_record_cost(&rec[0]);
  double hand = rec[1].error ? -1 : cwm_record_cost(&rec[1]);
  double dnnl = anchor_seconds_child(0, NULL, "", spec, threads);
  printf("%-12s %7d %12.2f %12.2f %12.2f %14.2f\n", id, threads, naive > 0 ? flops / naive * 1e-9 : 0,
         hand > 0 ? flops / hand * 1e-9 : 0, dnnl > 0 ? flops / dnnl * 1e-9 : 0,
         hand > 0 && dnnl > 0 ? dnnl / hand : 0);
  fflush(stdout);
  for (int i = 0; i < 2; i++) {
    if (rec[i].error) fprintf(stderr, "%s: %s\n", cwm_merr_name(rec[i].error), rec[i].msg);
    cwm_record_free(&rec[i]);
    cwm_state_free(st[i]);
  }
  free(steps);
  cwm_task_free(t);
  cwm_workload_free(w);
  return 0;
}

/* Candidates per second the builder compiles (fresh cache), one per compiler call and batched. */
static int builder(void) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec("dense_qkv", NULL, &e);
  if (!w) {
    fprintf(stderr, "%s\n", e.msg);
    return 1;
  }
  cwm_dag *d = cwm_dag_new(w, &e);
  enum { N = 48 };
  printf("\nbuilder throughput, dense_qkv, %d random candidates, fresh cache, 2 compiler jobs\n", N);
  printf("%-8s %12s %14s\n", "batch", "seconds", "candidates/s");
  int batches[] = {1, 4, 8};
  for (int bi = 0; bi < 3; bi++) {
    char dir[] = "/tmp/cwm-bench-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    cwm_rng r;
    cwm_rng_seed(&r, 7);
    cwm_kernel ks[N];
    cwm_candidate cs[N];
    for (int i = 0; i < N; i++) {
      cwm_state *s;
      cwm_sample_steps(d, &r, 12, &s, &e);
      cwm_codegen(s, NULL, &ks[i], &e);
      cwm_kernel_candidate(&ks[i], &cs[i]);
      cwm_state_free(s);
    }
    cwm_measure_opts mo;
    cwm_measure_opts_default(&mo);
    cli_env_measure(&mo);
  cli_env_measure(&mo);
    mo.cache_dir = dir;
    mo.batch = batches[bi];
    mo.build_jobs = 2;
    char *so[N];
    cwm_result res[N];
    double t0 = cwm_now();
    cwm_build(&mo, cs, N, so, res, &e);
    double dt = cwm_now() - t0;
    int ok = 0;
    for (int i = 0; i < N; i++) {
      ok += so[i] != NULL;
      free(so[i]);
      cwm_kernel_free(&ks[i]);
    }
    printf("%-8d %12.2f %14.1f   (%d built)\n", batches[bi], dt, ok / dt, ok);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
  }
  cwm_dag_free(d);
  cwm_workload_free(w);
  return 0;
}

int main(int argc, char **argv) {
  cli_env_apply();
  const char *threads = "1,2";
  int skip_builder = 0, skip_speed = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = argv[++i];
    else if (!strcmp(argv[i], "--skip-builder")) skip_builder = 1;
    else if (!strcmp(argv[i], "--skip-speed")) skip_speed = 1;
    else {
      fprintf(stderr, "usage: core_bench [--threads 1,2] [--skip-builder] [--skip-speed]\n");
      return 2;
    }
  }
  if (!skip_speed) {
    printf("GFLOP/s (median of 7 repeats of >= 50 ms); ratio = oneDNN latency / hand latency\n");
    printf("%-12s %7s %12s %12s %12s %14s\n", "workload", "threads", "naive", "hand", "oneDNN", "hand/oneDNN");
    const char *ids[] = {"matmul_1024", "dense_qkv", "conv_s1_3x3"};
    for (int k = 0; k < 3; k++) {
      char tl[64];
      snprintf(tl, sizeof tl, "%s", threads);
      for (char *tok = strtok(tl, ","); tok; tok = strtok(NULL, ","))
        if (speed(ids[k], atoi(tok))) return 1;
    }
  }
  if (!skip_builder && builder()) return 1;
  return 0;
}

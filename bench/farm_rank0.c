/* farm_rank0.c: what rank 0 of the MPI worker farm spends per candidate, the figures of the
 * 100-host model in docs/scale-out.md. Rank 0 searches (the world model ranks a round's
 * candidates), generates each candidate's C code, sends it as a job message, and appends each
 * record to the log (one write + fdatasync). This times the search, the code generation and the
 * log append here, and prints the job message's size per candidate.
 *
 * usage: farm_rank0 [--ids dense_qkv,conv_s2_3x3,...] [--round N] [--log-dir DIR] [--model world|random]
 *   --model      the search's model: world (default; what `cwm tune --model world` runs) or random
 *                (what `cwm dataset measure` runs)
 *   --round N    candidates per search round (default 64, the tuner's)
 *   --log-dir    where the appended log goes (default .): the disk that rank 0's log lives on
 * Output: one row per workload and the medians. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cwm/codegen.h"
#include "cwm/costmodel.h"
#include "cwm/record.h"
#include "cwm/search.h"
#include "cwm/world.h"
#include "env.h"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : 0;
}

int main(int argc, char **argv) {
  cli_env_apply();
  const char *ids = "dense_qkv,dense_ffn1,bmm_qk,conv_s1_3x3,conv_s2_3x3,dwconv_mbv2,softmax_attn,layernorm", *dir = ".",
             *model = "world";
  int round = 64;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ids") && i + 1 < argc) ids = argv[++i];
    else if (!strcmp(argv[i], "--round") && i + 1 < argc) round = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--log-dir") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
    else {
      fprintf(stderr, "usage: farm_rank0 [--ids a,b] [--round N] [--log-dir DIR] [--model world|random]\n");
      return 2;
    }
  }
  if (round < 1) round = 64;
  cwm_err e = {0};
  cwm_costmodel *m = NULL;
  if (!strcmp(model, "random")) {
    m = cwm_costmodel_random(1);
  } else {
    const char *mp = cwm_world_default_path();
    cwm_world *wm = mp ? cwm_world_load(mp, &e) : NULL;
    if (!wm) {
      fprintf(stderr, "farm_rank0: no world model: %s\n", e.msg);
      return 1;
    }
    m = cwm_costmodel_world(wm, NULL, &e);
  }
  if (!m) {
    fprintf(stderr, "farm_rank0: %s\n", e.msg);
    return 1;
  }
  char logp[4200];
  snprintf(logp, sizeof logp, "%s/farm_rank0-%d.jsonl", dir, (int)getpid());
  cwm_log *log = cwm_log_open(logp, &e);
  if (!log) {
    fprintf(stderr, "farm_rank0: %s\n", e.msg);
    return 1;
  }
  double s_search[64], s_gen[64], s_log[64], s_bytes[64];
  int nw = 0;
  printf("%-14s %10s %12s %10s %10s %12s\n", "workload", "proposed", "search_ms", "codegen_ms", "log_ms", "job_bytes");
  char *list = cwm_xstrdup(ids);
  for (char *id = strtok(list, ","); id && nw < 64; id = strtok(NULL, ",")) {
    cwm_workload *w = cwm_workload_from_spec(id, NULL, &e);
    cwm_task *t = w ? cwm_task_new(w, NULL, &e) : NULL;
    cwm_tune_opts to;
    cwm_tune_opts_default(&to);
    to.seed = 1;
    cwm_tuner *tu = t ? cwm_tuner_new(t, m, &to, &e) : NULL;
    if (!tu) {
      fprintf(stderr, "farm_rank0: %s: %s\n", id, e.msg);
      cwm_task_free(t);
      cwm_workload_free(w);
      continue;
    }
    cwm_state **picks = NULL;
    int np = 0;
    double t0 = cwm_now();
    int rc = cwm_tuner_propose(tu, round, &picks, &np, &e);
    double t1 = cwm_now();
    double bytes = 0, tgen = 0, tlog = 0;
    for (int i = 0; i < np && rc == 0; i++) {
      cwm_kernel k;
      double g0 = cwm_now();
      if (cwm_codegen(picks[i], NULL, &k, &e) == 0) {
        tgen += cwm_now() - g0;
        bytes += (double)strlen(k.body) + strlen(k.entry) + 64 + 16.0 * k.nargs;
        cwm_kernel_free(&k);
      }
      cwm_record r;
      cwm_record_init(&r);
      memcpy(r.key, "0123456789abcdef", 17);
      snprintf(r.name, sizeof r.name, "%s", id);
      r.workload = cwm_workload_print(w);
      cwm_record_set_steps(&r, picks[i]->steps, picks[i]->nsteps);
      r.ncosts = 3;
      r.costs[0] = r.costs[1] = r.costs[2] = 1e-4;
      double l0 = cwm_now();
      cwm_log_append(log, &r, &e);
      tlog += cwm_now() - l0;
      cwm_record_free(&r);
    }
    for (int i = 0; i < np; i++) cwm_state_free(picks[i]);
    free(picks);
    if (np > 0) {
      s_search[nw] = (t1 - t0) / np * 1e3;
      s_gen[nw] = tgen / np * 1e3;
      s_log[nw] = tlog / np * 1e3;
      s_bytes[nw] = bytes / np;
      printf("%-14s %10d %12.2f %10.2f %10.2f %12.0f\n", id, np, s_search[nw], s_gen[nw], s_log[nw], s_bytes[nw]);
      nw++;
    }
    cwm_tuner_free(tu);
    cwm_task_free(t);
    cwm_workload_free(w);
  }
  free(list);
  cwm_log_close(log);
  unlink(logp);
  cwm_costmodel_free(m);
  if (!nw) return 1;
  double a = median(s_search, nw), b = median(s_gen, nw), c = median(s_log, nw), d = median(s_bytes, nw);
  printf("median per candidate: search %.2f ms, codegen %.2f ms, log append %.2f ms, job message %.0f bytes\n", a, b,
         c, d);
  printf("rank 0 alone saturates at %.0f candidates/s (1 / (search + codegen + log))\n", 1e3 / (a + b + c));
  return 0;
}

/* cmd_tune_network.c: `cwm tune --network FILE`: tune every subgraph of a network with one budget
 * of trials shared by Ansor's gradient task scheduler; a progress line per round with the
 * estimated end-to-end latency, a table per subgraph at the end, each best kernel exported into
 * DIR/<name>/, and a JSON summary. Ctrl-C ends the run after the measurements in flight. */
#include "cli.h"
#include "env.h"
#include "cwm/costmodel.h"
#include "cwm/scheduler.h"

#include <cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int quiet;
} ui;

static void note(void *ud, const char *line) {
  if (!((ui *)ud)->quiet) fprintf(stderr, "cwm tune: %s\n", line);
}

static void progress(void *ud, const cwm_net_progress *p) {
  if (((ui *)ud)->quiet) return;
  char best[48], missing[64] = "";
  if (p->task_best < 1e9) snprintf(best, sizeof best, "%.2f us", p->task_best * 1e6);
  else snprintf(best, sizeof best, "none yet");
  if (p->missing) snprintf(missing, sizeof missing, " (%d of %d subgraphs not measured yet)", p->missing, p->ntasks);
  fprintf(stderr,
          "cwm tune: round %d%s: %d/%d trials, tuned %s (%d measured), its best %s, est. %.4f ms end to end%s, "
          "%.0f s elapsed, ETA %.0f s\n",
          p->round, p->warmup ? " (warm-up)" : "", p->trials, p->budget, p->name, p->measured, best,
          p->est_latency * 1e3, missing, p->elapsed, p->eta);
}

static cJSON *num_or_null(int ok, double v) { return ok ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static void add_numbers(cJSON *o, const char *const *keys, const double *values, int n) {
  for (int i = 0; i < n; i++) cJSON_AddNumberToObject(o, keys[i], values[i]);
}

static int write_summary(const char *path, const char *file, const cwm_network *net, const cwm_net_result *res,
                         const char *model, unsigned long long seed, int budget, const cwm_measure_opts *mo) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "network", net->name);
  cJSON_AddStringToObject(j, "file", file);
  cJSON_AddStringToObject(j, "model", model);
  cJSON_AddNumberToObject(j, "seed", (double)seed);
  cJSON_AddNumberToObject(j, "trials", budget);
  static const char *const rk[] = {"trials_done", "measured", "resumed", "errors", "rounds",
                                    "threads", "repeats", "min_repeat_ms", "tuning_seconds"};
  const double rv[] = {res->trials, res->measured, res->resumed, res->errors, res->rounds,
                       mo->threads, mo->repeats, mo->min_repeat_ms, res->seconds};
  add_numbers(j, rk, rv, 9);
  /* an end-to-end figure only when every subgraph has a kernel */
  cJSON_AddItemToObject(j, "est_latency_ms", num_or_null(res->missing == 0, res->est_latency * 1e3));
  cJSON_AddNumberToObject(j, "subgraphs_without_kernel", res->missing);
  cJSON *tasks = cJSON_AddArrayToObject(j, "tasks");
  for (int i = 0; i < res->ntasks; i++) {
    const cwm_net_task_result *t = &res->tasks[i];
    int ok = t->best_cost < 1e9;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "spec", net->sub[i].spec);
    cJSON_AddStringToObject(o, "key", t->key);
    cJSON_AddNumberToObject(o, "weight", t->weight);
    cJSON_AddNumberToObject(o, "flops", t->flops);
    cJSON_AddItemToObject(o, "best_us", num_or_null(ok, t->best_cost * 1e6));
    cJSON_AddItemToObject(o, "best_gflops", num_or_null(ok, ok ? t->flops / t->best_cost * 1e-9 : 0));
    cJSON_AddItemToObject(o, "share", num_or_null(ok && res->est_latency > 0,
                                                  ok ? t->weight * t->best_cost / res->est_latency : 0));
    static const char *const tk[] = {"trials", "measured", "resumed", "errors", "rounds"};
    const double tv[] = {t->trials, t->measured, t->resumed, t->errors, t->rounds};
    add_numbers(o, tk, tv, 5);
    cJSON_AddBoolToObject(o, "done", t->done);
    cJSON_AddItemToArray(tasks, o);
  }
  char *s = cJSON_Print(j);
  cJSON_Delete(j);
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_puts(&b, s);
  cwm_buf_putc(&b, '\n');
  free(s);
  cwm_err e = {0};
  int rc = cwm_write_file_atomic(path, b.s, b.len, &e);
  cwm_buf_free(&b);
  return rc ? cli_fail(&e) : 0;
}

static int export_all(const char *dir, const cwm_network *net, const cwm_net_result *res, const cwm_measure_opts *mo,
                      int quiet) {
  int rc = 0, n = 0;
  /* the target the records were measured for: the headers name it */
  cwm_target tg;
  char target[1024];
  cwm_target_detect(&tg, mo->threads, mo->cc, mo->cflags);
  cwm_target_string(&tg, target, sizeof target);
  for (int i = 0; i < res->ntasks && !rc; i++) {
    const cwm_net_task_result *t = &res->tasks[i];
    if (t->best_cost >= 1e9 || t->best_nsteps <= 0) continue;
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/%s", dir, t->name);
    cwm_err e = {0};
    cwm_dag *d = cwm_dag_new(net->sub[i].w, &e);
    cwm_state *best = NULL;
    if (!d || cwm_state_replay(d, t->best_steps, t->best_nsteps, &best, NULL, &e) || cwm_export_for(best, sub, t->name, target, &e))
      rc = cli_fail(&e);
    else
      n++;
    cwm_state_free(best);
    cwm_dag_free(d);
  }
  if (!rc && !quiet) fprintf(stderr, "cwm tune: %d kernels written to %s/<subgraph>/\n", n, dir);
  return rc;
}

static void print_table(const cwm_network *net, const cwm_net_result *res) {
  if (res->missing == 0)
    printf("network %s: est. end-to-end latency %.4f ms", net->name, res->est_latency * 1e3);
  else
    printf("network %s: est. end-to-end latency incomplete (%d of %d subgraphs without a kernel; the rest %.4f ms)",
           net->name, res->missing, res->ntasks, res->est_latency * 1e3);
  printf(", %d trials (%d measured now, %d resumed, %d errors), %.0f s\n", res->trials, res->measured, res->resumed,
         res->errors, res->seconds);
  int w = 8;
  for (int i = 0; i < res->ntasks; i++) {
    int l = (int)strlen(res->tasks[i].name);
    w = l > w ? l : w;
  }
  printf("%-*s %8s %12s %10s %7s %7s\n", w, "subgraph", "weight", "best us", "GFLOP/s", "share", "trials");
  for (int i = 0; i < res->ntasks; i++) {
    const cwm_net_task_result *t = &res->tasks[i];
    if (t->best_cost < 1e9)
      printf("%-*s %8g %12.2f %10.2f %6.1f%% %7d\n", w, t->name, t->weight, t->best_cost * 1e6,
             t->flops / t->best_cost * 1e-9, res->est_latency > 0 ? 100 * t->weight * t->best_cost / res->est_latency : 0,
             t->trials);
    else
      printf("%-*s %8g %12s %10s %7s %7d\n", w, t->name, t->weight, "-", "-", "-", t->trials);
  }
}

int cmd_tune_network(const cli_opt *o, int nopt, const char *help) {
  const char *path = cli_get(o, nopt, "--network"), *onnx = cli_get(o, nopt, "--onnx");
  if (path && onnx) return cli_usage("tune", help, "--onnx and --network do not go together");
  static const char *const single[] = {"--workload", "--workload-file", "--name", "--suite"};
  for (size_t k = 0; k < sizeof single / sizeof single[0]; k++)
    if (cli_get(o, nopt, single[k])) return cli_usage("tune", help, "%s does not go with --network", single[k]);
  cwm_net_opts no;
  cwm_net_opts_default(&no);
  cli_env_space(&no.tune.space);
  no.trials = cli_get_int(o, nopt, "--trials", no.trials);
  no.per_round = cli_get_int(o, nopt, "--per-round", no.per_round);
  uint64_t seed = (uint64_t)cli_get_long(o, nopt, "--seed", 1);
  no.sched.seed = seed;
  no.tune.seed = seed;
  no.tune.population = cli_get_int(o, nopt, "--population", no.tune.population);
  no.tune.generations = cli_get_int(o, nopt, "--generations", no.tune.generations);
  no.log_path = cli_get(o, nopt, "--log");
  ui u = {cli_get(o, nopt, "--quiet") != NULL};
  no.progress = progress;
  no.note = note;
  no.ud = &u;
  no.stop = &cli_stop;
  if (no.trials < 1 || no.per_round < 1 || no.tune.population < 1 || no.tune.generations < 0)
    return cli_usage("tune", help, "--trials, --per-round and --population must be positive");
  cwm_measure_opts mo;
  cwm_measure_opts_default(&mo);
  cli_env_measure(&mo);
  if (cli_target_runs_here("tune")) return CWM_EUSAGE;
  int prc = cli_tune_protocol(o, nopt, "tune", help, &mo);
  if (prc || (prc = cli_farm_measure(&mo, u.quiet))) return prc;
  no.tune.space.cores = mo.threads;
  const char *model = cli_model_name(cli_get(o, nopt, "--model"), cli_get(o, nopt, "--model-file"));
  cwm_err e = {0};
  cwm_network *net = NULL;
  if (onnx) {
    cwm_graph *g;
    cwm_partition *p;
    if (cli_onnx_load(onnx, &g, &p, &e)) return cli_fail(&e);
    net = cli_onnx_network(p, onnx, &e);
    cwm_partition_free(p);
    cwm_graph_free(g);
    path = onnx;
  } else {
    net = cwm_network_load(path, &e);
  }
  if (!net) return cli_fail(&e);
  if (no.trials < net->n) {
    int n = net->n;
    cwm_network_free(net);
    return cli_usage("tune", help, "--trials %d is less than one trial per subgraph (%d subgraphs)", no.trials, n);
  }
  cwm_costmodel *m = NULL;
  if (strcmp(model, "random") && strcmp(model, "ansor") && strcmp(model, "world")) {
    cwm_network_free(net);
    return cli_usage("tune", help, "unknown --model '%s' (random, ansor, world)", model);
  }
  m = cli_costmodel(model, seed, cli_get(o, nopt, "--pretrained"), cli_get(o, nopt, "--model-file"), mo.threads, &e);
  if (!m) {
    cwm_network_free(net);
    return cli_fail(&e);
  }
  cli_catch_stop();
  if (!u.quiet)
    fprintf(stderr, "cwm tune: network %s, %d subgraphs, %.4g GFLOP per inference, model %s, %d trials, seed %llu, "
                    "%d thread(s)\n",
            net->name, net->n, cwm_network_flops(net) * 1e-9, model, no.trials, (unsigned long long)seed, mo.threads);
  cwm_net_result res;
  int rc = cwm_tune_network(net, m, &mo, &no, &res, &e);
  if (cli_stop && !u.quiet)
    fprintf(stderr, "cwm tune: interrupted; %d records measured in this run are in the log\n", res.measured);
  if (rc) cli_fail(&e);
  if (res.trials > 0) print_table(net, &res);
  const char *dir = cli_get(o, nopt, "--export");
  if (dir && res.trials > 0) {
    int erc = export_all(dir, net, &res, &mo, u.quiet);
    rc = rc ? rc : erc;
  }
  const char *sum = cli_get(o, nopt, "--summary");
  if (sum) {
    int src = write_summary(sum, path, net, &res, model, (unsigned long long)seed, no.trials, &mo);
    rc = rc ? rc : src;
  }
  cwm_net_result_free(&res);
  cwm_costmodel_free(m);
  cwm_network_free(net);
  return rc;
}

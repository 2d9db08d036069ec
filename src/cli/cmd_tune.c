/* cmd_tune.c: `cwm tune`: search schedules for one workload with a cost model, measure them,
 * log every record, export the best kernel and write a JSON summary. Ctrl-C ends the run after
 * the measurements in flight; every record already measured stays in the log. With --network
 * the work goes to cmd_tune_network.c. */
#include "cli.h"
#include "env.h"
#include "cwm/costmodel.h"

#include <cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *TUNE_HELP =
    "usage: cwm tune --workload SPEC [--workload-file FILE] [--trials N]\n"
    "                [--model random|ansor|world] [--model-file MODEL] [--pretrained FILE]\n"
    "                [--seed S] [--log FILE] [--export DIR] [--summary FILE] [--threads T]\n"
    "                [--per-round N] [--population N] [--generations N]\n"
    "                [--name NAME] [--suite FILE] [--repeats R] [--min-repeat-ms MS]\n"
    "                [--confirm K] [--family-quota F] [--quiet]\n"
    "       cwm tune --onnx MODEL.onnx | --network FILE [--trials N] [--per-round N] [--model random|ansor|world]\n"
    "                [--model-file MODEL] [--seed S] [--log FILE] [--export DIR] [--summary FILE]\n"
    "                [--threads T] [--population N] [--generations N] [--pretrained FILE]\n"
    "                [--repeats R] [--min-repeat-ms MS] [--quiet]\n"
    "Models: world (the default: the compiler world model, --model-file MODEL, else $CWM_MODEL,\n"
    "else the shipped models/default.cwm; without any model file the default is ansor), ansor\n"
    "(Ansor's features + XGBoost, from scratch or --pretrained FILE), random.\n"
    "--target NAME (a global option, see cwm --help): the instruction set to tune for; records and\n"
    "the exported header name it, and NAME.c refuses a CPU without it instead of dying of SIGILL.\n"
    "Searches schedules (Ansor's sketches, random annotation, evolution under the cost model),\n"
    "measures --per-round (64) candidates per round until the log holds --trials (64) records of\n"
    "the workload, and prints a progress line per round. A --log that already holds records of\n"
    "this workload is resumed: they train the model and are not measured again. At the end the\n"
    "best kernel goes to DIR/NAME.c, NAME.h and NAME_example.c, and a JSON summary to --summary.\n"
    "--workload-file FILE reads the workload text from FILE (same as --workload @FILE).\n"
    "Each candidate's latency is the median of --repeats (5) timed repeats of at least\n"
    "--min-repeat-ms (50) each, after a checked first call (3 repeats once they took 1 s);\n"
    "fewer and shorter repeats measure faster and noisier (TVM's runner: 1 of 100 ms). A candidate\n"
    "whose warm-up calls are all over 1.5x the best so far is not repeated: the fastest of them is\n"
    "its latency (it is at least that much slower; about half of a 1,000-trial run is).\n"
    "--confirm K (8): at the end the K best programs of the log are timed again, one after another,\n"
    "3 times, and the lowest median is the result (best_us; best_logged_us is its tuning-time\n"
    "figure): the machine's speed drifts, so the lowest logged figure is partly luck. 0 = off.\n"
    "(--network runs do not confirm.)\n"
    "--family-quota F: from the second round on, at most F of a round's picks share a family\n"
    "(sketch, compute locations and annotation kinds; tile sizes aside), so that the model's best\n"
    "candidates of other families are measured too; where F > 0 the first round also measures the\n"
    "model's best program of each sketch its picks left out (at most F/4 of the round). Default:\n"
    "the model's (world 0.25; ansor and random 0, TVM's search). 0 = off.\n"
    "\n"
    "--onnx MODEL.onnx tunes the tasks of an ONNX model (what `cwm import MODEL.onnx` lists: anchor\n"
    "ops with their fused neighbours, identical ones merged with a weight) as --network does, and\n"
    "`cwm compile MODEL.onnx --log LOG --out DIR` then writes the network as a C library.\n"
    "--network FILE tunes a whole network: a list of subgraphs with weights (how often each runs;\n"
    "networks/README.md, e.g. networks/bert_base_seq128.tsv, networks/resnet50_b1.tsv). The\n"
    "--trials (default 1000 here) are shared among the subgraphs, one cost model for all: each\n"
    "subgraph first gets one round of min(--per-round, trials / subgraphs) candidates, then Ansor's\n"
    "gradient task scheduler gives each round to the subgraph expected to lower the estimated\n"
    "end-to-end latency (sum of weight x best latency) most. Each round prints the subgraph tuned,\n"
    "its best, the estimated end-to-end latency and an ETA; at the end a table per subgraph\n"
    "(weight, best us, GFLOP/s, share of the end-to-end time). One --log holds every subgraph's\n"
    "records and is resumed per subgraph (--trials counts them, resumed ones included);\n"
    "--export DIR writes each subgraph's best kernel into DIR/<name>/; --summary FILE writes\n"
    "{network, trials, est_latency_ms, tasks: [...]} as JSON.\n"
    "Ctrl-C stops after the measurements in flight; nothing measured is lost.\n";

/* --export DIR: the best schedule of the run as DIR/NAME.c, NAME.h and NAME_example.c. */
static int export_best(const cli_opt *o, int nopt, cwm_task *t, const cwm_workload *w, const cwm_tune_result *res,
                       int quiet) {
  const char *dir = cli_get(o, nopt, "--export");
  if (!dir) return 0;
  char name[80];
  const char *nm = cli_get(o, nopt, "--name");
  snprintf(name, sizeof name, "%s", nm ? nm : w->name);
  for (char *p = name; *p; p++)
    if (!(*p == '_' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) *p = '_';
  cwm_err e = {0};
  cwm_state *best = NULL;
  int rc = 0;
  if (cwm_state_replay(cwm_task_dag(t), res->best_steps, res->best_nsteps, &best, NULL, &e) ||
      cwm_export_for(best, dir, name, cwm_task_target(t), &e))
    rc = cli_fail(&e);
  else if (!quiet)
    fprintf(stderr, "cwm tune: kernel written to %s/%s.c, %s.h and %s_example.c\n", dir, name, name, name);
  cwm_state_free(best);
  return rc;
}

/* --summary FILE: the run as one JSON object, written atomically. cJSON, because the workload's
 * name may hold any bytes (a file name), and a cost that is not finite is null, never `inf`. */
static int write_summary(const char *path, const cwm_workload *w, const char *model, const cwm_tune_opts *to,
                         const cwm_measure_opts *mo, const cwm_tune_result *res, double flops) {
  char key[17];
  cwm_workload_key(w, key);
  int ok = res->best_cost < 1e9 && res->best_cost > 0;
  double bsec, rsec; /* of this process: this tuning run */
  cwm_measure_seconds(&bsec, &rsec);
  double gf = ok ? flops / res->best_cost * 1e-9 : 0;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "workload", w->name);
  cJSON_AddStringToObject(j, "key", key);
  cJSON_AddStringToObject(j, "model", model);
  cJSON_AddNumberToObject(j, "seed", (double)to->seed);
  cJSON_AddNumberToObject(j, "trials", to->trials);
  cJSON_AddItemToObject(j, "best_us", ok ? cJSON_CreateNumber(res->best_cost * 1e6) : cJSON_CreateNull());
  cJSON_AddItemToObject(j, "best_gflops", ok && isfinite(gf) ? cJSON_CreateNumber(gf) : cJSON_CreateNull());
  cJSON_AddNumberToObject(j, "tuning_seconds", res->seconds);
  cJSON_AddNumberToObject(j, "measured", res->measured);
  cJSON_AddNumberToObject(j, "resumed", res->resumed);
  cJSON_AddNumberToObject(j, "errors", res->errors);
  cJSON_AddNumberToObject(j, "threads", mo->threads);
  cJSON_AddNumberToObject(j, "build_seconds", bsec);
  cJSON_AddNumberToObject(j, "run_seconds", rsec);
  cJSON_AddNumberToObject(j, "repeats", mo->repeats);
  cJSON_AddNumberToObject(j, "min_repeat_ms", mo->min_repeat_ms);
  cJSON_AddItemToObject(j, "best_logged_us", ok && res->best_logged < 1e9 ? cJSON_CreateNumber(res->best_logged * 1e6)
                                                                         : cJSON_CreateNull());
  cJSON_AddNumberToObject(j, "confirmed", res->confirmed);
  char *txt = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_puts(&b, txt ? txt : "{}");
  cwm_buf_putc(&b, '\n');
  free(txt);
  cwm_err e = {0};
  int rc = cwm_write_file_atomic(path, b.s, b.len, &e) ? cli_fail(&e) : 0;
  cwm_buf_free(&b);
  return rc;
}

int cmd_tune(int argc, char **argv) {
  cli_opt o[] = {{"--workload", 1, NULL},  {"--workload-file", 1, NULL}, {"--trials", 1, NULL},
                 {"--model", 1, NULL},     {"--model-file", 1, NULL},     {"--seed", 1, NULL},          {"--log", 1, NULL},
                 {"--export", 1, NULL},    {"--summary", 1, NULL},       {"--threads", 1, NULL},
                 {"--per-round", 1, NULL}, {"--population", 1, NULL},    {"--generations", 1, NULL},
                 {"--pretrained", 1, NULL}, {"--name", 1, NULL},         {"--suite", 1, NULL},
                 {"--quiet", 0, NULL},      {"--network", 1, NULL},      {"--repeats", 1, NULL},
                 {"--min-repeat-ms", 1, NULL}, {"--confirm", 1, NULL},  {"--family-quota", 1, NULL},
                 {"--onnx", 1, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), TUNE_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  if ((rc = cli_check_outputs(o, NOPT(o), "tune", TUNE_HELP))) return rc;
  if (cli_get(o, NOPT(o), "--network") || cli_get(o, NOPT(o), "--onnx")) return cmd_tune_network(o, NOPT(o), TUNE_HELP);
  const char *spec = cli_get(o, NOPT(o), "--workload");
  char fspec[4200];
  if (cli_get(o, NOPT(o), "--workload-file")) {
    snprintf(fspec, sizeof fspec, "@%s", cli_get(o, NOPT(o), "--workload-file"));
    spec = fspec;
  }
  cwm_workload *w = cli_workload(spec, cli_get(o, NOPT(o), "--suite"), &rc);
  if (!w) return rc;
  cwm_tune_opts to;
  cwm_tune_opts_default(&to);
  cli_env_space(&to.space);
  to.trials = cli_get_int(o, NOPT(o), "--trials", to.trials);
  to.seed = (uint64_t)cli_get_long(o, NOPT(o), "--seed", 1);
  to.per_round = cli_get_int(o, NOPT(o), "--per-round", to.per_round);
  to.population = cli_get_int(o, NOPT(o), "--population", to.population);
  to.generations = cli_get_int(o, NOPT(o), "--generations", to.generations);
  to.log_path = cli_get(o, NOPT(o), "--log");
  const char *fq = cli_get(o, NOPT(o), "--family-quota");
  if (fq) {
    char *end;
    to.family_quota = strtod(fq, &end);
    if (*end || !(to.family_quota >= 0 && to.family_quota <= 1))
      return cli_usage("tune", TUNE_HELP, "--family-quota must be a fraction 0..1, not '%s'", fq);
  }
  long confirm = cli_get_long(o, NOPT(o), "--confirm", 8);
  if (confirm < 0 || confirm > 64) return cli_usage("tune", TUNE_HELP, "--confirm must be 0..64, not %ld", confirm);
  to.confirm = (int)confirm;
  int quiet = cli_get(o, NOPT(o), "--quiet") != NULL;
  cli_say say = {"tune", quiet};
  to.progress = cli_progress;
  to.progress_ud = &say;
  to.stop = &cli_stop;
  if (to.trials < 1 || to.per_round < 1 || to.population < 1 || to.generations < 0)
    return cli_usage("tune", TUNE_HELP, "--trials, --per-round and --population must be positive");
  cwm_measure_opts mo;
  cwm_measure_opts_default(&mo);
  cli_env_measure(&mo);
  if (cli_target_runs_here("tune")) return CWM_EUSAGE;
  if ((rc = cli_tune_protocol(o, NOPT(o), "tune", TUNE_HELP, &mo))) return rc;
  to.space.cores = mo.threads;
  const char *model = cli_model_name(cli_get(o, NOPT(o), "--model"), cli_get(o, NOPT(o), "--model-file"));
  cwm_err e = {0};
  cwm_costmodel *m = NULL;
  if (strcmp(model, "random") && strcmp(model, "ansor") && strcmp(model, "world"))
    return cli_usage("tune", TUNE_HELP, "unknown --model '%s' (random, ansor, world)", model);
  m = cli_costmodel(model, to.seed, cli_get(o, NOPT(o), "--pretrained"), cli_get(o, NOPT(o), "--model-file"), mo.threads, &e);
  if (!m) return cli_fail(&e);
  if ((rc = cli_farm_measure(&mo, quiet))) return rc; /* under mpirun: the workers measure */
  cwm_task *t = cwm_task_new(w, &mo, &e);
  if (!t) return cli_fail(&e);
  cli_catch_stop();
  if (!quiet) {
    const char *mf = cli_get(o, NOPT(o), "--model-file");
    if (!mf && !strcmp(model, "world")) mf = cwm_world_default_path();
    fprintf(stderr, "cwm tune: %s, model %s%s%s%s, %d trials, seed %llu, %d thread(s)\n", w->name, model,
            mf ? " (" : "", mf ? mf : "", mf ? ")" : "", to.trials, (unsigned long long)to.seed, mo.threads);
  }
  cwm_tune_result res;
  rc = cwm_tune(t, m, &to, &res, &e);
  if (cli_stop && !quiet) fprintf(stderr, "cwm tune: interrupted; %d records measured in this run are in the log\n", res.measured);
  double flops = cwm_task_flops(t);
  if (rc == 0 && res.best_nsteps >= 0 && res.best_cost < 1e9) {
    printf("best: %.2f us, %.2f GFLOP/s (%d measured now, %d resumed, %d errors, %.0f s", res.best_cost * 1e6,
           flops / res.best_cost * 1e-9, res.measured, res.resumed, res.errors, res.seconds);
    if (res.confirmed) printf("; median of %d timings in turn with the next %d best, logged %.2f us", to.confirm_rounds,
                              res.confirmed - 1, res.best_logged * 1e6);
    printf(")\n");
    rc = export_best(o, NOPT(o), t, w, &res, quiet);
  } else if (rc) {
    cli_fail(&e);
  }
  const char *sum = cli_get(o, NOPT(o), "--summary");
  if (sum) {
    int src = write_summary(sum, w, model, &to, &mo, &res, flops);
    rc = rc ? rc : src;
  }
  cwm_tune_result_free(&res);
  cwm_costmodel_free(m);
  cwm_task_free(t);
  cwm_workload_free(w);
  return rc;
}

/* cmd_core.c: show, sample, replay, codegen, measure. */
#include "cli.h"
#include "env.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char *SHOW_HELP =
    "usage: cwm show --workload SPEC [--suite FILE]\n"
    "Prints the workload's text in the tensor language, then its initial state.\n";

int cmd_show(int argc, char **argv) {
  cli_opt o[] = {{"--workload", 1, NULL}, {"--suite", 1, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), SHOW_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  cwm_workload *w = cli_workload(cli_get(o, NOPT(o), "--workload"), cli_get(o, NOPT(o), "--suite"), &rc);
  if (!w) return rc;
  cwm_err e = {0};
  cwm_dag *d = cwm_dag_new(w, &e);
  if (!d) return cli_fail(&e);
  char *text = cwm_workload_print(w);
  cwm_state *s = cwm_state_init(d);
  char *st = cwm_state_print(s);
  char key[17];
  cwm_workload_key(w, key);
  printf("# workload %s (key %s, %.4g GFLOP)\n%s\n# initial state\n%s", w->name, key,
         cwm_workload_flops(w) * 1e-9, text, st);
  free(text);
  free(st);
  cwm_state_free(s);
  cwm_dag_free(d);
  cwm_workload_free(w);
  return 0;
}

static const char *SAMPLE_HELP =
    "usage: cwm sample --workload SPEC --count N [--seed S] [--steps K] [--suite FILE]\n"
    "Prints N random valid schedule step lists (random walks of about K steps, default 12),\n"
    "one JSON list per line, the format `cwm measure --steps` and `cwm replay --steps` read.\n";

int cmd_sample(int argc, char **argv) {
  cli_opt o[] = {{"--workload", 1, NULL}, {"--suite", 1, NULL}, {"--count", 1, NULL},
                 {"--seed", 1, NULL},     {"--steps", 1, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), SAMPLE_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  long count = cli_get_long(o, NOPT(o), "--count", 10), seed = cli_get_long(o, NOPT(o), "--seed", 1);
  long nsteps = cli_get_long(o, NOPT(o), "--steps", 12);
  if (count < 0 || nsteps < 0 || nsteps > CWM_MAX_STEPS) return cli_usage("sample", SAMPLE_HELP, "bad --count or --steps");
  cwm_workload *w = cli_workload(cli_get(o, NOPT(o), "--workload"), cli_get(o, NOPT(o), "--suite"), &rc);
  if (!w) return rc;
  cwm_err e = {0};
  cwm_dag *d = cwm_dag_new(w, &e);
  if (!d) return cli_fail(&e);
  cwm_rng r;
  cwm_rng_seed(&r, (uint64_t)seed);
  for (long i = 0; i < count; i++) {
    cwm_state *s;
    cwm_sample_steps(d, &r, 1 + cwm_rng_int(&r, (int)nsteps * 2), &s, &e);
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_steps_print(s->steps, s->nsteps, &b);
    printf("%s\n", b.s ? b.s : "[]");
    cwm_buf_free(&b);
    cwm_state_free(s);
  }
  cwm_dag_free(d);
  cwm_workload_free(w);
  return 0;
}

static const char *REPLAY_HELP =
    "usage: cwm replay --workload SPEC --steps FILE [--line N] [--suite FILE]\n"
    "For each step list in FILE (or only the N-th, from 1), prints the initial state and the\n"
    "state after every step.\n";

int cmd_replay(int argc, char **argv) {
  cli_opt o[] = {{"--workload", 1, NULL}, {"--suite", 1, NULL}, {"--steps", 1, NULL}, {"--line", 1, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), REPLAY_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  const char *path = cli_get(o, NOPT(o), "--steps");
  if (!path) return cli_usage("replay", REPLAY_HELP, "--steps is required");
  long only = cli_get_long(o, NOPT(o), "--line", 0);
  cwm_workload *w;
  cli_lists l;
  cwm_dag *d = cli_dag_lists(o, NOPT(o), path, &w, &l, &rc);
  if (!d) return rc;
  cwm_err e = {0};
  cwm_step **lists = l.lists;
  int *lens = l.lens, n = l.n;
  for (int i = 0; i < n && rc == 0; i++) {
    if (only && i + 1 != only) continue;
    cwm_state **trace;
    if (cwm_state_replay(d, lists[i], lens[i], NULL, &trace, &e)) {
      fprintf(stderr, "cwm: %s: list %d: %s\n", path, i + 1, e.msg);
      rc = e.code;
      break;
    }
    for (int k = 0; k <= lens[i]; k++) {
      char *t = cwm_state_print(trace[k]);
      if (k == 0) printf("# list %d: initial state\n%s", i + 1, t);
      else {
        cwm_buf b;
        cwm_buf_init(&b);
        cwm_step_print(&lists[i][k - 1], &b);
        printf("# list %d: after step %d %s\n%s", i + 1, k - 1, b.s, t);
        cwm_buf_free(&b);
      }
      free(t);
      cwm_state_free(trace[k]);
    }
    free(trace);
  }
  cli_lists_free(&l);
  cwm_dag_free(d);
  cwm_workload_free(w);
  return rc;
}

static const char *CODEGEN_HELP =
    "usage: cwm codegen --workload SPEC [--steps FILE [--line N]] [--reference] [--suite FILE]\n"
    "Prints the C code of the schedule (the first step list of FILE, or the N-th), or of the\n"
    "initial state; --reference prints the double-accumulation reference kernel.\n";

int cmd_codegen(int argc, char **argv) {
  cli_opt o[] = {{"--workload", 1, NULL}, {"--suite", 1, NULL}, {"--steps", 1, NULL},
                 {"--line", 1, NULL},     {"--reference", 0, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), CODEGEN_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  long line = cli_get_long(o, NOPT(o), "--line", 1);
  cwm_workload *w;
  cwm_dag *d = cli_dag(o, NOPT(o), &w, &rc);
  if (!d) return rc;
  cwm_err e = {0};
  cwm_state *s = NULL;
  const char *path = cli_get(o, NOPT(o), "--steps");
  if (path) {
    cli_lists l;
    if (cli_read_steps(path, &l, &e)) return cli_fail(&e);
    if (line < 1 || line > l.n) return cli_usage("codegen", CODEGEN_HELP, "--line %ld: the file has %d lists", line, l.n);
    if (cwm_state_replay(d, l.lists[line - 1], l.lens[line - 1], &s, NULL, &e)) return cli_fail(&e);
    cli_lists_free(&l);
  } else {
    s = cwm_state_init(d);
  }
  cwm_codegen_opts co = {.reference = cli_get(o, NOPT(o), "--reference") != NULL};
  cwm_kernel k;
  if (cwm_codegen(s, &co, &k, &e)) return cli_fail(&e);
  printf("%s%s", cwm_measure_prelude(), k.body);
  cwm_kernel_free(&k);
  cwm_state_free(s);
  cwm_dag_free(d);
  cwm_workload_free(w);
  return 0;
}

static const char *MEASURE_HELP =
    "usage: cwm measure --workload SPEC --steps FILE [--log FILE] [--threads T] [--repeats R]\n"
    "                   [--min-repeat-ms MS] [--timeout S] [--no-check] [--flush-cache] [--suite FILE]\n"
    "Builds, checks against the reference and times each step list of FILE (one JSON list per\n"
    "line); prints one line per list and appends one record per list to --log (JSON lines).\n"
    "A list that does not fit the workload is an error naming its line; nothing is measured.\n";

int cmd_measure(int argc, char **argv) {
  cli_opt o[] = {{"--workload", 1, NULL},     {"--suite", 1, NULL},   {"--steps", 1, NULL},
                 {"--log", 1, NULL},          {"--threads", 1, NULL}, {"--repeats", 1, NULL},
                 {"--min-repeat-ms", 1, NULL}, {"--timeout", 1, NULL}, {"--no-check", 0, NULL},
                 {"--flush-cache", 0, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), MEASURE_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  const char *path = cli_get(o, NOPT(o), "--steps");
  if (!path) return cli_usage("measure", MEASURE_HELP, "--steps is required");
  cwm_workload *w = cli_workload(cli_get(o, NOPT(o), "--workload"), cli_get(o, NOPT(o), "--suite"), &rc);
  if (!w) return rc;
  cwm_measure_opts mo;
  cwm_measure_opts_default(&mo);
  cli_env_measure(&mo);
  if (cli_target_runs_here("measure")) return CWM_EUSAGE;
  mo.threads = cli_get_int(o, NOPT(o), "--threads", mo.threads);
  mo.repeats = cli_get_int(o, NOPT(o), "--repeats", mo.repeats);
  mo.min_repeat_ms = (double)cli_get_long(o, NOPT(o), "--min-repeat-ms", (long)mo.min_repeat_ms);
  mo.run_timeout_s = (double)cli_get_long(o, NOPT(o), "--timeout", (long)mo.run_timeout_s);
  if (cli_get(o, NOPT(o), "--no-check")) mo.check = 0;
  if (cli_get(o, NOPT(o), "--flush-cache")) mo.flush_cache = 1;
  cwm_err e = {0};
  cwm_task *t = cwm_task_new(w, &mo, &e);
  if (!t) return cli_fail(&e);
  cli_lists l;
  if (cli_read_steps(path, &l, &e)) return cli_fail(&e);
  cwm_step **lists = l.lists;
  int *lens = l.lens, n = l.n;
  cwm_state **states = cwm_xcalloc((size_t)(n ? n : 1), sizeof *states);
  for (int i = 0; i < n; i++)
    if (cwm_state_replay(cwm_task_dag(t), lists[i], lens[i], &states[i], NULL, &e)) {
      fprintf(stderr, "cwm: %s: list %d: %s\n", path, i + 1, e.msg);
      return e.code;
    }
  cwm_log *log = NULL;
  const char *logp = cli_get(o, NOPT(o), "--log");
  if (logp && !(log = cwm_log_open(logp, &e))) return cli_fail(&e);
  cwm_record *recs = cwm_xcalloc((size_t)(n ? n : 1), sizeof *recs);
  if (cwm_task_measure(t, states, n, recs, &e)) return cli_fail(&e);
  double flops = cwm_task_flops(t);
  int nok = 0;
  for (int i = 0; i < n; i++) {
    nok += !recs[i].error;
    if (recs[i].error)
      printf("%d\terror %s\t%s\n", i + 1, cwm_merr_name(recs[i].error), recs[i].msg);
    else {
      double sec = cwm_record_cost(&recs[i]);
      printf("%d\t%.3f us\t%.2f GFLOP/s\n", i + 1, sec * 1e6, flops / sec * 1e-9);
    }
    if (log && cwm_log_append(log, &recs[i], &e)) return cli_fail(&e);
    cwm_record_free(&recs[i]);
    cwm_state_free(states[i]);
  }
  if (log) cwm_log_close(log);
  free(recs);
  free(states);
  cli_lists_free(&l);
  cwm_task_free(t);
  cwm_workload_free(w);
  if (n > 0 && nok == 0) {
    fprintf(stderr, "cwm: %s: every one of the %d step lists failed (see above)\n", path, n);
    return CWM_ENOSCHED;
  }
  return 0;
}

static const char *DEMO_HELP =
    "usage: cwm demo [--workload matmul_1024|dense_qkv|conv_s1_3x3] [--threads T] [--log FILE] [--suite FILE]\n"
    "Builds, checks and times a hand-written schedule of a suite workload against the naive\n"
    "loop nest (the initial state), and prints both with the speed-up. Until `cwm tune` exists\n"
    "this is the main job the README runs.\n";

int cmd_demo(int argc, char **argv) {
  cli_opt o[] = {{"--workload", 1, NULL}, {"--suite", 1, NULL}, {"--threads", 1, NULL}, {"--log", 1, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), DEMO_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  const char *id = cli_get(o, NOPT(o), "--workload");
  if (!id) id = "matmul_1024";
  cwm_err e = {0};
  cwm_step *steps;
  int n;
  if (cwm_hand_schedule(id, &steps, &n, &e)) return cli_fail(&e);
  cwm_workload *w = cli_workload(id, cli_get(o, NOPT(o), "--suite"), &rc);
  if (!w) return rc;
  cwm_measure_opts mo;
  cwm_measure_opts_default(&mo);
  cli_env_measure(&mo);
  if (cli_target_runs_here("demo")) return CWM_EUSAGE;
  mo.threads = cli_get_int(o, NOPT(o), "--threads", 1);
  cwm_task *t = cwm_task_new(w, &mo, &e);
  if (!t) return cli_fail(&e);
  cwm_state *st[2];
  st[0] = cwm_state_init(cwm_task_dag(t));
  if (cwm_state_replay(cwm_task_dag(t), steps, n, &st[1], NULL, &e)) return cli_fail(&e);
  fprintf(stderr, "cwm demo: %s, %d thread(s): computing the reference, building and timing 2 kernels ...\n", id, mo.threads);
  cwm_record recs[2];
  if (cwm_task_measure(t, st, 2, recs, &e)) return cli_fail(&e);
  const char *what[2] = {"naive loop nest", "hand schedule"};
  double flops = cwm_task_flops(t), sec[2];
  for (int i = 0; i < 2; i++) {
    if (recs[i].error) {
      printf("%-16s error %s: %s\n", what[i], cwm_merr_name(recs[i].error), recs[i].msg);
      sec[i] = 0;
    } else {
      sec[i] = cwm_record_cost(&recs[i]);
      printf("%-16s %10.1f us  %7.2f GFLOP/s  (checked against the reference)\n", what[i], sec[i] * 1e6,
             flops / sec[i] * 1e-9);
    }
  }
  if (sec[0] > 0 && sec[1] > 0) printf("speed-up of the hand schedule: %.1fx\n", sec[0] / sec[1]);
  const char *logp = cli_get(o, NOPT(o), "--log");
  if (logp) {
    cwm_log *log = cwm_log_open(logp, &e);
    if (!log) return cli_fail(&e);
    for (int i = 0; i < 2; i++)
      if (cwm_log_append(log, &recs[i], &e)) return cli_fail(&e);
    cwm_log_close(log);
  }
  int failed = recs[0].error || recs[1].error;
  for (int i = 0; i < 2; i++) {
    cwm_record_free(&recs[i]);
    cwm_state_free(st[i]);
  }
  free(steps);
  cwm_task_free(t);
  cwm_workload_free(w);
  return failed ? CWM_ENOSCHED : 0;
}

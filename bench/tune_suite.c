/* tune_suite.c: tunes every suite workload (or --ids) with one or more cost models and a trial
 * budget, and in the same run measures oneDNN and PyTorch on the same shapes; prints a table of
 * best latency, GFLOP/s, the ratio to oneDNN and to PyTorch (anchor latency / ours, >1 = we are
 * faster), tuning time, and the geometric means over the compute-bound and memory-bound rows.
 * usage: tune_suite [--model ansor[,random][,world]] [--trials N] [--threads T] [--ids a,b] [--seed S]
 *                   [--log-dir DIR] [--pretrained FILE] [--no-torch] [--suite FILE]
 *                   [--repeats R] [--min-repeat-ms MS]
 * Logs go to DIR/<model>_<id>_t<T>_s<S>.jsonl, so an interrupted run resumes where it stopped. */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cwm/costmodel.h"
#include "cwm/search.h"
#include "cwm/world.h"
#include "env.h"
#include "anchors.h"

static volatile int g_stop; /* Ctrl-C: the tuning round in flight ends, nothing else starts */
static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

static void progress(void *ud, const char *line) { fprintf(stderr, "  [%s] %s\n", (const char *)ud, line); }

/* The best schedule of a tuning run as a state (NULL, with e set, when none ran). */
static cwm_state *best_state(cwm_task *t, const cwm_tune_result *res, cwm_err *e) {
  if (!res->best_steps || res->best_cost >= 1e9) {
    snprintf(e->msg, sizeof e->msg, "no schedule ran");
    return NULL;
  }
  cwm_state *s = NULL;
  if (cwm_state_replay(cwm_task_dag(t), res->best_steps, res->best_nsteps, &s, NULL, e)) return NULL;
  return s;
}

/* One timing of s with the task's protocol: seconds, or -1 (e says why). */
static double time_once(cwm_task *t, cwm_state *s, cwm_err *e) {
  cwm_record r;
  double sec = -1;
  if (cwm_task_measure(t, &s, 1, &r, e) == 0) {
    sec = cwm_record_cost(&r);
    if (sec >= 1e9) {
      snprintf(e->msg, sizeof e->msg, "%s", r.msg[0] ? r.msg : "it failed");
      sec = -1;
    }
    cwm_record_free(&r);
  }
  return sec;
}


static int memory_bound(const char *op) {
  return !strcmp(op, "softmax") || !strcmp(op, "layernorm") || !strcmp(op, "dwconv2d");
}

/* A figure, or "-" where it is missing (an anchor not run, --no-torch, a failed tuning). */
static void ratio_text(double v, const char *fmt, char *out, size_t n) {
  if (v > 0) snprintf(out, n, fmt, v);
  else snprintf(out, n, "%s", "-");
}

static const char USAGE[] =
    "usage: tune_suite [--model ansor[,random][,world]] [--trials N] [--threads T] [--ids a,b]\n"
    "                  [--seed S] [--log-dir DIR] [--pretrained FILE] [--no-torch] [--suite FILE]\n"
    "                  [--repeats R] [--min-repeat-ms MS] [--final-rounds N] [--confirm K]\n"
    "                  [--final-protocol anchor|tune]\n";

static const char HELP[] =
    "Tunes every suite row (or --ids) with each --model (default ansor) for --trials (default 64)\n"
    "measurements, measures oneDNN and PyTorch on the same shapes in the same run, and prints best\n"
    "latency, GFLOP/s, anchor latency / ours (> 1: we are faster) and tuning time per row, then the\n"
    "geometric means over the compute-bound (dense, matmul, batch_matmul, conv2d) and memory-bound\n"
    "(softmax, layernorm, dwconv2d) rows. --pretrained FILE: ansor starts from that model\n"
    "(cwm train ansor). --repeats/--min-repeat-ms: the measuring protocol (default 5 of 50 ms,\n"
    "as cwm tune). Logs: DIR/<model>_<id>_t<T>_s<S>.jsonl under --log-dir (default bench-logs);\n"
    "a rerun resumes from them and measures nothing twice. Then each model's best schedule and\n"
    "oneDNN are timed again in turn, --final-rounds times (default 3), and the medians are the\n"
    "figures compared (the logged best is printed too): a resumed row's log may come from another\n"
    "day's machine, and on this shared machine timings minutes apart differ more than timings in turn.\n"
    "The best schedule is cwm tune's: its --confirm K (default 8) best logged programs timed again\n"
    "in turn 3 times, the lowest median (0 = the lowest logged figure). In the final rounds it is\n"
    "timed with oneDNN's protocol (median of 7 repeats of at least 50 ms, as anchors.h times\n"
    "oneDNN), not the tuning one: --final-protocol tune keeps --repeats/--min-repeat-ms.\n";

int main(int argc, char **argv) {
  cli_env_apply();
  const char *models = "ansor", *ids = NULL, *logdir = "bench-logs", *pretrained = NULL, *suite = NULL;
  int trials = 64, threads = 1, torch = 1, repeats = -1; /* -1, -1: cwm tune's protocol */
  int final_rounds = 3, confirm = 8, anchor_protocol = 1;
  double min_ms = -1;
  long seed = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--model") && i + 1 < argc) models = argv[++i];
    else if (!strcmp(argv[i], "--trials") && i + 1 < argc) trials = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ids") && i + 1 < argc) ids = argv[++i];
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = atol(argv[++i]);
    else if (!strcmp(argv[i], "--log-dir") && i + 1 < argc) logdir = argv[++i];
    else if (!strcmp(argv[i], "--pretrained") && i + 1 < argc) pretrained = argv[++i];
    else if (!strcmp(argv[i], "--suite") && i + 1 < argc) suite = argv[++i];
    else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--min-repeat-ms") && i + 1 < argc) min_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--final-rounds") && i + 1 < argc) final_rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--confirm") && i + 1 < argc) confirm = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--final-protocol") && i + 1 < argc) {
      const char *fp = argv[++i];
      if (strcmp(fp, "anchor") && strcmp(fp, "tune")) {
        fprintf(stderr, "tune_suite: --final-protocol is anchor or tune, not '%s'\n%s", fp, USAGE);
        return 2;
      }
      anchor_protocol = !strcmp(fp, "anchor");
    }
    else if (!strcmp(argv[i], "--no-torch")) torch = 0;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("%s%s", USAGE, HELP);
      return 0;
    } else {
      fprintf(stderr, "tune_suite: unknown or incomplete option '%s'\n%s", argv[i], USAGE);
      return 2;
    }
  }
  if (trials < 1 || threads < 1 || final_rounds < 1 || final_rounds > 16 || confirm < 0 || confirm > 64 ||
      (repeats != -1 && (repeats < 1 || repeats > 32)) ||
      (min_ms != -1 && !(min_ms > 0 && min_ms <= 10000))) {
    fprintf(stderr, "tune_suite: --trials and --threads must be positive, --final-rounds 1..16, --confirm 0..64, --repeats "
                    "1..32, --min-repeat-ms above 0 and at most 10000\n%s",
            USAGE);
    return 2;
  }
  cwm_measure_opts proto;
  cwm_measure_opts_default(&proto);
  cli_env_measure(&proto);
  if (repeats > 0) proto.repeats = repeats;
  if (min_ms > 0) proto.min_repeat_ms = min_ms;
  if (!suite) suite = cwm_suite_default_path();
  cwm_err e = {0};
  if (cwm_mkdir_p(logdir, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return 5;
  }
  char *text = cwm_read_file(suite, NULL, &e);
  if (!text) {
    fprintf(stderr, "%s\n", e.msg);
    return 5;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  char *mlist[8];
  int nm = 0;
  char mbuf[256];
  snprintf(mbuf, sizeof mbuf, "%s", models);
  for (char *t = strtok(mbuf, ","); t && nm < 8; t = strtok(NULL, ",")) mlist[nm++] = t;
  printf("tune_suite: models %s, %d trials, %d thread(s), seed %ld, median of %d repeats of at least %g ms; "
         "best schedules (each the lowest median of its %d best logged, timed again in turn 3 times) and oneDNN "
         "timed again in turn %d times (medians; ours with %s protocol: median of %d repeats of at least %g ms); "
         "ratio = anchor latency / our latency\n",
         models, trials, threads, seed, proto.repeats, proto.min_repeat_ms, confirm, final_rounds,
         anchor_protocol ? "oneDNN's" : "the tuning", anchor_protocol ? ANCHOR_REPEATS : proto.repeats,
         anchor_protocol ? ANCHOR_MIN_REPEAT_S * 1000 : proto.min_repeat_ms);
  printf("%-13s %-9s %10s %9s %9s", "id", "op", "oneDNN_us", "torch_us", "GFLOP");
  printf("\n");
  double lg_c[8] = {0}, lg_m[8] = {0}, lt_c[8] = {0}, lt_m[8] = {0};
  int n_c = 0, n_m = 0, nt_c = 0, nt_m = 0;
  double worst_c[8], worst_m[8];
  for (int k = 0; k < 8; k++) worst_c[k] = worst_m[k] = 1e30;
  char *save = NULL;
  for (char *ln = strtok_r(text, "\n", &save); ln && !g_stop; ln = strtok_r(NULL, "\n", &save)) {
    if (ln[0] == '#' || !ln[0]) continue;
    char id[64], op[32], params[256];
    if (sscanf(ln, "%63[^\t]\t%31[^\t]\t%255[^\t]", id, op, params) != 3) continue;
    if (ids) {
      char want[512];
      snprintf(want, sizeof want, ",%s,", ids);
      char me[70];
      snprintf(me, sizeof me, ",%s,", id);
      if (!strstr(want, me)) continue;
    }
    char spec[300];
    snprintf(spec, sizeof spec, "%s %s", op, params);
    cwm_workload *w = cwm_workload_from_spec(id, suite, &e);
    if (!w) {
      fprintf(stderr, "%s: %s\n", id, e.msg);
      continue;
    }
    double flops = cwm_workload_flops(w);
    double best[8], tsec[8], logged[8];
    cwm_task *tk[8] = {0};
    cwm_state *bs[8] = {0};
    for (int k = 0; k < nm; k++) {
      cwm_measure_opts mo = proto;
      mo.threads = threads;
      cwm_task *t = cwm_task_new(w, &mo, &e);
      cwm_tune_opts to;
      cwm_tune_opts_default(&to);
      cli_env_space(&to.space);
      to.trials = trials;
      to.seed = (uint64_t)seed;
      to.stop = &g_stop;
      to.confirm = confirm;
      to.space.cores = threads;
      char logp[512];
      snprintf(logp, sizeof logp, "%s/%s_%s_t%d_s%ld.jsonl", logdir, mlist[k], id, threads, seed);
      to.log_path = logp;
      to.progress = progress;
      to.progress_ud = id;
      cwm_costmodel *m = NULL;
      if (!strcmp(mlist[k], "random")) {
        m = cwm_costmodel_random((uint64_t)seed);
      } else if (!strcmp(mlist[k], "world")) {
        /* the shipped default model ($CWM_MODEL overrides), loaded afresh for every workload */
        const char *mp = cwm_world_default_path();
        cwm_world *wm = mp ? cwm_world_load(mp, &e) : NULL;
        if (!mp) snprintf(e.msg, sizeof e.msg, "no default world model (models/default.cwm)");
        cwm_world_cm_opts wo;
        cwm_world_cm_opts_default(&wo);
        cli_env_world_cm(&wo);
        m = wm ? cwm_costmodel_world(wm, &wo, &e) : NULL;
      } else {
        m = cwm_costmodel_ansor((uint64_t)seed, pretrained, &e);
      }
      cwm_tune_result res = {0};
      best[k] = logged[k] = -1;
      tsec[k] = 0;
      if (!m || !t) fprintf(stderr, "%s: %s\n", id, e.msg);
      else if (cwm_tune(t, m, &to, &res, &e)) fprintf(stderr, "%s %s: %s\n", id, mlist[k], e.msg);
      else {
        logged[k] = res.best_logged;
        tsec[k] = res.seconds;
        /* the final timings: oneDNN's protocol (anchors.h) unless --final-protocol tune; the best
         * schedule is replayed on that task's graph */
        cwm_measure_opts fo = mo;
        if (anchor_protocol) fo.repeats = ANCHOR_REPEATS, fo.min_repeat_ms = ANCHOR_MIN_REPEAT_S * 1000;
        if (!(tk[k] = cwm_task_new(w, &fo, &e)) || !(bs[k] = best_state(tk[k], &res, &e))) {
          fprintf(stderr, "%s %s: the best schedule: %s\n", id, mlist[k], e.msg);
          cwm_task_free(tk[k]);
          tk[k] = NULL;
        }
      }
      cwm_tune_result_free(&res);
      cwm_costmodel_free(m);
      cwm_task_free(t);
    }
    if (g_stop) {
      for (int k = 0; k < nm; k++) cwm_state_free(bs[k]), cwm_task_free(tk[k]);
      cwm_workload_free(w);
      fprintf(stderr, "tune_suite: interrupted during %s; every record measured is in %s: the same command "
                      "resumes\n", id, logdir);
      break;
    }
    /* The comparison: each model's best schedule and oneDNN timed again, in turn, --final-rounds
     * times; the medians are compared. A resumed row's log may come from another day's machine
     * (not always the same CPU), and on this shared machine a timing
     * taken minutes apart from another can differ by far more than two taken in turn. */
    double sm[8][16], sd[16];
    for (int r = 0; r < final_rounds; r++) {
      for (int k = 0; k < nm; k++) {
        sm[k][r] = bs[k] ? time_once(tk[k], bs[k], &e) : -1;
        if (bs[k] && sm[k][r] <= 0) fprintf(stderr, "%s %s: timing the best schedule: %s\n", id, mlist[k], e.msg);
      }
      sd[r] = anchor_seconds_child(0, suite, id, spec, threads);
    }
    for (int k = 0; k < nm; k++) {
      best[k] = anchor_median(sm[k], final_rounds, -1);
      cwm_state_free(bs[k]);
      cwm_task_free(tk[k]);
    }
    double dn = anchor_median(sd, final_rounds, -1);
    double th = torch ? anchor_seconds_child(1, suite, id, spec, threads) : -1;
    char ths[32], rds[32], rts[32];
    ratio_text(th * 1e6, "%9.1f", ths, sizeof ths);
    printf("%-13s %-9s %10.1f %9s %9.3f\n", id, op, dn * 1e6, ths, flops * 1e-9);
    for (int k = 0; k < nm; k++) {
      double rd = best[k] > 0 && dn > 0 ? dn / best[k] : 0, rt = best[k] > 0 && th > 0 ? th / best[k] : 0;
      ratio_text(rd, "%5.2f", rds, sizeof rds);
      ratio_text(rt, "%5.2f", rts, sizeof rts);
      printf("    %-8s best %10.1f us %8.2f GFLOP/s  vs oneDNN %s  vs torch %s  tuning %6.0f s  (logged %.1f us)\n",
             mlist[k], best[k] * 1e6, best[k] > 0 ? flops / best[k] * 1e-9 : 0, rds, rts, tsec[k], logged[k] * 1e6);
      int mb = memory_bound(op);
      if (rd > 0) {
        if (mb) lg_m[k] += log(rd), worst_m[k] = rd < worst_m[k] ? rd : worst_m[k];
        else lg_c[k] += log(rd), worst_c[k] = rd < worst_c[k] ? rd : worst_c[k];
      }
      if (rt > 0) {
        if (mb) lt_m[k] += log(rt);
        else lt_c[k] += log(rt);
      }
    }
    if (dn > 0) memory_bound(op) ? n_m++ : n_c++;
    if (th > 0) memory_bound(op) ? nt_m++ : nt_c++;
    fflush(stdout);
    cwm_workload_free(w);
  }
  printf("\ngeometric means of (anchor latency / our latency):\n");
  for (int k = 0; k < nm; k++) {
    char v[6][32];
    ratio_text(n_c ? exp(lg_c[k] / n_c) : 0, "%.3f", v[0], 32);
    ratio_text(worst_c[k] < 1e29 ? worst_c[k] : 0, "%.3f", v[1], 32);
    ratio_text(nt_c ? exp(lt_c[k] / nt_c) : 0, "%.3f", v[2], 32);
    ratio_text(n_m ? exp(lg_m[k] / n_m) : 0, "%.3f", v[3], 32);
    ratio_text(worst_m[k] < 1e29 ? worst_m[k] : 0, "%.3f", v[4], 32);
    ratio_text(nt_m ? exp(lt_m[k] / nt_m) : 0, "%.3f", v[5], 32);
    printf("  %-8s compute-bound: vs oneDNN %s (worst %s), vs torch %s | memory-bound: vs oneDNN %s (worst %s), "
           "vs torch %s\n", mlist[k], v[0], v[1], v[2], v[3], v[4], v[5]);
  }
  free(text);
  return g_stop ? 130 : 0;
}

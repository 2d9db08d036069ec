/* paper_cpu.c: the CPU experiments of the world-model paper, reproduced on cwm in one run, and
 * REPORT.md with SVG plots written from their logs (issue 6). Every tuning run is a `cwm tune`
 * child process with its own log, so the whole thing resumes where it stopped: a run whose log
 * already holds its trials is not started again, and a partial one continues.
 *
 *   paper_cpu [--part quick|long|all|report|ablate200|sample|networks] [--dir DIR] [--report FILE] [--plots DIR]
 *             [--seeds 1,2,3] [--ids a,b] [--threads T] [--records LOG] [--no-torch]
 *             [--long-ids a,b] [--world-trials N] [--ansor-trials N]
 *
 * quick  (1) budget 64: world, ansor from scratch, ansor pre-trained on --records, random; every
 *        suite row, every seed. (3) ablations at 64 (seed 1): no transition, static final state,
 *        no contrastive pre-training. (4) syntactic noise: matmul 1024/1023 and two conv pairs off
 *        by one. (6) oneDNN and PyTorch on every row. Last, per row, the best schedule of every
 *        budget-64 run re-measured together in one stretch (the tables read those figures).
 * long   (3) the ablations continued to 200 trials, (2) world at 1,000 trials against ansor at
 *        10,000 on four rows (their best schedules then re-measured together in one stretch),
 *        (5) BERT-base and ResNet-50 at 64 trials per subgraph (world and
 *        ansor) beside PyTorch's measured latency of the whole network (--nets selects).
 *        ablate200, sample, networks: one of these three alone.
 * report the report only, from whatever the logs hold (also written after every part).
 * Nothing in REPORT.md is typed by hand: every figure comes from the logs under DIR. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cwm/costmodel.h"
#include "cwm/metrics.h"
#include "cwm/record.h"
#include "cwm/search.h"
#include "cwm/state.h"
#include "cwm/train.h"
#include "cwm/world.h"
#include "env.h"
#include "anchors.h"

#define MAXID 32
#define MAXSEED 8
#define MAXCURVE 10000

typedef struct {
  char id[64], op[32], spec[320];
} row_t;

typedef struct {
  const char *dir, *report, *plots, *records, *cwm, *suite;
  int threads, torch, nseeds, world_trials, ansor_trials;
  long seeds[MAXSEED];
  row_t rows[MAXID];
  int nrows;
  char long_ids[512];
  int long_mask;     /* which of the long part's experiments: LONG_ABL200 | LONG_SAMPLE | LONG_NETS */
  const char *nets;  /* --nets: the networks of the long part (default bert,resnet50) */
  int repeats, min_repeat_ms; /* cwm tune's measuring protocol; 0: its defaults */
} ctx_t;

enum { LONG_ABL200 = 1, LONG_SAMPLE = 2, LONG_NETS = 4 };

static volatile sig_atomic_t g_stop;
static int g_budget = 64; /* the quick part's budget; smaller only for a smoke test (--budget) */
static int g_budget200 = 200; /* the ablations' longer budget; smaller only for a smoke test (--budget200) */
static int g_no_static;   /* --no-static: leave out the static-final-state ablation (slow) */
static void on_signal(int s) {
  (void)s;
  g_stop = 1;
}

/* ---- small helpers ------------------------------------------------------------------------- */

static int file_exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && sb.st_size > 0;
}

static void mkdirs(const char *p) {
  cwm_err e = {0};
  if (cwm_mkdir_p(p, &e)) {
    fprintf(stderr, "paper_cpu: %s\n", e.msg);
    exit(5);
  }
}

static int is_memory_bound(const char *op) {
  return !strcmp(op, "softmax") || !strcmp(op, "layernorm") || !strcmp(op, "dwconv2d");
}

/* Costs (seconds, failures 1e10) of a log in measurement order; returns the count. */
static int log_costs(const char *path, double *c, int cap) {
  if (!file_exists(path)) return 0;
  cwm_err e = {0};
  cwm_log_iter *it = cwm_log_iter_open(path, &e);
  if (!it) return 0;
  cwm_record r;
  int n = 0;
  while (n < cap && cwm_log_iter_next(it, &r, &e) == 1) {
    c[n++] = cwm_record_cost(&r);
    cwm_record_free(&r);
  }
  cwm_log_iter_close(it);
  return n;
}

/* Best latency (seconds) within the first t records of a log; -1 if none ran. */
static double log_best(const char *path, int t) {
  static double c[MAXCURVE * 2];
  int n = log_costs(path, c, MAXCURVE * 2);
  if (n < 1) return -1;
  double b = 1e30;
  for (int i = 0; i < n && i < t; i++)
    if (c[i] < b) b = c[i];
  return b < 1e9 ? b : -1;
}

/* A number of a flat JSON object ("key": value); NAN if absent. */
static double json_num(const char *path, const char *key) {
  char *t = cwm_read_file(path, NULL, NULL);
  if (!t) return NAN;
  char pat[80];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  char *p = strstr(t, pat);
  double v = p ? strtod(p + strlen(pat), NULL) : NAN;
  free(t);
  return v;
}

static int log_count(const char *path) {
  static double c[MAXCURVE * 2];
  return log_costs(path, c, MAXCURVE * 2);
}

/* Runs argv (argv[0] a path) with stdout and stderr appended to logf; the exit status, -1 if it
 * could not start. SIGINT reaches the child too (same process group); we wait for it. */
static int run_cmd(char *const *argv, const char *logf) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = open(logf, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execv(argv[0], argv);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* ---- time accounting ------------------------------------------------------------------------ */

/* The parts run in pieces, on different days, so their wall time is summed from what each piece
 * recorded: a tuning run's progress file (every invocation's closing "best: ..., N s)" line), the
 * pre-training's "in N s", and DIR/times.tsv, where paper_cpu notes the steps it times itself
 * (the anchors, a row's re-measure, a noise replay) as "step<TAB>seconds" (the last note counts). */
static void time_note(const ctx_t *c, const char *step, double seconds) {
  char p[1024];
  snprintf(p, sizeof p, "%s/times.tsv", c->dir);
  FILE *f = fopen(p, "a");
  if (!f) return;
  fprintf(f, "%s\t%.1f\n", step, seconds);
  fclose(f);
}

static double time_of(const ctx_t *c, const char *step) {
  char p[1024], line[512];
  snprintf(p, sizeof p, "%s/times.tsv", c->dir);
  FILE *f = fopen(p, "r");
  double v = NAN;
  if (!f) return v;
  size_t n = strlen(step);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, step, n) && line[n] == '\t') v = strtod(line + n + 1, NULL);
  fclose(f);
  return v;
}

/* Seconds a tuning run's invocations took, from its progress file; NAN when none finished. */
static double out_seconds(const char *out) {
  char *t = cwm_read_file(out, NULL, NULL);
  if (!t) return NAN;
  double s = 0;
  int k = 0;
  for (char *l = t; l && *l;) {
    char *nl = strchr(l, '\n');
    if (nl) *nl = 0;
    if (!strncmp(l, "best:", 5)) {
      char *cm = strrchr(l, ',');
      double v;
      if (cm && sscanf(cm + 1, " %lf s)", &v) == 1) s += v, k++;
    }
    l = nl ? nl + 1 : NULL;
  }
  free(t);
  return k ? s : NAN;
}

/* ---- the models of the comparison ----------------------------------------------------------- */

typedef struct {
  const char *name;  /* in logs and the report */
  const char *model; /* --model */
  const char *file;  /* --model-file (world) or --pretrained (ansor), relative to the source */
  const char *what;
} model_t;

static const model_t MODELS[] = {
    {"world", "world", NULL, "the world model (models/default.cwm)"},
    {"ansor", "ansor", NULL, "Ansor's cost model from scratch (TVM's default)"},
    {"ansor-pre", "ansor", "@pretrained", "Ansor's cost model pre-trained on the shipped records"},
    {"random", "random", NULL, "random scores"},
    {"no-transition", "world", "models/ablation-no-transition.cwm", "world without the transition: z_0 + action features"},
    {"static", "world", "models/ablation-static.cwm", "world scoring the encoding of the real final text"},
    {"no-contrastive", "world", "models/ablation-no-contrastive.cwm", "world without contrastive pre-training"},
};
#define NMODELS (int)(sizeof MODELS / sizeof MODELS[0])

static const model_t *model_by_name(const char *n) {
  for (int i = 0; i < NMODELS; i++)
    if (!strcmp(MODELS[i].name, n)) return &MODELS[i];
  return NULL;
}

static void src_path(const char *rel, char *out, size_t n) {
  const char *s = getenv("CWM_SOURCE_DIR");
#ifdef CWM_SOURCE_DIR
  if (!s || !*s) s = CWM_SOURCE_DIR;
#endif
  if (rel[0] == '/' || !s) snprintf(out, n, "%s", rel);
  else snprintf(out, n, "%s/%s", s, rel);
}

static void run_paths(const ctx_t *c, const char *exp, const char *model, const char *id, long seed, char *log,
                      char *sum, char *out, size_t n) {
  snprintf(log, n, "%s/%s/%s_%s_s%ld.jsonl", c->dir, exp, model, id, seed);
  snprintf(sum, n, "%s/%s/%s_%s_s%ld.json", c->dir, exp, model, id, seed);
  snprintf(out, n, "%s/%s/%s_%s_s%ld.out", c->dir, exp, model, id, seed);
}

/* The pre-trained ansor model file, trained once from --records (training workloads only). */
static const char *pretrained_file(const ctx_t *c) {
  static char p[1024];
  snprintf(p, sizeof p, "%s/ansor-pretrained.bin", c->dir);
  if (file_exists(p)) return p;
  char outf[1100];
  snprintf(outf, sizeof outf, "%s/ansor-pretrained.out", c->dir);
  fprintf(stderr, "paper_cpu: training ansor on %s (its training workloads) -> %s\n", c->records, p);
  char *argv[] = {(char *)c->cwm, "train", "ansor", "--records", (char *)c->records, "--out", p, NULL};
  if (run_cmd(argv, outf) != 0) {
    fprintf(stderr, "paper_cpu: cannot train the pre-trained ansor model; see %s\n", outf);
    return NULL;
  }
  return p;
}

typedef struct {
  int total, done;
  double t0;
  long trials_total, trials_done, trials_ran; /* ran: measured by this invocation */
} progress_t;
static progress_t g_prog;

/* Appends --repeats/--min-repeat-ms to argv at *a when set (cwm tune's defaults otherwise); rs and
 * ms hold the numbers' text, so they live as long as argv. */
static void protocol_args(const ctx_t *c, char **argv, int *a, char rs[32], char ms[32]) {
  if (c->repeats > 0) {
    snprintf(rs, 32, "%d", c->repeats);
    argv[(*a)++] = "--repeats";
    argv[(*a)++] = rs;
  }
  if (c->min_repeat_ms > 0) {
    snprintf(ms, 32, "%d", c->min_repeat_ms);
    argv[(*a)++] = "--min-repeat-ms";
    argv[(*a)++] = ms;
  }
}

/* One tuning run, skipped when its log already holds `trials` records. Returns 0, or nonzero
 * when it failed (the report shows "-" for it) or was interrupted. */
static int tune_run(const ctx_t *c, const char *exp, const char *mname, const char *id, const char *spec, long seed,
                    int trials) {
  const model_t *m = model_by_name(mname);
  char log[1024], sum[1024], out[1024], dir[1024];
  run_paths(c, exp, mname, id, seed, log, sum, out, sizeof log);
  snprintf(dir, sizeof dir, "%s/%s", c->dir, exp);
  mkdirs(dir);
  g_prog.done++;
  int have = log_count(log);
  if (have >= trials && file_exists(sum) && json_num(sum, "trials") >= trials) {
    g_prog.trials_done += trials;
    return 0;
  }
  char mf[1024] = "";
  const char *mflag = NULL;
  if (m->file && !strcmp(m->file, "@pretrained")) {
    const char *p = pretrained_file(c);
    if (!p) return 1;
    snprintf(mf, sizeof mf, "%s", p);
    mflag = "--pretrained";
  } else if (m->file) {
    src_path(m->file, mf, sizeof mf);
    mflag = "--model-file";
    if (!file_exists(mf)) {
      fprintf(stderr, "paper_cpu: %s: model file %s missing; run skipped\n", mname, mf);
      return 1;
    }
  }
  char ts[32], ss[32], th[32];
  snprintf(ts, sizeof ts, "%d", trials);
  snprintf(ss, sizeof ss, "%ld", seed);
  snprintf(th, sizeof th, "%d", c->threads);
  char *argv[32];
  int a = 0;
  argv[a++] = (char *)c->cwm;
  argv[a++] = "tune";
  argv[a++] = "--workload";
  argv[a++] = (char *)spec;
  argv[a++] = "--name";
  argv[a++] = (char *)id;
  argv[a++] = "--model";
  argv[a++] = (char *)m->model;
  if (mflag) {
    argv[a++] = (char *)mflag;
    argv[a++] = mf;
  }
  argv[a++] = "--trials";
  argv[a++] = ts;
  argv[a++] = "--seed";
  argv[a++] = ss;
  argv[a++] = "--threads";
  argv[a++] = th;
  argv[a++] = "--log";
  argv[a++] = log;
  argv[a++] = "--summary";
  argv[a++] = sum;
  argv[a++] = "--confirm"; /* the report's figures come from the logs: no re-timing at the end */
  argv[a++] = "0";
  char rs[32], ms[32];
  protocol_args(c, argv, &a, rs, ms);
  argv[a] = NULL;
  double t = cwm_now();
  int rc = run_cmd(argv, out);
  int now = log_count(log);
  g_prog.trials_done += trials;
  g_prog.trials_ran += now - have > 0 ? now - have : 0;
  long measured_now = g_prog.trials_ran;
  double el = cwm_now() - g_prog.t0;
  double eta = measured_now > 0 ? el / (double)measured_now * (double)(g_prog.trials_total - g_prog.trials_done) : 0;
  double b = log_best(log, trials);
  fprintf(stderr, "paper_cpu: [%d/%d] %s %s %s seed %ld: %d trials, best %s%.1f us, %.0f s; ETA %.0f min%s\n",
          g_prog.done, g_prog.total, exp, mname, id, seed, now, b > 0 ? "" : "(none) ", b > 0 ? b * 1e6 : 0.0,
          cwm_now() - t, eta / 60, rc ? " (failed: see the .out file)" : "");
  return rc;
}

/* ---- anchors --------------------------------------------------------------------------------- */

/* PyTorch's median seconds for a whole network (bench/torch_anchor.py --network NAME). */
static double torch_network_seconds(const char *name, int threads) {
  char script[1024], cmd[2048], line[512];
  src_path("bench/torch_anchor.py", script, sizeof script);
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' --network %s --threads %d 2>/dev/null", script, name, threads);
  fflush(NULL);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  double s = -1;
  while (fgets(line, sizeof line, p)) {
    char *end;
    double v = strtod(line, &end);
    if (end != line && v > 0) s = v;
  }
  if (pclose(p) != 0) return -1;
  return s;
}

/* anchors.tsv: id, oneDNN us, PyTorch us (-1 where not measured); measured once. */
static void anchors_file(const ctx_t *c, char *p, size_t n) { snprintf(p, n, "%s/anchors.tsv", c->dir); }

static void measure_anchors(const ctx_t *c) {
  char p[1024];
  anchors_file(c, p, sizeof p);
  if (file_exists(p)) return;
  double t0 = cwm_now();
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_printf(&b, "# id\toneDNN_us\ttorch_us (threads %d)\n", c->threads);
  for (int i = 0; i < c->nrows && !g_stop; i++) {
    const row_t *r = &c->rows[i];
    double d = anchor_seconds_child(0, c->suite, r->id, r->spec, c->threads);
    double t = c->torch ? anchor_seconds_child(1, c->suite, r->id, r->spec, c->threads) : -1;
    cwm_buf_printf(&b, "%s\t%.3f\t%.3f\n", r->id, d > 0 ? d * 1e6 : -1, t > 0 ? t * 1e6 : -1);
    fprintf(stderr, "paper_cpu: anchors %s: oneDNN %.1f us, PyTorch %.1f us\n", r->id, d * 1e6, t * 1e6);
    if (t < 0) fprintf(stderr, "paper_cpu: (a negative figure: not measured)\n");
  }
  cwm_err e = {0};
  if (!g_stop && cwm_write_file_atomic(p, b.s, b.len, &e)) fprintf(stderr, "paper_cpu: %s\n", e.msg);
  else if (!g_stop) time_note(c, "anchors", cwm_now() - t0);
  cwm_buf_free(&b);
}

static int anchor_of(const ctx_t *c, const char *id, double *dnnl_us, double *torch_us) {
  char p[1024];
  anchors_file(c, p, sizeof p);
  *dnnl_us = *torch_us = -1;
  FILE *f = fopen(p, "r");
  if (!f) return 0;
  char line[512], rid[64];
  double d, t;
  while (fgets(line, sizeof line, f))
    if (line[0] != '#' && sscanf(line, "%63s %lf %lf", rid, &d, &t) == 3 && !strcmp(rid, id)) {
      *dnnl_us = d;
      *torch_us = t;
      fclose(f);
      return 1;
    }
  fclose(f);
  return 0;
}

/* ---- syntactic noise ------------------------------------------------------------------------- */

typedef struct {
  const char *a_id, *a_spec, *b_id, *b_spec;
} noise_pair_t;

static const noise_pair_t NOISE[] = {
    {"matmul_1024", "matmul M=1024 N=1024 K=1024", "matmul_1023", "matmul M=1023 N=1023 K=1023"},
    {"conv_s2_3x3", "conv2d C=128 H=28 W=28 K=128 R=3 S=3 stride=1 pad=1 bias=1 act=relu", "conv_s2_3x3_h27",
     "conv2d C=128 H=27 W=27 K=128 R=3 S=3 stride=1 pad=1 bias=1 act=relu"},
    {"conv_s3_3x3", "conv2d C=256 H=14 W=14 K=256 R=3 S=3 stride=1 pad=1 bias=1 act=relu", "conv_s3_3x3_h13",
     "conv2d C=256 H=13 W=13 K=256 R=3 S=3 stride=1 pad=1 bias=1 act=relu"},
};
#define NNOISE (int)(sizeof NOISE / sizeof NOISE[0])

/* The log of world on id at seed 1, from the budget-64 experiment or the noise directory. */
static void noise_log(const ctx_t *c, const char *id, char *log, size_t n) {
  snprintf(log, n, "%s/b64/world_%s_s1.jsonl", c->dir, id);
  if (!file_exists(log)) snprintf(log, n, "%s/noise/world_%s_s1.jsonl", c->dir, id);
}

/* The state of steps on another shape of the same computation (cwm_replay_retarget: every split
 * takes the extent its iterator has there, the lengths stay). NULL when a step does not fit. */
static cwm_state *retarget(const cwm_dag *d, const cwm_step *steps, int n) {
  cwm_state *s = NULL;
  cwm_err e = {0};
  return cwm_replay_retarget(d, steps, n, &s, &e) ? NULL : s;
}

/* Steps of the best record of a log, retargeted to spec, as a JSON line in file out; 0 if
 * written. */
static int best_steps_file(const char *log, const char *spec, const char *suite, const char *out) {
  cwm_record *recs = NULL;
  int n = 0, bad = 0;
  cwm_err e = {0};
  if (cwm_log_read(log, &recs, &n, &bad, &e) || n == 0) return 1;
  int bi = -1;
  for (int i = 0; i < n; i++)
    if (cwm_record_cost(&recs[i]) < 1e9 && (bi < 0 || cwm_record_cost(&recs[i]) < cwm_record_cost(&recs[bi]))) bi = i;
  int rc = 1;
  cwm_workload *w = cwm_workload_from_spec(spec, suite, &e);
  cwm_dag *d = w ? cwm_dag_new(w, &e) : NULL;
  cwm_state *s = d && bi >= 0 ? retarget(d, recs[bi].steps, recs[bi].nsteps) : NULL;
  if (s) {
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_steps_print(s->steps, s->nsteps, &b);
    cwm_buf_puts(&b, "\n");
    rc = cwm_write_file_atomic(out, b.s, b.len, &e) ? 1 : 0;
    cwm_buf_free(&b);
  }
  cwm_state_free(s);
  if (d) cwm_dag_free(d);
  cwm_workload_free(w);
  cwm_records_free(recs, n);
  return rc;
}

/* Replays the best schedule of from_log on the workload spec and measures it (cwm measure);
 * the median latency in seconds, -1 if it does not fit or failed. */
static double transfer(const ctx_t *c, const char *from_log, const char *spec, const char *tag) {
  char steps[1024], log[1024], out[1024];
  snprintf(steps, sizeof steps, "%s/noise/%s.steps", c->dir, tag);
  snprintf(log, sizeof log, "%s/noise/%s.jsonl", c->dir, tag);
  snprintf(out, sizeof out, "%s/noise/%s.out", c->dir, tag);
  if (!file_exists(log)) {
    if (best_steps_file(from_log, spec, c->suite, steps)) {
      fprintf(stderr, "paper_cpu: noise: the best schedule of %s does not fit %s\n", from_log, spec);
      return -1;
    }
    char th[16];
    snprintf(th, sizeof th, "%d", c->threads);
    char *argv[] = {(char *)c->cwm, "measure", "--workload", (char *)spec, "--steps", steps, "--log", log,
                    "--threads", th, NULL};
    double t0 = cwm_now();
    run_cmd(argv, out);
    char step[300];
    snprintf(step, sizeof step, "noise/%s", tag);
    if (!g_stop && file_exists(log)) time_note(c, step, cwm_now() - t0);
  }
  return log_best(log, 1);
}

/* ---- sample efficiency: the final re-measure ----------------------------------------------- */

/* A 10,000-trial run takes hours and is resumed over several runs, and the machine's speed
 * drifts from one run to the next (data/README.md: up to 1.8x), so the best latency of a log
 * can come from whichever stretch ran fastest. The comparison that counts re-measures the
 * FINAL_TOP best schedules of each contender (world within its budget, ansor within world's
 * budget and within its own) in one stretch, interleaved, FINAL_ROUNDS times; a contender's
 * figure is its best schedule's median over the rounds (round_figure). */
#define FINAL_TOP 5
#define FINAL_ROUNDS 3
#define FINAL_KINDS 3 /* 0: world@world_trials, 1: ansor@world_trials, 2: ansor@ansor_trials */

static void final_paths(const ctx_t *c, const char *id, char *steps, char *tags, char *log, char *out, size_t n) {
  snprintf(steps, n, "%s/sample/final_%s.steps", c->dir, id);
  snprintf(tags, n, "%s/sample/final_%s.tags", c->dir, id);
  snprintf(log, n, "%s/sample/final_%s.jsonl", c->dir, id);
  snprintf(out, n, "%s/sample/final_%s.out", c->dir, id);
}

/* The k best distinct good records among the first t of recs (indices into recs, best first). */
static int top_records(const cwm_record *recs, int n, int t, int k, int *idx) {
  int m = 0;
  for (int i = 0; i < n && i < t; i++) {
    double ci = cwm_record_cost(&recs[i]);
    if (ci >= 1e9) continue;
    int pos = m;
    while (pos > 0 && cwm_record_cost(&recs[idx[pos - 1]]) > ci) pos--;
    if (pos >= k) continue;
    if (m < k) m++;
    for (int j = m - 1; j > pos; j--) idx[j] = idx[j - 1];
    idx[pos] = i;
  }
  return m;
}

/* The interleaved step lists of the contenders (rank 1 of each, then rank 2, ...) and their
 * kinds, one per line, into sb and tb; the number of lines, 0 when a log is missing or short. */
static int final_lists(const ctx_t *c, const row_t *r, cwm_buf *sb, cwm_buf *tb) {
  char lw[1024], la[1024], x[1024], y[1024];
  run_paths(c, "sample", "world", r->id, 1, lw, x, y, sizeof lw);
  run_paths(c, "sample", "ansor", r->id, 1, la, x, y, sizeof la);
  cwm_record *rw = NULL, *ra = NULL;
  int nw = 0, na = 0, bad = 0, lines = 0;
  cwm_err e = {0};
  if (cwm_log_read(lw, &rw, &nw, &bad, &e) || cwm_log_read(la, &ra, &na, &bad, &e) || nw < c->world_trials ||
      na < c->ansor_trials) {
    cwm_records_free(rw, nw);
    cwm_records_free(ra, na);
    return 0;
  }
  int top[FINAL_KINDS][FINAL_TOP], nt[FINAL_KINDS];
  const cwm_record *src[FINAL_KINDS] = {rw, ra, ra};
  nt[0] = top_records(rw, nw, c->world_trials, FINAL_TOP, top[0]);
  nt[1] = top_records(ra, na, c->world_trials, FINAL_TOP, top[1]);
  nt[2] = top_records(ra, na, c->ansor_trials, FINAL_TOP, top[2]);
  cwm_workload *w = cwm_workload_from_spec(r->spec, c->suite, &e);
  cwm_dag *d = w ? cwm_dag_new(w, &e) : NULL;
  for (int j = 0; j < FINAL_TOP && d; j++)
    for (int k = 0; k < FINAL_KINDS; k++) {
      if (j >= nt[k]) continue;
      const cwm_record *rec = &src[k][top[k][j]];
      cwm_state *st = retarget(d, rec->steps, rec->nsteps); /* the same shape: a replay check */
      if (!st) continue;
      cwm_steps_print(st->steps, st->nsteps, sb);
      cwm_buf_puts(sb, "\n");
      cwm_buf_printf(tb, "%d\n", k);
      cwm_state_free(st);
      lines++;
    }
  if (d) cwm_dag_free(d);
  cwm_workload_free(w);
  cwm_records_free(rw, nw);
  cwm_records_free(ra, na);
  return lines;
}

/* The kinds of the lines of a tags file; their number. */
static int final_tags(const char *tags, int *kind, int cap) {
  FILE *f = fopen(tags, "r");
  if (!f) return 0;
  int n = 0, k;
  while (n < cap && fscanf(f, "%d", &k) == 1) kind[n++] = k;
  fclose(f);
  return n;
}

/* Measures the lines of a steps file on spec `rounds` times over (cwm measure, one stretch,
 * interleaved) into log; resumes a round cut short (the log's record i is always line i % lines of
 * the steps file). */
static void remeasure_rounds(const ctx_t *c, const char *spec, const char *steps, int lines, int rounds,
                             const char *log, const char *out) {
  int have = log_count(log);
  if (have >= rounds * lines) return;
  char *text = cwm_read_file(steps, NULL, NULL);
  if (!text) return;
  const char **list = calloc((size_t)lines, sizeof *list);
  int nl = 0;
  for (char *t = text, *nx; list && *t && nl < lines; t = nx) {
    nx = strchr(t, '\n');
    if (!nx) nx = t + strlen(t);
    else *nx++ = 0;
    list[nl++] = t;
  }
  char part[1100];
  snprintf(part, sizeof part, "%s.part", steps);
  while (!g_stop && nl == lines && have < rounds * lines) {
    cwm_buf b;
    cwm_buf_init(&b);
    for (int i = have % lines; i < lines; i++) cwm_buf_printf(&b, "%s\n", list[i]);
    cwm_err e = {0};
    int rc = cwm_write_file_atomic(part, b.s, b.len, &e);
    cwm_buf_free(&b);
    if (rc) break;
    char th[16], rs[32], ms[32];
    snprintf(th, sizeof th, "%d", c->threads);
    char *argv[24] = {(char *)c->cwm, "measure", "--workload", (char *)spec, "--steps", part, "--log", (char *)log,
                      "--threads", th};
    int a = 10;
    protocol_args(c, argv, &a, rs, ms);
    argv[a] = NULL;
    run_cmd(argv, out);
    int now = log_count(log);
    if (now <= have) break; /* nothing measured: see the .out file */
    have = now;
  }
  remove(part);
  free(list);
  free(text);
}

/* remeasure_rounds, its time noted as "step/ID" when it ran every round in this invocation. */
static void timed_rounds(const ctx_t *c, const char *step, const row_t *r, const char *steps, int lines, int rounds,
                         const char *log, const char *out) {
  int fresh = log_count(log) == 0;
  double t0 = cwm_now();
  remeasure_rounds(c, r->spec, steps, lines, rounds, log, out);
  char name[160];
  snprintf(name, sizeof name, "%s/%s", step, r->id);
  if (fresh && !g_stop && log_count(log) >= rounds * lines) time_note(c, name, cwm_now() - t0);
}

/* A schedule's re-measured figure: the median over the rounds of line j's costs (failures left
 * out; the mean of two when only two ran): one round caught by a burst of other work on the
 * machine does not decide it. NAN when every round failed. */
static double round_figure(const double *cost, int lines, int j, int rounds) {
  double v[8];
  int m = 0;
  for (int q = 0; q < rounds && m < 8; q++)
    if (cost[q * lines + j] < 1e9) v[m++] = cost[q * lines + j];
  return anchor_median(v, m, NAN);
}

/* Writes a re-measure's step lists and tags unless the files hold them already; when they held
 * others (a run redone), the old measurements are kept aside as .jsonl.stale. 0 when written or
 * unchanged. */
static int lists_update(const char *steps, const char *tags, const char *log, const cwm_buf *sb, const cwm_buf *tb) {
  char *os = cwm_read_file(steps, NULL, NULL), *ot = cwm_read_file(tags, NULL, NULL);
  int same = os && ot && sb->s && tb->s && !strcmp(os, sb->s) && !strcmp(ot, tb->s);
  free(os);
  free(ot);
  if (same) return 0;
  char stale[1100];
  snprintf(stale, sizeof stale, "%s.stale", log);
  if (file_exists(log) && rename(log, stale)) fprintf(stderr, "paper_cpu: cannot move %s aside\n", log);
  cwm_err e = {0};
  if (cwm_write_file_atomic(steps, sb->s, sb->len, &e) || cwm_write_file_atomic(tags, tb->s, tb->len, &e)) {
    fprintf(stderr, "paper_cpu: %s\n", e.msg);
    return 1;
  }
  return 0;
}

/* Re-measures a row's contenders once both of its sample runs are complete (again when a run
 * was redone). */
static void final_remeasure(const ctx_t *c, const row_t *r) {
  char steps[1024], tags[1024], log[1024], out[1024];
  final_paths(c, r->id, steps, tags, log, out, sizeof steps);
  cwm_buf sb, tb;
  cwm_buf_init(&sb);
  cwm_buf_init(&tb);
  int lines = final_lists(c, r, &sb, &tb);
  if (lines && lists_update(steps, tags, log, &sb, &tb)) lines = 0;
  cwm_buf_free(&sb);
  cwm_buf_free(&tb);
  if (!lines || log_count(log) >= FINAL_ROUNDS * lines) return;
  fprintf(stderr, "paper_cpu: sample %s: re-measuring the %d best schedules of world@%d, ansor@%d and ansor@%d "
          "together, %d rounds\n", r->id, lines, c->world_trials, c->world_trials, c->ansor_trials, FINAL_ROUNDS);
  timed_rounds(c, "samplefinal", r, steps, lines, FINAL_ROUNDS, log, out);
}

/* A contender's re-measured latency (seconds): over its schedules, the best mean of their
 * FINAL_ROUNDS costs (failures left out); NAN until every round ran. */
static double final_best(const ctx_t *c, const char *id, int k) {
  char steps[1024], tags[1024], log[1024], out[1024];
  final_paths(c, id, steps, tags, log, out, sizeof steps);
  int kind[FINAL_KINDS * FINAL_TOP];
  int lines = final_tags(tags, kind, FINAL_KINDS * FINAL_TOP);
  static double cost[FINAL_ROUNDS * FINAL_KINDS * FINAL_TOP + 1];
  int n = lines ? log_costs(log, cost, FINAL_ROUNDS * lines) : 0;
  if (!lines || n < FINAL_ROUNDS * lines) return NAN;
  double best = NAN;
  for (int j = 0; j < lines; j++) {
    if (kind[j] != k) continue;
    double f = round_figure(cost, lines, j, FINAL_ROUNDS);
    if (isfinite(f) && !(f >= best)) best = f;
  }
  return best;
}

/* Scores the candidates of log (replayed on both workloads; those that fit both) with a model and
 * returns the rank correlation of the two score vectors; *ncand gets their number. */
static double noise_correlation(const char *log, const char *spec_a, const char *spec_b, cwm_costmodel *m,
                                const char *suite, int *ncand) {
  *ncand = 0;
  cwm_err e = {0};
  cwm_workload *wa = cwm_workload_from_spec(spec_a, suite, &e), *wb = cwm_workload_from_spec(spec_b, suite, &e);
  cwm_dag *da = wa ? cwm_dag_new(wa, &e) : NULL, *db = wb ? cwm_dag_new(wb, &e) : NULL;
  cwm_record *recs = NULL;
  int n = 0, bad = 0;
  double r = NAN;
  if (da && db && !cwm_log_read(log, &recs, &n, &bad, &e) && n > 0) {
    cwm_state **sa = calloc((size_t)n, sizeof *sa), **sb = calloc((size_t)n, sizeof *sb);
    int k = 0;
    for (int i = 0; i < n; i++) {
      cwm_state *x = NULL, *y = NULL;
      if (cwm_state_replay(da, recs[i].steps, recs[i].nsteps, &x, NULL, &e) ||
          !(y = retarget(db, recs[i].steps, recs[i].nsteps))) {
        cwm_state_free(x);
        cwm_state_free(y);
        continue;
      }
      sa[k] = x;
      sb[k++] = y;
    }
    double *pa = calloc((size_t)(k ? k : 1), sizeof *pa), *pb = calloc((size_t)(k ? k : 1), sizeof *pb);
    if (k >= 3 && !cwm_costmodel_predict(m, sa, k, pa, &e) && !cwm_costmodel_predict(m, sb, k, pb, &e)) {
      r = cwm_kendall_tau_b(pa, pb, k);
      *ncand = k;
    }
    for (int i = 0; i < k; i++) {
      cwm_state_free(sa[i]);
      cwm_state_free(sb[i]);
    }
    free(sa);
    free(sb);
    free(pa);
    free(pb);
  }
  if (recs) cwm_records_free(recs, n);
  if (da) cwm_dag_free(da);
  if (db) cwm_dag_free(db);
  cwm_workload_free(wa);
  cwm_workload_free(wb);
  return r;
}

/* ---- SVG plots ------------------------------------------------------------------------------- */

typedef struct {
  const char *name;
  const double *y; /* NAN = no point */
  int n;           /* y[i] is at x = i + 1 */
} series_t;

static const char *COLORS[] = {"#1f77b4", "#d62728", "#2ca02c", "#7f7f7f", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"};

/* A line chart of best latency (or a ratio) against trials, log-scaled y, our own writer. */
static void svg_plot(const char *path, const char *title, const char *ylabel, const series_t *s, int ns, int logx) {
  const double W = 640, H = 400, L = 70, R = 170, T = 36, B = 48;
  double ymin = 1e300, ymax = -1e300;
  int xmax = 1;
  for (int k = 0; k < ns; k++)
    for (int i = 0; i < s[k].n; i++)
      if (isfinite(s[k].y[i]) && s[k].y[i] > 0) {
        ymin = fmin(ymin, s[k].y[i]);
        ymax = fmax(ymax, s[k].y[i]);
        if (i + 1 > xmax) xmax = i + 1;
      }
  if (!(ymax >= ymin)) return;
  if (ymax / ymin < 1.05) ymax = ymin * 1.05;
  double ly0 = log10(ymin) - 0.02, ly1 = log10(ymax) + 0.02;
  double lx1 = logx ? log10((double)xmax) : (double)xmax;
#define PX(x) (L + (W - L - R) * ((logx ? log10((double)(x)) : (double)(x)) / (lx1 > 0 ? lx1 : 1)))
#define PY(y) (T + (H - T - B) * (1 - (log10(y) - ly0) / (ly1 - ly0)))
  FILE *f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
             "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
  fprintf(f, "<text x=\"%.0f\" y=\"20\" font-size=\"14\">%s</text>\n", L, title);
  fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n", L, T,
          W - L - R, H - T - B);
  /* y ticks: 1-2-5 steps on the log scale */
  for (int e10 = (int)floor(ly0) - 1; e10 <= (int)ceil(ly1); e10++)
    for (int m = 1; m <= 5; m += (m == 1 ? 1 : 3)) {
      double v = m * pow(10, e10), lv = log10(v);
      if (lv < ly0 || lv > ly1) continue;
      fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, W - R, PY(v), PY(v));
      fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", L - 4, PY(v) + 4, v);
    }
  for (int e10 = 0; pow(10, e10) <= xmax; e10++)
    for (int m = 1; m <= 5; m += (m == 1 ? 1 : 3)) {
      double v = m * pow(10, e10);
      if (v > xmax || (!logx && m != 1 && e10 == 0)) continue;
      fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n", PX(v), H - B + 16, v);
    }
  fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">trials (measurements)</text>\n", L + (W - L - R) / 2,
          H - 10);
  fprintf(f, "<text x=\"14\" y=\"%.0f\" transform=\"rotate(-90 14 %.0f)\" text-anchor=\"middle\">%s</text>\n",
          T + (H - T - B) / 2, T + (H - T - B) / 2, ylabel);
  for (int k = 0; k < ns; k++) {
    const char *col = COLORS[k % 8];
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" points=\"", col);
    for (int i = 0; i < s[k].n; i++)
      if (isfinite(s[k].y[i]) && s[k].y[i] > 0) fprintf(f, "%.1f,%.1f ", PX(i + 1), PY(s[k].y[i]));
    fprintf(f, "\"/>\n");
    fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"3\"/>\n",
            W - R + 10, W - R + 30, T + 14 + 18.0 * k, T + 14 + 18.0 * k, col);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", W - R + 36, T + 18 + 18.0 * k, s[k].name);
  }
  fprintf(f, "</svg>\n");
  fclose(f);
#undef PX
#undef PY
}

/* Best-so-far curve of a log over n trials (NAN past its end). */
static void best_curve(const char *log, double *y, int n) {
  static double c[MAXCURVE * 2];
  int m = log_costs(log, c, MAXCURVE * 2);
  double b = 1e30;
  for (int i = 0; i < n; i++) {
    if (i < m && c[i] < b) b = c[i];
    y[i] = i < m && b < 1e9 ? b * 1e6 : NAN;
  }
}

/* ---- the parts ------------------------------------------------------------------------------- */

static const char *QUICK_MODELS[] = {"world", "ansor", "ansor-pre", "random"};
static const char *ABL_MODELS[] = {"no-transition", "static", "no-contrastive"};
static const char *LONG_IDS_DEFAULT = "dense_qkv,bmm_qk,conv_s1_3x3,conv_s3_3x3";

static const row_t *row_by_id(const ctx_t *c, const char *id) {
  for (int i = 0; i < c->nrows; i++)
    if (!strcmp(c->rows[i].id, id)) return &c->rows[i];
  return NULL;
}

/* ---- budgets 64 and 200: the final re-measure --------------------------------------------- */

/* The budget-64 runs span days too (a rerun resumes; a retrained model reruns only its own
 * runs), and the machine's speed drifts between days (pre-trained ansor's best schedules, timed
 * again in a later run, took 0.886 of their logged latency), so a ratio of two logs' figures
 * mixes the search's quality with the machine's speed that day. The best schedule of every
 * budget-64 run of a row (every model and seed, and the ablations at seed 1) is therefore
 * re-measured in one stretch, interleaved, REM_ROUNDS times; the report's budget-64 figures are
 * these (a run's figure: its best schedule's median over the rounds). The ablations at 200 (each
 * continues its 64-trial log, so its runs span days as well) get the same, in EXP "b200". */
#define REM_ROUNDS 3
#define REM_MAXRUNS (4 * MAXSEED + 3)

static void rem_paths(const ctx_t *c, const char *exp, const char *id, char *steps, char *tags, char *log, char *out,
                      size_t n) {
  snprintf(steps, n, "%s/%sfinal/%s.steps", c->dir, exp, id);
  snprintf(tags, n, "%s/%sfinal/%s.tags", c->dir, exp, id);
  snprintf(log, n, "%s/%sfinal/%s.jsonl", c->dir, exp, id);
  snprintf(out, n, "%s/%sfinal/%s.out", c->dir, exp, id);
}

/* The ablation tables' columns, world first; the runs continued to 200 trials. */
static const char *ABL_COLUMNS[] = {"world", "no-transition", "static", "no-contrastive"};

/* The runs of experiment exp on a row, in a fixed order: b64, every quick model at every seed and
 * the ablations at seed 1; b200, the four ablation columns at seed 1. Their number. */
static int rem_runs(const ctx_t *c, const char *exp, const char **model, long *seed) {
  int n = 0;
  if (!strcmp(exp, "b200")) {
    for (int k = 0; k < 4; k++) model[n] = ABL_COLUMNS[k], seed[n++] = 1;
    return n;
  }
  for (int s = 0; s < c->nseeds; s++)
    for (int k = 0; k < 4; k++) model[n] = QUICK_MODELS[k], seed[n++] = c->seeds[s];
  for (int k = 0; k < 3; k++) model[n] = ABL_MODELS[k], seed[n++] = 1;
  return n;
}

/* The best schedule within t trials of every complete run of exp on row r, as the text of a steps
 * file (one line per run) and of its tags file ("model seed" per line); the line count. */
static int rem_lists(const ctx_t *c, const char *exp, int t, const row_t *r, cwm_buf *sb, cwm_buf *tb) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(r->spec, c->suite, &e);
  cwm_dag *d = w ? cwm_dag_new(w, &e) : NULL;
  const char *model[REM_MAXRUNS];
  long seed[REM_MAXRUNS];
  int nruns = rem_runs(c, exp, model, seed), lines = 0;
  for (int q = 0; d && q < nruns; q++) {
    char log[1024], sum[1024], out[1024];
    run_paths(c, exp, model[q], r->id, seed[q], log, sum, out, sizeof log);
    cwm_record *recs = NULL;
    int n = 0, bad = 0, top;
    if (log_count(log) < t || cwm_log_read(log, &recs, &n, &bad, &e)) continue;
    cwm_state *st = top_records(recs, n, t, 1, &top) == 1 ? retarget(d, recs[top].steps, recs[top].nsteps) : NULL;
    if (st) {
      cwm_steps_print(st->steps, st->nsteps, sb);
      cwm_buf_puts(sb, "\n");
      cwm_buf_printf(tb, "%s %ld\n", model[q], seed[q]);
      lines++;
    }
    cwm_state_free(st);
    cwm_records_free(recs, n);
  }
  if (d) cwm_dag_free(d);
  cwm_workload_free(w);
  return lines;
}

/* Re-measures the winners of exp's runs (t trials each) on row r. When the set of complete runs
 * changed since the last re-measure (a run added or rerun), the lists are rewritten and the old
 * measurements kept aside as .jsonl.stale. */
static void rem_measure(const ctx_t *c, const char *exp, int t, const row_t *r) {
  char steps[1024], tags[1024], log[1024], out[1024], dir[1024];
  rem_paths(c, exp, r->id, steps, tags, log, out, sizeof steps);
  snprintf(dir, sizeof dir, "%s/%sfinal", c->dir, exp);
  mkdirs(dir);
  cwm_buf sb, tb;
  cwm_buf_init(&sb);
  cwm_buf_init(&tb);
  int lines = rem_lists(c, exp, t, r, &sb, &tb);
  if (lines && lists_update(steps, tags, log, &sb, &tb)) lines = 0;
  cwm_buf_free(&sb);
  cwm_buf_free(&tb);
  if (!lines || log_count(log) >= REM_ROUNDS * lines) return;
  fprintf(stderr, "paper_cpu: %s %s: re-measuring the best schedules of its %d runs together, %d rounds\n", exp,
          r->id, lines, REM_ROUNDS);
  char step[64];
  snprintf(step, sizeof step, "%sfinal", exp);
  timed_rounds(c, step, r, steps, lines, REM_ROUNDS, log, out);
}

/* A run's re-measured latency (seconds): its best schedule's median over the rounds (failures
 * left out); NAN until every round of its row ran or when the run is not in it. */
static double rem_cost(const ctx_t *c, const char *exp, const char *id, const char *model, long seed) {
  char steps[1024], tags[1024], log[1024], out[1024], want[96], line[128];
  rem_paths(c, exp, id, steps, tags, log, out, sizeof steps);
  snprintf(want, sizeof want, "%s %ld", model, seed);
  FILE *f = fopen(tags, "r");
  if (!f) return NAN;
  int lines = 0, j = -1;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (!strcmp(line, want)) j = lines;
    lines++;
  }
  fclose(f);
  static double cost[REM_ROUNDS * REM_MAXRUNS + 1];
  if (j < 0 || lines > REM_MAXRUNS || log_costs(log, cost, REM_ROUNDS * lines) < REM_ROUNDS * lines) return NAN;
  return round_figure(cost, lines, j, REM_ROUNDS);
}

static void part_quick(const ctx_t *c) {
  int npairs = 0;
  for (int p = 0; p < NNOISE; p++) npairs += row_by_id(c, NOISE[p].a_id) != NULL;
  g_prog.total = c->nrows * (4 * c->nseeds + 3) + 2 * npairs;
  g_prog.trials_total = (long)g_prog.total * g_budget;
  measure_anchors(c);
  /* budget 64: seeds outermost, so an early stop still leaves whole seeds */
  for (int s = 0; s < c->nseeds && !g_stop; s++)
    for (int i = 0; i < c->nrows && !g_stop; i++)
      for (int k = 0; k < 4 && !g_stop; k++)
        tune_run(c, "b64", QUICK_MODELS[k], c->rows[i].id, c->rows[i].spec, c->seeds[s], g_budget);
  for (int i = 0; i < c->nrows && !g_stop; i++)
    for (int k = 0; k < 3 && !g_stop; k++)
      if (!(g_no_static && !strcmp(ABL_MODELS[k], "static")))
        tune_run(c, "b64", ABL_MODELS[k], c->rows[i].id, c->rows[i].spec, 1, g_budget);
  /* noise: the off-by-one shapes that are not suite rows get their own world run (pairs whose
   * first shape is not among the selected rows are left out) */
  for (int p = 0; p < NNOISE && !g_stop; p++)
    for (int side = 0; side < 2 && !g_stop && row_by_id(c, NOISE[p].a_id); side++) {
      const char *id = side ? NOISE[p].b_id : NOISE[p].a_id, *spec = side ? NOISE[p].b_spec : NOISE[p].a_spec;
      char log[1024];
      noise_log(c, id, log, sizeof log);
      if (!file_exists(log) || log_count(log) < g_budget) {
        if (row_by_id(c, id)) tune_run(c, "b64", "world", id, spec, 1, g_budget);
        else tune_run(c, "noise", "world", id, spec, 1, g_budget);
      }
    }
  char nd[1024];
  snprintf(nd, sizeof nd, "%s/noise", c->dir);
  mkdirs(nd);
  for (int p = 0; p < NNOISE && !g_stop; p++) {
    if (!row_by_id(c, NOISE[p].a_id)) continue;
    char la[1024], lb[1024], tag[256];
    noise_log(c, NOISE[p].a_id, la, sizeof la);
    noise_log(c, NOISE[p].b_id, lb, sizeof lb);
    snprintf(tag, sizeof tag, "%s_on_%s", NOISE[p].a_id, NOISE[p].b_id);
    transfer(c, la, NOISE[p].b_spec, tag);
    snprintf(tag, sizeof tag, "%s_on_%s", NOISE[p].b_id, NOISE[p].a_id);
    transfer(c, lb, NOISE[p].a_spec, tag);
  }
  /* last, in one stretch: every row's winners re-measured side by side */
  for (int i = 0; i < c->nrows && !g_stop; i++) rem_measure(c, "b64", g_budget, &c->rows[i]);
}

static void part_long(const ctx_t *c) {
  char ids[512];
  snprintf(ids, sizeof ids, "%s", c->long_ids);
  int nl = 0;
  const char *lid[16];
  for (char *t = strtok(ids, ","); t && nl < 16; t = strtok(NULL, ",")) lid[nl++] = t;
  int nabl = g_no_static ? 3 : 4;
  g_prog.total = (c->long_mask & LONG_ABL200 ? c->nrows * nabl : 0) + (c->long_mask & LONG_SAMPLE ? nl * 2 : 0) +
                 (c->long_mask & LONG_NETS ? 4 : 0);
  g_prog.trials_total = (c->long_mask & LONG_ABL200 ? (long)c->nrows * nabl * g_budget200 : 0) +
                        (c->long_mask & LONG_SAMPLE ? (long)nl * (c->world_trials + c->ansor_trials) : 0);
  /* ablations at 200: each continues its 64-trial log (the same first 64 measurements) */
  const char *const *abl = ABL_COLUMNS;
  for (int i = 0; i < c->nrows && !g_stop && (c->long_mask & LONG_ABL200); i++)
    for (int k = 0; k < 4 && !g_stop; k++) {
      if (g_no_static && !strcmp(abl[k], "static")) continue;
      char l64[1024], s64[1024], o64[1024], l200[1024], s200[1024], o200[1024], d[1024];
      run_paths(c, "b64", abl[k], c->rows[i].id, 1, l64, s64, o64, sizeof l64);
      run_paths(c, "b200", abl[k], c->rows[i].id, 1, l200, s200, o200, sizeof l200);
      snprintf(d, sizeof d, "%s/b200", c->dir);
      mkdirs(d);
      if (!file_exists(l200) && file_exists(l64)) {
        char *t = cwm_read_file(l64, NULL, NULL);
        cwm_err e = {0};
        if (t) cwm_write_file_atomic(l200, t, strlen(t), &e);
        free(t);
      }
      tune_run(c, "b200", abl[k], c->rows[i].id, c->rows[i].spec, 1, g_budget200);
    }
  /* then, in one stretch, each row's winners at 200 re-measured side by side */
  for (int i = 0; i < c->nrows && !g_stop && (c->long_mask & LONG_ABL200); i++)
    rem_measure(c, "b200", g_budget200, &c->rows[i]);
  /* sample efficiency: every row's world run first (minutes each), then the ansor runs (hours
   * each on a conv row, resumed over several runs), each row's re-measure as soon as its pair is in */
  for (int i = 0; i < nl && !g_stop && (c->long_mask & LONG_SAMPLE); i++) {
    const row_t *r = row_by_id(c, lid[i]);
    if (r) tune_run(c, "sample", "world", r->id, r->spec, 1, c->world_trials);
  }
  for (int i = 0; i < nl && !g_stop && (c->long_mask & LONG_SAMPLE); i++) {
    const row_t *r = row_by_id(c, lid[i]);
    if (!r) continue;
    tune_run(c, "sample", "ansor", r->id, r->spec, 1, c->ansor_trials);
    if (!g_stop) final_remeasure(c, r); /* not after an interrupt */
  }
  /* whole networks */
  const char *nets[][2] = {{"bert", "networks/bert_base_seq128.tsv"}, {"resnet50", "networks/resnet50_b1.tsv"}};
  char netsel[256];
  snprintf(netsel, sizeof netsel, ",%s,", c->nets ? c->nets : "bert,resnet50");
  for (int n = 0; n < 2 && !g_stop && (c->long_mask & LONG_NETS); n++)
    for (int k = 0; k < 2 && !g_stop; k++) {
      char me[64];
      snprintf(me, sizeof me, ",%s,", nets[n][0]);
      if (!strstr(netsel, me)) break;
      const char *mn = k ? "ansor" : "world";
      char net[1024], log[1200], sum[1200], out[1200], d[1024], ts[32], th[16];
      src_path(nets[n][1], net, sizeof net);
      snprintf(d, sizeof d, "%s/net", c->dir);
      mkdirs(d);
      snprintf(log, sizeof log, "%s/%s_%s.jsonl", d, mn, nets[n][0]);
      snprintf(sum, sizeof sum, "%s/%s_%s.json", d, mn, nets[n][0]);
      snprintf(out, sizeof out, "%s/%s_%s.out", d, mn, nets[n][0]);
      g_prog.done++;
      if (file_exists(sum)) continue;
      /* 64 trials per subgraph: the network file's line count minus comments */
      char *text = cwm_read_file(net, NULL, NULL);
      int nsub = 0;
      for (char *l = text; l && *l;) {
        if (*l != '#' && *l != '\n') nsub++;
        l = strchr(l, '\n');
        if (l) l++;
      }
      free(text);
      snprintf(ts, sizeof ts, "%d", 64 * nsub);
      snprintf(th, sizeof th, "%d", c->threads);
      char rs[32], ms[32];
      char *argv[24] = {(char *)c->cwm, "tune", "--network", net, "--model", (char *)mn, "--trials", ts, "--seed", "1",
                        "--threads", th, "--log", log, "--summary", sum};
      int a = 16;
      protocol_args(c, argv, &a, rs, ms);
      argv[a] = NULL;
      int rc = run_cmd(argv, out);
      fprintf(stderr, "paper_cpu: network %s with %s: %s\n", nets[n][0], mn, rc ? "failed (see .out)" : "done");
    }
  char tp[1024];
  snprintf(tp, sizeof tp, "%s/net/torch.tsv", c->dir);
  if (!g_stop && !file_exists(tp) && c->torch && (c->long_mask & LONG_NETS)) {
    cwm_buf b;
    cwm_buf_init(&b);
    for (int n = 0; n < 2; n++) {
      double s = torch_network_seconds(nets[n][0], c->threads);
      cwm_buf_printf(&b, "%s\t%.3f\n", nets[n][0], s > 0 ? s * 1e3 : -1);
    }
    cwm_err e = {0};
    cwm_write_file_atomic(tp, b.s, b.len, &e);
    cwm_buf_free(&b);
  }
}

/* ---- the report ------------------------------------------------------------------------------ */

/* Time of a group of steps: seconds summed over the steps that recorded one, of how many. */
typedef struct {
  double s;
  int have, want;
} tsum_t;

/* A tuning run's seconds; it counts as had only once its log holds t trials. */
static void tsum_run(const ctx_t *c, tsum_t *ts, const char *exp, const char *model, const char *id, long seed,
                     int t) {
  char log[1024], sum[1024], out[1024];
  run_paths(c, exp, model, id, seed, log, sum, out, sizeof log);
  ts->want++;
  double v = out_seconds(out);
  if (isfinite(v)) ts->s += v;
  if (isfinite(v) && log_count(log) >= t) ts->have++;
}

static void tsum_step(const ctx_t *c, tsum_t *ts, const char *step) {
  ts->want++;
  double v = time_of(c, step);
  if (isfinite(v)) ts->s += v, ts->have++;
}

static void tsum_row(cwm_buf *r, const char *what, const tsum_t *ts, tsum_t *total) {
  cwm_buf_printf(r, "| %s | %d of %d | %.0f | %.1f |\n", what, ts->have, ts->want, ts->s, ts->s / 60);
  total->s += ts->s, total->have += ts->have, total->want += ts->want;
}

/* The row of a re-measure: every suite row's "step/ID" note. */
static void tsum_remeasure(const ctx_t *c, cwm_buf *r, const char *step, const char *what, tsum_t *total) {
  tsum_t m = {0};
  char name[160];
  for (int i = 0; i < c->nrows; i++) {
    snprintf(name, sizeof name, "%s/%s", step, c->rows[i].id);
    tsum_step(c, &m, name);
  }
  tsum_row(r, what, &m, total);
}

/* Seconds of the ansor pre-training, from its output ("... in N s"); NAN if it did not finish. */
static double pretrain_seconds(const ctx_t *c) {
  char p[1024];
  snprintf(p, sizeof p, "%s/ansor-pretrained.out", c->dir);
  char *t = cwm_read_file(p, NULL, NULL);
  double v = NAN;
  for (char *q = t; q && (q = strstr(q, " in ")); q += 4) {
    double x;
    char tail[4];
    if (sscanf(q + 4, "%lf %1[s]", &x, tail) == 2) v = x;
  }
  free(t);
  return v;
}

/* Section 7: how long each experiment took on this machine, summed from its pieces. */
static void report_time(const ctx_t *c, cwm_buf *r) {
  cwm_buf_printf(r, "## 7. Time\n\nSeconds as recorded by each piece: a tuning run's own elapsed time (every "
                    "invocation's closing line in its .out file), the pre-training's, and the anchors, re-measures "
                    "and noise replays as paper_cpu timed them (`%s/times.tsv`). The parts ran in pieces, on "
                    "different days; the sum is what one uninterrupted run takes, give or take the machine of the day. "
                    "A step counts as done once its log is complete (partial runs' seconds are in the sum, and so is any time a run was paused to keep the machine quiet for other timing).\n\n",
                 c->dir);
  cwm_buf_printf(r, "| quick part | done | seconds | minutes |\n|---|---:|---:|---:|\n");
  tsum_t total = {0};
  for (int k = 0; k < 4; k++) {
    tsum_t t = {0};
    for (int s = 0; s < c->nseeds; s++)
      for (int i = 0; i < c->nrows; i++) tsum_run(c, &t, "b64", QUICK_MODELS[k], c->rows[i].id, c->seeds[s], g_budget);
    char w[96];
    snprintf(w, sizeof w, "budget %d, %s", g_budget, QUICK_MODELS[k]);
    tsum_row(r, w, &t, &total);
  }
  for (int k = 0; k < 3; k++) {
    tsum_t t = {0};
    for (int i = 0; i < c->nrows; i++) tsum_run(c, &t, "b64", ABL_MODELS[k], c->rows[i].id, 1, g_budget);
    char w[96];
    snprintf(w, sizeof w, "ablation at %d, %s%s", g_budget, ABL_MODELS[k],
             g_no_static && !strcmp(ABL_MODELS[k], "static") ? " (left out: --no-static)" : "");
    if (g_no_static && !strcmp(ABL_MODELS[k], "static")) t.want = 0;
    tsum_row(r, w, &t, &total);
  }
  {
    tsum_t t = {0}, x = {0};
    for (int p = 0; p < NNOISE; p++) {
      if (!row_by_id(c, NOISE[p].a_id)) continue;
      if (!row_by_id(c, NOISE[p].b_id)) tsum_run(c, &t, "noise", "world", NOISE[p].b_id, 1, g_budget);
      char tag[256];
      snprintf(tag, sizeof tag, "noise/%s_on_%s", NOISE[p].a_id, NOISE[p].b_id);
      tsum_step(c, &x, tag);
      snprintf(tag, sizeof tag, "noise/%s_on_%s", NOISE[p].b_id, NOISE[p].a_id);
      tsum_step(c, &x, tag);
    }
    tsum_row(r, "noise: world on the off-by-one shapes", &t, &total);
    tsum_row(r, "noise: best schedules replayed", &x, &total);
  }
  {
    tsum_t t = {0, 0, 1};
    double v = pretrain_seconds(c);
    t.s = isfinite(v) ? v : 0;
    t.have = isfinite(v);
    tsum_row(r, "ansor pre-training", &t, &total);
    tsum_t a = {0};
    tsum_step(c, &a, "anchors");
    tsum_row(r, "oneDNN and PyTorch anchors", &a, &total);
    tsum_remeasure(c, r, "b64final", "re-measure of the winners", &total);
  }
  cwm_buf_printf(r, "| **quick part** | %d of %d | %.0f | %.1f |\n\n", total.have, total.want, total.s, total.s / 60);
  if (total.have == total.want)
    cwm_buf_printf(r, "Target: the quick part within 3 hours. Measured: %.2f h: %s.\n\n", total.s / 3600,
                   total.s <= 3 * 3600 ? "met" : "not met");
  else
    cwm_buf_printf(r, "Target: the quick part within 3 hours. Measured so far: %.2f h with %d of its %d steps done "
                      "(a step not done or not timed counts 0).\n\n", total.s / 3600, total.have, total.want);

  cwm_buf_printf(r, "| long part | done | seconds | minutes |\n|---|---:|---:|---:|\n");
  tsum_t lt = {0};
  for (int k = 0; k < 4; k++) {
    if (g_no_static && !strcmp(ABL_COLUMNS[k], "static")) continue;
    tsum_t t = {0};
    for (int i = 0; i < c->nrows; i++) tsum_run(c, &t, "b200", ABL_COLUMNS[k], c->rows[i].id, 1, g_budget200);
    char w[96];
    snprintf(w, sizeof w, "ablation at %d, %s (trials %d-%d)", g_budget200, ABL_COLUMNS[k], g_budget + 1, g_budget200);
    tsum_row(r, w, &t, &lt);
  }
  tsum_remeasure(c, r, "b200final", "re-measure of the winners at 200", &lt);
  char ids[512];
  snprintf(ids, sizeof ids, "%s", c->long_ids);
  for (char *sv = NULL, *id = strtok_r(ids, ",", &sv); id; id = strtok_r(NULL, ",", &sv)) {
    char w[160];
    tsum_t t = {0};
    tsum_run(c, &t, "sample", "world", id, 1, c->world_trials);
    snprintf(w, sizeof w, "sample %s: world, %d trials", id, c->world_trials);
    tsum_row(r, w, &t, &lt);
    tsum_t a = {0};
    tsum_run(c, &a, "sample", "ansor", id, 1, c->ansor_trials);
    snprintf(w, sizeof w, "sample %s: ansor, %d trials", id, c->ansor_trials);
    tsum_row(r, w, &a, &lt);
  }
  {
    tsum_t t = {0};
    const char *nets[] = {"world_bert", "ansor_bert", "world_resnet50", "ansor_resnet50"};
    for (int n = 0; n < 4; n++) {
      char sum[1024];
      snprintf(sum, sizeof sum, "%s/net/%s.json", c->dir, nets[n]);
      double v = json_num(sum, "tuning_seconds");
      t.want++;
      if (isfinite(v)) t.s += v, t.have++;
    }
    tsum_row(r, "networks: BERT-base and ResNet-50, world and ansor", &t, &lt);
  }
  cwm_buf_printf(r, "| **long part** | %d of %d | %.0f | %.1f |\n\n", lt.have, lt.want, lt.s, lt.s / 60);
}


static double geo(const double *v, int n) {
  double s = 0;
  int k = 0;
  for (int i = 0; i < n; i++)
    if (v[i] > 0 && isfinite(v[i])) s += log(v[i]), k++;
  return k ? exp(s / k) : NAN;
}

static double arith(const double *v, int n) {
  double s = 0;
  int k = 0;
  for (int i = 0; i < n; i++)
    if (v[i] > 0 && isfinite(v[i])) s += v[i], k++;
  return k ? s / k : NAN;
}

static double median(double *v, int n) { return anchor_median(v, n, NAN); }

static void fmt(char *o, size_t n, const char *f, double v) {
  if (isfinite(v) && v > 0) snprintf(o, n, f, v);
  else snprintf(o, n, "-");
}

/* Geometric mean over seeds of the best latency (us) within t trials of a model on a row. */
static double seeds_best(const ctx_t *c, const char *exp, const char *model, const char *id, int t, int nseeds) {
  double v[MAXSEED];
  int k = 0;
  for (int s = 0; s < nseeds; s++) {
    char log[1024], sum[1024], out[1024];
    run_paths(c, exp, model, id, c->seeds[s], log, sum, out, sizeof log);
    if (log_count(log) < t) continue;
    double b = log_best(log, t);
    if (b > 0) v[k++] = b * 1e6;
  }
  return k == nseeds ? geo(v, k) : NAN;
}

/* Geometric mean over seeds of the re-measured latency (us) of a model's budget-64 winners on a row;
 * NAN unless every seed's was re-measured. */
static double seeds_final(const ctx_t *c, const char *model, const char *id, int nseeds) {
  double v[MAXSEED];
  for (int s = 0; s < nseeds; s++) {
    v[s] = rem_cost(c, "b64", id, model, c->seeds[s]) * 1e6;
    if (!isfinite(v[s])) return NAN;
  }
  return geo(v, nseeds);
}

/* Whole networks compiled from ONNX and timed end to end (bench/e2e.sh writes the figures; the
 * committed copy is report/e2e.tsv): the compiled library against PyTorch eager and TorchScript. */
static void report_e2e(cwm_buf *r) {
  char path[1024];
  snprintf(path, sizeof path, "%s/report/e2e.tsv", CWM_SOURCE_DIR);
  FILE *f = fopen(path, "r");
  cwm_buf_printf(r, "### Compiled from ONNX and measured end to end\n\n");
  if (!f) {
    cwm_buf_printf(r, "Not measured yet (`bench/e2e.sh`, then copy out/e2e/e2e.tsv to report/e2e.tsv).\n\n");
    return;
  }
  cwm_buf_printf(r, "`cwm tune --onnx` (world model) then `cwm compile`: the whole network as one C library (every "
                    "operator, glue included), timed by its runner against PyTorch 1.13 on the same inputs, "
                    "interleaved rounds, medians (`bench/e2e.sh`; its outputs match PyTorch's, checked in the same "
                    "run).\n\n| network | threads | tasks tuned | trials | cwm ms | PyTorch eager ms | TorchScript ms "
                    "| eager / cwm | TorchScript / cwm |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  char line[512];
  double best_eager = 0, e1[2] = {0, 0}, s1[2] = {0, 0};
  const char *names[2] = {"resnet50", "bert_base"};
  while (fgets(line, sizeof line, f)) {
    char m[64];
    int th, tuned, tasks, trials;
    double c, e, s;
    if (sscanf(line, "%63s %d %lf %lf %lf %d %d %d", m, &th, &c, &e, &s, &tuned, &tasks, &trials) != 8 || c <= 0) continue;
    cwm_buf_printf(r, "| %s | %d | %d of %d | %d | %.2f | %.2f | %.2f | %.2fx | %.2fx |\n", m, th, tuned, tasks, trials, c,
                   e, s, e / c, s / c);
    if (e / c > best_eager) best_eager = e / c;
    for (int k = 0; k < 2; k++)
      if (th == 1 && !strcmp(m, names[k])) e1[k] = e / c, s1[k] = s / c;
  }
  fclose(f);
  cwm_buf_printf(r, "\nAt 1 thread: ");
  for (int k = 0; k < 2; k++) {
    if (e1[k] <= 0) continue;
    cwm_buf_printf(r, "%s %.2fx faster than eager (target 2.5x: %s) and %.2fx than TorchScript (target 1.2x: %s)%s",
                   names[k], e1[k], e1[k] >= 2.5 ? "met" : "**short**", s1[k], s1[k] >= 1.2 ? "met" : "**short**",
                   k == 0 ? "; " : ".");
  }
  cwm_buf_printf(r, " The published system reports 4.61x lower end-to-end latency than PyTorch on a CPU; the best "
                    "ratio here is %.2fx, %s.\n\n", best_eager, best_eager >= 4.61 ? "**reached**" : "**short of it**");
}

static void write_report(const ctx_t *c, const char *argv0_cmd) {
  cwm_buf r;
  cwm_buf_init(&r);
  mkdirs(c->plots);
  struct utsname u;
  uname(&u);
  char cpu[256] = "unknown CPU";
  FILE *ci = fopen("/proc/cpuinfo", "r");
  if (ci) {
    char line[512];
    while (fgets(line, sizeof line, ci))
      if (!strncmp(line, "model name", 10)) {
        char *p = strchr(line, ':');
        if (p) snprintf(cpu, sizeof cpu, "%s", p + 2);
        cpu[strcspn(cpu, "\n")] = 0;
        break;
      }
    fclose(ci);
  }
  time_t now = time(NULL);
  char date[64];
  strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  cwm_measure_opts mo; /* the protocol cwm tune uses where paper_cpu does not set it */
  cwm_measure_opts_default(&mo);
  cli_env_measure(&mo);
  cwm_buf_printf(&r, "# cwm against Ansor: the paper's CPU experiments\n\n");
  cwm_buf_printf(&r,
                 "Written by `bench/paper_cpu` (%s) from the logs under `%s`; nothing here is typed by hand. "
                 "Machine: %s, %ld online cores, %s %s; cwm %s; %d thread(s) per kernel; a candidate's latency is the "
                 "mean of %d timed repeats of at least %d ms after a warm-up; seeds", date, c->dir, cpu,
                 sysconf(_SC_NPROCESSORS_ONLN), u.sysname, u.release, CWM_VERSION, c->threads,
                 c->repeats > 0 ? c->repeats : mo.repeats, c->min_repeat_ms > 0 ? c->min_repeat_ms : (int)mo.min_repeat_ms);
  for (int s = 0; s < c->nseeds; s++) cwm_buf_printf(&r, "%s %ld", s ? "," : "", c->seeds[s]);
  cwm_buf_printf(&r, ".\n\nReproduce: `%s` (the quick part: budget 64, ablations at 64, noise, anchors), then "
                     "`./build/paper_cpu --part long` (ablations at 200, %d versus %d trials, networks; resumable). "
                     "Every tuning run is `cwm tune` with its own log in that directory (the `.out` file next to it "
                     "holds its progress lines).\n\n",
                 argv0_cmd, c->world_trials, c->ansor_trials);
  cwm_buf_printf(&r, "Models: ");
  for (int k = 0; k < NMODELS; k++) cwm_buf_printf(&r, "%s`%s`: %s", k ? "; " : "", MODELS[k].name, MODELS[k].what);
  cwm_buf_printf(&r, ". Every model is searched by the same evolution (Ansor's sketches, mutations and "
                     "epsilon-greedy picks); the world models' own search policy adds, from the second round on, "
                     "the family quota (at most a quarter of a round's picks share a sketch, compute locations "
                     "and annotation kinds) and, from 128 records of a workload on, the hand-off to Ansor's model "
                     "trained on them, weighted by how much of each candidate's family was measured "
                     "(docs/architecture.md, \"The world model in the search\").\n\n");

  /* (1) budget 64 */
  int nr = c->nrows, ns = c->nseeds;
  double best[4][MAXID], dn[MAXID], th[MAXID];
  cwm_buf_printf(&r, "## 1. Budget 64 (every suite row, %d seeds)\n\n", ns);
  cwm_buf_printf(&r, "Latency in us of each run's best schedule after 64 measurements, re-measured: once a row's runs "
                     "are complete, the best schedule of each (every model and seed, and the ablations of section 3) "
                     "is timed again in one stretch, interleaved, %d rounds, and a run's figure is the median of its "
                     "rounds; a model's cell is the geometric mean over the seeds. The runs themselves were made on "
                     "different days and the machine's speed drifts between days; the re-measure puts every model's schedules "
                     "on the same machine at the same hour. A row marked * has no complete re-measure yet and shows "
                     "the logged figures. Ratio = the other's latency / world's (> 1: world is faster).\n\n",
                 REM_ROUNDS);
  cwm_buf_printf(&r, "| row | oneDNN | PyTorch | world | ansor | ansor-pre | random | ansor/world | ansor-pre/world | "
                     "random/world | oneDNN/world |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  double rat[4][MAXID], ratl[4][MAXID];
  int nlogged = 0;
  for (int i = 0; i < nr; i++) {
    const row_t *w = &c->rows[i];
    anchor_of(c, w->id, &dn[i], &th[i]);
    double lg[4];
    int fin = 1;
    for (int k = 0; k < 4; k++) {
      lg[k] = seeds_best(c, "b64", QUICK_MODELS[k], w->id, g_budget, ns);
      best[k][i] = seeds_final(c, QUICK_MODELS[k], w->id, ns);
      fin &= isfinite(best[k][i]);
    }
    if (!fin)
      for (int k = 0; k < 4; k++) best[k][i] = lg[k];
    nlogged += !fin;
    for (int k = 1; k < 4; k++) rat[k][i] = best[k][i] / best[0][i], ratl[k][i] = lg[k] / lg[0];
    rat[0][i] = dn[i] > 0 ? dn[i] / best[0][i] : NAN;
    char f[12][32];
    fmt(f[0], 32, "%.1f", dn[i]);
    fmt(f[1], 32, "%.1f", th[i]);
    for (int k = 0; k < 4; k++) fmt(f[2 + k], 32, "%.1f", best[k][i]);
    for (int k = 1; k < 4; k++) fmt(f[5 + k], 32, "%.2f", rat[k][i]);
    fmt(f[9], 32, "%.2f", rat[0][i]);
    cwm_buf_printf(&r, "| %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", w->id, fin ? "" : " *", f[0],
                   f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9]);
  }
  char g[8][32];
  for (int k = 1; k < 4; k++) fmt(g[k], 32, "%.3f", geo(rat[k], nr));
  fmt(g[0], 32, "%.3f", geo(rat[0], nr));
  for (int k = 1; k < 4; k++) fmt(g[4 + k], 32, "%.3f", arith(rat[k], nr));
  cwm_buf_printf(&r, "| **geometric mean** | | | | | | | %s | %s | %s | %s |\n", g[1], g[2], g[3], g[0]);
  cwm_buf_printf(&r, "| **arithmetic mean** | | | | | | | %s | %s | %s | |\n\n", g[5], g[6], g[7]);
  for (int k = 1; k < 4; k++) fmt(g[k], 32, "%.3f", geo(ratl[k], nr));
  cwm_buf_printf(&r, "The same ratios from the figures logged during the runs (each run timed on its own day): "
                     "ansor/world %s, ansor-pre/world %s, random/world %s (geometric means).\n\n", g[1], g[2], g[3]);
  double gm_ansor = geo(rat[1], nr), gm_pre = geo(rat[2], nr);
  cwm_buf_printf(&r, "Target: world beats ansor from scratch by at least 1.3x (geometric mean; the published figure is "
                     "1.54x) and beats pre-trained ansor. Measured%s: %.3fx and %.3fx: %s.\n\n",
                 nlogged ? " (some rows logged only)" : ", re-measured", gm_ansor, gm_pre,
                 !isfinite(gm_ansor) || !isfinite(gm_pre) ? "incomplete (rows missing)"
                 : gm_ansor >= 1.3 && gm_pre > 1.0   ? "met"
                                                     : "**not met**");
  if (isfinite(gm_ansor))
    cwm_buf_printf(&r, "Against the published figure: %.3fx is %s 1.54x.\n\n", gm_ansor,
                   gm_ansor >= 1.54 ? "at or past" : "**short of**");
  /* curves: per row (mean over seeds) and the geometric mean of latency relative to the row's best */
  double *gcurve[4];
  int gcount = 0;
  for (int k = 0; k < 4; k++) gcurve[k] = calloc(64, sizeof(double));
  cwm_buf_printf(&r, "Best latency against trials: ");
  for (int i = 0; i < nr; i++) {
    const row_t *w = &c->rows[i];
    double y[4][64];
    series_t s[4];
    int ok = 1;
    double norm = 1e300;
    for (int k = 0; k < 4; k++) {
      double cv[MAXSEED][64]; /* each seed's curve, read once */
      for (int q = 0; q < ns; q++) {
        char log[1024], sum[1024], out[1024];
        run_paths(c, "b64", QUICK_MODELS[k], w->id, c->seeds[q], log, sum, out, sizeof log);
        best_curve(log, cv[q], g_budget);
      }
      for (int t = 0; t < g_budget; t++) {
        double v[MAXSEED];
        int m = 0;
        for (int q = 0; q < ns; q++)
          if (isfinite(cv[q][t])) v[m++] = cv[q][t];
        y[k][t] = m == ns ? geo(v, m) : NAN;
      }
      if (!isfinite(y[k][g_budget - 1])) ok = 0;
      else norm = fmin(norm, y[k][g_budget - 1]);
      s[k].name = QUICK_MODELS[k];
      s[k].y = y[k];
      s[k].n = g_budget;
    }
    char path[1024], title[256];
    snprintf(path, sizeof path, "%s/b64_%s.svg", c->plots, w->id);
    snprintf(title, sizeof title, "%s: best latency, budget 64 (geo. mean of %d seeds)", w->id, ns);
    svg_plot(path, title, "best latency (us)", s, 4, 0);
    cwm_buf_printf(&r, "%s[%s](%s/b64_%s.svg)", i ? ", " : "", w->id, c->plots, w->id);
    if (ok) {
      for (int k = 0; k < 4; k++)
        for (int t = 0; t < g_budget; t++) gcurve[k][t] += isfinite(y[k][t]) ? log(y[k][t] / norm) : log(1e3);
      gcount++;
    }
  }
  if (gcount) {
    series_t s[4];
    for (int k = 0; k < 4; k++) {
      for (int t = 0; t < g_budget; t++) gcurve[k][t] = exp(gcurve[k][t] / gcount);
      s[k].name = QUICK_MODELS[k];
      s[k].y = gcurve[k];
      s[k].n = g_budget;
    }
    char path[1024], title[256];
    snprintf(path, sizeof path, "%s/b64_geomean.svg", c->plots);
    snprintf(title, sizeof title, "geometric mean over %d rows of latency / the row's best at 64", gcount);
    svg_plot(path, title, "relative latency", s, 4, 0);
    cwm_buf_printf(&r, ".\n\n![budget 64, geometric mean](%s/b64_geomean.svg)\n\n", c->plots);
  } else {
    cwm_buf_printf(&r, ".\n\n");
  }
  for (int k = 0; k < 4; k++) free(gcurve[k]);

  /* (2) sample efficiency */
  cwm_buf_printf(&r, "## 2. Sample efficiency: world at %d trials against ansor at %d\n\n", c->world_trials,
                 c->ansor_trials);
  cwm_buf_printf(&r, "Best latency in us as logged during the runs, then the contenders' %d best schedules "
                     "re-measured together in one stretch (%d rounds, interleaved; a contender's figure is its best "
                     "schedule's median over the rounds): a 10,000-trial run spans several days, and the machine's speed "
                     "drifts between them, so the ratio that counts is the re-measured one.\n\n",
                 FINAL_TOP, FINAL_ROUNDS);
  cwm_buf_printf(&r, "| row | world@64 | world@%d | ansor@%d | ansor@%d | logged ansor@%d / world@%d | re-measured "
                     "world@%d | re-measured ansor@%d | re-measured ansor@%d | re-measured ansor@%d / world@%d |\n"
                     "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
                 c->world_trials, c->world_trials, c->ansor_trials, c->ansor_trials, c->world_trials,
                 c->world_trials, c->world_trials, c->ansor_trials, c->ansor_trials, c->world_trials);
  {
    char ids[512];
    snprintf(ids, sizeof ids, "%s", c->long_ids);
    double rs[16], rl[16];
    int n2 = 0;
    for (char *t = strtok(ids, ","); t && n2 < 16; t = strtok(NULL, ",")) {
      char lw[1024], la[1024], x[1024], y[1024];
      run_paths(c, "sample", "world", t, 1, lw, x, y, sizeof lw);
      run_paths(c, "sample", "ansor", t, 1, la, x, y, sizeof la);
      double w64 = log_best(lw, g_budget), w1k = log_count(lw) >= c->world_trials ? log_best(lw, c->world_trials) : NAN;
      double a1k = log_count(la) >= c->world_trials ? log_best(la, c->world_trials) : NAN;
      double a10k = log_count(la) >= c->ansor_trials ? log_best(la, c->ansor_trials) : NAN;
      double fw = final_best(c, t, 0), fa1 = final_best(c, t, 1), fa = final_best(c, t, 2);
      rl[n2] = a10k / w1k;
      rs[n2] = fa / fw;
      char f[9][32];
      fmt(f[0], 32, "%.1f", w64 * 1e6);
      fmt(f[1], 32, "%.1f", w1k * 1e6);
      fmt(f[2], 32, "%.1f", a1k * 1e6);
      fmt(f[3], 32, "%.1f", a10k * 1e6);
      fmt(f[4], 32, "%.3f", rl[n2]);
      fmt(f[5], 32, "%.1f", fw * 1e6);
      fmt(f[6], 32, "%.1f", fa1 * 1e6);
      fmt(f[7], 32, "%.1f", fa * 1e6);
      fmt(f[8], 32, "%.3f", rs[n2]);
      cwm_buf_printf(&r, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", t, f[0], f[1], f[2], f[3], f[4],
                     f[5], f[6], f[7], f[8]);
      /* curve plot, log x */
      int N = c->ansor_trials > c->world_trials ? c->ansor_trials : c->world_trials;
      if (N > MAXCURVE) N = MAXCURVE;
      double *yw = malloc(sizeof(double) * (size_t)N), *ya = malloc(sizeof(double) * (size_t)N);
      best_curve(lw, yw, N);
      best_curve(la, ya, N);
      series_t s[2] = {{"world", yw, N}, {"ansor", ya, N}};
      char path[1024], title[256];
      snprintf(path, sizeof path, "%s/sample_%s.svg", c->plots, t);
      snprintf(title, sizeof title, "%s: best latency against trials (seed 1)", t);
      svg_plot(path, title, "best latency (us)", s, 2, 1);
      free(yw);
      free(ya);
      n2++;
    }
    char f[4][32];
    fmt(f[0], 32, "%.3f", geo(rl, n2));
    fmt(f[1], 32, "%.3f", arith(rl, n2));
    fmt(f[2], 32, "%.3f", geo(rs, n2));
    fmt(f[3], 32, "%.3f", arith(rs, n2));
    cwm_buf_printf(&r, "| **geometric / arithmetic mean** | | | | | %s / %s | | | | %s / %s |\n\n", f[0], f[1], f[2],
                   f[3]);
    /* the target reads the re-measured ratios, and only when every row has them */
    int all = n2 > 0;
    for (int i = 0; i < n2; i++) all &= isfinite(rs[i]) && rs[i] > 0;
    double gm = all ? geo(rs, n2) : NAN;
    cwm_buf_printf(&r, "Target: world at %d within 3%% of ansor at %d (re-measured ratio at least 0.97). Measured: %s.",
                   c->world_trials, c->ansor_trials,
                   !isfinite(gm) ? "incomplete (runs missing: `paper_cpu --part long`)"
                   : gm >= 0.97  ? "met"
                                 : "**not met**");
    cwm_buf_printf(&r, " Curves: ");
    snprintf(ids, sizeof ids, "%s", c->long_ids);
    int q = 0;
    for (char *t = strtok(ids, ","); t; t = strtok(NULL, ","))
      cwm_buf_printf(&r, "%s[%s](%s/sample_%s.svg)", q++ ? ", " : "", t, c->plots, t);
    cwm_buf_printf(&r, ".\n\n");
  }

  /* (3) ablations */
  cwm_buf_printf(&r, "## 3. Ablations (seed 1)\n\n");
  const char *const *abl = ABL_COLUMNS;
  double worse[2][3][MAXID]; /* [budget][column - 1][row]: latency / world's */
  for (int b = 0; b < 2; b++) {
    int T = b ? g_budget200 : g_budget;
    const char *exp = b ? "b200" : "b64";
    char span[96] = "";
    if (b) snprintf(span, sizeof span, " of trials %d-%d (a run continues its %d-trial log)", g_budget + 1, T, g_budget);
    cwm_buf_printf(&r, "Best latency in us after %d measurements (%s); search seconds = tuning time minus building "
                       "and running (scoring and evolution)%s.\n\n| row | world | no-transition | static | no-contrastive |\n"
                       "|---|---:|---:|---:|---:|\n", T,
                   b ? "each run's best schedule re-measured with the others of its row, as in section 1; a row "
                       "marked * as logged"
                     : "re-measured with section 1's, a row marked * as logged", span);
    double secs[4][MAXID];
    for (int i = 0; i < nr; i++) {
      double v[4];
      /* the re-measured figures where the row has them */
      int fin = isfinite(rem_cost(c, exp, c->rows[i].id, "world", 1));
      for (int k = 0; k < 4; k++) {
        char log[1024], sum[1024], out[1024];
        run_paths(c, exp, abl[k], c->rows[i].id, 1, log, sum, out, sizeof log);
        v[k] = fin                 ? rem_cost(c, exp, c->rows[i].id, abl[k], 1) * 1e6
               : log_count(log) >= T ? log_best(log, T) * 1e6
                                     : NAN;
        double ts = json_num(sum, "tuning_seconds"), bs = json_num(sum, "build_seconds"),
               rs = json_num(sum, "run_seconds");
        secs[k][i] = isfinite(ts) && isfinite(bs) && isfinite(rs) && json_num(sum, "resumed") == (b ? g_budget : 0) ? ts - bs - rs : NAN;
      }
      for (int k = 1; k < 4; k++) worse[b][k - 1][i] = v[k] / v[0];
      char f[4][32];
      for (int k = 0; k < 4; k++) fmt(f[k], 32, "%.1f", v[k]);
      cwm_buf_printf(&r, "| %s%s | %s | %s | %s | %s |\n", c->rows[i].id, !fin ? " *" : "", f[0], f[1], f[2],
                     f[3]);
    }
    char f[8][32];
    for (int k = 0; k < 3; k++) fmt(f[k], 32, "%.3f", median(worse[b][k], nr));
    for (int k = 0; k < 4; k++) fmt(f[3 + k], 32, "%.1f", median(secs[k], nr));
    cwm_buf_printf(&r, "| **median latency / world's** | 1 | %s | %s | %s |\n", f[0], f[1], f[2]);
    cwm_buf_printf(&r, "| **median search seconds** | %s | %s | %s | %s |\n\n", f[3], f[4], f[5], f[6]);
  }
  {
    /* the verdict on the published ablation, from the two tables' no-transition medians */
    double m64 = median(worse[0][0], nr), m200 = median(worse[1][0], nr);
    int done = isfinite(m64) && isfinite(m200), reproduced = done && m64 >= 1.56 && m200 >= 1.56;
    char a[32], bb[32];
    fmt(a, sizeof a, "%.3f", m64);
    fmt(bb, sizeof bb, "%.3f", m200);
    cwm_buf_printf(&r, "The published ablation: without the learned transition, median latency 56-69%% worse "
                       "(1.56-1.69 of the full model's). Measured here: %s at %d trials and %s at %d: %s.%s\n\n",
                   a, g_budget, bb, g_budget200,
                   !done ? "incomplete (runs missing)" : reproduced ? "reproduced" : "**not reproduced**",
                   done && !reproduced
                       ? " Our world model ranks through a value head read off the rollout, and the ranker's trees also "
                         "see z_0 and the action features, which are what the no-transition column keeps: the "
                         "rollout adds little that the actions do not already say (models/README.md, \"Why the value "
                         "head\" and \"The value mode\")."
                       : "");
  }

  /* (4) syntactic noise */
  cwm_buf_printf(&r, "## 4. Syntactic noise\n\nThe best schedule world found (64 trials, seed 1) on one shape, replayed "
                     "on the other, against the other's own best; and the rank correlation (Kendall's tau-b) of a model's "
                     "scores for the same candidates (world's 64 measured ones on the first shape) on both shapes: "
                     "1 means the off-by-one text does not change the ranking.\n\n"
                     "| pair | own best A | A's best on B | own best B | B's best on A | world tau | ansor-pre tau | "
                     "candidates |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
  {
    cwm_err e = {0};
    const char *mp = cwm_world_default_path();
    cwm_world *wm = mp ? cwm_world_load(mp, &e) : NULL;
    cwm_world_cm_opts wo;
    cwm_world_cm_opts_default(&wo);
    cli_env_world_cm(&wo);
    cwm_costmodel *wcm = wm ? cwm_costmodel_world(wm, &wo, &e) : NULL;
    char pf[1024];
    snprintf(pf, sizeof pf, "%s/ansor-pretrained.bin", c->dir);
    cwm_costmodel *acm = file_exists(pf) ? cwm_costmodel_ansor(1, pf, &e) : NULL;
    for (int p = 0; p < NNOISE; p++) {
      char la[1024], lb[1024], t1[1024], t2[1024];
      noise_log(c, NOISE[p].a_id, la, sizeof la);
      noise_log(c, NOISE[p].b_id, lb, sizeof lb);
      snprintf(t1, sizeof t1, "%s/noise/%s_on_%s.jsonl", c->dir, NOISE[p].a_id, NOISE[p].b_id);
      snprintf(t2, sizeof t2, "%s/noise/%s_on_%s.jsonl", c->dir, NOISE[p].b_id, NOISE[p].a_id);
      double ba = log_best(la, g_budget), bb = log_best(lb, g_budget), ab = log_best(t1, 1), bA = log_best(t2, 1);
      int n1 = 0, n2 = 0;
      double rw = wcm && file_exists(la) ? noise_correlation(la, NOISE[p].a_spec, NOISE[p].b_spec, wcm, c->suite, &n1)
                                         : NAN;
      double ra = acm && file_exists(la) ? noise_correlation(la, NOISE[p].a_spec, NOISE[p].b_spec, acm, c->suite, &n2)
                                         : NAN;
      char f[6][32];
      fmt(f[0], 32, "%.1f", ba * 1e6);
      fmt(f[1], 32, "%.1f", ab * 1e6);
      fmt(f[2], 32, "%.1f", bb * 1e6);
      fmt(f[3], 32, "%.1f", bA * 1e6);
      if (isfinite(rw)) snprintf(f[4], 32, "%.3f", rw);
      else snprintf(f[4], 32, "-");
      if (isfinite(ra)) snprintf(f[5], 32, "%.3f", ra);
      else snprintf(f[5], 32, "-");
      cwm_buf_printf(&r, "| %s / %s | %s | %s | %s | %s | %s | %s | %d |\n", NOISE[p].a_id, NOISE[p].b_id, f[0], f[1],
                     f[2], f[3], f[4], f[5], n1);
    }
    cwm_costmodel_free(wcm);
    cwm_costmodel_free(acm);
  }
  cwm_buf_printf(&r, "\n");

  /* (5) networks */
  cwm_buf_printf(&r, "## 5. Whole networks (64 trials per subgraph, seed 1)\n\n| network | world est. ms | ansor est. "
                     "ms | ansor/world | PyTorch measured ms |\n|---|---:|---:|---:|---:|\n");
  {
    const char *nets[] = {"bert", "resnet50"};
    for (int n = 0; n < 2; n++) {
      char sw[1024], sa[1024], tp[1024];
      snprintf(sw, sizeof sw, "%s/net/world_%s.json", c->dir, nets[n]);
      snprintf(sa, sizeof sa, "%s/net/ansor_%s.json", c->dir, nets[n]);
      snprintf(tp, sizeof tp, "%s/net/torch.tsv", c->dir);
      double w = json_num(sw, "est_latency_ms"), a = json_num(sa, "est_latency_ms"), t = -1;
      FILE *f = fopen(tp, "r");
      if (f) {
        char nm[64];
        double v;
        while (fscanf(f, "%63s %lf", nm, &v) == 2)
          if (!strcmp(nm, nets[n])) t = v;
        fclose(f);
      }
      char x[4][32];
      fmt(x[0], 32, "%.2f", w);
      fmt(x[1], 32, "%.2f", a);
      fmt(x[2], 32, "%.3f", a / w);
      fmt(x[3], 32, "%.2f", t);
      cwm_buf_printf(&r, "| %s | %s | %s | %s | %s |\n", nets[n], x[0], x[1], x[2], x[3]);
    }
  }
  cwm_buf_printf(&r, "\nThe estimate is the sum of weight x best latency over the network's subgraphs "
                     "(networks/README.md); PyTorch runs the whole network eagerly, on the same threads.\n\n");
  report_e2e(&r);

  /* (6) anchors */
  cwm_buf_printf(&r, "## 6. Vendor anchors\n\noneDNN (libdnnl, weights reordered outside the timed region) and "
                     "PyTorch %s eager per row are in the table of section 1 (columns oneDNN, PyTorch; us, median of "
                     "repeats in the same run as the tuning). world against oneDNN over the compute-bound rows: ",
                 "1.13");
  {
    double v[MAXID], m[MAXID];
    int a = 0, b = 0;
    for (int i = 0; i < nr; i++) {
      if (!isfinite(rat[0][i])) continue;
      if (is_memory_bound(c->rows[i].op)) m[b++] = rat[0][i];
      else v[a++] = rat[0][i];
    }
    char f[2][32];
    fmt(f[0], 32, "%.3f", geo(v, a));
    fmt(f[1], 32, "%.3f", geo(m, b));
    cwm_buf_printf(&r, "geometric mean %s (%d rows); memory-bound rows %s (%d rows).\n\n", f[0], a, f[1], b);
  }
  report_time(c, &r);
  cwm_err e = {0};
  if (cwm_write_file_atomic(c->report, r.s, r.len, &e)) fprintf(stderr, "paper_cpu: %s\n", e.msg);
  else fprintf(stderr, "paper_cpu: report written to %s (plots in %s)\n", c->report, c->plots);
  cwm_buf_free(&r);
}

/* ---- main ------------------------------------------------------------------------------------ */

static const char *USAGE =
    "usage: paper_cpu [--part quick|long|all|report|ablate200|sample|networks] [--dir DIR] [--report FILE]\n"
    "                 [--plots DIR] [--seeds 1,2,3] [--ids a,b] [--threads T] [--records LOG] [--no-torch]\n"
    "                 [--long-ids a,b] [--world-trials N] [--ansor-trials N] [--cwm PATH] [--suite FILE]\n"
    "                 [--no-static] [--nets bert,resnet50] [--repeats R] [--min-repeat-ms MS]\n"
    "Runs the paper's CPU experiments on cwm and writes REPORT.md and SVG plots (issue 6):\n"
    "quick: budget 64 (world, ansor, ansor pre-trained on --records, random; every suite row and\n"
    "seed), ablations at 64 (no transition, static final state, no contrastive), syntactic noise,\n"
    "oneDNN and PyTorch anchors. long: ablations at 200, world at --world-trials (1000) against\n"
    "ansor at --ansor-trials (10000) on --long-ids, BERT-base and ResNet-50 at 64 trials per\n"
    "subgraph; ablate200, sample and networks: one of the long part's three experiments (--nets:\n"
    "which networks). report: only the report. Every run is `cwm tune` with its own log under --dir\n"
    "(default bench-out/paper), so a rerun resumes. Defaults: --report REPORT.md, --plots report,\n"
    "--records data/measured-0.3.jsonl (decompress data/measured-0.3.jsonl.xz first), 1 thread.\n"
    "--repeats and --min-repeat-ms set every run's measuring protocol (default 3 of 25 ms, half the\n"
    "time of cwm tune's 5 of 50 and no noisier: two runs of 5 x 50 ms differ by a median 9.2%,\n"
    "3 x 25 ms against 5 x 50 ms by 8.6%; docs/guide.md, \"The measuring protocol\").\n"
    "--no-static leaves out the static-final-state ablation (it prints and encodes every\n"
    "candidate the search scores: minutes per run).\n"
    "The quick part ends by re-measuring, row by row, the best schedule of every budget-64 run together,\n"
    "interleaved, three times (DIR/b64final/ID.*); the budget-64 and ablation tables read those figures.\n"
    "Once a row's two sample runs are complete, the 5 best schedules of world at --world-trials and\n"
    "of ansor at --world-trials and at --ansor-trials are re-measured together, interleaved, three times\n"
    "(DIR/sample/final_ID.*): those runs span days, and the machine's speed drifts between them.\n";

int main(int argc, char **argv) {
  cli_env_apply();
  ctx_t c;
  memset(&c, 0, sizeof c);
  c.dir = "bench-out/paper";
  c.report = "REPORT.md";
  c.plots = "report";
  c.threads = 1;
  c.torch = 1;
  c.world_trials = 1000;
  c.ansor_trials = 10000;
  c.repeats = 3;
  c.min_repeat_ms = 25;
  const char *part = "quick", *ids = NULL, *seeds = "1,2,3";
  static char rec[1024], cwmp[1100];
  src_path("data/measured-0.3.jsonl", rec, sizeof rec);
  c.records = rec;
  snprintf(c.long_ids, sizeof c.long_ids, "%s", LONG_IDS_DEFAULT);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(USAGE, stdout);
      return 0;
    } else if (!strcmp(a, "--no-torch")) c.torch = 0;
    else if (!strcmp(a, "--no-static")) g_no_static = 1;
    else if (!v) {
      fprintf(stderr, "paper_cpu: %s needs a value (or is unknown)\n%s", a, USAGE);
      return 2;
    } else if (!strcmp(a, "--part")) part = v, i++;
    else if (!strcmp(a, "--dir")) c.dir = v, i++;
    else if (!strcmp(a, "--report")) c.report = v, i++;
    else if (!strcmp(a, "--plots")) c.plots = v, i++;
    else if (!strcmp(a, "--seeds")) seeds = v, i++;
    else if (!strcmp(a, "--ids")) ids = v, i++;
    else if (!strcmp(a, "--threads")) c.threads = atoi(v), i++;
    else if (!strcmp(a, "--records")) c.records = v, i++;
    else if (!strcmp(a, "--long-ids")) {
      size_t l = strlen(v) < sizeof c.long_ids - 1 ? strlen(v) : sizeof c.long_ids - 1;
      memcpy(c.long_ids, v, l);
      c.long_ids[l] = 0;
      i++;
    }
    else if (!strcmp(a, "--world-trials")) c.world_trials = atoi(v), i++;
    else if (!strcmp(a, "--ansor-trials")) c.ansor_trials = atoi(v), i++;
    else if (!strcmp(a, "--cwm")) c.cwm = v, i++;
    else if (!strcmp(a, "--budget")) g_budget = atoi(v), i++;
    else if (!strcmp(a, "--budget200")) g_budget200 = atoi(v), i++;
    else if (!strcmp(a, "--suite")) c.suite = v, i++;
    else if (!strcmp(a, "--nets")) c.nets = v, i++;
    else if (!strcmp(a, "--repeats")) c.repeats = atoi(v), i++;
    else if (!strcmp(a, "--min-repeat-ms")) c.min_repeat_ms = atoi(v), i++;
    else {
      fprintf(stderr, "paper_cpu: unknown option %s\n%s", a, USAGE);
      return 2;
    }
  }
  int quick = !strcmp(part, "quick") || !strcmp(part, "all"), lng = !strcmp(part, "long") || !strcmp(part, "all");
  c.long_mask = LONG_ABL200 | LONG_SAMPLE | LONG_NETS;
  if (!strcmp(part, "ablate200")) lng = 1, c.long_mask = LONG_ABL200;
  if (!strcmp(part, "sample")) lng = 1, c.long_mask = LONG_SAMPLE;
  if (!strcmp(part, "networks")) lng = 1, c.long_mask = LONG_NETS;
  if (!quick && !lng && strcmp(part, "report")) {
    fprintf(stderr, "paper_cpu: --part quick, long, all, ablate200, sample, networks or report, not '%s'\n", part);
    return 2;
  }
  if (g_budget < 1 || g_budget > 64) {
    fprintf(stderr, "paper_cpu: --budget (smoke tests only) is 1..64\n");
    return 2;
  }
  if (g_budget200 < g_budget || g_budget200 > 200) {
    fprintf(stderr, "paper_cpu: --budget200 (smoke tests only) is --budget..200\n");
    return 2;
  }
  if (c.repeats < 0 || c.repeats > 32 || c.min_repeat_ms < 0 || c.min_repeat_ms > 10000) {
    fprintf(stderr, "paper_cpu: --repeats 1..32, --min-repeat-ms 1..10000\n");
    return 2;
  }
  if (c.threads < 1 || c.world_trials < 1 || c.ansor_trials < c.world_trials || c.ansor_trials > MAXCURVE) {
    fprintf(stderr, "paper_cpu: --threads >= 1, 1 <= --world-trials <= --ansor-trials <= %d\n", MAXCURVE);
    return 2;
  }
  char sb[256];
  snprintf(sb, sizeof sb, "%s", seeds);
  for (char *t = strtok(sb, ","); t && c.nseeds < MAXSEED; t = strtok(NULL, ",")) c.seeds[c.nseeds++] = atol(t);
  if (c.nseeds < 1) {
    fprintf(stderr, "paper_cpu: --seeds: none given\n");
    return 2;
  }
  if (!c.cwm) {
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
      self[n] = 0;
      char *sl = strrchr(self, '/');
      if (sl) *sl = 0;
      snprintf(cwmp, sizeof cwmp, "%s/cwm", self);
    }
    c.cwm = cwmp;
  }
  if (access(c.cwm, X_OK)) {
    fprintf(stderr, "paper_cpu: %s is not an executable cwm (--cwm PATH)\n", c.cwm);
    return 2;
  }
  if (!c.suite) c.suite = cwm_suite_default_path();
  cwm_err e = {0};
  char *text = cwm_read_file(c.suite, NULL, &e);
  if (!text) {
    fprintf(stderr, "paper_cpu: %s\n", e.msg);
    return 5;
  }
  char *save = NULL;
  for (char *ln = strtok_r(text, "\n", &save); ln && c.nrows < MAXID; ln = strtok_r(NULL, "\n", &save)) {
    if (ln[0] == '#' || !ln[0]) continue;
    row_t *r = &c.rows[c.nrows];
    char params[256];
    if (sscanf(ln, "%63[^\t]\t%31[^\t]\t%255[^\t]", r->id, r->op, params) != 3) continue;
    if (ids) {
      char want[600], me[70];
      snprintf(want, sizeof want, ",%s,", ids);
      snprintf(me, sizeof me, ",%s,", r->id);
      if (!strstr(want, me)) continue;
    }
    char spec[sizeof r->spec];
    snprintf(spec, sizeof spec, "%s %s", r->op, params);
    memcpy(r->spec, spec, sizeof spec);
    c.nrows++;
  }
  free(text);
  if (c.nrows == 0) {
    fprintf(stderr, "paper_cpu: no suite row selected\n");
    return 2;
  }
  if (quick && !file_exists(c.records))
    fprintf(stderr, "paper_cpu: warning: %s missing (xz -dk %s.xz); ansor-pre runs will fail\n", c.records,
            c.records);
  mkdirs(c.dir);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  g_prog.t0 = cwm_now();
  char cmdline[1024];
  snprintf(cmdline, sizeof cmdline, "./build/paper_cpu%s%s%s%s%s", ids ? " --ids " : "", ids ? ids : "",
           strcmp(seeds, "1,2,3") ? " --seeds " : "", strcmp(seeds, "1,2,3") ? seeds : "",
           g_no_static ? " --no-static" : "");
  if (c.threads != 1)
    snprintf(cmdline + strlen(cmdline), sizeof cmdline - strlen(cmdline), " --threads %d", c.threads);
  if (c.repeats > 0)
    snprintf(cmdline + strlen(cmdline), sizeof cmdline - strlen(cmdline), " --repeats %d", c.repeats);
  if (c.min_repeat_ms > 0)
    snprintf(cmdline + strlen(cmdline), sizeof cmdline - strlen(cmdline), " --min-repeat-ms %d", c.min_repeat_ms);
  if (quick) part_quick(&c);
  if (lng && !g_stop) {
    memset(&g_prog, 0, sizeof g_prog);
    g_prog.t0 = cwm_now();
    part_long(&c);
  }
  write_report(&c, cmdline);
  if (g_stop) fprintf(stderr, "paper_cpu: interrupted; run the same command again to resume\n");
  return g_stop ? 130 : 0;
}

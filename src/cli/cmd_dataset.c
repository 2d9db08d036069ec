/* cmd_dataset.c: `cwm dataset`: training workloads, unmeasured trajectories (sampled by worker
 * processes, merged in workload order so the file depends on the seed alone), the measured
 * collection, statistics, the split by workload, and noise pairs. */
#define _GNU_SOURCE
#include "cli.h"
#include "env.h"
#include "cwm/dataset.h"
#include "cwm/train.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *DATASET_HELP =
    "usage: cwm dataset <subcommand> [options]   (cwm dataset <subcommand> --help)\n"
    "\n"
    "  workloads  generate training workloads (a TSV like the suite, never a suite shape)\n"
    "  sample     sample unmeasured trajectories (workload + steps, JSON lines)\n"
    "  measure    measure candidates of every workload into a tuning log (resumable)\n"
    "  stats      counts per op kind, lengths, error rates, latencies of a file\n"
    "  split      split a trajectory file or log by workload into train and validation\n"
    "  noise      print a noise pair (same computation written differently)\n"
    "  remeasure  re-measure a random fraction of a log: the label noise\n";

/* ------------------------------------------------------------------ workloads */

static const char *WL_HELP =
    "usage: cwm dataset workloads --count N --seed S --out FILE [--suite FILE] [--max-gflop G]\n"
    "Writes N training workload specs (id, op, params, note; the suite's TSV layout) of every op\n"
    "kind of the suite with shapes from the ranges real networks use, at most G GFLOP each\n"
    "(default 2), none of the same op and shape as a row of the suite (--suite, default\n"
    "$CWM_SUITE or bench/suite.tsv). The same seed writes the same file.\n";

static int cmd_workloads(int argc, char **argv) {
  cli_opt o[] = {{"--count", 1, NULL}, {"--seed", 1, NULL}, {"--out", 1, NULL}, {"--suite", 1, NULL},
                 {"--max-gflop", 1, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), WL_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  const char *out = cli_get(o, NOPT(o), "--out");
  if (!out) return cli_usage("dataset workloads", WL_HELP, "--out is required");
  cwm_workgen_opts go;
  cwm_workgen_opts_default(&go);
  go.count = cli_get_int(o, NOPT(o), "--count", go.count);
  go.seed = (uint64_t)cli_get_long(o, NOPT(o), "--seed", 1);
  go.suite = cli_get(o, NOPT(o), "--suite");
  go.max_flops = 1e9 * (double)cli_get_long(o, NOPT(o), "--max-gflop", 2);
  if (go.count < 1 || go.max_flops <= 0) return cli_usage("dataset workloads", WL_HELP, "--count and --max-gflop must be positive");
  cwm_err e = {0};
  cwm_wl_entry *v;
  int n, rej;
  if (cwm_workgen(&go, &v, &n, &rej, &e)) return cli_fail(&e);
  char header[512];
  snprintf(header, sizeof header,
           "Training workloads: cwm dataset workloads --count %d --seed %llu (max %.3g GFLOP each).\n"
           "None has the op and shape of a row of %s (%d draws of a suite shape rejected).\n"
           "Columns: id <TAB> op <TAB> shape parameters <TAB> note",
           go.count, (unsigned long long)go.seed, go.max_flops * 1e-9, go.suite ? go.suite : "the suite (bench/suite.tsv)", rej);
  rc = cwm_wlist_write(out, v, n, header, &e) ? cli_fail(&e) : 0;
  if (!rc) {
    const char *kinds[] = {"dense", "matmul", "batch_matmul", "conv2d", "dwconv2d", "softmax", "layernorm"};
    fprintf(stderr, "cwm dataset workloads: %d workloads written to %s (", n, out);
    for (int k = 0; k < 7; k++) {
      int c = 0;
      for (int i = 0; i < n; i++) c += !strncmp(v[i].spec, kinds[k], strlen(kinds[k])) && v[i].spec[strlen(kinds[k])] == ' ';
      fprintf(stderr, "%s%s %d", k ? ", " : "", kinds[k], c);
    }
    fprintf(stderr, "); %d suite shapes rejected\n", rej);
  }
  free(v);
  return rc;
}

/* ------------------------------------------------------------------ sample */

static const char *SAMPLE_HELP =
    "usage: cwm dataset sample --workloads FILE --per-workload N --seed S --out FILE [--jobs J]\n"
    "                          [--limit K]\n"
    "Samples up to N distinct trajectories per workload of FILE (a TSV like the suite; --limit:\n"
    "the first K rows only) with the search sampler: random annotations of Ansor's sketches and\n"
    "chains of mutations of them. Writes JSON lines {\"key\", \"name\", \"final\", \"workload\",\n"
    "\"steps\"}: the states are not stored; replaying the steps gives every intermediate state\n"
    "(cwm replay), and \"final\" is the hash of the final state's print. J worker processes\n"
    "(default: online CPUs); the file depends on the seed alone. Prints the rate at the end.\n";

typedef struct {
  long off, len;
  int nout, status, worker;
  char msg[200];
} sample_slot;

typedef struct {
  long next, done_wl, done_traj;
  sample_slot slot[];
} sample_shared;

static void tmp_name(char *buf, size_t n, const char *out, int pid, int worker) {
  snprintf(buf, n, "%s.part.%d.%d", out, pid, worker);
}

static void sample_worker(const cwm_wl_entry *wl, int n, int per, uint64_t seed, const char *out, int worker,
                          sample_shared *sh) {
  char path[4200];
  tmp_name(path, sizeof path, out, (int)getppid(), worker);
  FILE *f = fopen(path, "w");
  if (!f) _exit(CWM_EIO);
  cwm_space_opts so;
  cwm_space_opts_default(&so);
  cli_env_space(&so);
  cwm_buf b;
  cwm_buf_init(&b);
  for (;;) {
    long i = __atomic_fetch_add(&sh->next, 1, __ATOMIC_SEQ_CST);
    if (i >= n) break;
    sample_slot *s = &sh->slot[i];
    s->worker = worker;
    s->off = ftell(f);
    cwm_err e = {0};
    cwm_workload *w = cwm_wl_entry_workload(&wl[i], &e);
    cwm_dag *d = w ? cwm_dag_new(w, &e) : NULL;
    cwm_traj *t = NULL;
    int nt = 0;
    if (d) {
      char key[17], sbuf[96];
      cwm_workload_key(w, key);
      int l = snprintf(sbuf, sizeof sbuf, "sample:%llu:%ld:%s", (unsigned long long)seed, i, key);
      cwm_traj_sample(d, &so, cwm_hash64(sbuf, (size_t)l), per, &t, &nt, &e);
    }
    for (int k = 0; k < nt; k++) {
      b.len = 0;
      if (b.s) b.s[0] = 0;
      cwm_traj_to_json(&t[k], &b);
      cwm_buf_putc(&b, '\n');
      fwrite(b.s, 1, b.len, f);
    }
    if (ferror(f)) _exit(CWM_EIO);
    s->len = ftell(f) - s->off;
    s->nout = nt;
    s->status = nt ? 0 : (e.code ? (int)e.code : CWM_ENOSCHED);
    if (!nt) snprintf(s->msg, sizeof s->msg, "%.190s", e.msg[0] ? e.msg : "no trajectory");
    cwm_trajs_free(t, nt);
    cwm_dag_free(d);
    cwm_workload_free(w);
    __atomic_fetch_add(&sh->done_traj, nt, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&sh->done_wl, 1, __ATOMIC_SEQ_CST);
  }
  cwm_buf_free(&b);
  if (fclose(f)) _exit(CWM_EIO);
  _exit(0);
}

static int cmd_sample_ds(int argc, char **argv) {
  cli_opt o[] = {{"--workloads", 1, NULL}, {"--per-workload", 1, NULL}, {"--seed", 1, NULL},
                 {"--out", 1, NULL},       {"--jobs", 1, NULL},         {"--limit", 1, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), SAMPLE_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  const char *wpath = cli_get(o, NOPT(o), "--workloads"), *out = cli_get(o, NOPT(o), "--out");
  if (!wpath || !out) return cli_usage("dataset sample", SAMPLE_HELP, "--workloads and --out are required");
  long per = cli_get_long(o, NOPT(o), "--per-workload", 64);
  uint64_t seed = (uint64_t)cli_get_long(o, NOPT(o), "--seed", 1);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  long jobs = cli_get_long(o, NOPT(o), "--jobs", ncpu > 0 ? ncpu : 1);
  if (per < 1 || per > 100000 || jobs < 1 || jobs > 256)
    return cli_usage("dataset sample", SAMPLE_HELP, "--per-workload and --jobs must be positive");
  cwm_err e = {0};
  cwm_wl_entry *wl;
  int n;
  if (cwm_wlist_read(wpath, &wl, &n, &e)) return cli_fail(&e);
  long limit = cli_get_long(o, NOPT(o), "--limit", n);
  if (limit >= 0 && limit < n) n = (int)limit;
  if (jobs > n) jobs = n ? n : 1;
  size_t shsz = sizeof(sample_shared) + sizeof(sample_slot) * (size_t)(n ? n : 1);
  sample_shared *sh = mmap(NULL, shsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) {
    free(wl);
    cwm_fail(&e, CWM_EIO, "dataset sample: shared memory: %s", strerror(errno));
    return cli_fail(&e);
  }
  memset(sh, 0, shsz);
  fflush(NULL);
  double t0 = cwm_now();
  pid_t *kids = cwm_xcalloc((size_t)jobs, sizeof *kids);
  for (int j = 0; j < jobs; j++) {
    kids[j] = fork();
    if (kids[j] == 0) sample_worker(wl, n, (int)per, seed, out, j, sh);
    if (kids[j] < 0) {
      jobs = j;
      break;
    }
  }
  int alive = (int)jobs, failed_worker = 0;
  double last_note = cwm_now();
  while (alive > 0) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      alive--;
      if (!WIFEXITED(st) || WEXITSTATUS(st)) failed_worker = 1;
      continue;
    }
    if (p < 0 && errno != EINTR) break;
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (cwm_now() - last_note > 5) {
      last_note = cwm_now();
      long dw = __atomic_load_n(&sh->done_wl, __ATOMIC_SEQ_CST), dt = __atomic_load_n(&sh->done_traj, __ATOMIC_SEQ_CST);
      double el = cwm_now() - t0;
      fprintf(stderr, "cwm dataset sample: %ld/%d workloads, %ld trajectories, %.0f/min, %.0f s elapsed, ETA %.0f s\n", dw,
              n, dt, dt / el * 60, el, dw ? el / dw * (n - dw) : 0.0);
    }
  }
  double el = cwm_now() - t0;
  /* merge the workers' parts in workload order */
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", out, (int)getpid());
  FILE *fo = failed_worker ? NULL : fopen(tmp, "w");
  if (!fo) failed_worker = 1;
  FILE **parts = cwm_xcalloc((size_t)jobs, sizeof *parts);
  for (int j = 0; j < jobs; j++) {
    char pp[4200];
    tmp_name(pp, sizeof pp, out, (int)getpid(), j);
    parts[j] = fopen(pp, "r");
    unlink(pp); /* the open handle keeps it readable */
  }
  long total = 0;
  int nfail = 0;
  const char *first_fail = NULL;
  char *buf = cwm_xmalloc(1 << 16);
  for (int i = 0; i < n && fo; i++) {
    sample_slot *s = &sh->slot[i];
    if (s->status) {
      if (!nfail++) first_fail = wl[i].id;
      fprintf(stderr, "cwm dataset sample: %s: %s\n", wl[i].id, s->msg);
    }
    FILE *pf = s->worker >= 0 && s->worker < jobs ? parts[s->worker] : NULL;
    if (s->len && (!pf || fseek(pf, s->off, SEEK_SET))) {
      failed_worker = 1;
      break;
    }
    for (long left = s->len; left > 0;) {
      size_t k = fread(buf, 1, left < (1 << 16) ? (size_t)left : (1 << 16), pf);
      if (!k || fwrite(buf, 1, k, fo) != k) {
        failed_worker = 1;
        break;
      }
      left -= (long)k;
    }
    total += s->nout;
  }
  free(buf);
  for (int j = 0; j < jobs; j++)
    if (parts[j]) fclose(parts[j]);
  free(parts);
  if (fo && (fclose(fo) || failed_worker || rename(tmp, out))) failed_worker = 1;
  if (failed_worker) {
    unlink(tmp);
    cwm_fail(&e, CWM_EIO, "dataset sample: a worker failed or %s could not be written", out);
    rc = cli_fail(&e);
  } else {
    fprintf(stderr,
            "cwm dataset sample: %ld trajectories of %d workloads (%d failed%s%s) in %.1f s with %ld worker(s): "
            "%.0f trajectories/min\n",
            total, n, nfail, nfail ? ", first " : "", nfail ? first_fail : "", el, jobs, total / (el > 0 ? el : 1) * 60);
    printf("sampling rate: %.0f trajectories per minute (%ld trajectories, %.1f s, %ld workers)\n",
           total / (el > 0 ? el : 1) * 60, total, el, jobs);
  }
  free(kids);
  munmap(sh, shsz);
  free(wl);
  return rc;
}

/* ------------------------------------------------------------------ measure */

static const char *MEASURE_HELP =
    "usage: cwm dataset measure --workloads FILE --per-workload N --seed S --log FILE\n"
    "                           [--population P] [--generations G] [--limit K] [--repeats R]\n"
    "                           [--min-repeat-ms MS] [--timeout S] [--quiet]\n"
    "Measures N programs of every workload of FILE (--limit: the first K rows) into the tuning\n"
    "log: random sketch samples plus a short evolution under the random model (population P,\n"
    "default 512, G generations, default 2), deduplicated against the log; 1 thread, the\n"
    "runner's default protocol (median of 5 repeats of at least 50 ms, 3 once they took 1 s;\n"
    "the checked first call is the warm-up), except the time-out: --timeout S, default 3 s\n"
    "(a candidate that slow is 100x off the best; it is recorded as run_timeout).\n"
    "Resumable: a rerun skips the workloads whose N records are in the log and continues a\n"
    "partial one. Ctrl-C stops after the measurements in flight. Progress with ETA on stderr.\n";

static int cmd_measure_ds(int argc, char **argv) {
  cli_opt o[] = {{"--workloads", 1, NULL},  {"--per-workload", 1, NULL}, {"--seed", 1, NULL},
                 {"--log", 1, NULL},        {"--population", 1, NULL},   {"--generations", 1, NULL},
                 {"--limit", 1, NULL},      {"--repeats", 1, NULL},      {"--min-repeat-ms", 1, NULL},
                 {"--timeout", 1, NULL},    {"--quiet", 0, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), MEASURE_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  const char *wpath = cli_get(o, NOPT(o), "--workloads");
  cwm_collect_opts co;
  cwm_collect_opts_default(&co);
  cli_env_measure(&co.measure);
  if (cli_target_runs_here("dataset measure")) return CWM_EUSAGE;
  co.log_path = cli_get(o, NOPT(o), "--log");
  if (!wpath || !co.log_path) return cli_usage("dataset measure", MEASURE_HELP, "--workloads and --log are required");
  co.per_workload = cli_get_int(o, NOPT(o), "--per-workload", co.per_workload);
  co.seed = (uint64_t)cli_get_long(o, NOPT(o), "--seed", 1);
  co.population = cli_get_int(o, NOPT(o), "--population", co.population);
  co.generations = cli_get_int(o, NOPT(o), "--generations", co.generations);
  co.measure.repeats = cli_get_int(o, NOPT(o), "--repeats", co.measure.repeats);
  co.measure.min_repeat_ms = (double)cli_get_long(o, NOPT(o), "--min-repeat-ms", (long)co.measure.min_repeat_ms);
  co.measure.run_timeout_s = (double)cli_get_long(o, NOPT(o), "--timeout", (long)co.measure.run_timeout_s);
  if (co.per_workload < 1 || co.population < 1 || co.generations < 0 || co.measure.repeats < 1)
    return cli_usage("dataset measure", MEASURE_HELP, "--per-workload, --population and --repeats must be positive");
  int quiet = cli_get(o, NOPT(o), "--quiet") != NULL;
  cli_say say = {"dataset measure", quiet};
  co.progress = cli_progress;
  co.progress_ud = &say;
  co.stop = &cli_stop;
  if ((rc = cli_farm_measure(&co.measure, quiet))) return rc; /* under mpirun: the workers measure */
  cwm_err e = {0};
  cwm_wl_entry *wl;
  int n;
  if (cwm_wlist_read(wpath, &wl, &n, &e)) return cli_fail(&e);
  long limit = cli_get_long(o, NOPT(o), "--limit", n);
  if (limit >= 0 && limit < n) n = (int)limit;
  cli_catch_stop();
  cwm_collect_result res;
  rc = cwm_dataset_measure(wl, n, &co, &res, &e);
  fprintf(stderr,
          "cwm dataset measure: %d workloads done now, %d already complete, %d failed; %d programs measured "
          "(%d errors) in %.0f s: %.1f programs/min%s\n",
          res.done, res.skipped, res.failed, res.measured, res.errors, res.seconds,
          res.measured / (res.seconds > 0 ? res.seconds : 1) * 60, cli_stop ? " (interrupted; rerun to continue)" : "");
  if (res.failed) fprintf(stderr, "cwm dataset measure: first failure: %s\n", res.first_failure);
  free(wl);
  return rc ? cli_fail(&e) : 0;
}

/* ------------------------------------------------------------------ remeasure */

static const char *REMEASURE_HELP =
    "usage: cwm dataset remeasure --log FILE --out FILE2 [--fraction F] [--seed S]\n"
    "                             [--repeats R] [--min-repeat-ms MS] [--quiet]\n"
    "Re-measures a seeded random fraction F (default 0.02) of the good records of FILE with the\n"
    "same protocol as cwm dataset measure (or with R repeats of at least MS ms each: how much\n"
    "noisier a faster protocol is), appending the new records to FILE2 (resumable: a\n"
    "program already in FILE2 is not measured again), and prints the label noise: the median\n"
    "(and 90th percentile) relative difference |t2 - t1| / t1 between the two timings, the\n"
    "median t2/t1, and both by stretch of the log (runs of first timings with no gap over an\n"
    "hour): a stretch far from 1 ran on a machine of another speed, which is drift, not noise.\n"
    "Timings are the mean of each record's repeats (as Ansor's); the time the measuring took\n"
    "is printed too.\n";

static int cmd_remeasure(int argc, char **argv) {
  cli_opt o[] = {{"--log", 1, NULL}, {"--out", 1, NULL}, {"--fraction", 1, NULL}, {"--seed", 1, NULL},
                 {"--quiet", 0, NULL},    {"--repeats", 1, NULL},      {"--min-repeat-ms", 1, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), REMEASURE_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  cwm_remeasure_opts ro;
  cwm_remeasure_opts_default(&ro);
  cli_env_measure(&ro.measure);
  if (cli_target_runs_here("dataset remeasure")) return CWM_EUSAGE;
  ro.log_path = cli_get(o, NOPT(o), "--log");
  ro.out_path = cli_get(o, NOPT(o), "--out");
  if (!ro.log_path || !ro.out_path) return cli_usage("dataset remeasure", REMEASURE_HELP, "--log and --out are required");
  ro.fraction = cli_get_double(o, NOPT(o), "--fraction", ro.fraction);
  if (!(ro.fraction > 0 && ro.fraction <= 1)) return cli_usage("dataset remeasure", REMEASURE_HELP, "--fraction must be in (0, 1]");
  ro.seed = (uint64_t)cli_get_long(o, NOPT(o), "--seed", 1);
  if ((rc = cli_tune_protocol(o, NOPT(o), "dataset remeasure", REMEASURE_HELP, &ro.measure))) return rc;
  int quiet = cli_get(o, NOPT(o), "--quiet") != NULL;
  cli_say say = {"dataset remeasure", quiet};
  ro.progress = cli_progress;
  ro.progress_ud = &say;
  ro.stop = &cli_stop;
  cli_catch_stop();
  cwm_remeasure_result res;
  cwm_err e = {0};
  rc = cwm_dataset_remeasure(&ro, &res, &e);
  printf("re-measured %d of %d selected programs (%d from an earlier run, %d not replayable, %d failed now) "
         "in %.0f s (%d repeats of at least %g ms); label noise over %d pairs: median relative difference %.2f%%, 90th percentile %.2f%%\n",
         res.measured + res.resumed, res.selected, res.resumed, res.skipped, res.failed_now, res.seconds,
         ro.measure.repeats, ro.measure.min_repeat_ms, res.compared,
         100 * res.median_rel_diff, 100 * res.p90_rel_diff);
  if (res.compared) {
    printf("median t2/t1 %.3f; by when the first timing was taken (stretches without a gap over an hour, UTC):\n",
           res.median_ratio);
    for (int i = 0; i < res.nstretch; i++) {
      char a[32], b[32];
      time_t ta = (time_t)res.stretch[i].first, tb = (time_t)res.stretch[i].last;
      struct tm ga, gb;
      strftime(a, sizeof a, "%Y-%m-%d %H:%M", gmtime_r(&ta, &ga));
      strftime(b, sizeof b, "%H:%M", gmtime_r(&tb, &gb));
      printf("  %s-%s  %5d pairs  median t2/t1 %.3f  median relative difference %.2f%%\n", a, b, res.stretch[i].n,
             res.stretch[i].median_ratio, 100 * res.stretch[i].median_rel_diff);
    }
  }
  return rc ? cli_fail(&e) : 0;
}

/* ------------------------------------------------------------------ stats */

static const char *STATS_HELP =
    "usage: cwm dataset stats FILE\n"
    "Prints, for a trajectory file or a tuning log (or both mixed): trajectories and workloads\n"
    "per op kind, trajectory length min/median/max, error rate per error kind and latency\n"
    "min/median/max of the measured records, and the corrupt lines skipped.\n";

static int cmd_stats(int argc, char **argv) {
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return cli_usage("dataset stats", STATS_HELP, NULL);
    if (argv[i][0] == '-' || path) return cli_usage("dataset stats", STATS_HELP, "unexpected argument '%s'", argv[i]);
    path = argv[i];
  }
  if (!path) return cli_usage("dataset stats", STATS_HELP, "FILE is required");
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_err e = {0};
  int rc = cwm_dataset_stats(path, &b, &e);
  if (rc == 0) fputs(b.s ? b.s : "", stdout);
  cwm_buf_free(&b);
  return rc ? cli_fail(&e) : 0;
}

/* ------------------------------------------------------------------ split */

static const char *SPLIT_HELP =
    "usage: cwm dataset split --in FILE --valid-fraction F --train OUT --valid OUT\n"
    "Copies the trajectories (or log records) of FILE into a training and a validation file\n"
    "by workload: a deterministic hash of the workload key puts about F (e.g. 0.1) of the\n"
    "workloads, with all their lines, in the validation file. Corrupt lines are dropped.\n";

static int cmd_split(int argc, char **argv) {
  cli_opt o[] = {{"--in", 1, NULL}, {"--valid-fraction", 1, NULL}, {"--train", 1, NULL}, {"--valid", 1, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), SPLIT_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  const char *in = cli_get(o, NOPT(o), "--in"), *tr = cli_get(o, NOPT(o), "--train"),
             *va = cli_get(o, NOPT(o), "--valid"), *fs = cli_get(o, NOPT(o), "--valid-fraction");
  if (!in || !tr || !va || !fs) return cli_usage("dataset split", SPLIT_HELP, "--in, --valid-fraction, --train and --valid are required");
  char *end;
  double frac = strtod(fs, &end);
  if (*end || frac < 0 || frac > 1) return cli_usage("dataset split", SPLIT_HELP, "--valid-fraction must be in [0, 1]");
  cwm_err e = {0};
  FILE *fin = fopen(in, "r");
  if (!fin) {
    cwm_fail(&e, CWM_EIO, "%s: cannot open: %s", in, strerror(errno));
    return cli_fail(&e);
  }
  FILE *ft = fopen(tr, "w"), *fv = fopen(va, "w");
  if (!ft || !fv) {
    cwm_fail(&e, CWM_EIO, "%s: cannot write: %s", !ft ? tr : va, strerror(errno));
    if (ft) fclose(ft);
    if (fv) fclose(fv);
    fclose(fin);
    return cli_fail(&e);
  }
  /* line by line: the key decides; the line is copied as it is */
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  long nt = 0, nv = 0, bad = 0;
  while ((len = getline(&line, &cap, fin)) >= 0) {
    cwm_traj t;
    cwm_err pe = {0};
    if (len <= 1) continue;
    if (cwm_traj_parse(line, &t, &pe)) {
      bad++;
      continue;
    }
    int part = cwm_split_part(t.key, frac);
    cwm_traj_free(&t);
    FILE *f = part == CWM_SPLIT_VALID ? fv : ft;
    fwrite(line, 1, (size_t)len, f);
    if (line[len - 1] != '\n') fputc('\n', f);
    if (part == CWM_SPLIT_VALID) nv++;
    else nt++;
  }
  free(line);
  fclose(fin);
  int werr = fclose(ft) | fclose(fv);
  if (werr) {
    cwm_fail(&e, CWM_EIO, "dataset split: write failed");
    return cli_fail(&e);
  }
  fprintf(stderr, "cwm dataset split: %ld lines to %s, %ld to %s, %ld corrupt lines dropped\n", nt, tr, nv, va, bad);
  return 0;
}

/* ------------------------------------------------------------------ noise */

static const char *NOISE_HELP =
    "usage: cwm dataset noise --workload SPEC --steps FILE [--line N] [--kind K] [--seed S]\n"
    "                         [--suite FILE]\n"
    "Prints a noise pair for the N-th step list of FILE (default 1): the final state, then the\n"
    "same computation written differently: kind 0 the same schedule on the shape +-1 in one\n"
    "dimension, 1 the axes renamed, 2 two independent statements swapped (else 1).\n";

static int cmd_noise(int argc, char **argv) {
  cli_opt o[] = {{"--workload", 1, NULL}, {"--steps", 1, NULL}, {"--line", 1, NULL},
                 {"--kind", 1, NULL},     {"--seed", 1, NULL},  {"--suite", 1, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), NOISE_HELP);
  if (rc) return rc < 0 ? 0 : rc;
  const char *path = cli_get(o, NOPT(o), "--steps");
  if (!path) return cli_usage("dataset noise", NOISE_HELP, "--steps is required");
  long line = cli_get_long(o, NOPT(o), "--line", 1), kind = cli_get_long(o, NOPT(o), "--kind", 0);
  cwm_workload *w;
  cli_lists l;
  cwm_dag *d = cli_dag_lists(o, NOPT(o), path, &w, &l, &rc);
  if (!d) return rc;
  cwm_err e = {0};
  if (line < 1 || line > l.n)
    return cli_usage("dataset noise", NOISE_HELP, "--line %ld: the file has %d lists", line, l.n);
  cwm_rng r;
  cwm_rng_seed(&r, (uint64_t)cli_get_long(o, NOPT(o), "--seed", 1));
  char *a, *b;
  cwm_noise_info info;
  rc = cwm_noise_pair_ex(d, l.lists[line - 1], l.lens[line - 1], (int)kind, &r, &a, &b, &info, &e);
  if (rc == 0) {
    printf("# a: %s\n%s# b (kind %d: %s)\n%s", w->name, a, info.kind, info.what, b);
    free(a);
    free(b);
    cwm_noise_info_free(&info);
  } else {
    rc = cli_fail(&e);
  }
  cli_lists_free(&l);
  cwm_dag_free(d);
  cwm_workload_free(w);
  return rc;
}

int cmd_dataset(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(DATASET_HELP, argc < 2 ? stderr : stdout);
    return argc < 2 ? CWM_EUSAGE : 0;
  }
  static const struct {
    const char *name;
    int (*fn)(int, char **);
  } subs[] = {{"workloads", cmd_workloads}, {"sample", cmd_sample_ds}, {"measure", cmd_measure_ds},
              {"stats", cmd_stats},         {"split", cmd_split},      {"noise", cmd_noise},
              {"remeasure", cmd_remeasure}};
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
    if (!strcmp(argv[1], subs[i].name)) return subs[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "cwm dataset: unknown subcommand '%s'\n%s", argv[1], DATASET_HELP);
  return CWM_EUSAGE;
}

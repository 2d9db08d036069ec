/* cmd_export.c: `cwm export --log LOG --out DIR`: the best known kernel of every workload of a
 * tuning log (or of one workload, or of an ONNX model's tasks), written as `cwm tune --export`
 * writes it, from the log alone and without measuring anything (TVM's apply-history-best). The
 * best is the valid record with the lowest mean latency among those of one target (this machine's
 * when the log has records of it: latencies of two targets do not compare); its state is rebuilt
 * from the workload text and steps the record carries, and the code is generated for the target
 * the record names (its instruction set's tile width), so the files are the ones tuning wrote. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *EXPORT_HELP =
    "usage: cwm export --log LOG --out DIR [--workload W | --onnx MODEL.onnx] [--name NAME]\n"
    "                  [--target-match any|this] [--threads T] [--suite FILE] [--quiet]\n"
    "Writes the best known kernel of each workload of the tuning log LOG into DIR, as `cwm tune\n"
    "--export DIR` writes it (NAME.c, NAME.h, NAME_example.c, NAME the workload's name with every\n"
    "character that cannot be in a C name made '_'), without measuring anything: TVM's\n"
    "apply-history-best. The best is the error-free record with the lowest mean latency; the\n"
    "kernel is rebuilt from the workload text and steps the record carries and generated for the\n"
    "target it was tuned for, so it is the kernel tuning exported (with --confirm 0; tuning's\n"
    "--confirm may pick another of its best few by timing them again, which the log does not hold).\n"
    "Prints a line per kernel: name, logged latency, file, the record's log line and its target.\n"
    "  --workload W       only W (a suite id, an op spec, @FILE, a workload key or a name the log\n"
    "                     gives it); a workload the log does not hold is an error (exit 2), one\n"
    "                     whose records all failed too (exit 8)\n"
    "  --onnx MODEL.onnx  the model's tasks (as `cwm import` lists them), each into DIR/<task>/ as\n"
    "                     `cwm tune --onnx --export DIR` writes them; tasks without records are noted\n"
    "  --name NAME        the kernel's name with --workload (a C identifier)\n"
    "  --target-match M   any (default): records of every target, those timed as this machine times\n"
    "                     (its CPU's instruction set or --target's, --threads T, compiler and flags)\n"
    "                     preferred where the log has some, so that one target's figures are compared;\n"
    "                     this: those records only\n"
    "  --threads T        the thread count of this machine's target (default 1, as `cwm tune`)\n"
    "Lines of LOG that are not records are skipped and counted; a record whose steps no longer apply\n"
    "to its workload is skipped, naming its line, for the next best. Without --workload, workloads\n"
    "with no valid record, or without workload text (plain Ansor lines: `cwm log from-ansor`), are\n"
    "noted and skipped; exit 8 when no kernel at all was written.\n";

/* A workload to export and where. */
typedef struct {
  char key[17];
  char name[80];    /* the kernel's name: its files and its function */
  char dir[4200];   /* where the files go */
  cwm_workload *w;  /* owned; NULL: the workload text the log's records carry */
  const char *what; /* how the command line named it (for errors), NULL: every workload of the log */
} xsel;

/* The name `cwm tune --export` gives a workload's kernel: its name with every character outside
 * [A-Za-z0-9_] made '_' (cmd_tune.c, export_best). */
static void tune_name(const char *from, char *out, size_t n) {
  snprintf(out, n, "%s", from);
  for (char *p = out; *p; p++)
    if (!(*p == '_' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) *p = '_';
}

static xsel *add_sel(xsel **v, int *n, const char *key, const char *name, const char *dir, cwm_workload *w) {
  *v = cwm_xrealloc(*v, sizeof **v * (size_t)(*n + 1));
  xsel *x = &(*v)[(*n)++];
  memset(x, 0, sizeof *x);
  memcpy(x->key, key, 17);
  tune_name(name, x->name, sizeof x->name);
  snprintf(x->dir, sizeof x->dir, "%s", dir);
  x->w = w;
  return x;
}

/* Every workload of the logs, in order of first appearance, named as its records name it; a name
 * tune could not export, or one an earlier workload took (two op specs are both "dense"), gets
 * the key added, so that no kernel overwrites another. */
static void select_all(const cli_logset *s, const char *dir, xsel **v, int *n) {
  for (int i = 0; i < s->n; i++) {
    const cwm_record *r = &s->v[i].r;
    int seen = 0;
    for (int k = 0; k < *n && !seen; k++) seen = !strcmp((*v)[k].key, r->key);
    if (seen) continue;
    xsel *x = add_sel(v, n, r->key, r->name[0] ? r->name : "kernel", dir, NULL);
    int taken = !cwm_export_name_ok(x->name);
    for (int k = 0; k < *n - 1 && !taken; k++) taken = !strcmp((*v)[k].name, x->name);
    if (taken) {
      char base[80];
      snprintf(base, sizeof base, "%s", x->name);
      snprintf(x->name, sizeof x->name, "%s%.50s_%s", cwm_export_name_ok(base) ? "" : "w_", base, r->key);
    }
  }
}

/* An ONNX model's tasks, each into DIR/<task>/ (cmd_tune_network.c's export_all). */
static int select_onnx(const char *path, const char *dir, xsel **v, int *n) {
  cwm_err e = {0};
  struct cwm_graph *g;
  cwm_partition *p;
  if (cli_onnx_load(path, &g, &p, &e)) return cli_fail(&e);
  for (int t = 0; t < p->ntasks; t++) {
    char *text = cwm_workload_print(p->tasks[t].w), sub[4200];
    cwm_workload *w = cwm_workload_parse(text, &e);
    free(text);
    if (!w) break;
    snprintf(w->name, sizeof w->name, "%s", p->tasks[t].name);
    snprintf(sub, sizeof sub, "%s/%s", dir, p->tasks[t].name);
    add_sel(v, n, p->tasks[t].key, p->tasks[t].name, sub, w);
  }
  cwm_partition_free(p);
  cwm_graph_free(g);
  return e.code ? cli_fail(&e) : 0;
}

/* The workload of x: its own, else the text of a record of its key (checked against the key, as
 * a log may be edited by hand). NULL with why filled when there is none. */
static cwm_workload *sel_workload(const xsel *x, const cli_logset *s, char *why, size_t n) {
  if (x->w) return x->w;
  snprintf(why, n, "its records carry no workload text (plain Ansor lines? `cwm log from-ansor --workload W`)");
  for (int i = 0; i < s->n; i++) {
    const cwm_record *r = &s->v[i].r;
    if (strcmp(r->key, x->key) || !r->workload || !r->workload[0]) continue;
    cwm_err e = {0};
    cwm_workload *w = cwm_workload_parse(r->workload, &e);
    char k[17] = "";
    if (w) cwm_workload_key(w, k);
    if (w && !strcmp(k, x->key)) {
      snprintf(w->name, sizeof w->name, "%s", r->name);
      return w;
    }
    snprintf(why, n, "%s, line %ld: the workload text %s", s->paths[s->v[i].file], s->v[i].line,
             w ? "does not have the record's key" : e.msg);
    cwm_workload_free(w);
  }
  return NULL;
}

/* Why x has no kernel to export (into why): its exit status as an error, when the command line
 * named it. */
static int nothing_to_export(const xsel *x, const cli_logset *s, char *why, size_t n) {
  int nrec = 0, nvalid = 0;
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->v[i].r.key, x->key)) nrec++, nvalid += !s->v[i].r.error && s->v[i].r.ncosts > 0;
  if (!nrec) {
    snprintf(why, n, "no record of it in the log");
    return CWM_EUSAGE;
  }
  if (nvalid)
    snprintf(why, n, "none of its %d valid records was timed as this machine times (--target-match this)", nvalid);
  else
    snprintf(why, n, "all of its %d records failed", nrec);
  return CWM_ENOSCHED;
}

/* Exports x's best record that still replays; *done counts the kernels written. 0, or the exit
 * status of an error (printed) that ends the command: a workload the command line named that has
 * no kernel, or a file that cannot be written. */
static int export_one(const xsel *x, const cli_logset *s, const char *mine, int only_this, int quiet, int *done) {
  char why[600] = "";
  const char *what = x->what ? x->what : x->name;
  int *idx, n = cli_log_ranked(s, x->key, mine, only_this, &idx), rc = 0, fatal = 0;
  cwm_err e = {0};
  cwm_workload *w = NULL;
  cwm_dag *d = NULL;
  if (!n) rc = nothing_to_export(x, s, why, sizeof why);
  else if (!(w = sel_workload(x, s, why, sizeof why))) rc = CWM_EPARSE;
  else if (!(d = cwm_dag_new(w, &e))) {
    rc = e.code ? (int)e.code : CWM_EPARSE;
    snprintf(why, sizeof why, "%s", e.msg);
  }
  for (int k = 0; d && k < n; k++) {
    const cli_logrec *lr = &s->v[idx[k]];
    cwm_state *st = NULL;
    e.msg[0] = 0;
    if (cwm_state_replay(d, lr->r.steps, lr->r.nsteps, &st, NULL, &e) || !cwm_state_is_complete(st)) {
      if (!quiet)
        fprintf(stderr, "cwm export: %s, line %ld: the steps of %s's record do not apply (%s); trying the next best\n",
                s->paths[lr->file], lr->line, what, e.msg[0] ? e.msg : "a split of unknown length is left");
      cwm_state_free(st);
      if (!rc) snprintf(why, sizeof why, "no record's steps apply to it (the best: %s, line %ld)", s->paths[lr->file], lr->line);
      rc = CWM_ESTEP;
      continue;
    }
    rc = cwm_export_for(st, x->dir, x->name, lr->r.target, &e);
    cwm_state_free(st);
    if (rc) {
      rc = cli_fail(&e);
      fatal = 1;
      break;
    }
    (*done)++;
    const char *t = lr->r.target && lr->r.target[0] ? lr->r.target : "not recorded";
    printf("%s: %.2f us, %s/%s.c (%s, line %ld; tuned for %s%s)\n", x->name, cwm_record_cost(&lr->r) * 1e6, x->dir,
           x->name, s->paths[lr->file], lr->line, t, cwm_record_same_target(&lr->r, mine) ? "" : "; not this machine's");
    break;
  }
  if (rc && !fatal) {
    if (x->what) fprintf(stderr, "cwm export: %s: %s\n", what, why);
    else if (!quiet) fprintf(stderr, "cwm export: %s (key %s) skipped: %s\n", what, x->key, why);
  }
  cwm_dag_free(d);
  if (w != x->w) cwm_workload_free(w);
  free(idx);
  return x->what || fatal ? rc : 0;
}

/* The options, checked before the log is read: 0 or the exit status. */
static int check_options(const cli_opt *o, int no, int *only_this) {
  const char *log = cli_get(o, no, "--log"), *dir = cli_get(o, no, "--out"), *tm = cli_get(o, no, "--target-match");
  const char *name = cli_get(o, no, "--name");
  if (!log || !*log) return cli_usage(NULL, EXPORT_HELP, "--log LOG is required");
  if (!dir || !*dir) return cli_usage(NULL, EXPORT_HELP, "--out DIR is required");
  if (cli_get(o, no, "--workload") && cli_get(o, no, "--onnx"))
    return cli_usage(NULL, EXPORT_HELP, "--workload and --onnx do not go together");
  if (name && !cli_get(o, no, "--workload")) return cli_usage(NULL, EXPORT_HELP, "--name goes with --workload");
  if (name && !cwm_export_name_ok(name))
    return cli_usage(NULL, EXPORT_HELP, "--name '%s' is not a C identifier free to use (a keyword, a libc name, reserved, "
                                        "or over 60 characters)", name);
  if (tm && strcmp(tm, "any") && strcmp(tm, "this"))
    return cli_usage(NULL, EXPORT_HELP, "--target-match is any or this, not '%s'", tm);
  int th = cli_get_int(o, no, "--threads", 1);
  if (th < 1 || th > 1024) return cli_usage(NULL, EXPORT_HELP, "--threads must be 1..1024");
  *only_this = tm && !strcmp(tm, "this");
  cwm_err e = {0};
  if (cwm_mkdir_p(dir, &e)) return cli_fail(&e);
  if (!cwm_dir_writable(dir)) {
    fprintf(stderr, "cwm export: --out %s: cannot write into it: %s\n", dir, strerror(errno));
    return CWM_EIO;
  }
  return 0;
}

int cmd_export(int argc, char **argv) {
  cli_opt o[] = {{"--log", 1, NULL},     {"--out", 1, NULL},          {"--workload", 1, NULL}, {"--onnx", 1, NULL},
                 {"--name", 1, NULL},    {"--target-match", 1, NULL}, {"--threads", 1, NULL},  {"--suite", 1, NULL},
                 {"--quiet", 0, NULL}};
  int rc = cli_parse(argc, argv, o, NOPT(o), EXPORT_HELP), only_this = 0;
  if (rc) return rc < 0 ? 0 : rc;
  if ((rc = check_options(o, NOPT(o), &only_this))) return rc;
  char *logs[1] = {(char *)cli_get(o, NOPT(o), "--log")};
  const char *dir = cli_get(o, NOPT(o), "--out"), *spec = cli_get(o, NOPT(o), "--workload");
  int quiet = cli_get(o, NOPT(o), "--quiet") != NULL;
  cli_logset s;
  if ((rc = cli_logset_read(&s, logs, 1, "export", quiet))) return rc;
  char mine[1024];
  cli_this_target(cli_get_int(o, NOPT(o), "--threads", 1), mine, sizeof mine);
  xsel *sel = NULL;
  int nsel = 0, done = 0;
  if (spec) {
    char key[17];
    cwm_workload *w = NULL;
    if (!(rc = cli_log_workload(&s, spec, cli_get(o, NOPT(o), "--suite"), key, &w))) {
      /* named by a key or a name: the name its records give it */
      const char *nm = cli_get(o, NOPT(o), "--name");
      for (int i = 0; !nm && !w && i < s.n; i++)
        if (!strcmp(s.v[i].r.key, key) && s.v[i].r.name[0]) nm = s.v[i].r.name;
      xsel *x = add_sel(&sel, &nsel, key, nm ? nm : w ? w->name : "kernel", dir, w);
      x->what = spec;
      if (!cwm_export_name_ok(x->name)) { /* a name tune could not export (--name is checked above) */
        char base[80];
        snprintf(base, sizeof base, "%s", x->name);
        snprintf(x->name, sizeof x->name, "w_%.50s_%s", base, key);
      }
    }
  } else if (cli_get(o, NOPT(o), "--onnx")) {
    rc = select_onnx(cli_get(o, NOPT(o), "--onnx"), dir, &sel, &nsel);
  } else {
    select_all(&s, dir, &sel, &nsel);
  }
  for (int i = 0; i < nsel && !rc; i++) rc = export_one(&sel[i], &s, mine, only_this, quiet, &done);
  if (!rc && !done) {
    fprintf(stderr, "cwm export: %s: no kernel written (%d workload%s, none with a valid record that applies)\n",
            logs[0], nsel, nsel == 1 ? "" : "s");
    rc = CWM_ENOSCHED;
  } else if (!rc && !quiet) {
    fprintf(stderr, "cwm export: %d kernel%s written to %s%s\n", done, done == 1 ? "" : "s", dir,
            cli_get(o, NOPT(o), "--onnx") ? "/<task>/" : "");
  }
  for (int i = 0; i < nsel; i++) cwm_workload_free(sel[i].w);
  free(sel);
  cli_logset_free(&s);
  return rc;
}

/* opts.c: option parsing and the loaders every command shares. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_fail(const cwm_err *e) {
  fprintf(stderr, "cwm: %s\n", e->msg[0] ? e->msg : "error");
  return e->code ? (int)e->code : 1;
}

long cli_get_long(const cli_opt *opts, int nopts, const char *name, long def) {
  const char *v = cli_get(opts, nopts, name);
  if (!v) return def;
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || end == v) {
    exit(cli_usage(NULL, NULL, "%s: '%s' is not an integer", name, v));
  }
  return x;
}

int cli_get_int(const cli_opt *opts, int nopts, const char *name, int def) {
  long x = cli_get_long(opts, nopts, name, def);
  if (x < INT_MIN || x > INT_MAX) {
    exit(cli_usage(NULL, NULL, "%s: %ld is out of range (at most %d)", name, x, INT_MAX));
  }
  return (int)x;
}

double cli_get_double(const cli_opt *opts, int nopts, const char *name, double def) {
  const char *v = cli_get(opts, nopts, name);
  if (!v) return def;
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (*end || end == v || errno == ERANGE || !isfinite(x)) {
    exit(cli_usage(NULL, NULL, "%s: '%s' is not a number", name, v));
  }
  return x;
}

cwm_workload *cli_workload(const char *spec, const char *suite, int *rc) {
  cwm_err e = {0};
  if (!spec) {
    *rc = cli_usage(NULL, NULL, "--workload is required");
    return NULL;
  }
  cwm_workload *w = cwm_workload_from_spec(spec, suite, &e);
  if (!w) *rc = cli_fail(&e);
  return w;
}

int cli_read_steps(const char *path, cli_lists *l, cwm_err *err) {
  memset(l, 0, sizeof *l);
  char *text = cwm_read_text(path, err);
  if (!text) return err->code;
  int cap = 0, lineno = 0;
  for (char *line = text, *next; line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    lineno++;
    char *p = line;
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    if (!*p || *p == '#') continue;
    if (l->n == cap) {
      cap = cap ? cap * 2 : 16;
      l->lists = cwm_xrealloc(l->lists, sizeof *l->lists * (size_t)cap);
      l->lens = cwm_xrealloc(l->lens, sizeof *l->lens * (size_t)cap);
    }
    cwm_err e = {0};
    if (cwm_steps_parse(p, &l->lists[l->n], &l->lens[l->n], &e)) {
      cwm_fail(err, CWM_EPARSE, "%s: line %d: %s", path, lineno, e.msg);
      cli_lists_free(l);
      free(text);
      return CWM_EPARSE;
    }
    l->n++;
  }
  free(text);
  return 0;
}

void cli_lists_free(cli_lists *l) {
  for (int i = 0; i < l->n; i++) free(l->lists[i]);
  free(l->lists);
  free(l->lens);
  memset(l, 0, sizeof *l);
}

cwm_dag *cli_dag_lists(const cli_opt *o, int nopt, const char *path, cwm_workload **w, cli_lists *l, int *rc) {
  cwm_dag *d = cli_dag(o, nopt, w, rc);
  cwm_err e = {0};
  if (d && cli_read_steps(path, l, &e)) {
    *rc = cli_fail(&e);
    cwm_dag_free(d);
    cwm_workload_free(*w);
    return NULL;
  }
  return d;
}

cwm_dag *cli_dag(const cli_opt *o, int nopt, cwm_workload **w, int *rc) {
  *w = cli_workload(cli_get(o, nopt, "--workload"), cli_get(o, nopt, "--suite"), rc);
  if (!*w) return NULL;
  cwm_err e = {0};
  cwm_dag *d = cwm_dag_new(*w, &e);
  if (!d) {
    *rc = cli_fail(&e);
    cwm_workload_free(*w);
    *w = NULL;
  }
  return d;
}

/* The measuring protocol options that tune, network tuning and `dataset remeasure` share. */
int cli_tune_protocol(const cli_opt *o, int nopt, const char *cmd, const char *help, cwm_measure_opts *mo) {
  long th = cli_get_long(o, nopt, "--threads", 1), r = cli_get_long(o, nopt, "--repeats", mo->repeats),
       ms = cli_get_long(o, nopt, "--min-repeat-ms", (long)mo->min_repeat_ms);
  if (th < 1 || th > 1024) return cli_usage(cmd, help, "--threads must be 1..1024");
  if (r < 1 || r > 32) return cli_usage(cmd, help, "--repeats must be 1..32, not %ld", r);
  if (ms < 0 || ms > 10000) return cli_usage(cmd, help, "--min-repeat-ms must be 0..10000, not %ld", ms);
  mo->threads = (int)th;
  mo->repeats = (int)r;
  mo->min_repeat_ms = (double)ms;
  return 0;
}

volatile int cli_stop;

static void on_stop_signal(int sig) {
  (void)sig;
  cli_stop = 1;
}

void cli_catch_stop(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

int cli_check_outputs(const cli_opt *o, int nopt, const char *cmd, const char *help) {
  const char *name = cli_get(o, nopt, "--name"), *dir = cli_get(o, nopt, "--export"),
             *sum = cli_get(o, nopt, "--summary");
  if (name && !cwm_export_name_ok(name))
    return cli_usage(cmd, help,
                     "--name '%s' is not a C identifier free to use (a keyword, a libc name, reserved, or over "
                     "60 characters)", name);
  if (dir) {
    cwm_err e = {0};
    if (!*dir) return cli_usage(cmd, help, "--export needs a directory");
    if (cwm_mkdir_p(dir, &e)) return cli_fail(&e);
    if (!cwm_dir_writable(dir)) {
      fprintf(stderr, "cwm: --export %s: cannot write into it: %s\n", dir, strerror(errno));
      return CWM_EIO;
    }
  }
  if (sum) {
    if (!*sum) return cli_usage(cmd, help, "--summary needs a file name");
    char parent[4096];
    cwm_parent_dir(sum, parent, sizeof parent);
    if (!cwm_dir_writable(parent)) {
      fprintf(stderr, "cwm: --summary %s: cannot write into %s: %s\n", sum, parent, strerror(errno));
      return CWM_EIO;
    }
  }
  return 0;
}

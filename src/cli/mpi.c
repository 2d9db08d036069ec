/* mpi.c: cwm under mpirun. Started with more than one rank, every rank but 0 becomes a worker of
 * the farm (dist/farm.c) before any command runs, and rank 0 runs the command, which measures
 * through the workers once it calls cli_farm_measure. Without mpirun nothing here does anything. */
#include "cli.h"
#include "env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/farm.h"

static cwm_farm *g_farm;
static cwm_farm_opts g_fo;
static int g_led;
/* the farm's progress lines follow the command's --quiet; its warnings (a worker lost) do not */
static cli_say g_say = {"tune", 0}, g_warn = {"tune", 0};

static void finish(void) {
  if (!g_farm) return;
  cwm_farm *f = g_farm;
  g_farm = NULL;
  if (cwm_farm_rank(f) == 0 && g_led) {
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_farm_report(f, &b);
    for (char *line = b.s, *nl; line && *line; line = nl) {
      nl = strchr(line, '\n');
      if (nl) *nl++ = 0;
      cli_progress(&g_say, line);
    }
    cwm_buf_free(&b);
  }
  cwm_farm_end(f);
}

/* Takes --worker-timeout S and --mixed-targets out of argv (they only mean something under
 * mpirun, and every command accepts them so that one command line serves every rank). */
static int farm_options(int *argc, char **argv) {
  const char *mixed = NULL, *wt = NULL;
  if (cli_take_option(argc, argv, "--mixed-targets", 0, &mixed) < 0 ||
      cli_take_option(argc, argv, "--worker-timeout", 1, &wt) < 0)
    return CWM_EUSAGE;
  if (mixed) g_fo.mixed_targets = 1;
  if (wt) {
    char *end;
    double s = strtod(wt, &end);
    if (*end || end == wt || !(s >= 1 && s <= 86400))
      return cli_usage("", NULL, "--worker-timeout must be 1..86400 seconds, not '%s'", wt);
    g_fo.worker_timeout_s = s;
  }
  return 0;
}

int cli_farm_begin(int *argc, char ***argv, int *done) {
  *done = 0;
  int rc = farm_options(argc, *argv);
  if (rc) return rc;
  if (cli_env_job_size() <= 1) return 0;
  cwm_err e = {0};
  g_farm = cwm_farm_init(argc, argv, &e);
  if (!g_farm) {
    *done = 1;
    return cli_fail(&e);
  }
  char **av = *argv;
  int ok = *argc >= 2 && (!strcmp(av[1], "tune") || (*argc >= 3 && !strcmp(av[1], "dataset") && !strcmp(av[2], "measure")));
  int help = 0;
  for (int i = 1; i < *argc; i++) help |= !strcmp(av[i], "--help") || !strcmp(av[i], "-h");
  if (cwm_farm_rank(g_farm) != 0) {
    /* a worker: the command line is rank 0's business; this rank serves until told to stop */
    *done = 1;
    rc = 0;
    if (ok && !help) {
      cwm_measure_opts local;
      cwm_measure_opts_default(&local);
      cli_env_measure(&local);
      if (cwm_farm_serve(g_farm, &local, &e)) rc = cli_fail(&e);
    }
    finish();
    return rc;
  }
  if (!ok && !help) {
    *done = 1;
    fprintf(stderr, "cwm: under mpirun only `cwm tune` and `cwm dataset measure` spread their work over the ranks; "
                    "run `cwm %s` as one process\n", *argc >= 2 ? av[1] : "");
    finish();
    return CWM_EUSAGE;
  }
  g_say.cmd = g_warn.cmd = av[1][0] == 'd' ? "dataset measure" : "tune";
  atexit(finish); /* a usage error's exit() still stops the workers */
  return 0;
}

int cli_farm_measure(cwm_measure_opts *mo, int quiet) {
  if (!g_farm) return 0;
  g_say.quiet = quiet;
  g_fo.progress = g_fo.warn = cli_progress;
  g_fo.progress_ud = &g_say;
  g_fo.warn_ud = &g_warn;
  cwm_err e = {0};
  if (cwm_farm_lead(g_farm, mo, &g_fo, &e)) return cli_fail(&e);
  g_led = 1;
  return 0;
}

void cli_farm_end(void) { finish(); }

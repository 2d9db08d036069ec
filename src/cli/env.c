/* env.c: every environment variable the cwm command honours, read here and nowhere else, so that
 * `cwm --help` can list them all and the library stays a function of its arguments. */
#include "env.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/codegen.h"
#include "cwm/nn.h"
#include "cwm/te.h"
#include "cwm/xgb.h"

static const char *var(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

void cli_env_apply(void) {
  const char *v;
  if ((v = var("CWM_XGBOOST_LIB"))) cwm_xgb_set_library(v);
  if ((v = var("CWM_OPENBLAS_LIB"))) cwm_blas_set_library(v);
  if ((v = var("CWM_MODEL"))) cwm_world_set_default_path(v);
  if ((v = var("CWM_SUITE"))) cwm_suite_set_default_path(v);
  /* only 8 and 16 are widths the code generator has; anything else leaves the CPU's */
  if ((v = var("CWM_VEC_LANES")) && (!strcmp(v, "8") || !strcmp(v, "16"))) cwm_codegen_set_lanes(atoi(v));
}

static const char *g_cache_dir; /* --cache-dir */
static long g_cache_max_mb = -1; /* --cache-max-mb */

int cli_cache_opts(int *argc, char **argv) {
  const char *dir = NULL, *mb = NULL;
  if (cli_take_option(argc, argv, "--cache-dir", 1, &dir) < 0 || cli_take_option(argc, argv, "--cache-max-mb", 1, &mb) < 0)
    return CWM_EUSAGE;
  if (dir) {
    if (!*dir) return cli_usage("", NULL, "--cache-dir needs a directory");
    g_cache_dir = dir;
  }
  if (mb) {
    char *end;
    long v = strtol(mb, &end, 10);
    if (*end || end == mb || v < 0 || v > (1L << 30))
      return cli_usage("", NULL, "--cache-max-mb must be a number of MB (0: no bound), not '%s'", mb);
    g_cache_max_mb = v;
  }
  return 0;
}

void cli_env_measure(cwm_measure_opts *mo) {
  /* the options keep the pointer, so the directory lives as long as the process */
  static char home_dir[4096];
  const char *v;
  if ((v = var("CC"))) mo->cc = v;
  mo->cflags = cli_target_cflags(mo->cflags);
  if (g_cache_max_mb >= 0) mo->cache_max_mb = g_cache_max_mb;
  if (g_cache_dir) {
    mo->cache_dir = g_cache_dir;
  } else if ((v = var("CWM_CACHE_DIR"))) {
    mo->cache_dir = v;
  } else if ((v = var("HOME"))) {
    snprintf(home_dir, sizeof home_dir, "%s/.cache/cwm", v);
    mo->cache_dir = home_dir;
  }
}

void cli_env_space(cwm_space_opts *so) {
  const char *v = getenv("CWM_REGISTER_TILE");
  if (v && !strcmp(v, "0")) so->register_tile = 0;
}

void cli_env_world_cm(cwm_world_cm_opts *o) {
  const char *v = getenv("CWM_WORLD_HANDOFF");
  if (v && !strcmp(v, "0")) o->handoff = 0;
}

int cli_env_plain_terminal(void) {
  const char *v = var("TERM");
  return !v || !strcmp(v, "dumb");
}

int cli_env_job_size(void) {
  /* Open MPI's mpirun, then the PMI of MPICH's and others' launchers */
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = var(vars[i]);
    if (v) return atoi(v);
  }
  return 0;
}

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
  static const char *const names[] = {"--cache-dir", "--cache-max-mb"};
  int out = 0;
  for (int i = 0; i < *argc; i++) {
    const char *val = NULL;
    int k = 0;
    while (k < 2 && !cli_opt_is(argv[i], names[k], &val)) k++;
    if (k == 2) {
      argv[out++] = argv[i];
      continue;
    }
    if (!val) {
      if (i + 1 >= *argc) {
        fprintf(stderr, "cwm: %s needs a value\n", names[k]);
        return CWM_EUSAGE;
      }
      val = argv[++i];
    }
    if (k == 0) {
      if (!*val) {
        fprintf(stderr, "cwm: --cache-dir needs a directory\n");
        return CWM_EUSAGE;
      }
      g_cache_dir = val;
    } else {
      char *end;
      long mb = strtol(val, &end, 10);
      if (*end || end == val || mb < 0 || mb > (1L << 30)) {
        fprintf(stderr, "cwm: --cache-max-mb must be a number of MB (0: no bound), not '%s'\n", val);
        return CWM_EUSAGE;
      }
      g_cache_max_mb = mb;
    }
  }
  *argc = out;
  argv[out] = NULL;
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

int cli_env_job_size(void) {
  /* Open MPI's mpirun, then the PMI of MPICH's and others' launchers */
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = var(vars[i]);
    if (v) return atoi(v);
  }
  return 0;
}

/* target.c: --target NAME, the instruction set kernels are generated, built and timed for. Taken
 * out of argv before any command (like --cache-dir), so that every command and every rank of an
 * MPI job sees the same target; it sets the code generator's register-tile width and the world
 * model's vector width for the process, and the instruction-set flags of every compile. */
#include "cli.h"
#include "env.h"

#include <stdio.h>
#include <string.h>

#include "cwm/codegen.h"
#include "cwm/ranker.h"
#include "cwm/record.h"

static const cwm_isa *g_isa; /* NULL: native (-march=native, the host's width) */

static void list_targets(FILE *f) {
  int n;
  const cwm_isa *l = cwm_isa_list(&n);
  char missing[32];
  fprintf(f, "  %-8s %s\n", "native", "this CPU (-march=native); the default");
  for (int i = 0; i < n; i++)
    fprintf(f, "  %-8s %s%s\n", l[i].name, l[i].about,
            cwm_isa_runs_here(&l[i], missing, sizeof missing) ? "" : " (not on this CPU: generate and export only)");
}

int cli_target_opts(int *argc, char **argv) {
  const char *val = NULL;
  if (cli_take_option(argc, argv, "--target", 1, &val) < 0) return CWM_EUSAGE;
  if (!val || !strcmp(val, "native")) {
    g_isa = NULL;
  } else if (!strcmp(val, "list") || !strcmp(val, "help")) {
    list_targets(stdout);
    *argc = 0;
    return -1;
  } else if (!(g_isa = cwm_isa_find(val))) {
    fprintf(stderr, "cwm: --target: unknown target '%s'; the targets:\n", val);
    list_targets(stderr);
    return CWM_EUSAGE;
  }
  if (g_isa) {
    cwm_codegen_set_lanes(g_isa->lanes);
    cwm_hwinfo_set_vector_floats(g_isa->vec_bytes / 4);
  }
  return 0;
}

const cwm_isa *cli_target_isa(void) { return g_isa; }

const char *cli_target_cflags(const char *base) {
  /* the options structs keep the pointer: one buffer for the process, as there is one target */
  static char buf[1024];
  if (!g_isa) return base;
  if (cwm_isa_cflags(g_isa, base, buf, sizeof buf)) return base;
  return buf;
}

int cli_target_runs_here(const char *cmd) {
  char missing[32];
  if (!g_isa || cwm_isa_runs_here(g_isa, missing, sizeof missing)) return 0;
  fprintf(stderr,
          "cwm %s: target %s needs %s, which this machine lacks: its kernels can be generated and exported "
          "here (cwm codegen, cwm export) but not timed\n",
          cmd, g_isa->name, missing);
  return CWM_EUSAGE;
}

/* main.c: the cwm command line. Each command parses its options, calls the library and turns
 * its status into one line on stderr and an exit code (the cwm_status numbers). */
#define _GNU_SOURCE
#include "cli.h"
#include "env.h"

#include "cwm/world.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *USAGE =
    "cwm " CWM_VERSION ": a tensor-program auto-scheduler with a compiler world model\n"
    "\n"
    "usage: cwm <command> [options]   (cwm <command> --help for its options)\n"
    "       cwm --version                 (with this machine's CPU, target, compiler and files)\n"
    "\n"
    "commands:\n"
    "  show      print a workload's text and its initial loop-nest state\n"
    "  sample    print random valid schedule step lists for a workload\n"
    "  replay    print every intermediate state of step lists\n"
    "  codegen   print the C code of a schedule\n"
    "  measure   build, check and time step lists; append records to a log\n"
    "  tune      search schedules with a cost model (a workload; a network: --onnx or --network)\n"
    "  import    read an ONNX model and show its tasks and glue\n"
    "  compile   write an ONNX model as a C library with the best kernels of a tuning log\n"
    "  export    write the best kernel of each workload of a tuning log, measuring nothing\n"
    "  log       list, pick the best of, filter, merge tuning logs; to and from Ansor's layout\n"
    "  demo      measure a hand-written schedule against the naive one\n"
    "  dataset   training workloads, trajectories, measured records, stats, splits\n"
    "  train     train the world model (encoder, transition, ranker) from the data set\n"
    "  eval      evaluate a world model's ranking on held-out workloads\n";

static const char *USAGE_MORE =
    "\n"
    "workloads (--workload SPEC): a suite id (matmul_1024), an op spec in quotes\n"
    "(\"dense M=128 N=768 K=768 bias=1 act=gelu\"), or @FILE with workload text.\n"
    "The suite file is $CWM_SUITE or bench/suite.tsv.\n"
    "\n"
    "options: --name VALUE or --name=VALUE; -- ends the options. A usage error is one line on\n"
    "stderr (exit 2) that names the command's --help.\n"
    "options of every command:\n"
    "  --help, -h         the command's usage, options and what it does\n"
    "  --list-options     the command's options, one a line, = after those that take a value\n"
    "                     (shell completion reads it: scripts/cwm-completion.bash)\n"
    "  --json             every line on stderr (progress, notes, errors) as one JSON object:\n"
    "                     {\"cmd\", \"kind\": \"progress\"|\"text\", \"msg\", \"elapsed\" seconds, and\n"
    "                     \"done\", \"total\", \"eta_s\" where the line counts toward a total};\n"
    "                     before the command (cwm --json tune ...) or among its options\n"
    "On a terminal, long jobs (tune, dataset measure and sample) also draw a progress bar with\n"
    "done/total, rate and ETA under their progress lines; --quiet leaves both out.\n"
    "\n"
    "exit codes:\n"
    "  0 ok   2 usage   3 malformed workload/spec/step text   4 step does not fit the state\n"
    "  5 file I/O   6 C compiler missing or failing   7 measurement infrastructure failed\n"
    "  8 nothing could be scheduled or measured   9 model file bad   10 runtime library missing\n"
    "  70 internal error\n"
    "\n"
    "options of every command that generates or compiles kernels:\n"
    "  --cache-dir DIR    the compile cache (overrides CWM_CACHE_DIR); it must be yours: it is\n"
    "                     created 0700 and refused when another user owns it\n"
    "  --cache-max-mb N   the cache is trimmed to 80% of N MB, least recently used kernels\n"
    "                     first (default 2048; 0: no bound)\n"
    "\n"
    "  --target NAME      the instruction set kernels are generated, built and timed for: native\n"
    "                     (this CPU, -march=native; the default), avx512, avx2, sse4, neon, generic;\n"
    "                     recorded in every log record and exported header (--target list: details)\n"
    "\n"
    "under mpirun (`mpirun -np N cwm tune ...`, `... cwm dataset measure ...`): rank 0 runs the\n"
    "command and writes the log; the other ranks build and time its candidates (docs/scale-out.md)\n"
    "  --worker-timeout S a chunk unanswered for S seconds goes to another worker (default: from the\n"
    "                     build and run time-outs); a worker that dies is noticed at once on rank 0's host\n"
    "  --mixed-targets    let workers whose CPU, threads, compiler or flags differ time side by side\n"
    "\n"
    "environment:\n"
    "  CWM_SUITE          the suite file (default: the source tree's bench/suite.tsv, else bench/suite.tsv)\n"
    "  CWM_MODEL          the world model file when no --model-file is given\n"
    "  CWM_CACHE_DIR      where kernels are compiled and cached (default $HOME/.cache/cwm)\n"
    "  HOME               the default cache is under it; without it, /tmp/cwm-cache-<uid>\n"
    "  CC                 the C compiler for kernels (default gcc)\n"
    "  CWM_VEC_LANES      8 or 16: the register tiles' vector lanes (default 16 where the CPU has AVX-512)\n"
    "  CWM_REGISTER_TILE  0 turns off the sampler's register-tile prior\n"
    "  CWM_WORLD_HANDOFF  0 turns off the world model's hand-off to Ansor's model\n"
    "  CWM_XGBOOST_LIB    the XGBoost library to open (default libxgboost.so.0)\n"
    "  CWM_OPENBLAS_LIB   the OpenBLAS library to open (default libopenblas.so.0, else libblas.so.3)\n"
    "  TERM               dumb (or unset): no progress bar on a terminal\n"
    "  OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE\n"
    "                     set by mpirun: above 1, this process is a rank of an MPI job\n";

/* The version, then what a bug report needs: the CPU and the target kernels are built for, the
 * compiler, and the files found (model, suite, cache). */
static int print_version(void) {
  cwm_measure_opts mo;
  cwm_measure_opts_default(&mo);
  cli_env_measure(&mo);
  cwm_target t;
  cwm_target_detect(&t, 1, mo.cc, mo.cflags);
  printf("cwm %s\n", CWM_VERSION);
  printf("cpu:      %s", t.model);
  if (t.cpuid[0]) printf(" (family.model %s)", t.cpuid);
  printf(", %d cores\n", t.cores);
  printf("kernels:  %s, %d-byte vectors, %d-float register tiles\n", t.isa, t.vec_bytes, cwm_codegen_lanes());
  printf("caches:  ");
  const long sz[3] = {t.l1d, t.l2, t.l3};
  const char *nm[3] = {"L1d", "L2", "L3"};
  int any = 0;
  for (int i = 0; i < 3; i++)
    if (sz[i] >= 1L << 20 && sz[i] % (1L << 20) == 0) printf("%s %s %ld MiB", any++ ? "," : "", nm[i], sz[i] >> 20);
    else if (sz[i] > 0) printf("%s %s %ld KiB", any++ ? "," : "", nm[i], sz[i] >> 10);
  printf("%s\n", any ? "" : " unknown");
  printf("compiler: %s %s\n", t.cc, t.cflags);
  const char *model = cwm_world_default_path();
  printf("model:    %s\n", model ? model : "none found (tune uses Ansor's online model)");
  printf("suite:    %s\n", cwm_suite_default_path());
  printf("cache:    %s\n", cwm_measure_cache_dir(&mo));
  return 0;
}

int main(int argc, char **argv) {
  cli_env_apply();
  cli_report_begin();
  cli_json_requested = cli_report_json;
  /* --json before the command; after it, cli_parse sees it among the command's options */
  while (argc > 1 && !strcmp(argv[1], "--json")) {
    cli_report_json();
    memmove(argv + 1, argv + 2, sizeof *argv * (size_t)(argc - 1));
    argc--;
  }
  int rc = cli_cache_opts(&argc, argv), done = 0;
  if (rc) return rc;
  if ((rc = cli_target_opts(&argc, argv))) return rc < 0 ? 0 : rc;
  rc = cli_farm_begin(&argc, &argv, &done);
  if (rc || done) return rc;
  if (argc < 2) {
    fprintf(stderr, "%s\nsee 'cwm --help' for the options, the environment and the exit codes\n", USAGE);
    return CWM_EUSAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    printf("%s%s", USAGE, USAGE_MORE);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) return print_version();
  static const struct { const char *name; int (*fn)(int, char **); } cmds[] = {
      {"show", cmd_show},       {"sample", cmd_sample}, {"replay", cmd_replay},
      {"codegen", cmd_codegen}, {"measure", cmd_measure}, {"demo", cmd_demo},
      {"tune", cmd_tune},       {"import", cmd_import}, {"compile", cmd_compile},
      {"dataset", cmd_dataset}, {"train", cmd_train}, {"eval", cmd_eval},
      {"export", cmd_export},   {"log", cmd_log},
  };
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(argv[1], cmds[i].name)) {
      cli_set_command(cmds[i].name);
      rc = cmds[i].fn(argc - 1, argv + 1);
      cli_farm_end();
      return rc;
    }
  return cli_usage("", NULL, "unknown command '%s'", argv[1]);
}

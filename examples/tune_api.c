/* tune_api.c: tuning a workload from a program through the embedding API (cwm/api.h): open a
 * tuner, tune, print the best time and schedule, export the kernel.
 *   cc tune_api.c $(pkg-config --cflags --libs cwm) -o tune_api
 *   ./tune_api layernorm 64 out          # then out/layernorm.c and out/layernorm.h
 * --quick measures with a small search and short timings (a smoke test, not a real tuning);
 * --cache-dir DIR compiles the kernels there (default: /tmp/cwm-cache-<uid>). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/api.h"

static void print_progress(void *ud, const char *line) {
  fprintf(stderr, "%s: %s\n", (const char *)ud, line);
}

int main(int argc, char **argv) {
  cwm_api_options o;
  cwm_api_options_init(&o, sizeof o); /* the defaults: the shipped world model, 5 x 50 ms timings */
  o.progress = print_progress;
  o.progress_ud = "tune_api";
  int i = 1;
  for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
    if (!strcmp(argv[i], "--quick")) {
      o.per_round = 8;
      o.population = 64;
      o.generations = 1;
      o.repeats = 1;
      o.min_repeat_ms = 1;
      o.confirm = 2;
    } else if (!strcmp(argv[i], "--cache-dir") && i + 1 < argc) {
      o.cache_dir = argv[++i];
    } else {
      break;
    }
  }
  if (argc - i != 3) {
    fprintf(stderr, "usage: %s [--quick] [--cache-dir DIR] WORKLOAD TRIALS OUTDIR\n", argv[0]);
    return 2;
  }
  const char *workload = argv[i], *outdir = argv[i + 2];
  int trials = atoi(argv[i + 1]);

  char err[512];
  cwm_api_tuner *t;
  int rc = cwm_api_open(workload, &o, &t, err, sizeof err);
  if (rc) {
    fprintf(stderr, "tune_api: %s\n", err);
    return rc;
  }
  printf("cwm %s, workload %s, model %s\n", cwm_api_version(), cwm_api_workload_name(t), cwm_api_model_file(t));
  if ((rc = cwm_api_tune(t, trials)) == 0) {
    double s = cwm_api_best_seconds(t);
    int measured, errors;
    cwm_api_counts(t, &measured, NULL, &errors);
    printf("best: %.2f us, %.2f GFLOP/s (%d measured, %d errors)\n", s * 1e6, cwm_api_flops(t) / s * 1e-9, measured,
           errors);
    printf("steps: %s\n", cwm_api_best_steps(t));
    rc = cwm_api_export(t, outdir, NULL); /* NULL: named after the workload */
    if (rc == 0) printf("exported to %s/\n", outdir);
  }
  if (rc) fprintf(stderr, "tune_api: %s\n", cwm_api_errmsg(t));
  cwm_api_close(t);
  return rc;
}

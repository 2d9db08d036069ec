/* anchors_main: prints the vendor speed anchors (oneDNN and PyTorch eager, float32) for
 * every row of bench/suite.tsv, or one row: microseconds per call and GFLOP/s.
 * Usage: anchors_main [--suite FILE] [--threads T] [--id ID] [--no-torch] */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anchors.h"

#ifdef CWM_HAVE_DNNL

/* Default suite: $CWM_SUITE, $CWM_SOURCE_DIR/bench/suite.tsv, the CWM_SOURCE_DIR compile
 * definition, <exe dir>/../bench/suite.tsv, then bench/suite.tsv. */
static void default_suite(char *out, size_t n) {
  const char *env = getenv("CWM_SUITE");
  if (env && env[0]) {
    snprintf(out, n, "%s", env);
    return;
  }
  /* torch_anchor.py sits next to suite.tsv: reuse its lookup */
  char script[4096];
  anchor_torch_script(script, sizeof script);
  char *slash = strrchr(script, '/');
  if (slash) {
    *slash = '\0';
    if (snprintf(out, n, "%s/suite.tsv", script) >= (int)n) snprintf(out, n, "bench/suite.tsv");
  } else {
    snprintf(out, n, "suite.tsv");
  }
}

static void usage(const char *argv0) {
  fprintf(stderr, "usage: %s [--suite FILE] [--threads T] [--id ID] [--no-torch]\n", argv0);
}

int main(int argc, char **argv) {
  char suite[4096];
  const char *want = NULL;
  int threads = 1, torch = 1;
  default_suite(suite, sizeof suite);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--suite") == 0 && i + 1 < argc) {
      snprintf(suite, sizeof suite, "%s", argv[++i]);
    } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = atoi(argv[++i]);
      if (threads < 1) {
        fprintf(stderr, "anchors_main: bad --threads\n");
        return 2;
      }
    } else if (strcmp(argv[i], "--id") == 0 && i + 1 < argc) {
      want = argv[++i];
    } else if (strcmp(argv[i], "--no-torch") == 0) {
      torch = 0;
    } else {
      usage(argv[0]);
      return 2;
    }
  }

  FILE *f = fopen(suite, "r");
  if (!f) {
    fprintf(stderr, "anchors_main: cannot open suite %s\n", suite);
    return 1;
  }
  printf("# suite %s, float32, %d thread%s; median of 7 repeats of >= 50 ms\n", suite, threads,
         threads == 1 ? "" : "s");
  printf("%-14s %-13s %12s %12s %12s %12s\n", "id", "op", "oneDNN_us", "oneDNN_GF/s",
         "PyTorch_us", "PyTorch_GF/s");
  fflush(stdout);

  char line[2048];
  int rows = 0, failures = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    const char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '\0' || *p == '#') continue;
    char *id = line, *opname = NULL, *params = NULL;
    char *tab = strchr(id, '\t');
    if (tab) {
      *tab = '\0';
      opname = tab + 1;
      tab = strchr(opname, '\t');
      if (tab) {
        *tab = '\0';
        params = tab + 1;
        tab = strchr(params, '\t');
        if (tab) *tab = '\0'; /* drop the comment column */
      }
    }
    if (!opname || !params) {
      fprintf(stderr, "anchors_main: malformed suite line for %s\n", id);
      failures++;
      continue;
    }
    if (want && strcmp(want, id) != 0) continue;
    rows++;

    char spec[1024], err[512];
    anchor_op op;
    snprintf(spec, sizeof spec, "%s %s", opname, params);
    if (anchor_parse_spec(spec, &op) != 0) {
      fprintf(stderr, "anchors_main: %s: cannot parse \"%s\"\n", id, spec);
      failures++;
      continue;
    }
    const double gflop = anchor_flops(&op) * 1e-9;
    char dcol[2][32], tcol[2][32];

    double ds = anchor_dnnl_seconds(&op, threads, err, sizeof err);
    if (ds > 0) {
      snprintf(dcol[0], sizeof dcol[0], "%.2f", ds * 1e6);
      snprintf(dcol[1], sizeof dcol[1], "%.2f", gflop / ds);
    } else {
      fprintf(stderr, "anchors_main: %s: oneDNN: %s\n", id, err);
      snprintf(dcol[0], sizeof dcol[0], "n/a");
      snprintf(dcol[1], sizeof dcol[1], "n/a");
      failures++;
    }

    double ts = -1.0;
    if (torch) {
      ts = anchor_torch_seconds(suite, id, threads, err, sizeof err);
      if (ts <= 0) {
        fprintf(stderr, "anchors_main: %s: PyTorch: %s\n", id, err);
        failures++;
      }
    }
    if (ts > 0) {
      snprintf(tcol[0], sizeof tcol[0], "%.2f", ts * 1e6);
      snprintf(tcol[1], sizeof tcol[1], "%.2f", gflop / ts);
    } else {
      snprintf(tcol[0], sizeof tcol[0], torch ? "n/a" : "-");
      snprintf(tcol[1], sizeof tcol[1], torch ? "n/a" : "-");
    }
    printf("%-14s %-13s %12s %12s %12s %12s\n", id, opname, dcol[0], dcol[1], tcol[0], tcol[1]);
    fflush(stdout);
  }
  fclose(f);
  if (want && rows == 0) {
    fprintf(stderr, "anchors_main: id %s not in %s\n", want, suite);
    return 1;
  }
  return failures ? 1 : 0;
}

#else /* !CWM_HAVE_DNNL */

int main(void) {
  fprintf(stderr, "anchors_main: built without oneDNN (libdnnl not found by CMake)\n");
  return 1;
}

#endif

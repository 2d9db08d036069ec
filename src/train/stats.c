/* stats.c: `cwm dataset stats`: counts per op kind, trajectory lengths, error kinds and
 * latencies of a trajectory file or a tuning log, read with the streaming reader. */
#define _GNU_SOURCE
#include "cwm/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char key[17];
  char kind[24];
} key_kind;

typedef struct {
  char kind[24];
  long trajs, workloads, errors;
} kind_count;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

int cwm_dataset_stats(const char *path, cwm_buf *report, cwm_err *err) {
  cwm_traj_iter *it = cwm_traj_iter_open(path, err);
  if (!it) return err ? err->code : CWM_EIO;
  key_kind *keys = NULL;
  int nkeys = 0;
  size_t capkeys = 0, caplens = 0, caplat = 0;
  kind_count kinds[16];
  int nkinds = 0;
  int *lens = NULL;
  double *lat = NULL;
  long n = 0, measured = 0, nlat = 0, no_text = 0;
  long errs[16] = {0};
  cwm_traj t;
  int rc;
  while ((rc = cwm_traj_iter_next(it, &t, err)) == 1) {
    int k = -1;
    for (int i = nkeys - 1; i >= 0 && k < 0; i--)
      if (!strcmp(keys[i].key, t.key)) k = i;
    if (k < 0) {
      keys = cwm_grow(keys, (size_t)nkeys, &capkeys, sizeof *keys);
      k = nkeys++;
      memcpy(keys[k].key, t.key, 17);
      const char *kind = "unknown";
      cwm_err we = {0};
      cwm_workload *w = t.workload ? cwm_workload_parse(t.workload, &we) : NULL;
      if (w) kind = cwm_workload_kind(w);
      else no_text++;
      snprintf(keys[k].kind, sizeof keys[k].kind, "%s", kind);
      cwm_workload_free(w);
      int ki = -1;
      for (int i = 0; i < nkinds; i++)
        if (!strcmp(kinds[i].kind, kind)) ki = i;
      if (ki < 0 && nkinds < 16) {
        ki = nkinds++;
        memset(&kinds[ki], 0, sizeof kinds[ki]);
        snprintf(kinds[ki].kind, sizeof kinds[ki].kind, "%s", kind);
      }
      if (ki >= 0) kinds[ki].workloads++;
    }
    for (int i = 0; i < nkinds; i++)
      if (!strcmp(kinds[i].kind, keys[k].kind)) {
        kinds[i].trajs++;
        if (t.measured && t.error) kinds[i].errors++;
      }
    lens = cwm_grow(lens, (size_t)n, &caplens, sizeof *lens);
    lens[n++] = t.nsteps;
    if (t.measured) {
      measured++;
      errs[t.error >= 0 && t.error < 16 ? t.error : 15]++;
      if (!t.error && t.cost < 1e9) {
        lat = cwm_grow(lat, (size_t)nlat, &caplat, sizeof *lat);
        lat[nlat++] = t.cost;
      }
    }
    cwm_traj_free(&t);
  }
  if (rc == 0) {
    cwm_buf_printf(report, "file: %s\n", path);
    cwm_buf_printf(report, "trajectories: %ld (%ld measured), workloads: %d, corrupt lines skipped: %ld\n", n,
                   measured, nkeys, cwm_traj_iter_nbad(it));
    if (cwm_traj_iter_nbad(it)) cwm_buf_printf(report, "  last corrupt: %s\n", cwm_traj_iter_last_bad(it));
    if (no_text) cwm_buf_printf(report, "workloads without text (kind unknown): %ld\n", no_text);
    cwm_buf_printf(report, "per op kind:%s\n", measured ? "   trajectories  workloads  error rate" : "   trajectories  workloads");
    for (int i = 0; i < nkinds; i++) {
      cwm_buf_printf(report, "  %-14s %10ld %10ld", kinds[i].kind, kinds[i].trajs, kinds[i].workloads);
      if (measured) cwm_buf_printf(report, "  %9.2f%%", kinds[i].trajs ? 100.0 * kinds[i].errors / kinds[i].trajs : 0.0);
      cwm_buf_putc(report, '\n');
    }
    if (n) {
      qsort(lens, (size_t)n, sizeof *lens, cmp_int);
      double mean = 0;
      for (long i = 0; i < n; i++) mean += lens[i];
      cwm_buf_printf(report, "trajectory length (steps): min %d, median %d, max %d, mean %.1f\n", lens[0], lens[n / 2],
                     lens[n - 1], mean / (double)n);
    }
    if (measured) {
      cwm_buf_printf(report, "errors: %.2f%% of %ld measured\n",
                     100.0 * (double)(measured - errs[0]) / (double)measured, measured);
      for (int e = 1; e < 16; e++)
        if (errs[e])
          cwm_buf_printf(report, "  %-16s %8ld  %6.2f%%\n", cwm_merr_name(e), errs[e], 100.0 * (double)errs[e] / (double)measured);
      if (nlat) {
        qsort(lat, (size_t)nlat, sizeof *lat, cmp_double);
        cwm_buf_printf(report, "latency of %ld good records: min %.3f us, median %.3f us, max %.3f us\n", nlat,
                       lat[0] * 1e6, lat[nlat / 2] * 1e6, lat[nlat - 1] * 1e6);
      }
    } else {
      cwm_buf_puts(report, "errors, latency: none (unmeasured trajectories)\n");
    }
  }
  cwm_traj_iter_close(it);
  free(keys);
  free(lens);
  free(lat);
  return rc < 0 ? (err ? err->code : CWM_EIO) : 0;
}

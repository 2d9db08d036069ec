/* fuzz_dataset.c: libFuzzer target for the data-set reader: the input is a trajectory file (or a
 * tuning log, or a mix), streamed through cwm_traj_iter_* from an in-memory file (memfd), each
 * trajectory it yields replayed on its own workload through the DAG cache, then the same bytes
 * summarised by cwm_dataset_stats. Bad lines must be skipped and counted, never crash; what the
 * reader yields must print back to a line it reads again. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cwm/dataset.h"
#include "cwm/train.h"

#define MAX_REPLAYS 2 /* replays per input: a replay and its final print cost about a millisecond */

static int write_all(int fd, const unsigned char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
  int fd = memfd_create("fuzz_dataset", MFD_CLOEXEC);
  if (fd < 0) abort();
  if (write_all(fd, data, n)) abort();
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  cwm_err e = {0};
  cwm_traj_iter *it = cwm_traj_iter_open(path, &e);
  if (!it) abort();
  cwm_dag_cache *cache = cwm_dag_cache_new();
  cwm_traj t;
  int rc, replays = 0;
  long yielded = 0;
  while ((rc = cwm_traj_iter_next(it, &t, &e)) == 1) {
    yielded++;
    /* what the reader yields prints as a trajectory line that parses back to the same steps */
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_traj_to_json(&t, &b);
    cwm_traj t2;
    cwm_err e2 = {0};
    if (cwm_traj_parse(b.s, &t2, &e2) != 0) abort();
    if (t2.nsteps != t.nsteps || strcmp(t2.key, t.key)) abort();
    cwm_traj_free(&t2);
    cwm_buf_free(&b);
    if (replays < MAX_REPLAYS) {
      replays++;
      cwm_err re = {0};
      const cwm_dag *d = cwm_dag_cache_get(cache, &t, &re);
      if (d) {
        cwm_state *s = NULL;
        if (cwm_traj_replay(d, &t, &s, NULL, &re) == 0) {
          char *p = cwm_state_print(s);
          free(p);
          cwm_state_free(s);
        }
      }
    }
    cwm_traj_free(&t);
  }
  if (rc < 0) abort(); /* a memfd does not fail to read */
  if (cwm_traj_iter_line(it) < 0 || cwm_traj_iter_nbad(it) < 0) abort();
  cwm_traj_iter_close(it);
  cwm_dag_cache_free(cache);
  cwm_buf report;
  cwm_buf_init(&report);
  if (cwm_dataset_stats(path, &report, &e) != 0) abort();
  cwm_buf_free(&report);
  close(fd);
  (void)yielded;
  return 0;
}

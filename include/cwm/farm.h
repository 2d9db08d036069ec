/* farm.h: measuring on the ranks of an MPI job (`mpirun -np N cwm tune ...`), as Ansor separates
 * builders and runners. Rank 0 runs the command (the search, the log) and measures through a
 * cwm_measurer that hands chunks of candidates to the other ranks, the workers; each builds its
 * chunk and times it as cwm_measure does in one process (timings on one host take turns through
 * the host's timing lock) and sends the results back. A worker that dies (noticed at once on
 * rank 0's host, else at its time-out) or hangs loses its chunk to another; when none is left,
 * rank 0 measures the rest itself. Nothing is written by the workers: rank 0 writes every
 * record, once, in the order a one-process run does.
 * Built without MPI (no libopenmpi-dev), cwm_farm_init fails and the rest is never reached. */
#ifndef CWM_FARM_H
#define CWM_FARM_H

#include "cwm/measure.h"

typedef struct cwm_farm cwm_farm;

typedef struct {
  /* a chunk unanswered this long goes to another worker and its worker is taken as hung (and
   * killed when it runs on rank 0's host); 0: 2 x the build time-out + 4 x (the run time-out +
   * 5 s) x the chunk size, which no live worker reaches */
  double worker_timeout_s;
  int mixed_targets; /* 1: accept workers whose targets differ; each record keeps its own */
  void (*progress)(void *ud, const char *line); /* the farm's start */
  void (*warn)(void *ud, const char *line);     /* a worker lost, rank 0 measuring itself */
  void *progress_ud, *warn_ud;
} cwm_farm_opts;

/* 1 when cwm was built with MPI. */
int cwm_farm_built(void);
/* MPI_Init (the caller knows the process was started by mpirun). NULL with err when MPI is not
 * built in or fails. Every rank calls it first thing. */
cwm_farm *cwm_farm_init(int *argc, char ***argv, cwm_err *err);
int cwm_farm_rank(const cwm_farm *f);
int cwm_farm_size(const cwm_farm *f);
/* Rank 0: sends the measuring protocol of mo to every worker, gathers each one's host and target
 * (CWM_EMEASURE when a worker does not answer in 60 s; CWM_EUSAGE naming the hosts when targets
 * differ and fo->mixed_targets is 0) and sets mo->measurer to the farm. */
int cwm_farm_lead(cwm_farm *f, cwm_measure_opts *mo, const cwm_farm_opts *fo, cwm_err *err);
/* The other ranks: build and time what rank 0 sends until it says stop (or, on its host, is
 * gone). local: this rank's own settings (cache directory, its bound); the protocol comes from
 * rank 0. Returns 0, or an error that ended the worker. */
int cwm_farm_serve(cwm_farm *f, const cwm_measure_opts *local, cwm_err *err);
/* Rank 0: one line per worker (rank, host, chunks, candidates, and whether it was lost). */
void cwm_farm_report(const cwm_farm *f, cwm_buf *out);
/* Rank 0 tells the workers to stop; every rank then leaves MPI (MPI_Finalize) and f is freed. */
void cwm_farm_end(cwm_farm *f);

#endif

/* dataset.h: the data the world model learns from. Training workloads (a seeded generator of op
 * specs that never repeats a suite shape), trajectories (a workload and the schedule steps that
 * build a program from its initial state; states are replayed on demand, never stored) written
 * as JSON lines, a streaming reader for trajectory files and tuning logs, the split by workload,
 * and statistics. They know nothing of models, search or measuring: what samples, measures and
 * perturbs programs for training is train.h, a layer above the search. */
#ifndef CWM_DATASET_H
#define CWM_DATASET_H

#include "cwm/record.h"
#include "cwm/state.h"
#include "cwm/te.h"

/* ------------------------------------------------------------ workload lists (workgen.c) */

/* One row of a workload list in the suite's TSV layout: id <TAB> op <TAB> params <TAB> note.
 * spec is "op params" (what cwm_workload_from_spec reads). */
typedef struct {
  char id[64];
  char spec[512];
  char note[256];
} cwm_wl_entry;

/* Reads a TSV list (lines starting with '#' and blank lines are skipped). Every row needs an id,
 * an op and params; a malformed row is CWM_EPARSE naming the file and line. *out is malloc'ed. */
int cwm_wlist_read(const char *path, cwm_wl_entry **out, int *n, cwm_err *err);
/* Writes the list atomically; header lines (may be NULL) are written first, each prefixed "# ". */
int cwm_wlist_write(const char *path, const cwm_wl_entry *e, int n, const char *header, cwm_err *err);
/* The entry's workload, named by its id. */
cwm_workload *cwm_wl_entry_workload(const cwm_wl_entry *e, cwm_err *err);

/* Compares two op specs by their parsed values (keys in any order, defaults filled in: a missing
 * bias is bias=0). *same = 1 when the ops are equal and every key has the same value; with
 * shape_only the epilogue keys (bias, act) are left out of the comparison, so a dense layer with
 * a suite row's M, N, K but another activation counts as the same shape. CWM_EPARSE on a
 * malformed spec. */
int cwm_spec_compare(const char *a, const char *b, int shape_only, int *same, cwm_err *err);

/* The op spec whose workload text is w's (the op library's inverse), e.g. "matmul M=24 N=24
 * K=24"; CWM_EPARSE when w is not the text of any op spec (hand-written workloads). */
int cwm_workload_spec(const cwm_workload *w, char *spec, size_t n, cwm_err *err);
/* The op name of cwm_workload_spec ("dense", "conv2d" ...) or "custom". */
const char *cwm_workload_kind(const cwm_workload *w);

typedef struct {
  int count;           /* workloads to generate */
  uint64_t seed;
  const char *suite;   /* suite TSV whose shapes are never emitted; NULL = cwm_suite_default_path() */
  double max_flops;    /* per workload; default 2e9 */
} cwm_workgen_opts;
void cwm_workgen_opts_default(cwm_workgen_opts *o);

/* One random op spec of a suite op kind with shapes from the ranges real networks use, within
 * the FLOP and tensor-size caps. No suite check here. Deterministic for the rng state. */
void cwm_workgen_draw(cwm_rng *r, double max_flops, char *spec, size_t n);
/* count distinct specs, none of the same shape as a suite row (cwm_spec_compare with
 * shape_only), ids "t<NNN>_<op>". *out is malloc'ed; *rejected (may be NULL) counts suite hits. */
int cwm_workgen(const cwm_workgen_opts *o, cwm_wl_entry **out, int *n, int *rejected, cwm_err *err);

/* ------------------------------------------------------------ trajectories (dataset.c) */

/* One trajectory: the workload (key, name, canonical text) and the steps from the initial state
 * to the final program. From a tuning log it also carries the measurement. */
typedef struct {
  char key[17];
  char name[64];
  char *workload;       /* owned canonical text, may be NULL (a log record without it) */
  cwm_step *steps;      /* owned */
  int nsteps;
  char final[17];       /* hash (hex) of the final state's print, "" if not stored */
  int measured;         /* 1: from a log record */
  int error;            /* cwm_merr of the record */
  double cost;          /* median seconds, CWM_FAILED_COST on error */
  char *target;         /* owned target string of the record (cwm_target_string); NULL if none */
} cwm_traj;

void cwm_traj_free(cwm_traj *t); /* frees the owned members and zeroes t */
/* Appends one JSON line (no newline): {"key","name","final","workload","steps"}. */
void cwm_traj_to_json(const cwm_traj *t, cwm_buf *out);
/* Parses a trajectory line or a tuning-log record line into t (overwritten, not freed). */
int cwm_traj_parse(const char *line, cwm_traj *t, cwm_err *err);
/* Replays t on d; checks the final print against t->final when stored (CWM_ESTEP naming the
 * key on a mismatch). trace as in cwm_state_replay (may be NULL). */
int cwm_traj_replay(const cwm_dag *d, const cwm_traj *t, cwm_state **out, cwm_state ***trace, cwm_err *err);

/* The split by workload: a deterministic hash of the key puts every trajectory of a workload
 * in the same part. Returns CWM_SPLIT_VALID for about valid_fraction of the keys. */
enum { CWM_SPLIT_ALL = -1, CWM_SPLIT_TRAIN = 0, CWM_SPLIT_VALID = 1 };
int cwm_split_part(const char *key, double valid_fraction);
/* Groups trajectories by workload key in the order of first appearance: gid[i] is the group of
 * t[i] (-1 where skip is given and skip[i] is set), first[g] the first trajectory of group g
 * (may be NULL); returns the number of groups. */
int cwm_traj_group_by_key(const cwm_traj *t, int n, const unsigned char *skip, int *gid, int *first);

/* Streaming reader for trajectory files and tuning logs (mixed lines are fine): one line in
 * memory at a time; lines that are not a trajectory or a record are skipped and counted. */
typedef struct cwm_traj_iter cwm_traj_iter;
cwm_traj_iter *cwm_traj_iter_open(const char *path, cwm_err *err); /* NULL + CWM_EIO */
/* Only trajectories of one part of the split (part CWM_SPLIT_TRAIN or CWM_SPLIT_VALID). */
void cwm_traj_iter_set_split(cwm_traj_iter *it, double valid_fraction, int part);
/* 1: *t holds the next trajectory (owned; cwm_traj_free); 0: end; negative: read error. */
int cwm_traj_iter_next(cwm_traj_iter *it, cwm_traj *t, cwm_err *err);
/* Up to max trajectories into batch[]; returns how many (0 at the end), negative on error. */
int cwm_traj_iter_batch(cwm_traj_iter *it, cwm_traj *batch, int max, cwm_err *err);
long cwm_traj_iter_nbad(const cwm_traj_iter *it);
long cwm_traj_iter_line(const cwm_traj_iter *it);
const char *cwm_traj_iter_last_bad(const cwm_traj_iter *it); /* "line L: why" or "" */
size_t cwm_traj_iter_bufsize(const cwm_traj_iter *it);       /* bytes of its line buffer */
void cwm_traj_iter_close(cwm_traj_iter *it);

/* DAGs by workload key, for replaying many trajectories of few workloads. */
typedef struct cwm_dag_cache cwm_dag_cache;
cwm_dag_cache *cwm_dag_cache_new(void);
/* The DAG of t's workload (owned by the cache); CWM_EPARSE when t carries no workload text. */
const cwm_dag *cwm_dag_cache_get(cwm_dag_cache *c, const cwm_traj *t, cwm_err *err);
void cwm_dag_cache_free(cwm_dag_cache *c);

#endif

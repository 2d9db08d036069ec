/* record.h: the tuning log. One measured schedule per line, as JSON in Ansor's v0.6 layout plus a
 * "cwm" object (version, workload name and text, error message), and a description of the
 * machine (cwm_target). Appends survive kills (one write + fdatasync per record); readers skip
 * and count the lines that do not parse (a line cut short by a kill, a corrupt line). */
#ifndef CWM_RECORD_H
#define CWM_RECORD_H

#include <stddef.h>

#include "cwm/state.h"
#include "cwm/util.h"

#define CWM_MAX_COSTS 32
#define CWM_FAILED_COST 1e10 /* the cost of a failed record, as Ansor writes it */

/* ------------------------------------------------------------------ target */

typedef struct {
  char model[128];   /* /proc/cpuinfo "model name", printable ASCII; "unknown" if absent */
  int cores;         /* online CPUs */
  int threads;       /* threads used for timing */
  char isa[16];      /* the instruction set the kernels are built for (a cwm_isa name) */
  int vec_bytes;     /* that instruction set's vector: 64 for avx512, 32 for avx2, else 16 */
  int cache_line;    /* 64 */
  long l1d, l2, l3;  /* data cache sizes in bytes, 0 if unknown */
  char cc[256];
  char cflags[512];
  char cpuid[24];    /* "family.model" of /proc/cpuinfo ("25.17"), "" if absent: cores of one name
                        can differ (AVX-512 executed at full or at half width) */
} cwm_target;

/* An instruction set kernels can be generated, built and timed for. The compiler flags select it
 * (no -march=native), so a kernel tuned for one builds the same way anywhere; `lanes` is the code
 * generator's register-tile width for it and `features` what an exported kernel checks at run time. */
typedef struct {
  const char *name;     /* "avx512", "avx2", "sse4", "neon", "generic" */
  const char *arch;     /* "x86_64" or "aarch64"; "" for any */
  int vec_bytes;        /* widest vector register */
  int lanes;            /* register-tile width in floats: 8 or 16 */
  const char *flags;    /* compiler flags that enable it (gcc and clang spelling) */
  const char *features; /* space-separated, as /proc/cpuinfo names them */
  const char *about;    /* one line for --help */
} cwm_isa;

/* The known instruction sets, widest first; *n set to their number. */
const cwm_isa *cwm_isa_list(int *n);
/* The one named, or NULL. "native" is not a preset: see cwm_isa_host. */
const cwm_isa *cwm_isa_find(const char *name);
/* The widest instruction set this CPU runs (what -march=native builds for, as far as the kernels go). */
const cwm_isa *cwm_isa_host(void);
/* The instruction set compiler flags build for: the host's with -march=native, else the widest whose
 * flags all appear in cflags, else generic. */
const cwm_isa *cwm_isa_of_cflags(const char *cflags);
/* 1 if this machine can run isa's code; else 0 with the first missing feature (or "aarch64" ...,
 * the architecture) in missing. */
int cwm_isa_runs_here(const cwm_isa *isa, char *missing, size_t n);
/* base with its -march=native (if any) replaced by isa's flags, or isa's flags put after base's
 * first word when base has none ("-O3 -fopenmp" -> "-O3 -mavx2 -mfma -fopenmp"); NULL isa: base as
 * it is. 0, or CWM_EUSAGE when buf is too small. */
int cwm_isa_cflags(const cwm_isa *isa, const char *base, char *buf, size_t n);

/* Fills t from this machine. threads <= 0 means all online CPUs; cc/cflags may be NULL ("cc", "").
 * The instruction set follows cflags (cwm_isa_of_cflags). */
void cwm_target_detect(cwm_target *t, int threads, const char *cc, const char *cflags);
/* "c -keys=cpu -mcpu=<model> [-cpuid=<family.model>] -isa=<isa> -threads=<n> -vec=<bytes> -cc=<cc>
 * -cflags=<cflags>", with spaces inside values replaced by '_'; always NUL-terminated (truncated to
 * n-1 bytes). */
void cwm_target_string(const cwm_target *t, char *buf, size_t n);
/* The instruction set a target string names (its -isa=; older strings without one: by -vec=, 64 as
 * avx512, 32 as avx2), or NULL when it names none. */
const cwm_isa *cwm_target_string_isa(const char *target);
/* The value of one field ("threads", "cc" ...) of a target string into buf ("" if absent); 1 if found. */
int cwm_target_string_field(const char *target, const char *field, char *buf, size_t n);

/* ------------------------------------------------------------------ record */

typedef struct {
  char key[17];          /* workload key: 16 lowercase hex digits (cwm_workload_key) */
  char name[64];         /* workload name, informative */
  char *workload;        /* owned canonical workload text, may be NULL (printed as "") */
  char *target;          /* owned target string (cwm_target_string), may be NULL (printed as "") */
  int hw[8];             /* [cores, vec_bytes, cache_line, 0, 0, 0, 0, 0] as Ansor's hardware params */
  cwm_step *steps;       /* owned, nsteps long (at most CWM_MAX_STEPS) */
  int nsteps;
  int error;             /* Ansor's MeasureErrorNO (cwm_merr in measure.h), 0 = ok */
  int ncosts;
  double costs[CWM_MAX_COSTS]; /* seconds per run; a failed record with none prints [1e+10] */
  double all_cost;       /* seconds spent building and running it */
  long timestamp;        /* unix seconds */
  char version[16];      /* cwm version that wrote it (CWM_VERSION) */
  char msg[256];         /* error message, "" if none */
  char host[64];         /* the host that timed it (cwm_hostname), "" if unknown (older logs) */
} cwm_record;

/* Zeroes r and sets version = CWM_VERSION. */
void cwm_record_init(cwm_record *r);
/* Frees the owned members and zeroes r (safe on a zeroed record). */
void cwm_record_free(cwm_record *r);
/* Deep copy; dst need not be initialized (its old contents are not freed). */
void cwm_record_copy(cwm_record *dst, const cwm_record *src);
/* Fills the target fields of r: target string and hw from t. Replaces r->target. */
void cwm_record_set_target(cwm_record *r, const cwm_target *t);
/* Replaces r->steps with a copy of steps[0..n). */
void cwm_record_set_steps(cwm_record *r, const cwm_step *steps, int n);
/* The record's mean cost over its repeats in seconds, as Ansor's (CWM_FAILED_COST if failed or
 * no costs). */
double cwm_record_cost(const cwm_record *r);

/* 1 if r was measured the way `target` (a cwm_target_string) measures: the same threads, vector
 * width, compiler and flags (the strings from "-threads=" on; the CPU's model name may differ, so
 * that a log moves between machines of one kind). A record without a target (older logs) matches. */
int cwm_record_same_target(const cwm_record *r, const char *target);

/* Appends the record as one JSON line (no trailing newline) to out. Returns CWM_OK. The steps
 * are exactly cwm_steps_print's text; costs are printed with %.9g (non-finite ones as 1e+10). */
int cwm_record_to_json(const cwm_record *r, cwm_buf *out);
/* Parses one line into r (r need not be initialized; it is overwritten, not freed). On failure
 * r is left zeroed and err (CWM_EPARSE) says what is wrong. */
int cwm_record_parse(const char *line, cwm_record *r, cwm_err *err);

/* ------------------------------------------------------------------ writer */

typedef struct cwm_log cwm_log;

/* Opens path for appending (created if missing; parent directories are not created).
 * NULL with CWM_EIO naming the path on failure. */
cwm_log *cwm_log_open(const char *path, cwm_err *err);
/* Writes the record as one line with a single write loop, then fdatasync. If the file does not
 * end in '\n' (a writer was killed mid-line) a '\n' is written first, so the cut line stays on
 * its own and this record is intact. CWM_EIO on failure. */
int cwm_log_append(cwm_log *log, const cwm_record *r, cwm_err *err);
void cwm_log_close(cwm_log *log);

/* ------------------------------------------------------------------ reader */

/* Reads every record of a log, in file order. Lines that do not parse are skipped and counted in
 * *nbad (may be NULL); blank lines count as neither. A missing or unreadable file is CWM_EIO.
 * *recs is malloc'ed (free with cwm_records_free) and is NULL when *n == 0. */
int cwm_log_read(const char *path, cwm_record **recs, int *n, int *nbad, cwm_err *err);
void cwm_records_free(cwm_record *recs, int n);

/* Streaming reader for big logs. */
typedef struct cwm_log_iter cwm_log_iter;
cwm_log_iter *cwm_log_iter_open(const char *path, cwm_err *err); /* NULL + CWM_EIO on failure */
/* 1: *r holds the next good record (owned; free with cwm_record_free); 0: end of file;
 * negative: read error (err filled, CWM_EIO). Bad lines are skipped and counted. */
int cwm_log_iter_next(cwm_log_iter *it, cwm_record *r, cwm_err *err);
int cwm_log_iter_nbad(const cwm_log_iter *it);
long cwm_log_iter_line(const cwm_log_iter *it);        /* 1-based line number of the last record */
const char *cwm_log_iter_last_bad(const cwm_log_iter *it); /* "line L: <parse error>" or "" */
void cwm_log_iter_close(cwm_log_iter *it);

#endif

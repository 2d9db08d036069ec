/* util.h: errors as values, growable strings, hashing, small helpers shared by every part.
 * Library code never prints or exits: it returns a status and fills a cwm_err the caller owns. */
#ifndef CWM_UTIL_H
#define CWM_UTIL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdarg.h>

/* The most arguments (tensors) a kernel takes: the code generator and the runner agree on it. */
#define CWM_MAX_ARGS 16

#define CWM_VERSION "0.2.0"

/* Error kinds double as the command line's exit codes (documented in `cwm --help`). */
typedef enum {
  CWM_OK = 0,
  CWM_EUSAGE = 2,     /* bad command line */
  CWM_EPARSE = 3,     /* malformed workload / op spec / step line */
  CWM_ESTEP = 4,      /* a schedule step does not fit the state */
  CWM_EIO = 5,        /* file cannot be read or written */
  CWM_ECOMPILER = 6,  /* C compiler missing or failing for reasons not of the candidate */
  CWM_EMEASURE = 7,   /* runner infrastructure failed */
  CWM_ENOSCHED = 8,   /* no candidate could be scheduled or measured */
  CWM_EMODEL = 9,     /* model file missing, corrupt or of another version */
  CWM_EDEP = 10,      /* runtime dependency (xgboost, openblas) missing */
  CWM_EINTERNAL = 70
} cwm_status;

typedef struct {
  cwm_status code;
  char msg[512];
} cwm_err;

/* Sets err (if not NULL) and returns code, so `return cwm_fail(err, CWM_EPARSE, "...")` reads well. */
int cwm_fail(cwm_err *err, cwm_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Growable NUL-terminated string buffer. */
typedef struct {
  char *s;
  size_t len, cap;
} cwm_buf;

void cwm_buf_init(cwm_buf *b);
void cwm_buf_free(cwm_buf *b);
void cwm_buf_putc(cwm_buf *b, char c);
void cwm_buf_puts(cwm_buf *b, const char *s);
/* n bytes (NUL bytes included: the buffer may hold binary data) */
void cwm_buf_append(cwm_buf *b, const void *data, size_t n);
void cwm_buf_printf(cwm_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cwm_buf_vprintf(cwm_buf *b, const char *fmt, va_list ap);
/* s (NULL: "") as a JSON string: quotes and backslashes escaped, control bytes as \n, \t, \r or
 * \u00XX, a byte that does not start valid UTF-8 replaced by `bad` (JSON text, e.g. "?"), so that
 * the output is always valid JSON. */
void cwm_buf_json_str(cwm_buf *b, const char *s, const char *bad);
void cwm_buf_indent(cwm_buf *b, int depth);
/* Takes ownership of the string; the buffer is left empty. */
char *cwm_buf_take(cwm_buf *b);

/* idx[0..n) = the indices of v ordered by value, ascending or (desc) descending; NaN counts as the
 * lowest value and ties keep index order. */
void cwm_argsort(const double *v, int n, int desc, int *idx);

/* A growing array: p with room for element n (capacity *cap doubled from 64 as needed); returns
 * the array, reallocated or not. */
void *cwm_grow(void *p, size_t n, size_t *cap, size_t elem);

/* ---- Line reader (util/lines.c) ---------------------------------------------------------------- */

/* A text file of records read a line at a time: lines end at '\n' ("\r\n" too), blank lines are
 * skipped, a line is at most max_line bytes (a longer one is reported, not held). */
typedef struct cwm_lines cwm_lines;
cwm_lines *cwm_lines_open(const char *path, const char *what, size_t max_line, cwm_err *err);
size_t cwm_lines_bufsize(const cwm_lines *l); /* bytes of its line buffer (at most max_line + 1) */
/* A line's parser: 0 accepts it (out filled), > 0 rejects it as corrupt (e says why), < 0 skips it. */
typedef int (*cwm_line_parser)(const char *line, void *out, void *ctx, cwm_err *e);
/* The next line parse accepts: 1, 0 at the end, -1 on a read error. Corrupt lines (parse's, too
 * long, a NUL byte) are counted and the last one's reason kept; the reader goes on after them. */
int cwm_lines_parse(cwm_lines *l, cwm_line_parser parse, void *out, void *ctx, cwm_err *err);
long cwm_lines_nbad(const cwm_lines *l);
long cwm_lines_last_good(const cwm_lines *l);     /* line number of the last line accepted */
const char *cwm_lines_last_bad(const cwm_lines *l); /* "line N: why" of the last corrupt line */
void cwm_lines_close(cwm_lines *l);

/* A set of 64-bit hashes (open addressing, linear probing; a zero-initialised one is empty; the
 * hash 0 is stored as 1). Release with free(set.h). */
typedef struct {
  uint64_t *h;
  size_t n, cap;
} cwm_hset;
int cwm_hset_has(const cwm_hset *s, uint64_t h);
void cwm_hset_add(cwm_hset *s, uint64_t h);

/* The 1-based column at which JSON text nests deeper than max arrays/objects (strings skipped),
 * or 0: checked before a recursive parser sees the text. */
long cwm_json_too_deep(const char *text, int max);

/* 64-bit FNV-1a; hex form is 16 lowercase digits plus NUL. */
uint64_t cwm_hash64(const void *data, size_t n);
void cwm_hash_hex(uint64_t h, char out[17]);

/* Deterministic PRNG (splitmix64 seeded xorshift). */
typedef struct { uint64_t s; } cwm_rng;
void cwm_rng_seed(cwm_rng *r, uint64_t seed);
uint64_t cwm_rng_next(cwm_rng *r);
int cwm_rng_int(cwm_rng *r, int n); /* uniform in [0, n) */
double cwm_rng_unit(cwm_rng *r);    /* uniform in [0, 1) */

double cwm_now(void); /* monotonic seconds */

/* The divisors of n (n >= 1) that are at most maxval, ascending, at most maxout of them; returns
 * their number. */
int cwm_divisors(int n, int maxval, int *out, int maxout);

/* Little-endian reads of the binary files cwm writes (model files, vocabularies, rankers). */
static inline uint32_t cwm_get_le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t cwm_get_le64(const unsigned char *p) {
  return (uint64_t)cwm_get_le32(p) | (uint64_t)cwm_get_le32(p + 4) << 32;
}
static inline float cwm_get_lef32(const unsigned char *p) {
  uint32_t v = cwm_get_le32(p);
  float f;
  __builtin_memcpy(&f, &v, 4);
  return f;
}
static inline double cwm_get_lef64(const unsigned char *p) {
  uint64_t v = cwm_get_le64(p);
  double f;
  __builtin_memcpy(&f, &v, 8);
  return f;
}

/* A progress callback as long-running library calls take it; cwm_progressf formats one line
 * and hands it over (nothing happens when fn is NULL). */
typedef void (*cwm_progress_fn)(void *ud, const char *line);
void cwm_progressf(cwm_progress_fn fn, void *ud, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

void *cwm_xmalloc(size_t n);
void *cwm_xcalloc(size_t n, size_t m);
void *cwm_xrealloc(void *p, size_t n);
char *cwm_xstrdup(const char *s);
/* A malloc'ed copy of n bytes (at least one byte allocated). */
void *cwm_memdup(const void *p, size_t n);

/* Opens a file for reading (close on exec); an empty path, a file that cannot be opened and a
 * directory are errors that name `what` (empty) or the path. */
FILE *cwm_open_read(const char *path, const char *what, cwm_err *err);
/* Reads a whole file of at most max bytes (a longer one, /dev/zero say, is an error, found
 * without reading more than max); returns NULL and fills err on failure. */
char *cwm_read_file_max(const char *path, size_t max, size_t *len, cwm_err *err);
/* cwm_read_file_max with 2 GB, the most an ONNX file can hold. */
char *cwm_read_file(const char *path, size_t *len, cwm_err *err);
/* Reads a whole text file of at most 256 MB: a NUL byte in it is an error (CWM_EPARSE), as a
 * parser would silently stop there and drop the rest. */
char *cwm_read_text(const char *path, cwm_err *err);
/* Writes to a temporary file made by mkstemp beside path (path.tmp.XXXXXX), syncs it, renames
 * it over path and syncs the directory, so a crash never leaves a half-written file and a planted
 * symbolic link is never written through. A path that is a character device or a FIFO
 * (/dev/null, /dev/stdout) is written in place instead; a directory is an error. */
int cwm_write_file_atomic(const char *path, const void *data, size_t n, cwm_err *err);
int cwm_mkdir_p(const char *path, cwm_err *err);
/* The directory part of path ("." when it has none, "/" for a file at the root). */
void cwm_parent_dir(const char *path, char *out, size_t n);
/* Whether a file can be created in dir: creating one is the only honest probe (access() judges
 * by the real uid, and root passes it where writes still fail); errno says why not. */
int cwm_dir_writable(const char *dir);
/* This machine's host name, kept to [A-Za-z0-9._-] (others become '_'), at most n-1 bytes;
 * "unknown" when it cannot be read. Records name the host that timed them with it. */
void cwm_hostname(char *out, size_t n);
/* A data file shipped with cwm (the default model, the suite): <prefix>/share/cwm/<installed>
 * beside the running program when it is installed there, else <source tree>/<in_source> while the
 * tree it was built from exists, else the install prefix chosen at build time; written into out,
 * or NULL when none exists. */
const char *cwm_data_file(const char *installed, const char *in_source, char *out, size_t n);
/* A shipped data file a program may choose another for (the default model, the suite): the
 * chosen path (copied) when one is set, else cwm_data_file's find, else NULL. */
typedef struct {
  const char *installed, *in_source;
  char chosen[4096], found[4096];
} cwm_data_default;
#define CWM_DATA_DEFAULT(installed, in_source) {(installed), (in_source), "", ""}
void cwm_data_default_set(cwm_data_default *d, const char *path); /* NULL or "": back to the search */
const char *cwm_data_default_path(cwm_data_default *d);

/* ---- Thread pool (util/pool.c) ---------------------------------------------------------------- */

/* Threads cwm_parallel_for uses; n <= 0: the online CPUs (at most 16). Not while another thread
 * runs a job. The pool, not OpenMP: idle workers sleep instead of spinning (libgomp's spinning
 * made a loaded two-core machine 20x slower) and it survives fork() (a libgomp child hangs in its
 * first parallel region once the parent has used one, and the runner forks). */
void cwm_pool_set_threads(int n);
int cwm_pool_threads(void);
/* Calls fn(ctx, begin, end, part) on contiguous parts of [0, n), part in [0, cwm_pool_threads()),
 * one per thread, and returns when all are done. Runs fn(ctx, 0, n, 0) on the calling thread when
 * work (any measure of the cost, in about float operations) is under ~32k, when there is one
 * thread, when called from inside a part, or while another thread is using the pool. */
typedef void (*cwm_range_fn)(void *ctx, int begin, int end, int part);
void cwm_parallel_for(int n, long work, cwm_range_fn fn, void *ctx);
/* Ends libgomp's thread team in this process, if some library loaded libgomp (XGBoost does), so
 * that a child forked next can run parallel regions; call it before such a fork. Nothing in a
 * process that was itself forked. */
void cwm_omp_release(void);

#endif

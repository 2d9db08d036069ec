/* api.h: the embedding API. A small interface to tune one workload from a program (or from
 * Python through python/cwm, which declares the same functions): open a tuner on a workload,
 * tune it for some trials, read the best time and schedule, export the best kernel as C.
 *
 *   cwm_api_options o;
 *   cwm_api_options_init(&o, sizeof o);
 *   o.log = "tune.jsonl";
 *   cwm_api_tuner *t;
 *   char err[512];
 *   if (cwm_api_open("dense_qkv", &o, &t, err, sizeof err)) { fprintf(stderr, "%s\n", err); ... }
 *   if (cwm_api_tune(t, 64) == 0)
 *     printf("%.2f us %s\n", cwm_api_best_seconds(t) * 1e6, cwm_api_best_steps(t));
 *   cwm_api_export(t, "out", NULL);
 *   cwm_api_close(t);
 *
 * The header stands alone (no other cwm header, no macros a binding has to evaluate) and its
 * interface only grows: functions are added, never changed, and cwm_api_options only gains fields
 * at its end, so a program built against an older api.h keeps working with a newer library.
 *
 * Return codes: 0 on success, else the cwm_status of cwm/util.h (the cwm command's exit codes):
 * 2 bad argument, 3 malformed workload text or spec, 5 file I/O, 6 C compiler missing or failing,
 * 7 measuring infrastructure failed, 8 nothing could be scheduled or measured, 9 model file
 * missing or bad, 10 runtime library missing (XGBoost for the ansor and world models, OpenBLAS
 * for world), 70 internal error. No function aborts or prints on bad input; messages go to the
 * caller's buffer (cwm_api_open) or stay with the handle (cwm_api_errmsg).
 *
 * Threads: a handle is used by one thread at a time, except cwm_api_stop. Tune one handle at a
 * time per process (timings on one host take turns anyway). The library reads no environment
 * variable: everything it uses is an option. */
#ifndef CWM_API_H
#define CWM_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A workload being tuned: its cost model, its search and its best program so far. */
typedef struct cwm_api_tuner cwm_api_tuner;

/* Options of cwm_api_open. Fill with cwm_api_options_init(&o, sizeof o), then set fields. The
 * defaults (in parentheses) are those of `cwm tune`, except that the model is world and the cache
 * directory /tmp/cwm-cache-<uid> (the command's: ~/.cache/cwm, read from the environment).
 * Strings are copied by cwm_api_open. */
typedef struct cwm_api_options {
  size_t size;             /* sizeof the caller's struct, set by cwm_api_options_init: fields
                              beyond it (added by a later version) keep their defaults */
  const char *model;       /* the cost model: "world" (default; the compiler world model),
                              "ansor" (Ansor's features + XGBoost) or "random" */
  const char *model_file;  /* world: the model file; NULL: the shipped default.cwm (found beside
                              the library as installed: <prefix>/share/cwm; else the source tree) */
  const char *pretrained;  /* ansor: a model written by `cwm train ansor`; NULL: from scratch */
  const char *suite;       /* the suite file suite ids are looked up in; NULL: the shipped one */
  const char *log;         /* the tuning log (JSON lines): its records of this workload are
                              resumed (they train the model and are not measured again) and
                              every new record is appended; NULL: no log */
  const char *cache_dir;   /* where kernels are compiled and cached; NULL: /tmp/cwm-cache-<uid> */
  const char *cc;          /* the C compiler for kernels; NULL: gcc */
  int threads;             /* threads per kernel, 1..1024 (1) */
  int per_round;           /* measurements per search round, >= 1 (64) */
  int population;          /* the evolution's population, >= 1 (2048) */
  int generations;         /* evolution generations per round, >= 0 (4) */
  int repeats;             /* timed repeats per candidate, median taken, 1..32 (5) */
  double min_repeat_ms;    /* the least length of one repeat, 0..10000 (50) */
  int confirm;             /* after each cwm_api_tune, the best `confirm` programs are timed again
                              in turn 3 times and the lowest median becomes the best, 0..64 (8;
                              0 = off) */
  double family_quota;     /* the most of a round's picks one schedule family may take, 0..1;
                              < 0: the model's own (world 0.25, others 0) (-1) */
  unsigned long long seed; /* the same seed gives the same search decisions (1) */
  int world_handoff;       /* world: blend in Ansor's model trained on the workload's own records
                              once it has 128 (1; 0 = the world model alone) */
  /* called with one line of progress (a round's figures, a resumed log ...); NULL: none */
  void (*progress)(void *ud, const char *line);
  void *progress_ud;
  const char *target;      /* the instruction set to generate, compile and time kernels for, as
                              `cwm --target`: "native" (default; NULL too: -march=native), "avx512",
                              "avx2", "sse4", "generic"; one this CPU lacks fails with 2. It sets
                              the code generator's vector width for the whole process (each
                              cwm_api_open sets it), and records and exports name it */
} cwm_api_options;

/* The library's version, "MAJOR.MINOR.PATCH" (as `cwm --version`). */
const char *cwm_api_version(void);

/* sizeof(cwm_api_options) of this library: a binding that declares the struct itself checks its
 * declaration against it. */
size_t cwm_api_options_size(void);

/* Writes the defaults into the fields of o that fit in size bytes (pass sizeof *o) and sets
 * o->size. */
void cwm_api_options_init(cwm_api_options *o, size_t size);

/* Opens a tuner on a workload: a suite id ("dense_qkv"), an op spec ("dense M=128 N=768 K=768
 * bias=1 act=none") or "@FILE" with workload text, as `cwm tune --workload` takes them. o NULL:
 * the defaults. Loads the cost model and resumes o->log. On success *out is the handle (close it
 * with cwm_api_close); on failure *out is NULL and err (errlen bytes, may be NULL) holds the
 * message, which names the workload, option or file at fault. */
int cwm_api_open(const char *workload, const cwm_api_options *o, cwm_api_tuner **out, char *err, size_t errlen);

/* Searches and measures up to `trials` (>= 0) programs never measured before, in rounds of
 * o->per_round, then confirms the best (o->confirm). Calls add up: the search, the model and the
 * best carry on from the previous call. Stops early when the search space runs dry or
 * cwm_api_stop is called (both return 0: see cwm_api_counts for what was measured). Fails with
 * 8 when nothing could be scheduled or every measured program failed. */
int cwm_api_tune(cwm_api_tuner *h, int trials);

/* Asks a running cwm_api_tune to return after the measurements in flight; nothing measured is
 * lost. Safe from another thread or a signal handler. The next cwm_api_tune clears it. */
void cwm_api_stop(cwm_api_tuner *h);

/* The best program's time in seconds (the confirmed median when confirmed), or -1 while no
 * program has run (measured now or resumed from the log). */
double cwm_api_best_seconds(const cwm_api_tuner *h);

/* The best program's schedule steps as cwm prints them (one JSON array of Ansor's steps, as in
 * the log's records), or NULL while no program has run. The text belongs to the handle and stays
 * valid until the next call on it. */
const char *cwm_api_best_steps(cwm_api_tuner *h);

/* Counters of the workload's records; any pointer may be NULL. measured: measured by this handle;
 * resumed: taken from the log at open; errors: measured programs that failed (compile, crash,
 * wrong answer, time-out). */
void cwm_api_counts(const cwm_api_tuner *h, int *measured, int *resumed, int *errors);

/* Writes the best program as DIR/NAME.c (the kernel; needs only the C library, libm and OpenMP),
 * DIR/NAME.h (its signature and the layouts of its arguments) and DIR/NAME_example.c (a check
 * against a reference), as `cwm tune --export DIR --name NAME`. DIR is created if needed. NAME:
 * a C identifier of at most 60 characters that is not a keyword, a libc or libm name, reserved
 * or cwm_*; NULL: the workload's name with other characters as '_'. Fails with 8 while no
 * program has run. */
int cwm_api_export(cwm_api_tuner *h, const char *dir, const char *name);

/* The workload's name (the suite id, the op, or the file's base name). */
const char *cwm_api_workload_name(const cwm_api_tuner *h);

/* Floating-point operations of one run of the workload (GFLOP/s = flops / seconds * 1e-9). */
double cwm_api_flops(const cwm_api_tuner *h);

/* The world model file in use, or NULL for the other models. */
const char *cwm_api_model_file(const cwm_api_tuner *h);

/* The message of the last call on h that failed ("" if none). Valid until the next call on h. */
const char *cwm_api_errmsg(const cwm_api_tuner *h);

/* Frees the handle and closes its log (NULL: nothing). */
void cwm_api_close(cwm_api_tuner *h);

#ifdef __cplusplus
}
#endif
#endif

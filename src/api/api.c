/* api.c: the embedding API (cwm/api.h) over the task, the cost models and the tuner: what
 * `cwm tune` does, behind an opaque handle, with options as a struct instead of a command line
 * and the environment. The tuner lives as long as the handle, so that successive cwm_api_tune
 * calls continue one search (the model keeps what it learnt) instead of starting new ones. */
#define _GNU_SOURCE /* dladdr */
#include "cwm/api.h"

#include "cwm/codegen.h"
#include "cwm/costmodel.h"
#include "cwm/ranker.h"
#include "cwm/record.h"
#include "cwm/search.h"
#include "cwm/te.h"
#include "cwm/world.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* From the directory the library is installed in to <datadir>/cwm (CMake sets it from
 * GNUInstallDirs; "../share/cwm" for the usual lib/ and share/). */
#ifndef CWM_API_LIB_TO_DATA
#define CWM_API_LIB_TO_DATA "../share/cwm"
#endif

struct cwm_api_tuner {
  cwm_workload *w;
  cwm_task *task;
  cwm_costmodel *model;
  cwm_tuner *tuner;
  cwm_tune_opts to;
  int confirm;
  volatile int stop;
  /* copies of the option strings the task and the tuner keep pointers to */
  char *log, *cache_dir, *cc;
  char cflags[1024]; /* the target's compiler flags */
  char model_file[4096];
  char *best_steps; /* the text cwm_api_best_steps last returned */
  char errmsg[512];
};

const char *cwm_api_version(void) { return CWM_VERSION; }

size_t cwm_api_options_size(void) { return sizeof(cwm_api_options); }

static void defaults(cwm_api_options *o) {
  *o = (cwm_api_options){.size = sizeof *o, .model = "world", .threads = 1, .per_round = 64, .population = 2048,
                         .generations = 4, .repeats = 5, .min_repeat_ms = 50, .confirm = 8, .family_quota = -1,
                         .seed = 1, .world_handoff = 1};
}

void cwm_api_options_init(cwm_api_options *o, size_t size) {
  if (!o || size < sizeof o->size) return;
  cwm_api_options d;
  defaults(&d);
  /* fields are only ever added at the end, so a smaller struct is a prefix of this one */
  memcpy(o, &d, size < sizeof d ? size : sizeof d);
  o->size = size;
}

/* A data file shipped with cwm beside this library as installed (<libdir>/../share/cwm/<file>):
 * cwm_data_file looks beside the running program, and a program that loads libcwm.so (Python)
 * lives elsewhere. Found through the address of a function of the library, so that it also
 * works for a program linked with libcwm.a and installed beside it. */
static const char *beside_library(const char *file, char *out, size_t n) {
  Dl_info info;
  if (!dladdr((void *)cwm_api_version, &info) || !info.dli_fname || !strchr(info.dli_fname, '/')) return NULL;
  char dir[4096];
  cwm_parent_dir(info.dli_fname, dir, sizeof dir);
  int len = snprintf(out, n, "%s/%s/%s", dir, CWM_API_LIB_TO_DATA, file);
  return len > 0 && (size_t)len < n && access(out, R_OK) == 0 ? out : NULL;
}

static int fail_msg(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_msg(char *err, size_t errlen, int code, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* The option checks of `cwm tune` (cli_tune_protocol and cmd_tune), with the same ranges. */
static int check_options(const cwm_api_options *o, char *err, size_t errlen) {
  const char *m = o->model ? o->model : "world";
  if (strcmp(m, "world") && strcmp(m, "ansor") && strcmp(m, "random"))
    return fail_msg(err, errlen, CWM_EUSAGE, "unknown model '%.64s' (world, ansor, random)", m);
  if (o->threads < 1 || o->threads > 1024)
    return fail_msg(err, errlen, CWM_EUSAGE, "threads must be 1..1024, not %d", o->threads);
  if (o->per_round < 1 || o->population < 1 || o->generations < 0)
    return fail_msg(err, errlen, CWM_EUSAGE, "per_round and population must be positive, generations not negative");
  if (o->repeats < 1 || o->repeats > 32)
    return fail_msg(err, errlen, CWM_EUSAGE, "repeats must be 1..32, not %d", o->repeats);
  if (!(o->min_repeat_ms >= 0 && o->min_repeat_ms <= 10000))
    return fail_msg(err, errlen, CWM_EUSAGE, "min_repeat_ms must be 0..10000, not %g", o->min_repeat_ms);
  if (o->confirm < 0 || o->confirm > 64)
    return fail_msg(err, errlen, CWM_EUSAGE, "confirm must be 0..64, not %d", o->confirm);
  if (!(o->family_quota <= 1)) /* NaN too */
    return fail_msg(err, errlen, CWM_EUSAGE, "family_quota must be a fraction 0..1 (< 0: the model's), not %g",
                    o->family_quota);
  const char *const paths[] = {o->model_file, o->pretrained, o->suite, o->log, o->cache_dir, o->cc};
  const char *const names[] = {"model_file", "pretrained", "suite", "log", "cache_dir", "cc"};
  for (int i = 0; i < 6; i++)
    if (paths[i] && !paths[i][0]) return fail_msg(err, errlen, CWM_EUSAGE, "%s is empty (NULL for the default)", names[i]);
  if (o->target && strcmp(o->target, "native")) {
    const cwm_isa *isa = cwm_isa_find(o->target);
    char missing[32];
    if (!isa) return fail_msg(err, errlen, CWM_EUSAGE, "unknown target '%.64s' (native, avx512, avx2, sse4, generic)", o->target);
    if (!cwm_isa_runs_here(isa, missing, sizeof missing))
      return fail_msg(err, errlen, CWM_EUSAGE, "target %s needs %s, which this CPU lacks: its kernels cannot be timed here",
                      isa->name, missing);
  }
  return 0;
}

/* The options to use: the caller's fields over the defaults of those it does not know. */
static int read_options(const cwm_api_options *in, cwm_api_options *o, char *err, size_t errlen) {
  defaults(o);
  if (!in) return 0;
  if (in->size > sizeof *o)
    return fail_msg(err, errlen, CWM_EUSAGE,
                    "the options are from a newer cwm (%zu bytes; this library, %s, knows %zu): build against "
                    "this library's api.h", in->size, CWM_VERSION, sizeof *o);
  if (in->size < offsetof(cwm_api_options, model) + sizeof in->model)
    return fail_msg(err, errlen, CWM_EUSAGE, "options.size is %zu: fill the options with cwm_api_options_init",
                    in->size);
  memcpy(o, in, in->size);
  o->size = sizeof *o;
  return check_options(o, err, errlen);
}

static cwm_costmodel *open_model(cwm_api_tuner *h, const cwm_api_options *o, cwm_err *e) {
  const char *name = o->model ? o->model : "world";
  if (!strcmp(name, "random")) return cwm_costmodel_random(o->seed);
  if (!strcmp(name, "ansor")) return cwm_costmodel_ansor(o->seed, o->pretrained, e);
  char found[4096];
  const char *path = o->model_file;
  if (!path) path = beside_library("default.cwm", found, sizeof found);
  if (!path) path = cwm_world_default_path();
  if (!path) {
    cwm_fail(e, CWM_EMODEL, "model world: no model file (set model_file, or install cwm with its share/cwm/default.cwm)");
    return NULL;
  }
  snprintf(h->model_file, sizeof h->model_file, "%s", path);
  cwm_world *w = cwm_world_load(path, e);
  if (!w) return NULL;
  cwm_world_cm_opts wo;
  cwm_world_cm_opts_default(&wo);
  wo.handoff = o->world_handoff != 0;
  wo.threads = o->threads;
  return cwm_costmodel_world(w, &wo, e);
}

/* A failed call's code: never 0, so that a failure is never taken for a handle. */
static int failed(const cwm_err *e) { return e->code ? (int)e->code : CWM_EINTERNAL; }

static char *dup_or_null(const char *s) { return s ? cwm_xstrdup(s) : NULL; }

/* The workload, the task and the model of a handle whose options are checked. */
static int open_parts(cwm_api_tuner *h, const char *workload, const cwm_api_options *o, cwm_err *e) {
  char suite[4096];
  const char *sp = o->suite ? o->suite : beside_library("suite.tsv", suite, sizeof suite);
  h->w = cwm_workload_from_spec(workload, sp, e);
  if (!h->w) {
    /* an op spec's error names the key, not the spec: the spec's first 100 bytes name it */
    cwm_err we = *e;
    return cwm_fail(e, we.code ? we.code : CWM_EPARSE, "workload '%.100s': %s", workload, we.msg);
  }
  cwm_measure_opts mo;
  cwm_measure_opts_default(&mo);
  mo.threads = o->threads;
  mo.repeats = o->repeats;
  mo.min_repeat_ms = o->min_repeat_ms;
  h->cache_dir = dup_or_null(o->cache_dir);
  h->cc = dup_or_null(o->cc);
  if (h->cache_dir) mo.cache_dir = h->cache_dir;
  if (h->cc) mo.cc = h->cc;
  if (o->target && strcmp(o->target, "native")) {
    const cwm_isa *isa = cwm_isa_find(o->target); /* checked by check_options */
    if (cwm_isa_cflags(isa, mo.cflags, h->cflags, sizeof h->cflags))
      return cwm_fail(e, CWM_EUSAGE, "target %s: the compiler flags are too long", isa->name);
    mo.cflags = h->cflags;
    cwm_codegen_set_lanes(isa->lanes);
    cwm_hwinfo_set_vector_floats(isa->vec_bytes / 4);
  } else { /* the host's: a target an earlier handle set does not carry over */
    cwm_codegen_set_lanes(0);
    cwm_hwinfo_set_vector_floats(0);
  }
  if (!(h->task = cwm_task_new(h->w, &mo, e))) return failed(e);
  if (!(h->model = open_model(h, o, e))) return failed(e);
  cwm_tune_opts_default(&h->to);
  h->to.per_round = o->per_round;
  h->to.population = o->population;
  h->to.generations = o->generations;
  h->to.family_quota = o->family_quota < 0 ? -1 : o->family_quota;
  h->to.seed = o->seed;
  h->to.space.cores = o->threads;
  h->to.log_path = h->log = dup_or_null(o->log);
  h->to.stop = &h->stop;
  h->to.progress = o->progress;
  h->to.progress_ud = o->progress_ud;
  h->confirm = o->confirm;
  if (!(h->tuner = cwm_tuner_new(h->task, h->model, &h->to, e))) return failed(e);
  return 0;
}

int cwm_api_open(const char *workload, const cwm_api_options *opts, cwm_api_tuner **out, char *err, size_t errlen) {
  if (err && errlen) err[0] = 0;
  if (!out) return fail_msg(err, errlen, CWM_EUSAGE, "cwm_api_open: out is NULL");
  *out = NULL;
  if (!workload || !workload[0]) return fail_msg(err, errlen, CWM_EUSAGE, "no workload given");
  cwm_api_options o;
  int rc = read_options(opts, &o, err, errlen);
  if (rc) return rc;
  cwm_api_tuner *h = cwm_xcalloc(1, sizeof *h);
  cwm_err e = {0};
  if ((rc = open_parts(h, workload, &o, &e))) {
    fail_msg(err, errlen, rc, "%s", e.msg);
    cwm_api_close(h);
    return rc;
  }
  cwm_tune_result st;
  cwm_tuner_result(h->tuner, &st);
  if (st.resumed)
    cwm_progressf(h->to.progress, h->to.progress_ud, "resumed %d records of %s from %s (%d corrupt lines skipped)",
                  st.resumed, h->w->name, h->log, st.corrupt_lines);
  if (st.other_cpu)
    cwm_progressf(h->to.progress, h->to.progress_ud,
                  "%d of them were measured on another CPU model (cpuid %s): their latencies are that CPU's",
                  st.other_cpu, st.other_cpuid);
  if (st.other_target)
    cwm_progressf(h->to.progress, h->to.progress_ud,
                  "%d records of this workload in %s were measured with other threads, vector width, compiler or "
                  "flags: not resumed", st.other_target, h->log);
  cwm_tune_result_free(&st);
  *out = h;
  return 0;
}

static int fail(cwm_api_tuner *h, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(cwm_api_tuner *h, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->errmsg, sizeof h->errmsg, fmt, ap);
  va_end(ap);
  return code;
}

/* The rounds of cwm_tune, counted from this call rather than from the log's start. */
static int tune_rounds(cwm_api_tuner *h, int trials, cwm_err *e) {
  double t0 = cwm_now(), flops = cwm_task_flops(h->task);
  int done = 0, stalls = 0, round = 0;
  while (done < trials && !h->stop) {
    int want = h->to.per_round < trials - done ? h->to.per_round : trials - done, nm = 0;
    int rc = cwm_tuner_round(h->tuner, want, &nm, e);
    if (rc) return rc;
    if (nm == 0) {
      if (h->stop) break;
      if (++stalls >= 3) {
        cwm_progressf(h->to.progress, h->to.progress_ud, "the search space is exhausted: no new candidates");
        break;
      }
      continue;
    }
    done += nm;
    double best = cwm_tuner_best(h->tuner), el = cwm_now() - t0;
    cwm_tune_result st;
    cwm_tuner_result(h->tuner, &st);
    cwm_progressf(h->to.progress, h->to.progress_ud,
                  "round %d: %d/%d trials, best %.2f us (%.2f GFLOP/s), %d errors, %.0f s elapsed, ETA %.0f s", ++round,
                  done, trials, best < 1e9 ? best * 1e6 : 0.0, best < 1e9 ? flops / best * 1e-9 : 0.0, st.errors, el,
                  el / done * (trials - done));
    cwm_tune_result_free(&st);
  }
  return 0;
}

int cwm_api_tune(cwm_api_tuner *h, int trials) {
  if (!h) return CWM_EUSAGE;
  h->errmsg[0] = 0;
  if (trials < 0) return fail(h, CWM_EUSAGE, "trials must be >= 0, not %d", trials);
  h->stop = 0;
  cwm_err e = {0};
  int rc = tune_rounds(h, trials, &e);
  if (!rc && h->confirm > 1 && !h->stop) rc = cwm_tuner_confirm(h->tuner, h->confirm, 3, &e);
  if (rc) return fail(h, rc, "%s", e.msg);
  cwm_tune_result st;
  cwm_tuner_result(h->tuner, &st);
  int n = st.measured + st.resumed, errors = st.errors;
  cwm_tune_result_free(&st);
  if (trials > 0 && n == 0 && !h->stop)
    return fail(h, CWM_ENOSCHED, "%s: the search cannot schedule this workload: no candidate could be generated",
                h->w->name);
  if (trials > 0 && n > 0 && cwm_tuner_best(h->tuner) >= 1e9)
    return fail(h, CWM_ENOSCHED, "%s: every measured candidate failed (%d errors)%s", h->w->name, errors,
                h->log ? "; the log has their kinds" : "");
  return 0;
}

void cwm_api_stop(cwm_api_tuner *h) {
  if (h) h->stop = 1;
}

double cwm_api_best_seconds(const cwm_api_tuner *h) {
  double b = h ? cwm_tuner_best(h->tuner) : 1e10;
  return b < 1e9 ? b : -1;
}

const char *cwm_api_best_steps(cwm_api_tuner *h) {
  if (!h) return NULL;
  const cwm_step *steps;
  int n = cwm_tuner_best_steps(h->tuner, &steps);
  if (n <= 0 || cwm_tuner_best(h->tuner) >= 1e9) return NULL;
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_steps_print(steps, n, &b);
  free(h->best_steps);
  h->best_steps = cwm_buf_take(&b);
  return h->best_steps;
}

void cwm_api_counts(const cwm_api_tuner *h, int *measured, int *resumed, int *errors) {
  cwm_tune_result st = {0};
  if (h) cwm_tuner_result(h->tuner, &st);
  if (measured) *measured = st.measured;
  if (resumed) *resumed = st.resumed;
  if (errors) *errors = st.errors;
  cwm_tune_result_free(&st);
}

/* The export name `cwm tune --export` gives a workload without --name. */
static void default_name(const char *wname, char *out, size_t n) {
  snprintf(out, n, "%s", wname);
  for (char *p = out; *p; p++)
    if (!(*p == '_' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) *p = '_';
}

int cwm_api_export(cwm_api_tuner *h, const char *dir, const char *name) {
  if (!h) return CWM_EUSAGE;
  h->errmsg[0] = 0;
  if (!dir || !dir[0]) return fail(h, CWM_EUSAGE, "export needs a directory");
  char def[80];
  if (!name) {
    default_name(h->w->name, def, sizeof def);
    name = def;
  }
  if (!cwm_export_name_ok(name))
    return fail(h, CWM_EUSAGE,
                "export name '%.80s' is not a C identifier free to use (a keyword, a libc name, reserved, cwm_*, "
                "or over 60 characters)", name);
  const cwm_step *steps;
  int n = cwm_tuner_best_steps(h->tuner, &steps);
  if (n <= 0 || cwm_tuner_best(h->tuner) >= 1e9)
    return fail(h, CWM_ENOSCHED, "%s: nothing to export: no program has run yet (tune first)", h->w->name);
  cwm_err e = {0};
  cwm_state *best = NULL;
  int rc = cwm_state_replay(cwm_task_dag(h->task), steps, n, &best, NULL, &e);
  /* for the target it was timed on, as `cwm tune --export`: NAME.h records it and its flags */
  if (!rc) rc = cwm_export_for(best, dir, name, cwm_task_target(h->task), &e);
  cwm_state_free(best);
  return rc ? fail(h, rc, "export %s/%s: %s", dir, name, e.msg) : 0;
}

const char *cwm_api_workload_name(const cwm_api_tuner *h) { return h ? h->w->name : NULL; }

double cwm_api_flops(const cwm_api_tuner *h) { return h ? cwm_task_flops(h->task) : 0; }

const char *cwm_api_model_file(const cwm_api_tuner *h) { return h && h->model_file[0] ? h->model_file : NULL; }

const char *cwm_api_errmsg(const cwm_api_tuner *h) { return h ? h->errmsg : "no tuner (NULL handle)"; }

void cwm_api_close(cwm_api_tuner *h) {
  if (!h) return;
  cwm_tuner_free(h->tuner); /* before the model and the task it borrows */
  cwm_costmodel_free(h->model);
  cwm_task_free(h->task);
  cwm_workload_free(h->w);
  free(h->log);
  free(h->cache_dir);
  free(h->cc);
  free(h->best_steps);
  free(h);
}

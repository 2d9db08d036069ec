/* cmd_log.c: `cwm log`: list, pick the best of, filter, merge and convert tuning logs; and the log
 * helpers `cwm export` shares: reading several logs with each record's file and line, the valid
 * records of a workload ranked on one target, workload selectors. Outputs go to stdout or, with
 * -o, to a file written atomically (cwm_write_file_atomic); corrupt lines are skipped and counted,
 * as every log reader does.
 *
 * The plain Ansor layout is what TVM's auto_scheduler reads (src/auto_scheduler/measure_record.cc,
 * ReadMeasureRecord): an object of the keys "i", "r", "v" and no other (another key is fatal
 * there), i = [[workload_key, target, hardware_params, target_host, layout_rewrite, [inputs]],
 * [[], steps]], r = [costs, error_no, all_cost, timestamp]. A cwm record is that plus "cwm"; what
 * differs is the workload key and the target. TVM's key for a function registered with
 * auto_scheduler.register_workload is json.dumps([name, args...]); an op-library workload gets the
 * key of a function cwm_<op>(params in the op's key order), the "ops both know". Its target string
 * must parse as a TVM Target, which refuses attributes the kind does not declare, so cwm's
 * -isa/-threads/-vec/-cc/-cflags are dropped for "c -keys=cpu -mcpu=<model>" (cores and the vector
 * width stay in the hardware parameters). */
#define _GNU_SOURCE
#include "cli.h"
#include "cwm/dataset.h"
#include "env.h"

#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers shared with cmd_export.c -------------------------------------------------------- */

int cli_logset_read(cli_logset *s, char *const *paths, int npaths, const char *cmd, int quiet) {
  memset(s, 0, sizeof *s);
  s->paths = paths;
  s->npaths = npaths;
  size_t cap = 0;
  for (int f = 0; f < npaths; f++) {
    cwm_err e = {0};
    cwm_log_iter *it = cwm_log_iter_open(paths[f], &e);
    if (!it) {
      cli_logset_free(s);
      return cli_fail(&e);
    }
    cwm_record r;
    int got;
    while ((got = cwm_log_iter_next(it, &r, &e)) == 1) {
      s->v = cwm_grow(s->v, (size_t)s->n, &cap, sizeof *s->v);
      s->v[s->n].r = r;
      s->v[s->n].file = f;
      s->v[s->n].line = cwm_log_iter_line(it);
      s->n++;
    }
    int bad = cwm_log_iter_nbad(it);
    if (bad && !quiet)
      fprintf(stderr, "cwm %s: %s: skipped %d line%s that %s not a record (the last: %s)\n", cmd, paths[f], bad,
              bad == 1 ? "" : "s", bad == 1 ? "is" : "are", cwm_log_iter_last_bad(it));
    s->nbad += bad;
    cwm_log_iter_close(it);
    if (got < 0) {
      cli_logset_free(s);
      return cli_fail(&e);
    }
  }
  return 0;
}

void cli_logset_free(cli_logset *s) {
  for (int i = 0; i < s->n; i++) cwm_record_free(&s->v[i].r);
  free(s->v);
  memset(s, 0, sizeof *s);
}

void cli_this_target(int threads, char *buf, size_t n) {
  /* what cwm_task_new gives its records: the same options `cwm tune` measures with */
  cwm_measure_opts mo;
  cwm_measure_opts_default(&mo);
  cli_env_measure(&mo);
  cwm_target t;
  cwm_target_detect(&t, threads, mo.cc, mo.cflags);
  cwm_target_string(&t, buf, n);
}

static int valid(const cwm_record *r) { return !r->error && cwm_record_cost(r) < CWM_FAILED_COST; }

int cli_log_ranked(const cli_logset *s, const char *key, const char *mine, int only_this, int **idx) {
  int *v = cwm_xmalloc(sizeof *v * (size_t)(s->n ? s->n : 1));
  int n = 0, nmine = 0;
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->v[i].r.key, key) && valid(&s->v[i].r)) nmine += mine && cwm_record_same_target(&s->v[i].r, mine);
  /* latencies of two machines (or thread counts) do not compare: one target's records only */
  int want_mine = only_this || nmine > 0;
  for (int i = 0; i < s->n; i++) {
    const cwm_record *r = &s->v[i].r;
    if (!strcmp(r->key, key) && valid(r) && (!want_mine || cwm_record_same_target(r, mine))) v[n++] = i;
  }
  double *c = cwm_xmalloc(sizeof *c * (size_t)(n ? n : 1));
  int *ord = cwm_xmalloc(sizeof *ord * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) c[i] = cwm_record_cost(&s->v[v[i]].r);
  cwm_argsort(c, n, 0, ord); /* ties keep file order: the tuner keeps the first of equal bests too */
  for (int i = 0; i < n; i++) ord[i] = v[ord[i]];
  free(v);
  free(c);
  *idx = ord;
  return n;
}

static int is_key(const char *s) {
  for (int i = 0; i < 16; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return s[16] == 0;
}

int cli_log_workload(const cli_logset *s, const char *spec, const char *suite, char key[17], cwm_workload **w) {
  if (w) *w = NULL;
  if (is_key(spec)) {
    memcpy(key, spec, 17);
    return 0;
  }
  cwm_err e = {0};
  cwm_workload *x = cwm_workload_from_spec(spec, suite, &e);
  if (x) {
    cwm_workload_key(x, key);
    if (w) *w = x;
    else cwm_workload_free(x);
    return 0;
  }
  /* not a spec: the name the log's records give it (a network's subgraph, an @file's base name) */
  int found = -1;
  for (int i = 0; s && i < s->n; i++) {
    if (strcmp(s->v[i].r.name, spec)) continue;
    if (found >= 0 && strcmp(s->v[found].r.key, s->v[i].r.key)) {
      fprintf(stderr, "cwm: --workload %s: the log names several workloads so (keys %s and %s); give the key\n", spec,
              s->v[found].r.key, s->v[i].r.key);
      return CWM_EUSAGE;
    }
    found = i;
  }
  if (found < 0 && !strchr(spec, ' ') && spec[0] != '@') { /* a word: a name the log was asked for */
    fprintf(stderr, "cwm: --workload %s: no workload of the log has that name or key, nor is it a suite id (%s)\n",
            spec, e.msg);
    return CWM_EUSAGE;
  }
  if (found < 0) return cli_fail(&e);
  memcpy(key, s->v[found].r.key, 17);
  return 0;
}

/* ---- the Ansor form of an op-library workload ------------------------------------------------ */

/* json.dumps(["cwm_<op>", values...]) of a spec "op k=v ...": numbers bare, words quoted. */
static void spec_to_key(const char *spec, char *out, size_t n) {
  cwm_buf b;
  cwm_buf_init(&b);
  size_t wn = strcspn(spec, " ");
  cwm_buf_printf(&b, "[\"cwm_%.*s\"", (int)wn, spec);
  for (const char *p = spec + wn; (p = strchr(p, '=')) != NULL;) {
    size_t vn = strcspn(++p, " ");
    int num = vn && strspn(p, "0123456789") == vn;
    cwm_buf_printf(&b, num ? ", %.*s" : ", \"%.*s\"", (int)vn, p);
  }
  cwm_buf_putc(&b, ']');
  snprintf(out, n, "%s", b.s);
  cwm_buf_free(&b);
}

/* The Ansor workload key of an op-library workload into out; 0 when w is not one. */
static int ansor_key(const cwm_workload *w, char *out, size_t n) {
  char spec[256];
  cwm_err e = {0};
  if (cwm_workload_spec(w, spec, sizeof spec, &e)) return 0;
  spec_to_key(spec, out, n);
  return 1;
}

/* The Ansor key of a record's workload text (cached per key: a log repeats a few workloads). */
typedef struct {
  char key[17];
  char akey[256]; /* "" when none */
} akey_cache;

static const char *record_akey(const cwm_record *r, akey_cache **c, int *nc) {
  for (int i = 0; i < *nc; i++)
    if (!strcmp((*c)[i].key, r->key)) return (*c)[i].akey;
  *c = cwm_xrealloc(*c, sizeof **c * (size_t)(*nc + 1));
  akey_cache *e = &(*c)[(*nc)++];
  memcpy(e->key, r->key, 17);
  e->akey[0] = 0;
  cwm_err err = {0};
  cwm_workload *w = r->workload && r->workload[0] ? cwm_workload_parse(r->workload, &err) : NULL;
  char k[17] = "";
  if (w) cwm_workload_key(w, k);
  if (w && !strcmp(k, r->key)) ansor_key(w, e->akey, sizeof e->akey);
  cwm_workload_free(w);
  return e->akey;
}

/* TVM's target for a cwm target string; a string that is not cwm's (from TVM) is kept. */
static void ansor_target(const char *t, char *out, size_t n) {
  char model[256];
  if (!t || !strstr(t, " -threads=")) {
    snprintf(out, n, "%s", t ? t : "c -keys=cpu");
    return;
  }
  if (!cwm_target_string_field(t, "mcpu", model, sizeof model) || !model[0]) {
    snprintf(out, n, "c -keys=cpu");
    return;
  }
  for (char *p = model; *p; p++) /* TVM splits attributes on blanks and reads quotes and '=' */
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-", *p)) *p = '_';
  snprintf(out, n, "c -keys=cpu -mcpu=%s", model);
}

/* One plain Ansor line: the record's JSON with the key and target replaced and "cwm" removed. */
static void ansor_line(const cwm_record *r, const char *akey, cwm_buf *out) {
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_record_to_json(r, &b);
  cJSON *j = cJSON_Parse(b.s);
  cwm_buf_free(&b);
  cJSON *task = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "i"), 0);
  char target[1024];
  ansor_target(r->target, target, sizeof target);
  cJSON_ReplaceItemInArray(task, 0, cJSON_CreateString(akey));
  cJSON_ReplaceItemInArray(task, 1, cJSON_CreateString(target));
  cJSON_DeleteItemFromObjectCaseSensitive(j, "cwm");
  char *s = cJSON_PrintUnformatted(j);
  cwm_buf_puts(out, s);
  cwm_buf_putc(out, '\n');
  cJSON_free(s);
  cJSON_Delete(j);
}

/* ---- the subcommands --------------------------------------------------------------------------- */

static const char *LOG_HELP =
    "usage: cwm log list LOG...                  one line per workload: key, name, records, valid ones,\n"
    "                                            the best latency (us) and the target it was timed on\n"
    "       cwm log best LOG... [-o OUT]         the best valid record of each workload and target\n"
    "       cwm log filter LOG... [--workload W] [--target-substr S] [--valid] [-o OUT]\n"
    "       cwm log merge LOG... -o OUT          every record once (identical records dropped)\n"
    "       cwm log to-ansor LOG [-o OUT]        plain Ansor v0.6 lines, as TVM's auto_scheduler reads them\n"
    "       cwm log from-ansor LOG --workload W [-o OUT]   plain Ansor lines as cwm records of W\n"
    "Records are written as cwm writes them, one JSON line each, to stdout or atomically to OUT\n"
    "(which may be one of the inputs). Lines that are not records are skipped and counted, as the\n"
    "tuner does. `cwm log SUBCOMMAND --help` says more; `cwm export --log LOG` writes the kernels.\n";

static const char *out_path(const cli_opt *o, int no) {
  const char *p = cli_get(o, no, "-o");
  return p ? p : cli_get(o, no, "--out");
}

/* The lines to OUT (atomically; a device or FIFO such as /dev/null in place) or to stdout. */
static int emit(const char *path, const cwm_buf *b) {
  if (!path) {
    if (b->len) fwrite(b->s, 1, b->len, stdout);
    return fflush(stdout) ? CWM_EIO : 0;
  }
  cwm_err e = {0};
  return cwm_write_file_atomic(path, b->s ? b->s : "", b->len, &e) ? cli_fail(&e) : 0;
}

/* Groups of records by workload key (and target): grp[i] the group of record i, first[g] the first
 * record of group g (groups in order of first appearance); the number of groups. */
static int group_records(const cli_logset *s, int by_target, int *grp, int *first) {
  size_t cap = 16;
  while (cap < (size_t)s->n * 2) cap *= 2;
  int *tab = cwm_xmalloc(sizeof *tab * cap), ng = 0;
  for (size_t i = 0; i < cap; i++) tab[i] = -1;
  for (int i = 0; i < s->n; i++) {
    const cwm_record *r = &s->v[i].r;
    const char *t = by_target && r->target ? r->target : "";
    uint64_t h = cwm_hash64(r->key, 16) ^ (cwm_hash64(t, strlen(t)) * 0x9e3779b97f4a7c15ULL);
    size_t at = (size_t)h & (cap - 1);
    for (;; at = (at + 1) & (cap - 1)) {
      if (tab[at] < 0) {
        tab[at] = ng;
        first[ng++] = i;
        break;
      }
      const cwm_record *q = &s->v[first[tab[at]]].r;
      if (!strcmp(q->key, r->key) && !strcmp(by_target && q->target ? q->target : "", t)) break;
    }
    grp[i] = tab[at];
  }
  free(tab);
  return ng;
}

/* Parses a subcommand's options and reads its logs (the operands, min.. of them, at most max; 0:
 * any number): 0, -1 after --help, or the exit status. */
static int open_logs(int argc, char **argv, cli_opt *o, int no, const char *help, cli_logset *s, int min, int max) {
  char **pos = cwm_xmalloc(sizeof *pos * (size_t)(argc + 1));
  int np = 0, rc = cli_parse_operands(argc, argv, o, no, help, pos, max ? max : argc, &np);
  if (rc) {
    free(pos);
    return rc < 0 ? -1 : rc;
  }
  if (np < min) {
    free(pos);
    return cli_usage(NULL, help, "a log file is missing");
  }
  rc = cli_logset_read(s, pos, np, cli_command(), cli_get(o, no, "--quiet") != NULL);
  if (rc) free(pos);
  return rc;
}

static void close_logs(cli_logset *s) {
  char *const *paths = s->paths;
  cli_logset_free(s);
  free((void *)paths);
}

static const char *LIST_HELP =
    "usage: cwm log list LOG... [--threads T] [--quiet]\n"
    "One line per workload of the logs: its key, name, records, valid records (error-free), the best\n"
    "valid latency in us and the target string it was timed on. The best is the one `cwm export --log`\n"
    "exports: among the records timed as this machine times with --threads T (1, as `cwm tune`) when\n"
    "there are such records, else among all; '+N' counts the workload's other targets.\n";

static int log_list(int argc, char **argv) {
  cli_opt o[] = {{"--threads", 1, NULL}, {"--quiet", 0, NULL}};
  cli_logset s;
  int rc = open_logs(argc, argv, o, NOPT(o), LIST_HELP, &s, 1, 0);
  if (rc) return rc < 0 ? 0 : rc;
  char mine[1024];
  cli_this_target(cli_get_int(o, NOPT(o), "--threads", 1), mine, sizeof mine);
  int *grp = cwm_xmalloc(sizeof *grp * (size_t)(s.n + 1)), *first = cwm_xmalloc(sizeof *first * (size_t)(s.n + 1));
  int *tg = cwm_xmalloc(sizeof *tg * (size_t)(s.n + 1)), *tfirst = cwm_xmalloc(sizeof *tfirst * (size_t)(s.n + 1));
  int ng = group_records(&s, 0, grp, first), nt = group_records(&s, 1, tg, tfirst), width = 8;
  for (int g = 0; g < ng; g++) {
    int l = (int)strlen(s.v[first[g]].r.name);
    width = l > width ? l : width;
  }
  printf("%-16s  %-*s  %7s  %7s  %12s  %s\n", "key", width, "name", "records", "valid", "best us", "target");
  for (int g = 0; g < ng; g++) {
    const cwm_record *r0 = &s.v[first[g]].r;
    int nrec = 0, nvalid = 0, ntargets = 0, *idx;
    for (int i = 0; i < s.n; i++)
      if (grp[i] == g) nrec++, nvalid += valid(&s.v[i].r);
    for (int t = 0; t < nt; t++) ntargets += grp[tfirst[t]] == g;
    int n = cli_log_ranked(&s, r0->key, mine, 0, &idx);
    const cwm_record *b = n ? &s.v[idx[0]].r : NULL;
    char best[32] = "-", more[32] = "";
    if (b) snprintf(best, sizeof best, "%.2f", cwm_record_cost(b) * 1e6);
    if (ntargets > 1) snprintf(more, sizeof more, " (+%d)", ntargets - 1);
    printf("%-16s  %-*s  %7d  %7d  %12s  %s%s\n", r0->key, width, r0->name, nrec, nvalid, best,
           b && b->target ? b->target : "-", more);
    free(idx);
  }
  free(grp);
  free(first);
  free(tg);
  free(tfirst);
  close_logs(&s);
  return 0;
}

static const char *BEST_HELP =
    "usage: cwm log best LOG... [-o OUT] [--quiet]\n"
    "The best valid record (lowest mean latency, error 0) of each workload and target string, in the\n"
    "order they first appear: a small log that `cwm export --log`, `cwm compile --log` and a resumed\n"
    "`cwm tune` read as they read the whole one (a resumed tuner then measures from a warm start).\n"
    "-o OUT (or --out OUT): the output file, written atomically; stdout without it.\n";

static int log_best(int argc, char **argv) {
  cli_opt o[] = {{"-o", 1, NULL}, {"--out", 1, NULL}, {"--quiet", 0, NULL}};
  cli_logset s;
  int rc = open_logs(argc, argv, o, NOPT(o), BEST_HELP, &s, 1, 0);
  if (rc) return rc < 0 ? 0 : rc;
  int *grp = cwm_xmalloc(sizeof *grp * (size_t)(s.n + 1)), *first = cwm_xmalloc(sizeof *first * (size_t)(s.n + 1));
  int ng = group_records(&s, 1, grp, first);
  int *best = cwm_xmalloc(sizeof *best * (size_t)(ng + 1));
  for (int g = 0; g < ng; g++) best[g] = -1;
  for (int i = 0; i < s.n; i++)
    if (valid(&s.v[i].r) && (best[grp[i]] < 0 || cwm_record_cost(&s.v[i].r) < cwm_record_cost(&s.v[best[grp[i]]].r)))
      best[grp[i]] = i;
  cwm_buf b;
  cwm_buf_init(&b);
  int nout = 0;
  for (int g = 0; g < ng; g++) {
    if (best[g] < 0) continue;
    cwm_record_to_json(&s.v[best[g]].r, &b);
    cwm_buf_putc(&b, '\n');
    nout++;
  }
  rc = emit(out_path(o, NOPT(o)), &b);
  if (!rc && !cli_get(o, NOPT(o), "--quiet"))
    fprintf(stderr, "cwm log: %d best records of %d records (%d workload and target pairs without a valid one)\n", nout,
            s.n, ng - nout);
  cwm_buf_free(&b);
  free(grp);
  free(first);
  free(best);
  close_logs(&s);
  return rc;
}

static const char *FILTER_HELP =
    "usage: cwm log filter LOG... [--workload W] [--target-substr S] [--valid] [--suite FILE] [-o OUT] [--quiet]\n"
    "The records that pass every filter given, in order: --workload W (a suite id, an op spec, @FILE,\n"
    "a workload key, or a name the log gives it), --target-substr S (the target string contains S,\n"
    "e.g. -isa=avx2 or -threads=4), --valid (error-free, with a latency).\n"
    "-o OUT (or --out OUT): the output file, written atomically; stdout without it.\n";

static int log_filter(int argc, char **argv) {
  cli_opt o[] = {{"--workload", 1, NULL}, {"--target-substr", 1, NULL}, {"--valid", 0, NULL}, {"--suite", 1, NULL},
                 {"-o", 1, NULL},         {"--out", 1, NULL},           {"--quiet", 0, NULL}};
  cli_logset s;
  int rc = open_logs(argc, argv, o, NOPT(o), FILTER_HELP, &s, 1, 0);
  if (rc) return rc < 0 ? 0 : rc;
  const char *spec = cli_get(o, NOPT(o), "--workload"), *sub = cli_get(o, NOPT(o), "--target-substr");
  int only_valid = cli_get(o, NOPT(o), "--valid") != NULL, nout = 0;
  char key[17] = "";
  if (spec && (rc = cli_log_workload(&s, spec, cli_get(o, NOPT(o), "--suite"), key, NULL))) {
    close_logs(&s);
    return rc;
  }
  cwm_buf b;
  cwm_buf_init(&b);
  for (int i = 0; i < s.n; i++) {
    const cwm_record *r = &s.v[i].r;
    if ((spec && strcmp(r->key, key)) || (sub && !strstr(r->target ? r->target : "", sub)) || (only_valid && !valid(r)))
      continue;
    cwm_record_to_json(r, &b);
    cwm_buf_putc(&b, '\n');
    nout++;
  }
  rc = emit(out_path(o, NOPT(o)), &b);
  if (!rc && !cli_get(o, NOPT(o), "--quiet")) fprintf(stderr, "cwm log: %d of %d records kept\n", nout, s.n);
  cwm_buf_free(&b);
  close_logs(&s);
  return rc;
}

static const char *MERGE_HELP =
    "usage: cwm log merge LOG... -o OUT [--quiet]\n"
    "Every record of the logs once, in order: a record identical to one before it (the same\n"
    "workload, target, steps, timings and timestamp: a log merged twice, a copy) is dropped; the same\n"
    "program timed twice is two records and stays. OUT (-o or --out) may be one of the logs.\n";

static int log_merge(int argc, char **argv) {
  cli_opt o[] = {{"-o", 1, NULL}, {"--out", 1, NULL}, {"--quiet", 0, NULL}};
  cli_logset s;
  int rc = open_logs(argc, argv, o, NOPT(o), MERGE_HELP, &s, 1, 0);
  if (rc) return rc < 0 ? 0 : rc;
  const char *out = out_path(o, NOPT(o));
  if (!out) {
    close_logs(&s);
    return cli_usage(NULL, MERGE_HELP, "-o OUT is required");
  }
  cwm_hset seen = {0};
  cwm_buf b, line;
  cwm_buf_init(&b);
  cwm_buf_init(&line);
  int nout = 0;
  for (int i = 0; i < s.n; i++) {
    line.len = 0;
    cwm_record_to_json(&s.v[i].r, &line);
    uint64_t h = cwm_hash64(line.s, line.len);
    if (cwm_hset_has(&seen, h)) continue;
    cwm_hset_add(&seen, h);
    cwm_buf_append(&b, line.s, line.len);
    cwm_buf_putc(&b, '\n');
    nout++;
  }
  rc = emit(out, &b);
  if (!rc && !cli_get(o, NOPT(o), "--quiet"))
    fprintf(stderr, "cwm log: %d records from %d log%s into %s (%d identical ones dropped)\n", nout, s.npaths,
            s.npaths == 1 ? "" : "s", out, s.n - nout);
  free(seen.h);
  cwm_buf_free(&b);
  cwm_buf_free(&line);
  close_logs(&s);
  return rc;
}

static const char *TO_ANSOR_HELP =
    "usage: cwm log to-ansor LOG [-o OUT] [--quiet]\n"
    "The records as plain Ansor v0.6 lines, the layout TVM's auto_scheduler reads and writes\n"
    "(auto_scheduler.load_records): {\"i\":[[KEY,TARGET,[8 hardware ints],\"\",0,[]],[[],STEPS]],\n"
    "\"r\":[COSTS,ERROR,ALL_COST,TIMESTAMP],\"v\":\"v0.6\"}, without cwm's own \"cwm\" key (TVM refuses\n"
    "any other key). Only records of op-library workloads (the ops of bench/suite.tsv) are written:\n"
    "KEY is the key TVM gives a function registered with @auto_scheduler.register_workload named\n"
    "cwm_<op> with the op's parameters in order, e.g. [\"cwm_dense\", 128, 768, 768, 1, \"none\"]\n"
    "(`cwm show` prints the computation such a function defines). TARGET is \"c -keys=cpu\n"
    "-mcpu=<cpu>\": TVM refuses cwm's other target attributes; the cores and vector width stay in\n"
    "the hardware parameters. Other records are skipped and counted.\n"
    "-o OUT (or --out OUT): the output file, written atomically; stdout without it.\n";

static int log_to_ansor(int argc, char **argv) {
  cli_opt o[] = {{"-o", 1, NULL}, {"--out", 1, NULL}, {"--quiet", 0, NULL}};
  cli_logset s;
  int rc = open_logs(argc, argv, o, NOPT(o), TO_ANSOR_HELP, &s, 1, 1);
  if (rc) return rc < 0 ? 0 : rc;
  akey_cache *cache = NULL;
  int ncache = 0, nout = 0;
  cwm_buf b;
  cwm_buf_init(&b);
  for (int i = 0; i < s.n; i++) {
    const char *akey = record_akey(&s.v[i].r, &cache, &ncache);
    if (!akey[0]) continue;
    ansor_line(&s.v[i].r, akey, &b);
    nout++;
  }
  rc = emit(out_path(o, NOPT(o)), &b);
  if (!rc && !cli_get(o, NOPT(o), "--quiet")) {
    fprintf(stderr, "cwm log: %d of %d records written in the plain Ansor layout\n", nout, s.n);
    for (int i = 0; i < ncache; i++)
      if (!cache[i].akey[0])
        fprintf(stderr, "cwm log: workload %s has no Ansor form (not an op-library workload, or no workload text): "
                        "its records were skipped\n", cache[i].key);
  }
  free(cache);
  cwm_buf_free(&b);
  close_logs(&s);
  return rc;
}

static const char *FROM_ANSOR_HELP =
    "usage: cwm log from-ansor LOG --workload W [--suite FILE] [-o OUT] [--quiet]\n"
    "Plain Ansor v0.6 lines (a TVM auto_scheduler log, or `cwm log to-ansor`'s output) as cwm\n"
    "records of workload W (a suite id, an op spec or @FILE): W's key, name and text are attached;\n"
    "the steps, timings and target string are kept. A line whose key is another op-library\n"
    "workload's Ansor key ([\"cwm_<op>\", ...] with other parameters), or whose steps do not apply to\n"
    "W, is refused with its line number and the exit status is 4 (the other lines are written);\n"
    "lines that are not records are skipped and counted.\n"
    "-o OUT (or --out OUT): the output file, written atomically; stdout without it.\n";

typedef struct {
  cwm_record r;
  char akey[512]; /* the line's own workload key */
} fa_rec;

typedef struct {
  const char *key, *name, *text;
} fa_ctx;

/* A plain line as a cwm record of the workload in ctx: 0, or 1 (corrupt) with e saying why. */
static int fa_parse(const char *line, void *out, void *ctx, cwm_err *e) {
  const fa_ctx *c = ctx;
  fa_rec *fr = out;
  if (cwm_json_too_deep(line, 16)) return cwm_fail(e, CWM_EPARSE, "nested too deep"), 1;
  cJSON *j = cJSON_Parse(line);
  cJSON *task = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "i"), 0), *k = cJSON_GetArrayItem(task, 0);
  if (!cJSON_IsString(k) || !k->valuestring) {
    cJSON_Delete(j);
    return cwm_fail(e, CWM_EPARSE, "not an Ansor record (no workload key at \"i\"[0][0])"), 1;
  }
  snprintf(fr->akey, sizeof fr->akey, "%s", k->valuestring);
  cJSON_ReplaceItemInArray(task, 0, cJSON_CreateString(c->key));
  cJSON_DeleteItemFromObjectCaseSensitive(j, "cwm");
  cJSON *cw = cJSON_AddObjectToObject(j, "cwm");
  cJSON_AddStringToObject(cw, "name", c->name);
  cJSON_AddStringToObject(cw, "workload", c->text);
  char *s = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  int rc = cwm_record_parse(s, &fr->r, e);
  cJSON_free(s);
  if (!rc) snprintf(fr->r.version, sizeof fr->r.version, "%s", CWM_VERSION); /* the cwm that converted it */
  return rc ? 1 : 0;
}

/* The JSON text of a key in one spelling (a key is compared as TVM decodes it, not byte for byte). */
static char *normal_json(const char *text) {
  cJSON *j = cJSON_Parse(text);
  char *s = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  return s;
}

/* Why a converted record is refused (into why), or 0. */
static int fa_refuse(const fa_rec *fr, const char *wakey, const cwm_dag *d, char *why, size_t n) {
  if (!strncmp(fr->akey, "[\"cwm_", 6)) {
    char *a = normal_json(fr->akey), *b = wakey[0] ? normal_json(wakey) : NULL;
    int same = a && b && !strcmp(a, b);
    cJSON_free(a);
    cJSON_free(b);
    if (!same) return snprintf(why, n, "its workload is %s, not this one (%s)", fr->akey, wakey[0] ? wakey : "no Ansor form"), 1;
  }
  cwm_err e = {0};
  cwm_state *st = NULL;
  int bad = cwm_state_replay(d, fr->r.steps, fr->r.nsteps, &st, NULL, &e);
  if (bad) snprintf(why, n, "the steps do not apply: %s", e.msg);
  else if ((bad = !cwm_state_is_complete(st))) snprintf(why, n, "the steps leave a split of unknown length");
  cwm_state_free(st);
  return bad;
}

static int log_from_ansor(int argc, char **argv) {
  cli_opt o[] = {{"--workload", 1, NULL}, {"--suite", 1, NULL}, {"-o", 1, NULL}, {"--out", 1, NULL}, {"--quiet", 0, NULL}};
  char *pos[1] = {NULL};
  int np = 0, rc = cli_parse_operands(argc, argv, o, NOPT(o), FROM_ANSOR_HELP, pos, 1, &np);
  if (rc) return rc < 0 ? 0 : rc;
  const char *path = pos[0], *spec = cli_get(o, NOPT(o), "--workload");
  if (!np) return cli_usage(NULL, FROM_ANSOR_HELP, "the log file is missing");
  if (!spec) return cli_usage(NULL, FROM_ANSOR_HELP, "--workload W is required: the lines do not carry the workload");
  cwm_workload *w = cli_workload(spec, cli_get(o, NOPT(o), "--suite"), &rc);
  if (!w) return rc;
  cwm_err e = {0};
  cwm_dag *d = cwm_dag_new(w, &e);
  cwm_lines *l = d ? cwm_lines_open(path, "log", 4 << 20, &e) : NULL;
  if (!l) {
    cwm_dag_free(d);
    cwm_workload_free(w);
    return cli_fail(&e);
  }
  char key[17], wakey[256] = "";
  cwm_workload_key(w, key);
  ansor_key(w, wakey, sizeof wakey);
  char *text = cwm_workload_print(w);
  fa_ctx ctx = {key, w->name, text};
  fa_rec fr;
  cwm_buf b;
  cwm_buf_init(&b);
  int got, nout = 0, nrefused = 0, quiet = cli_get(o, NOPT(o), "--quiet") != NULL;
  while ((got = cwm_lines_parse(l, fa_parse, &fr, &ctx, &e)) == 1) {
    char why[1200];
    if (fa_refuse(&fr, wakey, d, why, sizeof why)) {
      fprintf(stderr, "cwm log: %s: line %ld refused: %s\n", path, cwm_lines_last_good(l), why);
      nrefused++;
    } else {
      cwm_record_to_json(&fr.r, &b);
      cwm_buf_putc(&b, '\n');
      nout++;
    }
    cwm_record_free(&fr.r);
  }
  long nbad = cwm_lines_nbad(l);
  if (nbad && !quiet)
    fprintf(stderr, "cwm log: %s: skipped %ld line%s that %s not a record (the last: %s)\n", path, nbad,
            nbad == 1 ? "" : "s", nbad == 1 ? "is" : "are", cwm_lines_last_bad(l));
  rc = got < 0 ? cli_fail(&e) : emit(out_path(o, NOPT(o)), &b);
  if (!rc && !quiet) fprintf(stderr, "cwm log: %d records of %s written, %d refused\n", nout, w->name, nrefused);
  if (!rc && nrefused) rc = CWM_ESTEP;
  cwm_buf_free(&b);
  free(text);
  cwm_lines_close(l);
  cwm_dag_free(d);
  cwm_workload_free(w);
  return rc;
}

int cmd_log(int argc, char **argv) {
  static const struct {
    const char *name;
    int (*fn)(int, char **);
  } subs[] = {{"list", log_list},   {"best", log_best},         {"filter", log_filter},
              {"merge", log_merge}, {"to-ansor", log_to_ansor}, {"from-ansor", log_from_ansor}};
  if (argc < 2) return cli_usage("log", LOG_HELP, "a subcommand is missing");
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) return cli_usage("log", LOG_HELP, NULL);
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
    if (!strcmp(argv[1], subs[i].name)) return subs[i].fn(argc - 1, argv + 1); /* errors say "cwm log list" */
  return cli_usage("log", LOG_HELP, "unknown subcommand '%s'", argv[1]);
}

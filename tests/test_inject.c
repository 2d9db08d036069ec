/* test_inject.c: generated C is never an injection path. C fragments are smuggled through every
 * field of a workload text (tensor, axis and output names, numbers, function names, comments,
 * the const marker of packed weights), of an op spec, of a workload file's name, of suite and
 * workload-list ids, of a tuning-log record and a trajectory line (name, workload text, step
 * strings), and of an Ansor model file (keys, feature rows, costs, a booster attribute, the
 * objective). Each must be refused, or, when the input is accepted, the C that cwm_codegen and
 * cwm_export write for it must hold none of the payload's bytes. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cwm/costmodel.h"
#include "cwm/dataset.h"
#include "cwm/search.h"
#include "cwm/sketch.h"
#include "testlib.h"

/* Each payload has bytes an identifier or a number cannot hold. */
static const char *const PAYLOADS[] = {
    ";system(\"pwned\");",
    "*/ pwned(); /*",
    "\n#include \"pwned.h\"\n",
    "\\\npwned",
    "\"pwned\"",
    "// pwned\n",
    "__attribute__((constructor)) void pwned(void) {}",
    "?\?/\npwned", /* a trigraph for backslash */
    "'p'",
    "{pwned}",
};
#define NPAY ((int)(sizeof PAYLOADS / sizeof PAYLOADS[0]))

static int accepted_total, refused_total;

/* The C of the initial state and of a few sampled schedules of w (all of it that cwm_codegen
 * writes: the kernel and the reference kernel), concatenated. */
static char *all_code(const cwm_workload *w) {
  cwm_err e = {0};
  cwm_dag *d = cwm_dag_new(w, &e);
  if (!d) return NULL;
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_state *s0 = cwm_state_init(d);
  cwm_kernel k;
  cwm_codegen_opts ref = {.reference = 1};
  if (cwm_codegen(s0, NULL, &k, &e) == 0) {
    cwm_buf_puts(&b, k.body);
    cwm_kernel_free(&k);
  }
  if (cwm_codegen(s0, &ref, &k, &e) == 0) {
    cwm_buf_puts(&b, k.body);
    cwm_kernel_free(&k);
  }
  cwm_state_free(s0);
  cwm_space_opts so;
  cwm_space_opts_default(&so);
  cwm_rng r;
  cwm_rng_seed(&r, 7);
  cwm_state **ss = NULL;
  int ns = 0;
  if (cwm_sample_initial(d, &so, &r, 3, &ss, &ns, &e) == 0) {
    for (int i = 0; i < ns; i++)
      if (cwm_codegen(ss[i], NULL, &k, &e) == 0) {
        cwm_buf_puts(&b, k.body);
        cwm_kernel_free(&k);
      }
    cwm_states_free(ss, ns);
  }
  cwm_dag_free(d);
  return b.s ? cwm_buf_take(&b) : cwm_xstrdup("");
}

/* The payload must not reach the code; returns 1 when it does. */
static int leaks(const char *code, const char *payload) { return code && strstr(code, payload) != NULL; }

/* text is a workload with the payload somewhere: refused with CWM_EPARSE, or clean code. */
static void try_workload_text(const char *text, const char *payload, const char *where) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_parse(text, &e);
  if (!w) {
    refused_total++;
    CHECKF(e.code == CWM_EPARSE, "%s: refused with code %d, not CWM_EPARSE: %s", where, e.code, e.msg);
    return;
  }
  accepted_total++;
  char *code = all_code(w);
  CHECKF(!leaks(code, payload), "%s: payload %s reached the generated C", where, payload);
  free(code);
  cwm_workload_free(w);
}

static const char *const BASE_PLAIN =
    "input A[16, 32]\n"
    "input W[24, 32]\n"
    "input bias[24]\n"
    "D[i:16, j:24] = sum(k:32 : A[i, k] * W[j, k])\n"
    "out[i:16, j:24] = relu(D[i, j] * 0.5 + bias[j])\n"
    "output out\n";
/* the same with constant weights: kernels take W in a packed layout, with pack functions */
static const char *const BASE_CONST =
    "input A[16, 32]\n"
    "input W[24, 32] const\n"
    "input bias[24]\n"
    "D[i:16, j:24] = sum(k:32 : A[i, k] * W[j, k])\n"
    "out[i:16, j:24] = relu(D[i, j] * 0.5 + bias[j])\n"
    "output out\n";
static const char *BASE = BASE_PLAIN;

/* Replaces the n-th occurrence (0-based) of word in BASE by repl. */
static char *replace_nth(const char *word, int nth, const char *repl) {
  const char *p = BASE;
  for (int i = 0; p && i <= nth; i++) {
    p = strstr(p, word);
    if (p && i < nth) p += strlen(word);
  }
  if (!p) return NULL;
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_printf(&b, "%.*s%s%s", (int)(p - BASE), BASE, repl, p + strlen(word));
  return cwm_buf_take(&b);
}

static void test_workload_text(void) {
  /* every kind of token: the site (word, which occurrence) and what it is */
  static const struct { const char *word; int nth; const char *what; } sites[] = {
      {"A", 0, "input tensor name"},    {"W", 1, "tensor use"},        {"bias", 0, "input name"},
      {"D", 0, "compute name"},         {"i", 1, "axis name"},         {"k", 0, "reduction axis"},
      {"k", 1, "axis use"},             {"32", 0, "shape"},            {"16", 1, "extent"},
      {"0.5", 0, "float constant"},     {"relu", 0, "function name"},  {"sum", 0, "reducer"},
      {"out", 2, "output name"},        {"output", 0, "keyword"},      {"input", 0, "keyword"},
      {"const", 0, "const marker"},
  };
  int nsites = (int)(sizeof sites / sizeof sites[0]);
  for (int s = 0; s < nsites; s++)
    for (int p = 0; p < NPAY; p++)
      for (int form = 0; form < 3; form++) {
        /* the payload after the token, before it, or instead of it */
        cwm_buf r;
        cwm_buf_init(&r);
        if (form == 0) cwm_buf_printf(&r, "%s%s", sites[s].word, PAYLOADS[p]);
        else if (form == 1) cwm_buf_printf(&r, "%s%s", PAYLOADS[p], sites[s].word);
        else cwm_buf_puts(&r, PAYLOADS[p]);
        char *text = replace_nth(sites[s].word, sites[s].nth, r.s);
        CHECKF(text != NULL || strstr(BASE, sites[s].word) == NULL, "site %s", sites[s].what);
        if (text) {
          char where[128];
          snprintf(where, sizeof where, "workload %s (form %d, payload %d)", sites[s].what, form, p);
          try_workload_text(text, PAYLOADS[p], where);
        }
        free(text);
        cwm_buf_free(&r);
      }
  /* a comment may hold anything: it never reaches the code */
  for (int p = 0; p < NPAY; p++) {
    if (strchr(PAYLOADS[p], '\n')) continue; /* a newline ends the comment */
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_buf_printf(&b, "# %s\n%s", PAYLOADS[p], BASE);
    try_workload_text(b.s, PAYLOADS[p], "workload comment");
    cwm_buf_free(&b);
  }
  /* numbers that are not plain decimals */
  static const char *const nums[] = {"0x20", "32e0", "1e999", "nan", "inf", "3.2e1", "32L", "32u", "-32",
                                     "99999999999999999999", "0.5f", "1e-999"};
  for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
    char *t1 = replace_nth("32", 0, nums[i]), *t2 = replace_nth("0.5", 0, nums[i]);
    cwm_err e = {0};
    cwm_workload *w = cwm_workload_parse(t1, &e);
    CHECKF(w == NULL || !strcmp(nums[i], "3.2e1") || !strcmp(nums[i], "32e0"), "shape %s accepted", nums[i]);
    cwm_workload_free(w);
    w = cwm_workload_parse(t2, &e);
    if (w) {
      /* a constant is printed back as a C number: no inf, nan or suffix spelled by the input */
      char *code = all_code(w);
      CHECKF(code && !strstr(code, "inf") && !strstr(code, "nan") && !strstr(code, "0.5f") && !strstr(code, "32L"),
             "constant %s: %s", nums[i], code ? code : "(no code)");
      free(code);
      cwm_workload_free(w);
    }
    free(t1);
    free(t2);
  }
}

static void test_op_spec(void) {
  static const char *const specs[] = {
      "dense M=16 N=24 K=32 bias=1 act=relu%s",     "dense M=16%s N=24 K=32",
      "dense%s M=16 N=24 K=32",                     "dense M=16 N=24 K=32 act=relu%s",
      "dense M=16 N=24 K=32 act=%s",                "conv2d C=3 H=9 W=9 K=4 R=3 S=3 stride=1 pad=1%s",
      "dense M=16 N=24 K=32 %s=1",
  };
  for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
    for (int p = 0; p < NPAY; p++) {
      char spec[512];
      snprintf(spec, sizeof spec, specs[s], PAYLOADS[p]);
      cwm_err e = {0};
      cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
      if (!w) {
        refused_total++;
        CHECKF(e.code == CWM_EPARSE, "spec %zu payload %d: code %d: %s", s, p, e.code, e.msg);
        continue;
      }
      accepted_total++;
      char *code = all_code(w);
      CHECKF(!leaks(code, PAYLOADS[p]), "spec %zu: payload %d reached the generated C", s, p);
      free(code);
      cwm_workload_free(w);
    }
}

/* A workload file's name becomes the workload's name, which the kernel's comment repeats; a
 * suite row's id does the same. */
static void test_names(const char *dir) {
  static const char *const names[] = {"pw*ned", "pwned\n#include <pwned.h>\nx", "pwned\\", "q\"pwned\"", "x;pwned();"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.wl", dir, names[i]);
    cwm_err e = {0};
    CHECKF(cwm_write_file_atomic(path, BASE, strlen(BASE), &e) == 0, "%s", e.msg);
    char spec[600];
    snprintf(spec, sizeof spec, "@%s", path);
    cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
    CHECKF(w != NULL, "workload file %s: %s", path, e.msg);
    if (!w) continue;
    char *code = all_code(w);
    CHECKF(!leaks(code, names[i]), "the file name %s reached the generated C", names[i]);
    free(code);
    /* nor the exported kernel, its header or its example */
    cwm_dag *d = cwm_dag_new(w, &e);
    cwm_state *s0 = d ? cwm_state_init(d) : NULL;
    char edir[600];
    snprintf(edir, sizeof edir, "%s/export", dir);
    CHECKF(s0 && cwm_export(s0, edir, "k", &e) == 0, "export: %s", e.msg);
    static const char *const files[] = {"k.h", "k.c", "k_example.c"};
    for (int f = 0; f < 3; f++) {
      char fp[700];
      snprintf(fp, sizeof fp, "%s/%s", edir, files[f]);
      char *text = cwm_read_file(fp, NULL, &e);
      CHECKF(text && !leaks(text, names[i]), "the file name %s reached %s", names[i], files[f]);
      free(text);
    }
    cwm_state_free(s0);
    cwm_dag_free(d);
    cwm_workload_free(w);
  }
  /* a suite file whose ids carry code */
  char suite[512];
  snprintf(suite, sizeof suite, "%s/suite.tsv", dir);
  const char *rows = "*/pwned();/*\tdense\tM=16 N=24 K=32\tx\n";
  cwm_err e = {0};
  CHECK(cwm_write_file_atomic(suite, rows, strlen(rows), &e) == 0);
  cwm_workload *w = cwm_workload_from_spec("*/pwned();/*", suite, &e);
  if (w) {
    char *code = all_code(w);
    CHECKF(!leaks(code, "*/pwned();/*"), "a suite id reached the generated C");
    free(code);
    cwm_workload_free(w);
  }
  /* a training-workload list whose ids carry code (cwm dataset measure builds kernels from it) */
  cwm_wl_entry en;
  memset(&en, 0, sizeof en);
  snprintf(en.id, sizeof en.id, "%s", "*/ pwned(); /*");
  snprintf(en.spec, sizeof en.spec, "%s", "dense M=16 N=24 K=32");
  w = cwm_wl_entry_workload(&en, &e);
  CHECKF(w != NULL, "%s", e.msg);
  if (w) {
    char *code = all_code(w);
    CHECKF(!leaks(code, en.id), "a workload list id reached the generated C");
    free(code);
    cwm_workload_free(w);
  }
}

/* ------------------------------------------------------------------ records and trajectories */

/* Replays a trajectory or record line the way the data-set tools do (DAG cache, replay) and
 * generates its code. */
static void try_line(const char *line, const char *payload, const char *where) {
  cwm_traj t;
  cwm_err e = {0};
  if (cwm_traj_parse(line, &t, &e) != 0) {
    refused_total++;
    CHECKF(e.code == CWM_EPARSE, "%s: code %d", where, e.code);
    return;
  }
  cwm_dag_cache *c = cwm_dag_cache_new();
  const cwm_dag *d = cwm_dag_cache_get(c, &t, &e);
  cwm_state *s = NULL;
  if (d && cwm_traj_replay(d, &t, &s, NULL, &e) == 0) {
    accepted_total++;
    cwm_kernel k;
    if (cwm_codegen(s, NULL, &k, &e) == 0) {
      CHECKF(!leaks(k.body, payload), "%s: payload reached the generated C", where);
      cwm_kernel_free(&k);
    }
    char *code = all_code(cwm_dag_workload(d));
    CHECKF(!leaks(code, payload), "%s: payload reached the generated C", where);
    free(code);
    cwm_state_free(s);
  } else {
    refused_total++;
  }
  cwm_dag_cache_free(c);
  cwm_traj_free(&t);
  /* the tuning-log reader too */
  cwm_record r;
  if (cwm_record_parse(line, &r, &e) == 0) {
    if (r.workload) {
      cwm_workload *w = cwm_workload_parse(r.workload, &e);
      if (w) {
        char *code = all_code(w);
        CHECKF(!leaks(code, payload), "%s: the record's workload leaked", where);
        free(code);
        cwm_workload_free(w);
      }
    }
    cwm_record_free(&r);
  }
}

/* JSON string body for s (quotes, backslashes and control bytes escaped). */
static void json_str(cwm_buf *b, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') cwm_buf_printf(b, "\\%c", *p);
    else if (*p < 0x20) cwm_buf_printf(b, "\\u%04x", *p);
    else cwm_buf_putc(b, (char)*p);
  }
}

static void test_records(void) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_parse(BASE, &e);
  cwm_dag *d = cwm_dag_new(w, &e);
  char key[17];
  cwm_workload_key(w, key);
  /* a real record of a sampled schedule, as the tuner writes it */
  cwm_space_opts so;
  cwm_space_opts_default(&so);
  cwm_rng rng;
  cwm_rng_seed(&rng, 3);
  cwm_state **ss = NULL;
  int ns = 0;
  CHECK(cwm_sample_initial(d, &so, &rng, 1, &ss, &ns, &e) == 0 && ns == 1);
  cwm_record r;
  cwm_record_init(&r);
  memcpy(r.key, key, 17);
  snprintf(r.name, sizeof r.name, "base");
  r.workload = cwm_workload_print(w);
  cwm_record_set_steps(&r, ss[0]->steps, ss[0]->nsteps);
  r.ncosts = 1;
  r.costs[0] = 1e-3;
  cwm_buf good;
  cwm_buf_init(&good);
  cwm_record_to_json(&r, &good);
  try_line(good.s, "pwned", "the unaltered record"); /* sanity: accepted */
  for (int p = 0; p < NPAY; p++) {
    const char *pl = PAYLOADS[p];
    /* the name field */
    cwm_buf nb;
    cwm_buf_init(&nb);
    json_str(&nb, pl);
    char *at = strstr(good.s, "\"name\":\"base\"");
    if (!at) at = strstr(good.s, "\"name\": \"base\"");
    CHECKF(at != NULL, "record layout: %s", good.s);
    if (at) {
      const char *q = strstr(at, "base");
      cwm_buf l;
      cwm_buf_init(&l);
      cwm_buf_printf(&l, "%.*s%s%s", (int)(q - good.s), good.s, nb.s, q + 4);
      try_line(l.s, pl, "record name");
      cwm_buf_free(&l);
    }
    /* the workload text: the payload after the first tensor name */
    cwm_buf wt;
    cwm_buf_init(&wt);
    cwm_buf_printf(&wt, "%.*sA%s%s", 6, BASE, pl, BASE + 7);
    cwm_buf wj;
    cwm_buf_init(&wj);
    json_str(&wj, wt.s);
    cwm_traj t;
    memset(&t, 0, sizeof t);
    memcpy(t.key, key, 17);
    snprintf(t.name, sizeof t.name, "%.60s", pl);
    t.workload = wt.s;
    t.steps = ss[0]->steps;
    t.nsteps = ss[0]->nsteps;
    cwm_buf tl;
    cwm_buf_init(&tl);
    cwm_traj_to_json(&t, &tl);
    try_line(tl.s, pl, "trajectory workload and name");
    /* the step strings: a cache scope and a pragma carrying the payload */
    cwm_buf sl;
    cwm_buf_init(&sl);
    cwm_buf_printf(&sl, "{\"key\":\"%s\",\"name\":\"x\",\"workload\":\"", key);
    json_str(&sl, BASE);
    cwm_buf_puts(&sl, "\",\"steps\":[[\"CHW\",3,\"local");
    json_str(&sl, pl);
    cwm_buf_puts(&sl, "\"],[\"PR\",3,0,\"auto_unroll_max_step$16");
    json_str(&sl, pl);
    cwm_buf_puts(&sl, "\"]]}");
    try_line(sl.s, pl, "step strings");
    cwm_buf_free(&sl);
    cwm_buf_free(&tl);
    cwm_buf_free(&wj);
    cwm_buf_free(&wt);
    cwm_buf_free(&nb);
  }
  cwm_buf_free(&good);
  cwm_record_free(&r);
  cwm_states_free(ss, ns);
  cwm_dag_free(d);
  cwm_workload_free(w);
}

/* ------------------------------------------------------------------ model files */

static uint64_t get_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void put_le(unsigned char *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void fix_checksum(unsigned char *d, size_t len) { put_le(d + len - 8, cwm_hash64(d, len - 8), 8); }

/* Loads the model file bytes; when they load, the model picks among sampled schedules of a
 * small dense and the chosen one's code must not hold the payload. */
static void try_model(const unsigned char *d, size_t len, const char *payload, size_t plen, const char *where,
                      int expect_refused) {
  cwm_err e = {0};
  cwm_costmodel *m = cwm_costmodel_ansor_from_buffer(1, d, len, &e);
  if (!m) {
    refused_total++;
    CHECKF(e.code == CWM_EMODEL, "%s: code %d: %s", where, e.code, e.msg);
    return;
  }
  accepted_total++;
  CHECKF(!expect_refused, "%s: a model file with the payload there loaded", where);
  cwm_workload *w = cwm_workload_parse(BASE, &e);
  cwm_dag *dg = cwm_dag_new(w, &e);
  cwm_space_opts so;
  cwm_space_opts_default(&so);
  cwm_rng rng;
  cwm_rng_seed(&rng, 5);
  cwm_state **ss = NULL;
  int ns = 0;
  CHECK(cwm_sample_initial(dg, &so, &rng, 8, &ss, &ns, &e) == 0 && ns > 0);
  double sc[8];
  CHECKF(cwm_costmodel_predict(m, ss, ns, sc, &e) == 0, "%s: %s", where, e.msg);
  int best = 0;
  for (int i = 1; i < ns; i++)
    if (sc[i] > sc[best]) best = i;
  cwm_kernel k;
  if (ns && cwm_codegen(ss[best], NULL, &k, &e) == 0) {
    CHECKF(!memmem(k.body, strlen(k.body), payload, plen), "%s: payload reached the generated C", where);
    cwm_kernel_free(&k);
  }
  cwm_states_free(ss, ns);
  cwm_dag_free(dg);
  cwm_workload_free(w);
  cwm_costmodel_free(m);
}

static void test_model_file(void) {
  const char *src = getenv("CWM_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/fuzz/corpus/ansormodel/p102_booster.model", src ? src : ".");
  size_t len = 0;
  cwm_err e = {0};
  unsigned char *orig = (unsigned char *)cwm_read_file(path, &len, &e);
  CHECKF(orig != NULL, "%s", e.msg);
  if (!orig) return;
  uint64_t nprog = get_le(orig + 16, 8), nrows = get_le(orig + 24, 8), blen = get_le(orig + 40, 8);
  size_t prog0 = 48, rows0 = prog0 + nprog * 40, boost0 = rows0 + nrows * CWM_ANSOR_NFEAT * 4;
  CHECK(boost0 + blen + 8 == len && nprog > 3 && nrows > 1);
  try_model(orig, len, "pwned", 5, "the unaltered model", 0);
  unsigned char *d = malloc(len + 4096);
  /* payload bytes as program keys: refused (keys are hex) */
  for (int p = 0; p < NPAY; p++) {
    size_t pl = strlen(PAYLOADS[p]) < 16 ? strlen(PAYLOADS[p]) : 16;
    memcpy(d, orig, len);
    memcpy(d + prog0 + 40, PAYLOADS[p], pl);
    fix_checksum(d, len);
    try_model(d, len, PAYLOADS[p], pl, "program key", 1);
  }
  /* payload bytes as feature rows and as a cost: printable bytes are finite floats, so the file
   * loads; its numbers only rank schedules */
  for (int p = 0; p < NPAY; p++) {
    size_t pl = strlen(PAYLOADS[p]) & ~(size_t)7;
    if (pl == 0) continue;
    memcpy(d, orig, len);
    memcpy(d + rows0 + 4 * 3, PAYLOADS[p], pl);
    memcpy(d + prog0 + 16, PAYLOADS[p], 8); /* program 0's cost, a positive double */
    fix_checksum(d, len);
    try_model(d, len, PAYLOADS[p], pl, "feature row and cost", 0);
  }
  /* a booster attribute holding the payload: XGBoost keeps it; nothing of it reaches code */
  const char *attr = "attributes{";
  unsigned char *a = memmem(orig + boost0, blen, attr, strlen(attr));
  CHECK(a != NULL);
  for (int p = 0; a && p < NPAY; p++) {
    const char *pl = PAYLOADS[p];
    size_t at = (size_t)(a - orig) + strlen(attr), n = 0;
    unsigned char ins[512];
    ins[n++] = 'L';
    const char *k = "pwned_key";
    for (int i = 0; i < 8; i++) ins[n + (size_t)i] = (unsigned char)((uint64_t)strlen(k) >> (8 * (7 - i)));
    n += 8;
    memcpy(ins + n, k, strlen(k));
    n += strlen(k);
    ins[n++] = 'S';
    ins[n++] = 'L';
    for (int i = 0; i < 8; i++) ins[n + (size_t)i] = (unsigned char)((uint64_t)strlen(pl) >> (8 * (7 - i)));
    n += 8;
    memcpy(ins + n, pl, strlen(pl));
    n += strlen(pl);
    memcpy(d, orig, at);
    memcpy(d + at, ins, n);
    memcpy(d + at + n, orig + at, len - at);
    put_le(d + 40, blen + n, 8);
    fix_checksum(d, len + n);
    try_model(d, len + n, pl, strlen(pl), "booster attribute", 0);
  }
  /* the objective's name: XGBoost refuses an unknown one */
  const char *obj = "reg:squarederror";
  unsigned char *o = memmem(orig + boost0, blen, obj, strlen(obj));
  CHECK(o != NULL);
  if (o) {
    memcpy(d, orig, len);
    memcpy(d + (o - orig), "reg:\";pwned();/*", strlen(obj));
    fix_checksum(d, len);
    try_model(d, len, "pwned", 5, "objective name", 1);
  }
  free(d);
  free(orig);
}

int main(void) {
  char dir[] = "/tmp/cwm-inject-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  test_workload_text();
  BASE = BASE_CONST;
  test_workload_text();
  BASE = BASE_PLAIN;
  test_op_spec();
  test_names(dir);
  test_records();
  test_model_file();
  fprintf(stderr, "inject: %d inputs refused, %d accepted with clean code\n", refused_total, accepted_total);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
  return test_done();
}

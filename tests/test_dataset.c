/* test_dataset.c: the data set. The workload generator never emits a suite shape; a stored
 * trajectory replays to its stored final print byte for byte; the reader streams a file far
 * larger than its memory, skipping and counting corrupt lines; the split never puts a workload
 * in both parts; noise pairs compute the same function (kernels checked against their own
 * references); the measured collection resumes without measuring anything twice. */
#define _GNU_SOURCE
#include "cwm/dataset.h"
#include "cwm/train.h"
#include "cwm/search.h"
#include "testlib.h"

#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static char tmpdir[64];

static const char *tmp(const char *name) {
  static char buf[8][256];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
  return buf[k];
}

static const char *suite_path(void) { return cwm_suite_default_path(); }

static void source_path(char *out, size_t n, const char *rel) {
  const char *src = getenv("CWM_SOURCE_DIR");
  if (src && *src) {
    snprintf(out, n, "%s/%s", src, rel);
    return;
  }
  /* the suite is SRC/bench/suite.tsv */
  char s[512];
  snprintf(s, sizeof s, "%s", suite_path());
  char *p = strstr(s, "bench/suite.tsv");
  if (p) *p = 0;
  size_t l = strlen(s);
  if (l + strlen(rel) + 1 > n) l = 0;
  memcpy(out, s, l);
  memcpy(out + l, rel, strlen(rel) + 1);
}

static long mem_in_use(void) {
  struct mallinfo2 mi = mallinfo2();
  return (long)(mi.uordblks + mi.hblkhd);
}

static long maxrss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* ------------------------------------------------------------------ reader and split */

/* Trajectory lines of a few generated workloads (distinct keys), as text. */
static char **sample_lines(int nwl, int per, int *nlines) {
  cwm_workgen_opts go;
  cwm_workgen_opts_default(&go);
  go.count = nwl;
  go.seed = 11;
  go.max_flops = 5e7;
  cwm_wl_entry *wl;
  int n;
  cwm_err e = {0};
  CHECKF(cwm_workgen(&go, &wl, &n, NULL, &e) == 0, "%s", e.msg);
  char **lines = calloc((size_t)(nwl * per), sizeof *lines);
  int cnt = 0;
  for (int i = 0; i < n; i++) {
    cwm_workload *w = cwm_wl_entry_workload(&wl[i], &e);
    cwm_dag *d = w ? cwm_dag_new(w, &e) : NULL;
    cwm_traj *t = NULL;
    int nt = 0;
    CHECKF(d && cwm_traj_sample(d, NULL, 100 + (uint64_t)i, per, &t, &nt, &e) == 0, "%s: %s", wl[i].spec, e.msg);
    for (int k = 0; k < nt; k++) {
      cwm_buf b;
      cwm_buf_init(&b);
      cwm_traj_to_json(&t[k], &b);
      lines[cnt++] = cwm_buf_take(&b);
    }
    cwm_trajs_free(t, nt);
    cwm_dag_free(d);
    cwm_workload_free(w);
  }
  free(wl);
  *nlines = cnt;
  return lines;
}

static void test_reader_streams(void) {
  int nl;
  char **lines = sample_lines(40, 6, &nl);
  CHECK(nl >= 200);
  char path[256];
  snprintf(path, sizeof path, "%s", tmp("big.jsonl"));
  FILE *f = fopen(path, "w");
  long good = 0, bad = 0, bytes = 0;
  const long target = 22L << 20;
  for (long i = 0; bytes < target; i++) {
    const char *l = lines[i % nl];
    bytes += fprintf(f, "%s\n", l);
    good++;
    if (i % 997 == 5) { /* a line cut short by a kill */
      bytes += fprintf(f, "%.*s\n", (int)strlen(l) / 2, l);
      bad++;
    }
    if (i % 1999 == 7) { /* not JSON; a wrong key; steps that do not parse */
      bytes += fprintf(f, "garbage \x01\x02 {\n{\"key\":\"xyz\",\"steps\":[]}\n{\"key\":\"0123456789abcdef\",\"steps\":[[\"ZZ\",1]]}\n");
      fputs(l, f); /* a good line with a NUL byte in it */
      fputc(0, f);
      fputs("\n", f);
      bytes += (long)strlen(l) + 2;
      bad += 4;
    }
    if (i == 1234) { /* one line longer than the reader's line limit */
      for (int k = 0; k < 5 << 20; k += 64) fputs("{\"key\":\"0123456789abcdef\",\"steps\":[],\"junk\":\"xxxxxxxxxxx", f);
      fputs("\"}\n", f);
      bytes += 5 << 20;
      bad++;
    }
  }
  fclose(f);
  struct stat sb;
  stat(path, &sb);
  CHECKF(sb.st_size > 20L << 20, "file is %ld bytes", (long)sb.st_size);

  const long budget = 6L << 20; /* far below the file's 25 MB */
  long rss0 = maxrss_kb();
  long base = mem_in_use(), peak = 0;
  cwm_err e = {0};
  cwm_traj_iter *it = cwm_traj_iter_open(path, &e);
  CHECK(it != NULL);
  cwm_traj t;
  long n = 0;
  int rc;
  while ((rc = cwm_traj_iter_next(it, &t, &e)) == 1) {
    long m = mem_in_use() - base;
    if (m > peak) peak = m;
    n++;
    cwm_traj_free(&t);
  }
  CHECK(rc == 0);
  CHECKF(n == good, "read %ld trajectories, wrote %ld", n, good);
  CHECKF(cwm_traj_iter_nbad(it) == bad, "counted %ld bad lines, wrote %ld (last: %s)", cwm_traj_iter_nbad(it), bad,
         cwm_traj_iter_last_bad(it));
  CHECK(cwm_traj_iter_bufsize(it) <= (size_t)(4 << 20));
  cwm_traj_iter_close(it);
  long rss_growth = (maxrss_kb() - rss0) * 1024;
  if (!UNDER_ASAN) {
    CHECKF(peak < budget, "reader held %ld bytes at once (budget %ld)", peak, budget);
    CHECKF(rss_growth < 2 * budget, "peak RSS grew by %ld bytes while reading a %ld-byte file", rss_growth,
           (long)sb.st_size);
  }
  fprintf(stderr, "reader: %ld trajectories and %ld corrupt lines from %.1f MB; peak held %.2f MB, RSS growth %.2f MB\n",
          n, bad, sb.st_size / 1048576.0, peak / 1048576.0, rss_growth / 1048576.0);

  /* batches: the same trajectories */
  it = cwm_traj_iter_open(path, &e);
  cwm_traj batch[64];
  long nb = 0;
  int k;
  while ((k = cwm_traj_iter_batch(it, batch, 64, &e)) > 0) {
    nb += k;
    for (int i = 0; i < k; i++) cwm_traj_free(&batch[i]);
  }
  CHECK(k == 0 && nb == good);
  cwm_traj_iter_close(it);

  /* the split: by workload key, never one key in both parts */
  char small[256];
  snprintf(small, sizeof small, "%s", tmp("small.jsonl"));
  f = fopen(small, "w");
  for (int i = 0; i < nl; i++) fprintf(f, "%s\n", lines[i]);
  fclose(f);
  char keys[2][64][17];
  int nk[2] = {0, 0};
  long cnt[2] = {0, 0};
  for (int part = 0; part < 2; part++) {
    it = cwm_traj_iter_open(small, &e);
    cwm_traj_iter_set_split(it, 0.3, part);
    while (cwm_traj_iter_next(it, &t, &e) == 1) {
      CHECK(cwm_split_part(t.key, 0.3) == part);
      int have = 0;
      for (int j = 0; j < nk[part]; j++) have |= !strcmp(keys[part][j], t.key);
      if (!have && nk[part] < 64) memcpy(keys[part][nk[part]++], t.key, 17);
      cnt[part]++;
      cwm_traj_free(&t);
    }
    cwm_traj_iter_close(it);
  }
  CHECKF(cnt[0] + cnt[1] == nl, "train %ld + valid %ld != %d", cnt[0], cnt[1], nl);
  CHECKF(nk[0] > 0 && nk[1] > 0, "train %d keys, valid %d keys", nk[0], nk[1]);
  for (int a = 0; a < nk[0]; a++)
    for (int b = 0; b < nk[1]; b++) CHECKF(strcmp(keys[0][a], keys[1][b]), "key %s in both parts", keys[0][a]);
  /* the split of keys is stable and near the fraction over many keys */
  int valid = 0;
  for (int i = 0; i < 10000; i++) {
    char key[17];
    cwm_hash_hex(cwm_hash64(&i, sizeof i), key);
    valid += cwm_split_part(key, 0.2) == CWM_SPLIT_VALID;
    CHECK(cwm_split_part(key, 0.2) == cwm_split_part(key, 0.2));
  }
  CHECKF(valid > 1800 && valid < 2200, "%d of 10000 keys in validation at fraction 0.2", valid);
  for (int i = 0; i < nl; i++) free(lines[i]);
  free(lines);
  unlink(path);
}

/* ------------------------------------------------------------------ generator */

static int has_key_value(const char *spec, const char *kv) {
  char pat[64];
  snprintf(pat, sizeof pat, " %s ", kv);
  char s[600];
  snprintf(s, sizeof s, " %s ", spec);
  return strstr(s, pat) != NULL;
}

static void test_generator(void) {
  cwm_err e = {0};
  cwm_wl_entry *suite;
  int ns;
  CHECKF(cwm_wlist_read(suite_path(), &suite, &ns, &e) == 0, "%s", e.msg);
  CHECK(ns == 16);
  /* the comparison itself: parsed values, keys in any order, defaults filled in */
  int same;
  CHECK(cwm_spec_compare("dense K=768 N=768 M=128 act=none bias=1", "dense M=128 N=768 K=768 bias=1 act=none", 0, &same,
                         &e) == 0 && same);
  CHECK(cwm_spec_compare("dense M=128 N=768 K=768", "dense M=128 N=768 K=768 bias=0 act=none", 0, &same, &e) == 0 && same);
  CHECK(cwm_spec_compare("dense M=128 N=768 K=768 act=gelu", "dense M=128 N=768 K=768 bias=1", 0, &same, &e) == 0 && !same);
  CHECK(cwm_spec_compare("dense M=128 N=768 K=768 act=gelu", "dense M=128 N=768 K=768 bias=1", 1, &same, &e) == 0 && same);
  CHECK(cwm_spec_compare("matmul M=128 N=768 K=768", "dense M=128 N=768 K=768", 1, &same, &e) == 0 && !same);
  CHECK(cwm_spec_compare("matmul M=1 N=2", "matmul M=1 N=2 K=3", 1, &same, &e) == CWM_EPARSE);

  /* 10,000 draws: none of a suite shape (checked here independently, by values and by the
   * canonical workload text), all kinds and variants present */
  cwm_workgen_opts go;
  cwm_workgen_opts_default(&go);
  go.count = 10000;
  go.seed = 12345;
  cwm_wl_entry *v;
  int n, rej;
  double t0 = cwm_now();
  CHECKF(cwm_workgen(&go, &v, &n, &rej, &e) == 0, "%s", e.msg);
  CHECK(n == 10000);
  char suite_keys[32][17];
  for (int i = 0; i < ns; i++) {
    cwm_workload *w = cwm_wl_entry_workload(&suite[i], &e);
    cwm_workload_key(w, suite_keys[i]);
    cwm_workload_free(w);
  }
  int clashes = 0, kinds[7] = {0}, ksz[8] = {0}, stride2 = 0, nobias = 0, biasrelu = 0, gelu = 0, prime_big = 0,
      odd = 0, bad = 0;
  const char *kn[7] = {"dense ", "matmul ", "batch_matmul ", "conv2d ", "dwconv2d ", "softmax ", "layernorm "};
  for (int i = 0; i < n; i++) {
    for (int s = 0; s < ns; s++) {
      int c1 = 0;
      cwm_spec_compare(v[i].spec, suite[s].spec, 1, &c1, &e);
      clashes += c1;
    }
    cwm_workload *w = cwm_wl_entry_workload(&v[i], &e);
    if (!w) {
      bad++;
      continue;
    }
    char key[17];
    cwm_workload_key(w, key);
    for (int s = 0; s < ns; s++) clashes += !strcmp(key, suite_keys[s]);
    bad += cwm_workload_flops(w) > 2.2e9;
    cwm_workload_free(w);
    for (int k = 0; k < 7; k++) kinds[k] += !strncmp(v[i].spec, kn[k], strlen(kn[k]));
    if (!strncmp(v[i].spec, "conv2d ", 7) || !strncmp(v[i].spec, "dwconv2d ", 9)) {
      for (int r = 1; r <= 7; r += 2) {
        char kv[16];
        snprintf(kv, sizeof kv, "R=%d", r);
        ksz[r] += has_key_value(v[i].spec, kv);
      }
      stride2 += has_key_value(v[i].spec, "stride=2");
      nobias += has_key_value(v[i].spec, "bias=0") && has_key_value(v[i].spec, "act=none");
      biasrelu += has_key_value(v[i].spec, "bias=1") && has_key_value(v[i].spec, "act=relu");
    }
    gelu += has_key_value(v[i].spec, "act=gelu");
    if (!strncmp(v[i].spec, "matmul ", 7) || !strncmp(v[i].spec, "dense ", 6)) {
      const char *m = strstr(v[i].spec, " M=");
      int x = m ? atoi(m + 3) : 0, p = x > 1000;
      for (int d = 2; d * d <= x && p; d++) p = x % d != 0;
      prime_big += p;
      odd += x % 2;
    }
  }
  CHECKF(clashes == 0, "%d generated workloads have a suite shape", clashes);
  CHECKF(bad == 0, "%d generated workloads do not build or exceed the FLOP cap", bad);
  for (int k = 0; k < 7; k++) CHECKF(kinds[k] > 100, "%s: %d", kn[k], kinds[k]);
  for (int r = 1; r <= 7; r += 2) CHECKF(ksz[r] > 50, "kernel %d: %d", r, ksz[r]);
  CHECK(stride2 > 100 && nobias > 100 && biasrelu > 100 && gelu > 100 && prime_big > 5 && odd > 100);
  fprintf(stderr, "generator: 10000 workloads in %.1f s, %d suite shapes rejected; kinds", cwm_now() - t0, rej);
  for (int k = 0; k < 7; k++) fprintf(stderr, " %s%d", kn[k], kinds[k]);
  fprintf(stderr, "\n");
  free(v);

  /* deterministic */
  go.count = 50;
  go.seed = 3;
  cwm_wl_entry *a, *b;
  int na, nb2;
  cwm_workgen(&go, &a, &na, NULL, &e);
  cwm_workgen(&go, &b, &nb2, NULL, &e);
  CHECK(na == nb2 && memcmp(a, b, sizeof *a * (size_t)na) == 0);
  free(a);
  free(b);

  /* the shipped list: 480 rows, what seed 1 generates, no suite shape, and every spec maps
   * back from its workload (the op library's inverse) */
  char shipped[512];
  source_path(shipped, sizeof shipped, "data/train_workloads.tsv");
  cwm_wl_entry *sh;
  int nsh;
  if (cwm_wlist_read(shipped, &sh, &nsh, &e)) {
    CHECKF(0, "%s", e.msg);
  } else {
    CHECK(nsh == 480);
    go.count = 480;
    go.seed = 1;
    go.suite = suite_path();
    cwm_workgen(&go, &a, &na, NULL, &e);
    for (int i = 0; i < nsh && i < na; i++) {
      CHECKF(!strcmp(sh[i].spec, a[i].spec) && !strcmp(sh[i].id, a[i].id), "row %d: %s vs %s", i, sh[i].spec, a[i].spec);
      for (int s = 0; s < ns; s++) {
        int c1 = 0;
        cwm_spec_compare(sh[i].spec, suite[s].spec, 1, &c1, &e);
        CHECKF(!c1, "%s has the shape of %s", sh[i].id, suite[s].id);
      }
      cwm_workload *w = cwm_wl_entry_workload(&sh[i], &e);
      char spec[512];
      int ok = w && cwm_workload_spec(w, spec, sizeof spec, &e) == 0;
      /* the spec found writes the same text (a pointwise convolution's H x W is one flattened
       * axis, so 37 x 26 comes back as 26 x 37) */
      int eq = 0;
      char *t1 = ok ? cwm_op_to_text(spec, &e) : NULL, *t2 = ok ? cwm_op_to_text(sh[i].spec, &e) : NULL;
      eq = t1 && t2 && !strcmp(t1, t2);
      free(t1);
      free(t2);
      CHECKF(ok && eq, "%s: spec %s maps back to %s", sh[i].id, sh[i].spec, ok ? spec : e.msg);
      cwm_workload_free(w);
    }
    /* data/heldout_workloads.tsv: exactly the rows whose key is held out at fraction 0.15, in order */
    char held[512];
    source_path(held, sizeof held, "data/heldout_workloads.tsv");
    cwm_wl_entry *hw;
    int nhw, k = 0;
    if (cwm_wlist_read(held, &hw, &nhw, &e)) {
      CHECKF(0, "%s", e.msg);
    } else {
      for (int i = 0; i < nsh; i++) {
        cwm_workload *w = cwm_wl_entry_workload(&sh[i], &e);
        cwm_dag *d = w ? cwm_dag_new(w, &e) : NULL;
        if (d && cwm_split_part(cwm_dag_key(d), 0.15) == CWM_SPLIT_VALID) {
          CHECKF(k < nhw && !strcmp(hw[k].id, sh[i].id) && !strcmp(hw[k].spec, sh[i].spec),
                 "held-out row %d should be %s", k, sh[i].id);
          k++;
        }
        cwm_dag_free(d);
        cwm_workload_free(w);
      }
      CHECKF(k == nhw && nhw == 65, "%d held-out rows listed, %d held out", nhw, k);
      free(hw);
    }
    free(a);
    free(sh);
  }
  free(suite);
}

/* ------------------------------------------------------------------ replay byte for byte */

static void test_replay_bytes(void) {
  const char *specs[] = {"conv2d C=5 H=13 W=13 K=7 R=3 S=3 stride=2 pad=1 bias=1 act=relu",
                         "dense M=17 N=33 K=19 bias=1 act=gelu", "layernorm M=7 N=33", "softmax B=2 M=3 N=17"};
  char path[256];
  snprintf(path, sizeof path, "%s", tmp("traj.jsonl"));
  FILE *f = fopen(path, "w");
  int total = 0;
  cwm_err e = {0};
  for (int s = 0; s < 4; s++) {
    cwm_workload *w = cwm_workload_from_spec(specs[s], NULL, &e);
    cwm_dag *d = cwm_dag_new(w, &e);
    cwm_traj *t;
    int nt;
    CHECKF(cwm_traj_sample(d, NULL, 7, 12, &t, &nt, &e) == 0, "%s", e.msg);
    CHECK(nt >= 6);
    for (int k = 0; k < nt; k++) {
      cwm_state *st;
      CHECK(cwm_state_replay(d, t[k].steps, t[k].nsteps, &st, NULL, &e) == 0);
      char *p = cwm_state_print(st);
      char name[64];
      snprintf(name, sizeof name, "final.%d.txt", total);
      FILE *g = fopen(tmp(name), "w");
      fputs(p, g);
      fclose(g);
      free(p);
      cwm_state_free(st);
      cwm_buf b;
      cwm_buf_init(&b);
      cwm_traj_to_json(&t[k], &b);
      fprintf(f, "%s\n", b.s);
      cwm_buf_free(&b);
      total++;
    }
    cwm_trajs_free(t, nt);
    cwm_dag_free(d);
    cwm_workload_free(w);
  }
  fclose(f);
  /* re-read, replay from the stored workload text alone, compare with the stored prints */
  cwm_traj_iter *it = cwm_traj_iter_open(path, &e);
  cwm_dag_cache *c = cwm_dag_cache_new();
  cwm_traj t;
  int i = 0, same = 0;
  while (cwm_traj_iter_next(it, &t, &e) == 1) {
    const cwm_dag *d = cwm_dag_cache_get(c, &t, &e);
    cwm_state *st = NULL;
    cwm_state **trace = NULL;
    int rc = d ? cwm_traj_replay(d, &t, &st, &trace, &e) : -1;
    CHECKF(rc == 0, "trajectory %d: %s", i, e.msg);
    if (rc == 0) {
      char name[64];
      snprintf(name, sizeof name, "final.%d.txt", i);
      char *stored = cwm_read_file(tmp(name), NULL, &e);
      char *p = cwm_state_print(st), *q = cwm_state_print(trace[t.nsteps]);
      same += stored && !strcmp(stored, p) && !strcmp(p, q);
      free(stored);
      free(p);
      free(q);
      for (int k = 0; k <= t.nsteps; k++) cwm_state_free(trace[k]);
      free(trace);
      cwm_state_free(st);
      /* a wrong stored hash is caught */
      memcpy(t.final, "0000000000000000", 17);
      CHECK(cwm_traj_replay(d, &t, NULL, NULL, &e) == CWM_ESTEP);
    }
    cwm_traj_free(&t);
    i++;
  }
  CHECK(i == total);
  CHECKF(same == total, "%d of %d trajectories replay to their stored print", same, total);
  cwm_traj_iter_close(it);
  cwm_dag_cache_free(c);

  /* stats of the trajectory file */
  cwm_buf rep;
  cwm_buf_init(&rep);
  CHECK(cwm_dataset_stats(path, &rep, &e) == 0);
  CHECK(rep.s && strstr(rep.s, "conv2d") && strstr(rep.s, "layernorm") && strstr(rep.s, "softmax") &&
        strstr(rep.s, "trajectory length"));
  cwm_buf_free(&rep);
}

/* ------------------------------------------------------------------ noise pairs */

static cwm_measure_opts quick_opts(void) {
  cwm_measure_opts mo = test_measure_opts(1);
  mo.threads = 1;
  return mo;
}

/* Measures (with the reference check) the state of steps on w; 1 if it ran and agreed. */
static int runs_and_agrees(const cwm_workload *w, const cwm_step *steps, int n) {
  cwm_measure_opts mo = quick_opts();
  cwm_err e = {0};
  cwm_task *t = cwm_task_new(w, &mo, &e);
  if (!t) return 0;
  cwm_state *s = NULL;
  int ok = 0;
  if (cwm_state_replay(cwm_task_dag(t), steps, n, &s, NULL, &e) == 0) {
    cwm_record r;
    if (cwm_task_measure(t, &s, 1, &r, &e) == 0) {
      ok = r.error == 0;
      if (!ok) fprintf(stderr, "  %s: error %d: %s\n", w->name, r.error, r.msg);
      cwm_record_free(&r);
    }
  }
  if (!ok && e.msg[0]) fprintf(stderr, "  %s: %s\n", w->name, e.msg);
  cwm_state_free(s);
  cwm_task_free(t);
  return ok;
}

static void check_pair(const char *spec, int kind, int want_kind, const char *want_what, int pairs) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
  cwm_dag *d = cwm_dag_new(w, &e);
  cwm_traj *t;
  int nt;
  CHECK(cwm_traj_sample(d, NULL, 5, 16, &t, &nt, &e) == 0);
  int made = 0;
  for (int k = 0; k < nt && made < pairs; k++) {
    for (uint64_t seed = 1; seed < 40 && made < pairs; seed++) {
      cwm_rng r;
      cwm_rng_seed(&r, seed + 1000 * (uint64_t)k);
      char *a, *b;
      cwm_noise_info info;
      if (cwm_noise_pair_ex(d, t[k].steps, t[k].nsteps, kind, &r, &a, &b, &info, &e)) {
        CHECKF(0, "%s kind %d: %s", spec, kind, e.msg);
        break;
      }
      if (want_what && !strstr(info.what, want_what)) {
        free(a);
        free(b);
        cwm_noise_info_free(&info);
        continue;
      }
      made++;
      CHECKF(info.kind == want_kind, "%s: kind %d made %d", spec, kind, info.kind);
      CHECKF(strcmp(a, b) != 0, "%s kind %d (%s): the two prints are equal", spec, kind, info.what);
      /* b replays from its own workload and steps to the same text */
      cwm_dag *db = cwm_dag_new(info.wb, &e);
      cwm_state *sb = NULL;
      CHECK(db && cwm_state_replay(db, info.steps_b, info.nsteps_b, &sb, NULL, &e) == 0);
      if (sb) {
        char *pb = cwm_state_print(sb);
        CHECK(!strcmp(pb, b));
        free(pb);
      }
      cwm_state_free(sb);
      cwm_dag_free(db);
      /* both kernels compile and agree with their references */
      CHECKF(runs_and_agrees(w, t[k].steps, t[k].nsteps), "%s: program a fails", spec);
      CHECKF(runs_and_agrees(info.wb, info.steps_b, info.nsteps_b), "%s kind %d (%s): program b fails", spec, kind, info.what);
      fprintf(stderr, "noise kind %d on %s: %s (prints of %zu and %zu bytes)\n", kind, spec, info.what, strlen(a), strlen(b));
      free(a);
      free(b);
      cwm_noise_info_free(&info);
      break; /* the next pair from another trajectory */
    }
  }
  CHECKF(made == pairs, "%s kind %d: %d of %d pairs made", spec, kind, made, pairs);
  cwm_trajs_free(t, nt);
  cwm_dag_free(d);
  cwm_workload_free(w);
}

static void test_noise(void) {
  /* the 1024-vs-1023 case in small: guards appear, the computation is the same */
  check_pair("matmul M=24 N=24 K=24", CWM_NOISE_SHAPE, CWM_NOISE_SHAPE, "24 -> 23", 2);
  check_pair("conv2d C=4 H=10 W=10 K=8 R=3 S=3 stride=1 pad=1 bias=1 act=relu", CWM_NOISE_SHAPE, CWM_NOISE_SHAPE, NULL, 1);
  check_pair("dense M=16 N=24 K=20 bias=1 act=gelu", CWM_NOISE_RENAME, CWM_NOISE_RENAME, NULL, 1);
  check_pair("layernorm M=6 N=40", CWM_NOISE_REORDER, CWM_NOISE_REORDER, "swapped", 1);
  check_pair("softmax B=2 M=3 N=17", CWM_NOISE_REORDER, CWM_NOISE_RENAME, NULL, 1); /* no independent pair */
  /* the plain entry point */
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec("matmul M=24 N=24 K=24", NULL, &e);
  cwm_dag *d = cwm_dag_new(w, &e);
  cwm_rng r;
  cwm_rng_seed(&r, 1);
  char *a, *b;
  CHECK(cwm_noise_pair(d, NULL, 0, CWM_NOISE_SHAPE, &r, &a, &b, &e) == 0);
  CHECK(a && b && strcmp(a, b));
  free(a);
  free(b);
  CHECK(cwm_noise_pair(d, NULL, 0, 7, &r, &a, &b, &e) == CWM_EUSAGE);
  cwm_dag_free(d);
  cwm_workload_free(w);
}

/* ------------------------------------------------------------------ measured collection */

static void test_measure(void) {
  cwm_wl_entry wl[2];
  memset(wl, 0, sizeof wl);
  snprintf(wl[0].id, sizeof wl[0].id, "tiny_mm");
  snprintf(wl[0].spec, sizeof wl[0].spec, "matmul M=8 N=12 K=9");
  snprintf(wl[1].id, sizeof wl[1].id, "tiny_sm");
  snprintf(wl[1].spec, sizeof wl[1].spec, "softmax B=1 M=4 N=9");
  cwm_collect_opts o;
  cwm_collect_opts_default(&o);
  test_env_measure(&o.measure);
  o.per_workload = 4;
  o.population = 32;
  o.generations = 1;
  o.measure = quick_opts();
  static char logp[256];
  snprintf(logp, sizeof logp, "%s", tmp("measured.jsonl"));
  o.log_path = logp;
  cwm_collect_result res;
  cwm_err e = {0};
  CHECKF(cwm_dataset_measure(wl, 2, &o, &res, &e) == 0, "%s", e.msg);
  CHECKF(res.done == 2 && res.measured == 8 && res.skipped == 0, "done %d measured %d skipped %d", res.done,
         res.measured, res.skipped);
  /* a rerun measures nothing; a larger target continues both */
  CHECK(cwm_dataset_measure(wl, 2, &o, &res, &e) == 0);
  CHECKF(res.skipped == 2 && res.measured == 0, "rerun: skipped %d measured %d", res.skipped, res.measured);
  o.per_workload = 6;
  CHECK(cwm_dataset_measure(wl, 2, &o, &res, &e) == 0);
  CHECKF(res.measured == 4 && res.resumed == 8, "continue: measured %d resumed %d", res.measured, res.resumed);
  /* 12 records, 6 per workload, no program twice */
  cwm_record *recs;
  int n, nbad;
  CHECK(cwm_log_read(o.log_path, &recs, &n, &nbad, &e) == 0);
  CHECK(n == 12 && nbad == 0);
  int dup = 0, per[2] = {0, 0}, ok = 0;
  char k0[17];
  cwm_workload *w0 = cwm_wl_entry_workload(&wl[0], &e);
  cwm_workload_key(w0, k0);
  cwm_workload_free(w0);
  for (int i = 0; i < n; i++) {
    per[strcmp(recs[i].key, k0) != 0]++;
    ok += recs[i].error == 0;
    for (int j = 0; j < i; j++)
      dup += !strcmp(recs[i].key, recs[j].key) && recs[i].nsteps == recs[j].nsteps &&
             !memcmp(recs[i].steps, recs[j].steps, sizeof(cwm_step) * (size_t)recs[i].nsteps);
  }
  CHECK(per[0] == 6 && per[1] == 6 && dup == 0 && ok > 6);
  cwm_records_free(recs, n);
  /* the reader and stats read logs too */
  FILE *f = fopen(o.log_path, "a");
  fputs("{\"i\":[[\"cut short\n", f);
  fclose(f);
  cwm_buf rep;
  cwm_buf_init(&rep);
  CHECK(cwm_dataset_stats(o.log_path, &rep, &e) == 0);
  CHECKF(rep.s && strstr(rep.s, "12 measured") && strstr(rep.s, "latency") && strstr(rep.s, "matmul") &&
             strstr(rep.s, "corrupt lines skipped: 1"),
         "%s", rep.s ? rep.s : "");
  fprintf(stderr, "%s", rep.s ? rep.s : "");
  cwm_buf_free(&rep);

  /* label noise: re-measuring every good record (the corrupt last line is skipped) */
  cwm_remeasure_opts ro;
  cwm_remeasure_opts_default(&ro);
  test_env_measure(&ro.measure);
  ro.log_path = o.log_path;
  static char outp[256];
  snprintf(outp, sizeof outp, "%s", tmp("remeasured.jsonl"));
  ro.out_path = outp;
  ro.fraction = 1.0;
  ro.measure = quick_opts();
  cwm_remeasure_result rr;
  CHECKF(cwm_dataset_remeasure(&ro, &rr, &e) == 0, "%s", e.msg);
  CHECKF(rr.selected == ok && rr.measured == ok && rr.resumed == 0 && rr.compared + rr.failed_now == ok &&
             rr.median_rel_diff >= 0 && rr.p90_rel_diff >= rr.median_rel_diff,
         "selected %d measured %d compared %d (good %d)", rr.selected, rr.measured, rr.compared, ok);
  /* resumed: nothing measured twice, the same comparison */
  cwm_remeasure_result r2;
  CHECK(cwm_dataset_remeasure(&ro, &r2, &e) == 0);
  CHECKF(r2.measured == 0 && r2.resumed == ok && fabs(r2.median_rel_diff - rr.median_rel_diff) < 1e-6, "resume: measured %d resumed %d",
         r2.measured, r2.resumed);
  CHECKF(rr.nstretch == 1 && rr.stretch[0].n == rr.compared && rr.median_ratio > 0,
         "one stretch expected: %d stretches", rr.nstretch);
  /* drift: the log's first half timed two hours earlier on a machine 4x slower, the second half
   * timed as the re-measurement did: two stretches, t2/t1 exactly 1/4 and 1 */
  {
    CHECK(cwm_log_read(o.log_path, &recs, &n, &nbad, &e) == 0);
    cwm_record *again;
    int na, nbad2;
    CHECK(cwm_log_read(outp, &again, &na, &nbad2, &e) == 0);
    static char drift[256];
    snprintf(drift, sizeof drift, "%s", tmp("drift.jsonl"));
    remove(drift);
    cwm_log *dl = cwm_log_open(drift, &e);
    CHECK(dl != NULL);
    int early = 0, late = 0;
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < na; j++)
        if (!strcmp(recs[i].key, again[j].key) && recs[i].nsteps == again[j].nsteps && again[j].error == 0 &&
            !memcmp(recs[i].steps, again[j].steps, sizeof(cwm_step) * (size_t)recs[i].nsteps)) {
          recs[i].ncosts = again[j].ncosts;
          for (int k = 0; k < again[j].ncosts; k++) recs[i].costs[k] = again[j].costs[k] * (i < n / 2 ? 4 : 1);
          early += i < n / 2;
          late += i >= n / 2;
        }
      if (i < n / 2) recs[i].timestamp -= 7200;
      CHECK(cwm_log_append(dl, &recs[i], &e) == 0);
    }
    cwm_log_close(dl);
    cwm_records_free(recs, n);
    cwm_records_free(again, na);
    cwm_remeasure_opts rd = ro;
    rd.log_path = drift;
    cwm_remeasure_result r3;
    CHECKF(cwm_dataset_remeasure(&rd, &r3, &e) == 0, "%s", e.msg);
    CHECKF(early > 0 && late > 0 && r3.measured == 0 && r3.nstretch == 2 && r3.stretch[0].n == early &&
               r3.stretch[1].n == late && r3.stretch[1].first - r3.stretch[0].last > 3600 &&
               fabs(r3.stretch[0].median_ratio - 0.25) < 1e-9 && fabs(r3.stretch[0].median_rel_diff - 0.75) < 1e-9 &&
               fabs(r3.stretch[1].median_ratio - 1) < 1e-9 && r3.stretch[1].median_rel_diff < 1e-9,
           "stretches %d: %d pairs ratio %.3f, %d pairs ratio %.3f (early %d late %d)", r3.nstretch,
           r3.stretch[0].n, r3.stretch[0].median_ratio, r3.stretch[1].n, r3.stretch[1].median_ratio, early, late);
  }
  /* a small fraction picks a subset */
  ro.fraction = 0.3;
  CHECK(cwm_dataset_remeasure(&ro, &r2, &e) == 0);
  CHECK(r2.selected < ok && r2.measured == 0);
}

/* Grouping by workload key: first appearance order, skipped rows in no group. */
static void test_group_by_key(void) {
  const char *keys[6] = {"a", "b", "a", "c", "b", "a"};
  cwm_traj t[6];
  memset(t, 0, sizeof t);
  for (int i = 0; i < 6; i++) snprintf(t[i].key, sizeof t[i].key, "%s", keys[i]);
  int gid[6], first[6];
  CHECK(cwm_traj_group_by_key(t, 6, NULL, gid, first) == 3);
  CHECK(gid[0] == 0 && gid[1] == 1 && gid[2] == 0 && gid[3] == 2 && gid[4] == 1 && gid[5] == 0);
  CHECK(first[0] == 0 && first[1] == 1 && first[2] == 3);
  unsigned char skip[6] = {1, 0, 0, 1, 0, 0};
  CHECK(cwm_traj_group_by_key(t, 6, skip, gid, NULL) == 2);
  CHECK(gid[0] == -1 && gid[1] == 0 && gid[2] == 1 && gid[3] == -1 && gid[4] == 0 && gid[5] == 1);
  CHECK(cwm_traj_group_by_key(t, 0, NULL, gid, NULL) == 0);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cwm-test-dataset-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  test_reader_streams(); /* first: it measures memory */
  test_generator();
  test_group_by_key();
  test_replay_bytes();
  test_noise();
  test_measure();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (!test_failures && system(cmd)) return 1;
  return test_done();
}

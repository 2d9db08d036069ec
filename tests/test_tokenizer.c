/* test_tokenizer.c: the world model's tokenizer: the token classes on hand-written lines, the
 * noise pairs it must see as near (a shape one off) or equal (renamed axes), <unk> for what the
 * vocabulary lacks, deterministic vocabularies, save/load with every truncation and altered
 * byte rejected, and the speed on real printed states. */
#define _GNU_SOURCE
#include "cwm/dataset.h"
#include "cwm/train.h"
#include "cwm/state.h"
#include "cwm/te.h"
#include "cwm/tokenizer.h"
#include "testlib.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The token names of text, space-separated (owned). */
static char *names_of(const cwm_vocab *v, const char *text) {
  int *ids, n;
  cwm_err e = {0};
  if (cwm_tokenize(v, text, &ids, &n, &e)) return cwm_xstrdup(e.msg);
  cwm_buf b;
  cwm_buf_init(&b);
  for (int i = 0; i < n; i++) cwm_buf_printf(&b, "%s%s", i ? " " : "", cwm_token_name(v, ids[i]));
  free(ids);
  if (!b.s) cwm_buf_puts(&b, "");
  return cwm_buf_take(&b);
}

static cwm_vocab *vocab_of(const char *const *texts, int n, int min_count) {
  cwm_vocab *v = cwm_vocab_new_builder();
  cwm_err e = {0};
  for (int i = 0; i < n; i++) CHECK(cwm_vocab_add_text(v, texts[i], &e) == 0);
  CHECK(cwm_vocab_finish(v, min_count, &e) == 0);
  return v;
}

static void expect_tokens(const cwm_vocab *v, const char *text, const char *want) {
  char *got = names_of(v, text);
  CHECKF(strcmp(got, want) == 0, "\n  text: %s\n  got:  %s\n  want: %s", text, got, want);
  free(got);
}

static int count_unk(const int *ids, int n) {
  int k = 0;
  for (int i = 0; i < n; i++) k += ids[i] == CWM_TOK_UNK;
  return k;
}

/* ------------------------------------------------------------ token classes */

static const char *const matmul_a =
    "placeholder A[1023, 1023]\n"
    "placeholder B[1023, 1023]\n"
    "pragma auto_unroll_max_step=512\n"
    "for j (0,1023)\n"
    "  for i.0 (0,33)\n"
    "    for i.1 (0,31) auto_unroll\n"
    "      out[((i.0)*31 + i.1), j] = 0\n"
    "for k.0 (0,2)\n"
    "  parallel j (0,1023)\n"
    "    for k.2 (0,29)\n"
    "      for k.1 (0,1)\n"
    "        for i.0 (0,33)\n"
    "          for k.3 (0,33)\n"
    "            parallel i.1 (0,31) auto_unroll\n"
    "              if (((k.0)*957 + (k.2)*33 + k.3) < 1023) out[((i.0)*31 + i.1), j] += (A[((i.0)*31 + i.1), "
    "((k.0)*957 + (k.2)*33 + k.3)] * B[((k.0)*957 + (k.2)*33 + k.3), j])\n";

/* the same schedule with K = 1024 (cwm dataset noise --kind 0) */
static const char *const matmul_b =
    "placeholder A[1023, 1024]\n"
    "placeholder B[1024, 1023]\n"
    "pragma auto_unroll_max_step=512\n"
    "for j (0,1023)\n"
    "  for i.0 (0,33)\n"
    "    for i.1 (0,31) auto_unroll\n"
    "      out[((i.0)*31 + i.1), j] = 0\n"
    "for k.0 (0,2)\n"
    "  parallel j (0,1023)\n"
    "    for k.2 (0,29)\n"
    "      for k.1 (0,1)\n"
    "        for i.0 (0,33)\n"
    "          for k.3 (0,33)\n"
    "            parallel i.1 (0,31) auto_unroll\n"
    "              if (((k.0)*957 + (k.2)*33 + k.3) < 1024) out[((i.0)*31 + i.1), j] += (A[((i.0)*31 + i.1), "
    "((k.0)*957 + (k.2)*33 + k.3)] * B[((k.0)*957 + (k.2)*33 + k.3), j])\n";

/* the axes renamed (kind 1): i->kw j->c k->x */
static const char *const matmul_r =
    "placeholder A[1023, 1023]\n"
    "placeholder B[1023, 1023]\n"
    "pragma auto_unroll_max_step=512\n"
    "for c (0,1023)\n"
    "  for kw.0 (0,33)\n"
    "    for kw.1 (0,31) auto_unroll\n"
    "      out[((kw.0)*31 + kw.1), c] = 0\n"
    "for x.0 (0,2)\n"
    "  parallel c (0,1023)\n"
    "    for x.2 (0,29)\n"
    "      for x.1 (0,1)\n"
    "        for kw.0 (0,33)\n"
    "          for x.3 (0,33)\n"
    "            parallel kw.1 (0,31) auto_unroll\n"
    "              if (((x.0)*957 + (x.2)*33 + x.3) < 1023) out[((kw.0)*31 + kw.1), c] += (A[((kw.0)*31 + kw.1), "
    "((x.0)*957 + (x.2)*33 + x.3)] * B[((x.0)*957 + (x.2)*33 + x.3), c])\n";

static const char *const softmax_text =
    "placeholder X[1, 12, 128]\n"
    "allocate mx[1, 12]\n"
    "allocate mx.rf[12, 8]\n"
    "for b@i (0,12)\n"
    "  mx[0, (((b@i) % 12))] = -inf\n"
    "  vectorize k.0@k.1.1 (0,16)\n"
    "    mx[0, (((b@i) % 12))] max= X[0, (((b@i) % 12)), ((k.0@k.1.1)*8 + 1)]\n"
    "allocate out.local[4, 8]\n"
    "    e[0, i, j] = exp((X[0, i, j] - mx[0, i]))\n"
    "    mu.rf[i, k.0] += (X[i, ((k.0)*64 + k.1)] * 0.001953125)\n"
    "    y[i] = ((x[i] * 0.5) + 1e-05) + 2.0 + 0.0\n";

static void test_classes(void) {
  const char *texts[] = {matmul_a, softmax_text};
  cwm_vocab *v = vocab_of(texts, 2, 1);
  expect_tokens(v, "placeholder A[1023, 1024]\n",
                "<d:0> placeholder <t:0> [ <n:b10> <#1> <#0> <#2> <#3> , <n:b10> <#1> <#0> <#2> <#4> ]");
  expect_tokens(v, "    for i.1 (0,31) auto_unroll\n",
                "<d:2> for <ax:0> .1 ( <n:0> , <n:b5> <#3> <#1> ) auto_unroll");
  expect_tokens(v, "pragma auto_unroll_max_step=512", "<d:0> pragma auto_unroll_max_step = <n:b9> <#5> <#1> <#2>");
  expect_tokens(v, "      out[((i.0)*31 + i.1), j] = 0\n",
                "<d:3> <t:0> [ ( ( <ax:0> .0 ) * <n:b5> <#3> <#1> + <ax:0> .1 ) , <ax:1> ] = <n:0>");
  /* fused names, '@' and suffixes, -inf, max=, a local buffer, a function, floats */
  expect_tokens(v, "for b@i (0,12)\n  mx[0, (((b@i) % 12))] = -inf\n",
                "<d:0> for <ax:0> @ <ax:1> ( <n:0> , <n:b4> <#1> <#2> ) "
                "<d:1> <t:0> [ <n:0> , ( ( ( <ax:0> @ <ax:1> ) % <n:b4> <#1> <#2> ) ) ] = - inf");
  expect_tokens(v, "vectorize k.0@k.1.1 (0,16)\n  mx[0] max= X[1]\n",
                "<d:0> vectorize <ax:0> .0 @ <ax:0> .1 .1 ( <n:0> , <n:b4> <#1> <#6> ) "
                "<d:1> <t:0> [ <n:0> ] max= <t:1> [ <n:1> ]");
  expect_tokens(v, "allocate out.local[4, 8]", "<d:0> allocate <t:0> .local [ <n:b2> <#4> , <n:b3> <#8> ]");
  expect_tokens(v, "e[i] = exp((X[i] - mx[i]))",
                "<d:0> <t:0> [ <ax:0> ] = exp ( ( <t:1> [ <ax:0> ] - <t:2> [ <ax:0> ] ) )");
  expect_tokens(v, "y[i] = 0.001953125 + 0.5 + 1e-05 + 2.0 + 0.0",
                "<d:0> <t:0> [ <ax:0> ] = <f:b-9> <#1> <#9> <#5> + <f:b-1> <#5> + <f:b-17> <#1> + "
                "<f:b1> <#2> + <f:0>");
  /* buckets: round(log2 n), so a power of two sits in the middle of its bucket */
  expect_tokens(v, "0 1 2 3 5 6 724 725 1448 1449",
                "<d:0> <n:0> <n:1> <n:b1> <#2> <n:b2> <#3> <n:b2> <#5> <n:b3> <#6> <n:b9> <#7> <#2> <#4> "
                "<n:b10> <#7> <#2> <#5> <n:b10> <#1> <#4> <#4> <#8> <n:b11> <#1> <#4> <#4> <#9>");
  expect_tokens(v, "4611686018427387903 4611686018427387904",
                "<d:0> <n:b62> <#4> <#6> <#1> <#1> <#6> <#8> <#6> <#0> <#1> <#8> <#4> <#2> <#7> <#3> <#8> <#7> "
                "<#9> <#0> <#3> <n:big> <#4> <#6> <#1> <#1> <#6> <#8> <#6> <#0> <#1> <#8> <#4> <#2> <#7> <#3> "
                "<#8> <#7> <#9> <#0> <#4>");
  /* indentation: depth per line, blank lines vanish, deep nests cap at 63 */
  expect_tokens(v, "for i (0,2)\n\n   \n  for j (0,2)\n\tout[i] = 0\n",
                "<d:0> for <ax:0> ( <n:0> , <n:b1> <#2> ) <d:1> for <ax:1> ( <n:0> , <n:b1> <#2> ) "
                "<d:1> <t:0> [ <ax:0> ] = <n:0>");
  char deep[200];
  memset(deep, ' ', 150);
  strcpy(deep + 150, "x[0]");
  expect_tokens(v, deep, "<d:63> <t:0> [ <n:0> ]");
  /* an axis named like a word stays an axis once declared */
  expect_tokens(v, "for inf (0,2)\n  out[inf] = inf", "<d:0> for <ax:0> ( <n:0> , <n:b1> <#2> ) <d:1> <t:0> [ <ax:0> ] = <ax:0>");
  /* canonical maps are per text */
  expect_tokens(v, "B[q]", "<d:0> <t:0> [ <ax:0> ]");
  expect_tokens(v, "", "");
  expect_tokens(v, "\n\n  \n", "");
  cwm_vocab_free(v);
}

/* ------------------------------------------------------------ noise pairs */

static int differing(const int *a, const int *b, int n) {
  int d = 0;
  for (int i = 0; i < n; i++) d += a[i] != b[i];
  return d;
}

/* Length of the longest common subsequence. */
static int lcs(const int *a, int na, const int *b, int nb) {
  int *prev = cwm_xcalloc((size_t)nb + 1, sizeof *prev), *cur = cwm_xcalloc((size_t)nb + 1, sizeof *cur);
  for (int i = 1; i <= na; i++) {
    for (int j = 1; j <= nb; j++)
      cur[j] = a[i - 1] == b[j - 1] ? prev[j - 1] + 1 : prev[j] > cur[j - 1] ? prev[j] : cur[j - 1];
    int *t = prev;
    prev = cur;
    cur = t;
  }
  int r = prev[nb];
  free(prev);
  free(cur);
  return r;
}

static void test_pairs(void) {
  const char *texts[] = {matmul_a};
  cwm_vocab *v = vocab_of(texts, 1, 1);
  cwm_err e = {0};
  int *a, *b, *r, na, nb, nr;
  CHECK(cwm_tokenize(v, matmul_a, &a, &na, &e) == 0);
  CHECK(cwm_tokenize(v, matmul_b, &b, &nb, &e) == 0);
  CHECK(cwm_tokenize(v, matmul_r, &r, &nr, &e) == 0);
  /* 1023 -> 1024 in three places: one digit token each, the buckets equal */
  CHECKF(na == nb && differing(a, b, na) == 3, "1023 vs 1024: %d and %d tokens, %d differ", na, nb,
         na == nb ? differing(a, b, na) : -1);
  CHECKF(nr == na && memcmp(a, r, sizeof *a * (size_t)na) == 0, "renamed axes change the ids");
  CHECK(count_unk(a, na) == 0 && count_unk(b, nb) == 0 && count_unk(r, nr) == 0);
  free(a);
  free(b);
  free(r);
  cwm_vocab_free(v);
}

/* ------------------------------------------------------------ real printed states */

typedef struct {
  char **t;
  int n, cap;
} texts;

static void texts_add(texts *x, char *s) {
  if (x->n == x->cap) {
    x->cap = x->cap ? 2 * x->cap : 64;
    x->t = cwm_xrealloc(x->t, (size_t)x->cap * sizeof *x->t);
  }
  x->t[x->n++] = s;
}

static void texts_free(texts *x) {
  for (int i = 0; i < x->n; i++) free(x->t[i]);
  free(x->t);
}

static cwm_dag *dag_of(const char *spec) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
  CHECKF(w, "%s: %s", spec, e.msg);
  if (!w) return NULL;
  cwm_dag *d = cwm_dag_new(w, &e);
  cwm_workload_free(w);
  CHECKF(d, "%s: %s", spec, e.msg);
  return d;
}

/* Final states of sampled trajectories of spec; with pairs, checks the noise pairs too. */
static void sample_states(const char *spec, int n, texts *out, const cwm_vocab *pairs_vocab) {
  cwm_dag *d = dag_of(spec);
  if (!d) return;
  cwm_err e = {0};
  cwm_traj *t = NULL;
  int nt = 0;
  CHECKF(cwm_traj_sample(d, NULL, 7, n, &t, &nt, &e) == 0, "%s: %s", spec, e.msg);
  for (int k = 0; k < nt; k++) {
    cwm_state *s = NULL;
    if (cwm_state_replay(d, t[k].steps, t[k].nsteps, &s, NULL, &e)) {
      CHECKF(0, "%s: %s", spec, e.msg);
      continue;
    }
    if (out) texts_add(out, cwm_state_print(s));
    cwm_state_free(s);
    if (!pairs_vocab || k >= 4) continue;
    for (int kind = CWM_NOISE_SHAPE; kind <= CWM_NOISE_RENAME; kind++) {
      cwm_rng r;
      cwm_rng_seed(&r, 100 + (uint64_t)k);
      char *ta, *tb;
      if (cwm_noise_pair(d, t[k].steps, t[k].nsteps, kind, &r, &ta, &tb, &e)) {
        CHECKF(0, "%s noise %d: %s", spec, kind, e.msg);
        continue;
      }
      int *a, *b, na, nb;
      CHECK(cwm_tokenize(pairs_vocab, ta, &a, &na, &e) == 0);
      CHECK(cwm_tokenize(pairs_vocab, tb, &b, &nb, &e) == 0);
      if (kind == CWM_NOISE_RENAME) {
        CHECKF(na == nb && !memcmp(a, b, sizeof *a * (size_t)na), "%s: renamed axes change the tokens", spec);
      } else {
        /* a shape one off: the same nest, a few sizes differ and guards may appear; most of
         * the shorter token list survives in the longer one */
        double close = (double)lcs(a, na, b, nb) / (na < nb ? na : nb);
        if (k == 0) fprintf(stderr, "  %s shape noise: %d vs %d tokens, %.1f%% in common\n", spec, na, nb, 100 * close);
        CHECKF(close > 0.8, "%s: shape noise: %d vs %d tokens, %.2f in common", spec, na, nb, close);
      }
      free(a);
      free(b);
      free(ta);
      free(tb);
    }
  }
  cwm_trajs_free(t, nt);
  cwm_dag_free(d);
}

static const char *const train_specs[] = {
    "dense M=64 N=96 K=80 bias=1 act=gelu",
    "matmul M=96 N=64 K=128",
    "batch_matmul B=4 M=32 N=48 K=64",
    "softmax B=2 M=12 N=96",
    "layernorm M=32 N=192",
    "conv2d C=8 H=14 W=14 K=16 R=3 S=3 stride=1 pad=1 bias=1 act=relu",
    "dwconv2d C=16 H=28 W=28 R=3 S=3 stride=2 pad=1",
};

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best of three in CPU seconds: the two cores are shared, wall time measures the neighbours. */
static double now_best(const cwm_vocab *v, const char *text, size_t len, int *ntok) {
  double best = 1e9;
  for (int rep = 0; rep < 3; rep++) {
    int *ids, n;
    cwm_err e = {0};
    double t0 = cpu_now();
    CHECK(cwm_tokenize_n(v, text, len, &ids, &n, &e) == 0);
    double dt = cpu_now() - t0;
    if (dt < best) best = dt;
    *ntok = n;
    free(ids);
  }
  return best;
}

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static void test_real_states(void) {
  texts train = {0}, held = {0};
  int nspec = (int)(sizeof train_specs / sizeof *train_specs);
  for (int i = 0; i < nspec; i++) sample_states(train_specs[i], 24, &train, NULL);
  CHECK(train.n >= 5 * nspec);
  cwm_vocab *v = cwm_vocab_new_builder();
  cwm_err e = {0};
  size_t bytes = 0;
  for (int i = 0; i < train.n; i++) {
    CHECK(cwm_vocab_add_text(v, train.t[i], &e) == 0);
    bytes += strlen(train.t[i]);
  }
  CHECK(cwm_vocab_finish(v, 1, &e) == 0);
  fprintf(stderr, "  vocabulary of %d states (%zu bytes): %d tokens\n", train.n, bytes, cwm_vocab_size(v));
  CHECK(cwm_vocab_size(v) < 1000);
  long ntok = 0, unk = 0;
  for (int i = 0; i < train.n; i++) {
    int *ids, n;
    CHECK(cwm_tokenize(v, train.t[i], &ids, &n, &e) == 0);
    ntok += n;
    unk += count_unk(ids, n);
    for (int k = 0; k < n; k++) CHECK(ids[k] > CWM_TOK_PAD && ids[k] < cwm_vocab_size(v));
    free(ids);
  }
  CHECKF(unk == 0, "%ld <unk> in the training texts", unk);
  fprintf(stderr, "  %.2f bytes per token, %ld tokens per state on average\n", (double)bytes / ntok, ntok / train.n);
  /* workloads never seen: shapes and names differ, the vocabulary still covers them */
  sample_states("dense M=128 N=768 K=768 bias=1 act=gelu", 12, &held, v);
  sample_states("matmul M=63 N=65 K=100", 12, &held, v);
  sample_states("conv2d C=3 H=25 W=25 K=32 R=3 S=3 stride=2 pad=1 bias=1 act=relu", 12, &held, v);
  sample_states("layernorm M=20 N=200", 8, &held, v);
  long hn = 0, hu = 0;
  for (int i = 0; i < held.n; i++) {
    int *ids, n;
    CHECK(cwm_tokenize(v, held.t[i], &ids, &n, &e) == 0);
    hn += n;
    hu += count_unk(ids, n);
    free(ids);
  }
  fprintf(stderr, "  held-out states: %ld tokens, %ld <unk>\n", hn, hu);
  CHECKF(hu * 1000 <= hn, "held-out <unk> rate %ld / %ld", hu, hn);

  /* speed: the training texts repeated to a few MB */
  cwm_buf big;
  cwm_buf_init(&big);
  while (big.len < ((size_t)4 << 20))
    for (int i = 0; i < train.n; i++) cwm_buf_puts(&big, train.t[i]);
  int n;
  double dt = now_best(v, big.s, big.len, &n);
  double mbs = (double)big.len / (1 << 20) / dt;
  fprintf(stderr, "  tokenize: %.1f MB in %.3f CPU s = %.0f MB/s (%d tokens)%s\n", (double)big.len / (1 << 20), dt, mbs,
          n, SANITIZED ? " [sanitized build]" : "");
  if (!SANITIZED) CHECKF(mbs >= 20, "tokenizer at %.1f MB/s", mbs);
  cwm_buf_free(&big);
  cwm_vocab_free(v);
  texts_free(&train);
  texts_free(&held);
}

/* ------------------------------------------------------------ unknowns, determinism, min_count */

static void test_unknown(void) {
  const char *texts[] = {matmul_a};
  cwm_vocab *v = vocab_of(texts, 1, 1);
  /* a function, a word after pragma, punctuation and bytes the vocabulary has not seen */
  expect_tokens(v, "out[i] = foo(A[i]) ~ 7", "<d:0> <t:0> [ <ax:0> ] = <unk> ( <t:1> [ <ax:0> ] ) <unk> <n:b3> <#7>");
  expect_tokens(v, "pragma unroll_explicit=1", "<d:0> pragma <unk> = <n:1>");
  expect_tokens(v, "y[x \xe2\x82\xac\x01 z]", "<d:0> <t:0> [ <ax:0> <unk> <ax:1> ]");
  char longw[200];
  memset(longw, 'a', 100);
  strcpy(longw + 100, "(1)");
  expect_tokens(v, longw, "<d:0> <unk> ( <n:1> )");
  /* fixed classes never fall to <unk>: huge sizes, deep nests, many axes */
  cwm_buf b;
  cwm_buf_init(&b);
  for (int i = 0; i < 70; i++) cwm_buf_printf(&b, "%*sfor a%d.12 (0,%ld)\n", 2 * i, "", i, 1L << (i % 40));
  int *ids, n;
  cwm_err e = {0};
  CHECK(cwm_tokenize(v, b.s, &ids, &n, &e) == 0);
  CHECKF(count_unk(ids, n) == 0, "%s", names_of(v, b.s));
  int many = 0, last_ax = 0;
  for (int i = 0; i < n; i++) {
    many += ids[i] == cwm_vocab_lookup(v, "<ax:many>");
    last_ax += ids[i] == cwm_vocab_lookup(v, "<ax:63>");
  }
  CHECK(many == 6 && last_ax == 1); /* a64 .. a69 */
  CHECK(ids[0] == cwm_vocab_lookup(v, "<d:0>") && cwm_vocab_lookup(v, "<d:63>") > CWM_TOK_UNK);
  free(ids);
  cwm_buf_free(&b);
  CHECK(!strcmp(cwm_token_name(v, -1), "<bad id>") && !strcmp(cwm_token_name(v, cwm_vocab_size(v)), "<bad id>"));
  CHECK(!strcmp(cwm_token_name(v, CWM_TOK_PAD), "<pad>") && !strcmp(cwm_token_name(v, CWM_TOK_UNK), "<unk>"));
  CHECK(cwm_vocab_lookup(v, "for") > CWM_TOK_UNK && cwm_vocab_lookup(v, "no such token") == CWM_TOK_UNK);
  /* misuse: tokenizing with a builder, adding to a finished vocabulary */
  cwm_vocab *bld = cwm_vocab_new_builder();
  CHECK(cwm_tokenize(bld, "x", &ids, &n, &e) == CWM_EINTERNAL && ids == NULL && n == 0);
  CHECK(cwm_vocab_size(bld) == 0);
  cwm_vocab_free(bld);
  CHECK(cwm_vocab_add_text(v, "x", &e) == CWM_EINTERNAL);
  CHECK(cwm_vocab_finish(v, 1, &e) == CWM_EINTERNAL);
  cwm_vocab_free(v);
}

static void saved(const cwm_vocab *v, cwm_buf *b) {
  cwm_err e = {0};
  cwm_buf_init(b);
  CHECK(cwm_vocab_save(v, b, &e) == 0);
}

static void test_determinism(void) {
  const char *fwd[] = {matmul_a, softmax_text, matmul_r, matmul_b};
  const char *rev[] = {matmul_b, matmul_r, softmax_text, matmul_a};
  cwm_vocab *v1 = vocab_of(fwd, 4, 1), *v2 = vocab_of(rev, 4, 1);
  cwm_buf b1, b2;
  saved(v1, &b1);
  saved(v2, &b2);
  CHECK(b1.len == b2.len && !memcmp(b1.s, b2.s, b1.len));
  /* most frequent learned tokens first: '(' and ')' beat "placeholder" */
  CHECK(cwm_vocab_lookup(v1, "(") < cwm_vocab_lookup(v1, "placeholder"));
  cwm_buf_free(&b1);
  cwm_buf_free(&b2);
  /* min_count: "exp" occurs once in softmax_text, "for" many times */
  cwm_vocab *v3 = vocab_of(fwd, 4, 2);
  CHECK(cwm_vocab_lookup(v1, "exp") > CWM_TOK_UNK && cwm_vocab_lookup(v3, "exp") == CWM_TOK_UNK);
  CHECK(cwm_vocab_lookup(v3, "for") > CWM_TOK_UNK);
  CHECK(cwm_vocab_size(v3) < cwm_vocab_size(v1));
  cwm_vocab_free(v1);
  cwm_vocab_free(v2);
  cwm_vocab_free(v3);
  /* a lone '@' (an operator, not a fused name) is the fixed "@", not a second one that made
   * finish fail (found by fuzz_modelfile) */
  const char *at[] = {"x @ y\n@\n"};
  cwm_vocab *va = vocab_of(at, 1, 1);
  CHECK(cwm_vocab_size(va) > 0);
  cwm_buf ba;
  saved(va, &ba);
  cwm_err e = {0};
  cwm_vocab *vb = cwm_vocab_load(ba.s, ba.len, &e);
  CHECKF(vb && cwm_vocab_size(vb) == cwm_vocab_size(va), "%s", e.msg);
  expect_tokens(va, "x @ y", "<d:0> x @ <ax:0>");
  cwm_vocab_free(vb);
  cwm_buf_free(&ba);
  cwm_vocab_free(va);
  /* a builder whose table grows many times keeps its own copies of the words (a grown table
   * once forgot that it owns them: leaked under fuzz_modelfile) */
  cwm_buf t;
  cwm_buf_init(&t);
  for (int i = 0; i < 300; i++) cwm_buf_printf(&t, "x[i] = f%d(y[i]) + .s%d\n", i, i);
  cwm_vocab *vg = cwm_vocab_new_builder();
  CHECK(cwm_vocab_add_text(vg, t.s, &e) == 0);
  memset(t.s, 'z', t.len);
  cwm_buf_free(&t);
  CHECK(cwm_vocab_finish(vg, 1, &e) == 0);
  CHECK(cwm_vocab_lookup(vg, "f299") > CWM_TOK_UNK && cwm_vocab_lookup(vg, "f0") > CWM_TOK_UNK);
  CHECK(cwm_vocab_size(vg) >= 2 + 300 + 300);
  cwm_vocab_free(vg);
}

/* ------------------------------------------------------------ save / load */

static void put_le(unsigned char *p, uint64_t x, int n) {
  for (int i = 0; i < n; i++) p[i] = (unsigned char)(x >> (8 * i));
}

/* Recomputes the trailing checksum, so a crafted defect reaches the checks behind it. */
static void reseal(unsigned char *p, size_t n) { put_le(p + n - 8, cwm_hash64(p, n - 8), 8); }

static void expect_load_error(const unsigned char *p, size_t n, const char *want, const char *what) {
  cwm_err e = {0};
  cwm_vocab *v = cwm_vocab_load(p, n, &e);
  CHECKF(!v && e.code == CWM_EMODEL && strstr(e.msg, want), "%s: got %s (code %d), want \"%s\"", what,
         v ? "a vocabulary" : e.msg, e.code, want);
  cwm_vocab_free(v);
}

static void test_save_load(void) {
  const char *texts[] = {matmul_a, softmax_text};
  cwm_vocab *v = vocab_of(texts, 2, 1);
  cwm_buf b;
  saved(v, &b);
  cwm_err e = {0};
  cwm_vocab *w = cwm_vocab_load(b.s, b.len, &e);
  CHECKF(w, "%s", e.msg);
  if (!w) return;
  CHECK(cwm_vocab_size(w) == cwm_vocab_size(v));
  for (int i = 0; i < cwm_vocab_size(v); i++) CHECK(!strcmp(cwm_token_name(v, i), cwm_token_name(w, i)));
  char *x = names_of(v, matmul_b), *y = names_of(w, matmul_b);
  CHECK(!strcmp(x, y));
  free(x);
  free(y);
  cwm_buf b2;
  saved(w, &b2);
  CHECK(b2.len == b.len && !memcmp(b.s, b2.s, b.len));
  cwm_buf_free(&b2);
  cwm_vocab_free(w);

  unsigned char *p = (unsigned char *)b.s;
  size_t n = b.len;
  int fails = 0;
  for (size_t cut = 0; cut < n; cut++) {
    w = cwm_vocab_load(p, cut, &e);
    if (w || e.code != CWM_EMODEL) fails++;
    cwm_vocab_free(w);
  }
  CHECKF(fails == 0, "%d truncations loaded", fails);
  for (size_t i = 0; i < n; i++)
    for (int m = 0; m < 3; m++) {
      unsigned char mask = m == 0 ? 0x01 : m == 1 ? 0x80 : 0xff;
      p[i] ^= mask;
      w = cwm_vocab_load(p, n, &e);
      if (w || e.code != CWM_EMODEL) fails++;
      cwm_vocab_free(w);
      p[i] ^= mask;
    }
  CHECKF(fails == 0, "%d altered buffers loaded", fails);
  expect_load_error(p, n / 2, "truncated", "half");
  expect_load_error(p, 5, "truncated", "five bytes");
  expect_load_error((const unsigned char *)"CWMMODEL", 8, "bad magic", "model magic");
  p[n / 2] ^= 0x40;
  expect_load_error(p, n, "", "altered");
  p[n / 2] ^= 0x40;

  /* crafted defects behind a valid checksum */
  unsigned char *q = cwm_xmalloc(n + 16);
  memcpy(q, p, n);
  put_le(q + 8, 2, 4);
  reseal(q, n);
  expect_load_error(q, n, "format version 2; this cwm reads version 1", "version");
  memcpy(q, p, n);
  put_le(q + 12, CWM_TOKENIZER_SCHEME + 1, 4);
  reseal(q, n);
  expect_load_error(q, n, "tokenizer scheme", "scheme");
  memcpy(q, p, n);
  put_le(q + 16, 0xffffffffu, 4);
  reseal(q, n);
  expect_load_error(q, n, "absurd token count", "count");
  memcpy(q, p, n);
  put_le(q + 16, 200000, 4);
  reseal(q, n);
  expect_load_error(q, n, "vocabulary: ", "count past the data");
  /* the last token becomes a copy of "(" by renaming: find two learned tokens of equal length */
  int nv = cwm_vocab_size(v), di = -1, dj = -1, learned0 = cwm_vocab_lookup(v, "@") + 1;
  CHECK(learned0 > 2);
  for (int i = nv - 1; i > learned0 && di < 0; i--)
    for (int j = i - 1; j >= learned0; j--)
      if (strlen(cwm_token_name(v, i)) == strlen(cwm_token_name(v, j))) {
        di = i, dj = j;
        break;
      }
  CHECK(di > 0);
  if (di > 0) {
    memcpy(q, p, n);
    size_t off = 20;
    unsigned char *ti = NULL, *tj = NULL;
    for (int k = 0; k < nv; k++) {
      if (k == di) ti = q + off + 1;
      if (k == dj) tj = q + off + 1;
      off += 1 + q[off];
    }
    memcpy(ti, tj, strlen(cwm_token_name(v, dj)));
    reseal(q, n);
    expect_load_error(q, n, "repeats token", "duplicate");
  }
  memcpy(q, p, n);
  q[21] = ' '; /* inside "<pad>" */
  reseal(q, n);
  expect_load_error(q, n, "printable", "space in a token");
  memcpy(q, p, n);
  q[22] = 'P';
  reseal(q, n);
  expect_load_error(q, n, "expected \"<pad>\"", "fixed token");
  memcpy(q, p, n);
  q[20] = 0;
  reseal(q, n);
  expect_load_error(q, n, "length 0", "empty token");
  memcpy(q, p, n);
  memcpy(q + n, q + n - 8, 8);
  memset(q + n - 8, 0, 8);
  reseal(q, n + 8);
  expect_load_error(q, n + 8, "after the checksum", "trailing bytes");
  free(q);
  expect_load_error(NULL, 0, "truncated", "empty");
  cwm_buf_free(&b);
  cwm_vocab_free(v);
}

int main(void) {
  test_classes();
  test_pairs();
  test_unknown();
  test_determinism();
  test_save_load();
  test_real_states();
  return test_done();
}

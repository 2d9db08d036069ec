/* test_costmodel.c: Ansor's per-store features (shape, annotations, schedule sensitivity) and the
 * XGBoost model: it learns a synthetic cost that depends on the schedule, the random model does
 * not, and the model file round-trips and refuses truncated or altered copies, and boosters
 * crafted against XGBoost's loader (bad child, parent and feature indices, huge counts, deep
 * nesting). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/costmodel.h"
#include "testlib.h"

static cwm_dag *dag_of(const char *spec) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(spec, NULL, &e);
  if (!w) {
    fprintf(stderr, "%s: %s\n", spec, e.msg);
    exit(1);
  }
  cwm_dag *d = cwm_dag_new(w, &e);
  cwm_workload_free(w);
  if (!d) {
    fprintf(stderr, "%s: %s\n", spec, e.msg);
    exit(1);
  }
  return d;
}

static cwm_state *replay(const cwm_dag *d, const char *steps) {
  cwm_step *st;
  int n;
  cwm_err e = {0};
  if (cwm_steps_parse(steps, &st, &n, &e)) {
    fprintf(stderr, "parse %s: %s\n", steps, e.msg);
    return NULL;
  }
  cwm_state *s = NULL;
  if (cwm_state_replay(d, st, n, &s, NULL, &e)) fprintf(stderr, "replay %s: %s\n", steps, e.msg);
  free(st);
  return s;
}

static int all_finite(const float *r, int n) {
  for (int i = 0; i < n; i++)
    if (!isfinite(r[i])) return 0;
  return 1;
}

/* The row of the buffer with the most ops (the compute stage's). */
static const float *main_row(const float *rows, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (rows[i * CWM_ANSOR_NFEAT + CWM_AF_OPS + 1] > rows[best * CWM_ANSOR_NFEAT + CWM_AF_OPS + 1]) best = i;
  return rows + best * CWM_ANSOR_NFEAT;
}

static void test_features(void) {
  cwm_dag *d = dag_of("matmul M=64 N=64 K=64");
  const char *plain = "[]";
  const char *tiled = "[[\"SP\",2,1,64,[16],1],[\"RE\",2,[0,1,3,2]],[\"AN\",2,3,2],[\"AN\",2,0,3]]";
  const char *cached = "[[\"CHW\",2,\"local\"],[\"SP\",2,0,64,[4,8],1],[\"SP\",2,3,64,[16],1],"
                       "[\"SP\",2,5,64,[8],1],[\"RE\",2,[0,3,1,5,2,6,4]],[\"FSP\",3,0,1,1],"
                       "[\"FSP\",3,2,2,1],[\"RE\",3,[0,2,1,3]],[\"CA\",2,3,1],[\"FU\",3,[0,1]],"
                       "[\"AN\",3,0,3],[\"PR\",2,0,\"auto_unroll_max_step$16\"],[\"AN\",2,6,2]]";
  cwm_state *s0 = replay(d, plain), *s1 = replay(d, tiled), *s2 = replay(d, cached);
  CHECK(s0 && s1 && s2);
  if (!s0 || !s1 || !s2) return;
  float *r0 = NULL, *r1 = NULL, *r2 = NULL;
  int n0 = 0, n1 = 0, n2 = 0;
  cwm_err e = {0};
  CHECKF(cwm_ansor_features(s0, &r0, &n0, &e) == 0, "%s", e.msg);
  CHECKF(cwm_ansor_features(s1, &r1, &n1, &e) == 0, "%s", e.msg);
  CHECKF(cwm_ansor_features(s2, &r2, &n2, &e) == 0, "%s", e.msg);
  CHECKF(n0 == 1 && n1 == 1, "rows %d %d", n0, n1); /* init + update of one buffer share a row */
  CHECKF(n2 == 2, "cache write: %d rows", n2);
  CHECK(all_finite(r0, n0 * CWM_ANSOR_NFEAT) && all_finite(r1, n1 * CWM_ANSOR_NFEAT) &&
        all_finite(r2, n2 * CWM_ANSOR_NFEAT));
  if (n0 < 1 || n1 < 1 || n2 < 1) return;
  /* plain: 64^3 adds and muls, no annotations, 3 loops */
  CHECKF(fabsf(r0[CWM_AF_OPS + 1] - (float)log2(64.0 * 64 * 64 + 1)) < 1e-3, "addsub %g", r0[CWM_AF_OPS + 1]);
  CHECK(r0[CWM_AF_VEC] == 0 && r0[CWM_AF_PARALLEL] == 0 && r0[CWM_AF_VEC + 3] == 1);
  CHECK(r0[CWM_AF_OUTER + 1] == 2.0f); /* slog(3) */
  /* tiled: vectorized inner j.1 (16), parallel outer i (64) */
  CHECKF(r1[CWM_AF_VEC] == 1.0f, "vec_num %g", r1[CWM_AF_VEC]);
  CHECKF(fabsf(r1[CWM_AF_VEC + 2] - (float)log2(17)) < 1e-5, "vec_len %g", r1[CWM_AF_VEC + 2]);
  CHECKF(r1[CWM_AF_VEC + 3 + 1] == 1.0f, "vec position: inner spatial");
  CHECKF(r1[CWM_AF_PARALLEL] == 1.0f, "par_num %g", r1[CWM_AF_PARALLEL]);
  CHECKF(fabsf(r1[CWM_AF_PARALLEL + 1] - (float)log2(65)) < 1e-5, "par_prod %g", r1[CWM_AF_PARALLEL + 1]);
  CHECKF(r1[CWM_AF_PARALLEL + 3 + 3] == 1.0f, "parallel position: outer spatial");
  /* the vectorized write is contiguous: the output buffer's stride is 1 somewhere in the top 5 */
  int stride1 = 0;
  for (int b = 0; b < 5; b++)
    if (r1[CWM_AF_BUF + b * CWM_AF_BUF_W + 17] == 1.0f) stride1 = 1;
  CHECK(stride1);
  /* the schedules differ in their features */
  CHECK(memcmp(r0, r1, sizeof(float) * CWM_ANSOR_NFEAT) != 0);
  /* cache write: the local buffer row has allocation features, the output row none; both see the
   * parallel fused loop; the compute row has auto-unroll 16 and a vectorized loop */
  const float *mr = main_row(r2, n2), *cr = mr == r2 ? r2 + CWM_ANSOR_NFEAT : r2;
  CHECKF(mr[CWM_AF_ALLOC] > 0 && cr[CWM_AF_ALLOC] == 0, "alloc %g %g", mr[CWM_AF_ALLOC], cr[CWM_AF_ALLOC]);
  CHECK(mr[CWM_AF_PARALLEL] == 1.0f && cr[CWM_AF_PARALLEL] == 1.0f);
  CHECKF(mr[CWM_AF_PARALLEL + 3 + 3] == 1.0f, "enclosing parallel loop is outer spatial");
  CHECKF(fabsf(mr[CWM_AF_OUTER + 2] - (float)log2(17)) < 1e-5, "auto_unroll %g", mr[CWM_AF_OUTER + 2]);
  CHECK(mr[CWM_AF_VEC] == 1.0f);
  /* a sketch has no features */
  cwm_state *sk = replay(d, "[[\"SP\",2,0,64,[0],1]]");
  if (sk) {
    float *rs = NULL;
    int ns = 5;
    CHECK(cwm_ansor_features(sk, &rs, &ns, &e) != 0 && rs == NULL && ns == 0);
    cwm_state_free(sk);
  }
  free(r0);
  free(r1);
  free(r2);
  cwm_state_free(s0);
  cwm_state_free(s1);
  cwm_state_free(s2);
  cwm_dag_free(d);
}

/* Random states of several workloads: features are finite and the row count sane. */
static void test_features_random(void) {
  const char *specs[] = {"matmul M=64 N=48 K=32", "dense M=8 N=16 K=12 bias=1 act=gelu", "softmax B=2 M=4 N=8",
                         "conv2d C=4 H=10 W=10 K=8 R=3 S=3 stride=1 pad=1 bias=1 act=relu"};
  cwm_rng r;
  cwm_rng_seed(&r, 7);
  int ok = 0, bad = 0;
  for (int w = 0; w < 4; w++) {
    cwm_dag *d = dag_of(specs[w]);
    for (int k = 0; k < 60; k++) {
      cwm_state *s;
      cwm_err e = {0};
      cwm_sample_steps(d, &r, 1 + cwm_rng_int(&r, 16), &s, &e);
      float *rows = NULL;
      int n = 0;
      if (cwm_ansor_features(s, &rows, &n, &e) == 0) {
        ok++;
        CHECKF(n >= 1 && all_finite(rows, n * CWM_ANSOR_NFEAT), "%s: %d rows", specs[w], n);
      } else {
        bad++;
      }
      free(rows);
      cwm_state_free(s);
    }
    cwm_dag_free(d);
  }
  CHECKF(ok > 200, "%d of 240 random states featurized (%d failed)", ok, bad);
}

/* ------------------------------------------------------------------ learning */

static void ranks(const double *x, int n, double *rk) {
  int *idx = malloc(sizeof(int) * (size_t)n);
  for (int i = 0; i < n; i++) idx[i] = i;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && x[idx[j]] < x[idx[j - 1]]; j--) {
      int t = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = t;
    }
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && x[idx[j + 1]] == x[idx[i]]) j++;
    for (int k = i; k <= j; k++) rk[idx[k]] = (i + j) / 2.0;
    i = j + 1;
  }
  free(idx);
}

static double spearman(const double *a, const double *b, int n) {
  double *ra = malloc(sizeof(double) * (size_t)n), *rb = malloc(sizeof(double) * (size_t)n);
  ranks(a, n, ra);
  ranks(b, n, rb);
  double ma = 0, mb = 0;
  for (int i = 0; i < n; i++) {
    ma += ra[i];
    mb += rb[i];
  }
  ma /= n;
  mb /= n;
  double sab = 0, saa = 0, sbb = 0;
  for (int i = 0; i < n; i++) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  free(ra);
  free(rb);
  return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : 0;
}

/* Synthetic cost: faster with every vectorized loop and (less) every parallel loop. */
static double synthetic_cost(const cwm_state *s, cwm_rng *noise) {
  int nv = 0, np = 0;
  for (int p = 0; p < s->nstages; p++) {
    const cwm_stage *st = &s->stages[p];
    if (cwm_stage_is_placeholder(s, p) || st->loc == CWM_LOC_INLINE) continue;
    for (int k = 0; k < st->niters; k++) {
      int a = st->nodes[st->iters[k]].ann;
      nv += a == CWM_ANN_VECTORIZE;
      np += a == CWM_ANN_PARALLEL;
    }
  }
  return 1e-3 / (1.0 + nv + 0.5 * np) * (1.0 + 0.02 * (cwm_rng_unit(noise) - 0.5));
}

#define NTRAIN 200
#define NTEST 100

static const char *tmp_dir(void) {
  const char *d = getenv("CWM_CACHE_DIR");
  return d && *d ? d : "/tmp";
}

static void test_learning(void) {
  cwm_dag *d = dag_of("matmul M=64 N=48 K=32");
  char key[17];
  cwm_workload_key(cwm_dag_workload(d), key);
  cwm_rng r, noise;
  cwm_rng_seed(&r, 2024);
  cwm_rng_seed(&noise, 99);
  int n = 0;
  cwm_state *states[NTRAIN + NTEST];
  cwm_record *recs = calloc(NTRAIN + NTEST, sizeof *recs);
  double speed[NTRAIN + NTEST];
  int attempts = 0;
  while (n < NTRAIN + NTEST && attempts < 5000) {
    attempts++;
    cwm_state *s;
    cwm_err e = {0};
    cwm_sample_steps(d, &r, 2 + cwm_rng_int(&r, 12), &s, &e);
    float *rows = NULL;
    int nr = 0;
    if (cwm_ansor_features(s, &rows, &nr, &e) != 0) { /* keep only programs */
      cwm_state_free(s);
      continue;
    }
    free(rows);
    states[n] = s;
    cwm_record_init(&recs[n]);
    memcpy(recs[n].key, key, sizeof key);
    double c = synthetic_cost(s, &noise);
    recs[n].ncosts = 1;
    recs[n].costs[0] = c;
    speed[n] = 1.0 / c;
    n++;
  }
  CHECKF(n == NTRAIN + NTEST, "only %d states", n);
  if (n < NTRAIN + NTEST) return;

  cwm_err e = {0};
  cwm_costmodel *m = cwm_costmodel_ansor(1, NULL, &e);
  CHECKF(m != NULL, "%s", e.msg);
  if (!m) return;
  double t0 = cwm_now();
  /* four batches of 50: random until 100 records, first training at 150, retrained at 200 */
  for (int b = 0; b < NTRAIN; b += 50) CHECKF(cwm_costmodel_update(m, states + b, recs + b, 50, &e) == 0, "%s", e.msg);
  double t1 = cwm_now();
  double pred[NTEST], pred2[NTEST], rnd[NTEST];
  CHECKF(cwm_costmodel_predict(m, states + NTRAIN, NTEST, pred, &e) == 0, "%s", e.msg);
  double t2 = cwm_now();
  double rho = spearman(pred, speed + NTRAIN, NTEST);
  cwm_costmodel *rm = cwm_costmodel_random(5);
  CHECK(cwm_costmodel_predict(rm, states + NTRAIN, NTEST, rnd, &e) == 0);
  double rho_r = spearman(rnd, speed + NTRAIN, NTEST);
  fprintf(stderr, "costmodel: spearman ansor %.3f, random %.3f; training %.2fs, predicting %d states %.3fs\n",
          rho, rho_r, t1 - t0, NTEST, t2 - t1);
  CHECKF(rho > 0.5, "ansor model rank correlation %.3f", rho);
  CHECKF(fabs(rho_r) < 0.3, "random model rank correlation %.3f", rho_r);
  /* held-out score distribution is not constant */
  int differ = 0;
  for (int i = 1; i < NTEST; i++) differ += pred[i] != pred[0];
  CHECK(differ > 10);
  /* an invalid state scores CWM_SCORE_INVALID */
  cwm_state *sk = replay(d, "[[\"SP\",2,0,64,[0],1]]");
  if (sk) {
    double sc = 0;
    CHECK(cwm_costmodel_predict(m, &sk, 1, &sc, &e) == 0 && sc == CWM_SCORE_INVALID);
    cwm_state_free(sk);
  }

  /* save -> load round trip */
  char path[4096];
  cwm_mkdir_p(tmp_dir(), &e);
  snprintf(path, sizeof path, "%s/test_costmodel.model", tmp_dir());
  CHECKF(m->save && m->save(m, path, &e) == 0, "save: %s", e.msg);
  cwm_costmodel *m2 = cwm_costmodel_ansor(1, path, &e);
  CHECKF(m2 != NULL, "load: %s", e.msg);
  if (m2) {
    CHECKF(cwm_costmodel_predict(m2, states + NTRAIN, NTEST, pred2, &e) == 0, "%s", e.msg);
    int same = 1;
    for (int i = 0; i < NTEST; i++) same &= pred2[i] == pred[i];
    CHECK(same);
    cwm_costmodel_free(m2);
  }
  /* truncated and altered copies fail with CWM_EMODEL */
  size_t len = 0;
  char *data = cwm_read_file(path, &len, &e);
  CHECK(data != NULL && len > 100);
  if (data) {
    char bad[4200];
    snprintf(bad, sizeof bad, "%s.bad", path);
    size_t cuts[] = {len / 2, len - 1, 10};
    for (int k = 0; k < 3; k++) {
      CHECK(cwm_write_file_atomic(bad, data, cuts[k], &e) == 0);
      cwm_err e2 = {0};
      cwm_costmodel *mb = cwm_costmodel_ansor(1, bad, &e2);
      CHECKF(mb == NULL && e2.code == CWM_EMODEL, "truncated to %zu: code %d", cuts[k], e2.code);
      CHECKF(strstr(e2.msg, "truncated") != NULL, "message: %s", e2.msg);
      cwm_costmodel_free(mb);
    }
    size_t flips[] = {len / 2, 3, len - 3, 60};
    for (int k = 0; k < 4; k++) {
      data[flips[k]] ^= 0x10;
      CHECK(cwm_write_file_atomic(bad, data, len, &e) == 0);
      data[flips[k]] ^= 0x10;
      cwm_err e2 = {0};
      cwm_costmodel *mb = cwm_costmodel_ansor(1, bad, &e2);
      CHECKF(mb == NULL && e2.code == CWM_EMODEL, "byte %zu flipped: code %d", flips[k], e2.code);
      CHECKF(e2.msg[0] != 0, "a message");
      cwm_costmodel_free(mb);
    }
    cwm_err e2 = {0};
    snprintf(bad, sizeof bad, "%s/no-such-model-file", tmp_dir());
    CHECK(cwm_costmodel_ansor(1, bad, &e2) == NULL && e2.code == CWM_EMODEL);
    free(data);
  }

  /* before the warm-up the ansor model is random too: an untrained model's first scores */
  cwm_costmodel *m3 = cwm_costmodel_ansor(3, NULL, &e);
  CHECK(cwm_costmodel_update(m3, states, recs, 60, &e) == 0);
  CHECK(cwm_costmodel_predict(m3, states + NTRAIN, NTEST, rnd, &e) == 0);
  CHECKF(fabs(spearman(rnd, speed + NTRAIN, NTEST)) < 0.3, "warm-up scores are random");
  cwm_costmodel_free(m3);

  cwm_costmodel_free(rm);
  cwm_costmodel_free(m);
  for (int i = 0; i < n; i++) {
    cwm_state_free(states[i]);
    cwm_record_free(&recs[i]);
  }
  free(recs);
  cwm_dag_free(d);
}

/* ---- model files crafted against XGBoost's loader (fuzz_ansormodel's findings) ---- */

static uint64_t get_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Loads data (its checksum refreshed, as a forger would) and expects CWM_EMODEL. */
static void expect_refused(unsigned char *data, size_t len, const char *what) {
  uint64_t h = cwm_hash64(data, len - 8);
  for (int i = 0; i < 8; i++) data[len - 8 + i] = (unsigned char)(h >> (8 * i));
  cwm_err e = {0};
  cwm_costmodel *m = cwm_costmodel_ansor_from_buffer(1, data, len, &e);
  CHECKF(m == NULL && e.code == CWM_EMODEL, "%s: loaded or code %d (%s)", what, e.code, e.msg);
  cwm_costmodel_free(m);
}

/* Offset of the first element of the typed array after key `name` at or after `from`. */
static size_t typed_at(const unsigned char *b, size_t n, size_t from, const char *name) {
  size_t kl = strlen(name);
  for (size_t i = from; i + kl + 13 < n; i++)
    if (!memcmp(b + i, name, kl) && b[i + kl] == '[' && b[i + kl + 1] == '$') return i + kl + 13;
  return 0;
}

static void test_hostile_booster(void) {
  const char *src = getenv("CWM_SOURCE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/fuzz/corpus/ansormodel/p102_booster.model", src ? src : ".");
  size_t len = 0;
  cwm_err e = {0};
  unsigned char *orig = (unsigned char *)cwm_read_file(path, &len, &e);
  CHECKF(orig != NULL && len > 1000, "%s", e.msg);
  if (!orig) return;
  cwm_costmodel *ok = cwm_costmodel_ansor_from_buffer(1, orig, len, &e);
  CHECKF(ok != NULL, "the seed loads: %s", e.msg);
  cwm_costmodel_free(ok);
  size_t boff = len - 8 - get_le(orig + 40, 8); /* the booster is last, before the checksum */
  unsigned char *d = malloc(len);
  /* a child index far outside the tree: XGBoost's RegTree::LoadModel crashed on it */
  memcpy(d, orig, len);
  size_t lc = typed_at(d, len, boff, "left_children");
  CHECK(lc > 0);
  d[lc] = 0x06;
  expect_refused(d, len, "child index 0x06xxxxxx");
  /* a parent index out of range (a pruned node's parent link: LoadModel follows it too) */
  memcpy(d, orig, len);
  size_t pa = typed_at(d, len, boff, "parents");
  CHECK(pa > 0);
  d[pa + 4 * 2] = 0x09;
  expect_refused(d, len, "parent index 0x09xxxxxx");
  /* a typed array claiming 2^52 elements: allocated before its bytes are read */
  memcpy(d, orig, len);
  size_t sc = typed_at(d, len, boff, "split_conditions");
  CHECK(sc > 0);
  d[sc - 7] = 0x0f;
  d[sc - 6] = 0xff;
  expect_refused(d, len, "typed array count 2^52");
  /* a split on a feature past the row width: read out of bounds at prediction */
  memcpy(d, orig, len);
  size_t si = typed_at(d, len, boff, "split_indices");
  CHECK(si > 0);
  d[si + 2] = 0x10; /* feature 39 -> 0x1027 */
  expect_refused(d, len, "split feature 4135");
  free(d);
  /* a booster nested 100000 deep: XGBoost's reader recurses once per level */
  size_t depth = 100000, hl = len - 8 - get_le(orig + 40, 8) - get_le(orig + 16, 8) * 40 -
                                 get_le(orig + 24, 8) * CWM_ANSOR_NFEAT * 4;
  CHECK(hl == 48);
  size_t dl = 48 + 2 * depth + 8;
  d = calloc(1, dl);
  memcpy(d, orig, 48);
  memset(d + 16, 0, 24); /* no programs, no rows, never trained */
  uint64_t bl = 2 * depth;
  for (int i = 0; i < 8; i++) d[40 + i] = (unsigned char)(bl >> (8 * i));
  memset(d + 48, '[', depth);
  memset(d + 48 + depth, ']', depth);
  expect_refused(d, dl, "nested 100000 deep");
  free(d);
  free(orig);
}

int main(void) {
  test_features();
  test_features_random();
  test_learning();
  test_hostile_booster();
  return test_done();
}

/* test_state.c: schedule steps against states: every kind of misfit gives its own message and
 * leaves the state untouched; replay yields every intermediate state; printing is
 * deterministic; Ansor's own example record replays and computes the right answer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/search.h"
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
  return d;
}

static cwm_state *replay(cwm_dag *d, const char *steps) {
  cwm_step *st;
  int n;
  cwm_err e = {0};
  if (cwm_steps_parse(steps, &st, &n, &e)) {
    fprintf(stderr, "parse: %s\n", e.msg);
    return NULL;
  }
  cwm_state *s = NULL;
  if (cwm_state_replay(d, st, n, &s, NULL, &e)) fprintf(stderr, "replay: %s\n", e.msg);
  free(st);
  return s;
}

/* Applies one step text to a state built from prefix; expects failure with `want` in the message
 * and the state unchanged. */
static void expect_misfit(cwm_dag *d, const char *prefix, const char *step, const char *want) {
  cwm_state *s = replay(d, prefix);
  CHECKF(s != NULL, "prefix %s", prefix);
  if (!s) return;
  char *before = cwm_state_print(s);
  int nsteps = s->nsteps;
  cwm_step st;
  cwm_err e = {0};
  int rc = cwm_step_parse(step, &st, &e);
  CHECKF(rc == 0, "%s: %s", step, e.msg);
  if (rc == 0) {
    rc = cwm_state_apply(s, &st, &e);
    CHECKF(rc == CWM_ESTEP, "%s should not fit (rc %d)", step, rc);
    CHECKF(strstr(e.msg, want) != NULL, "%s: message '%s' lacks '%s'", step, e.msg, want);
    char *after = cwm_state_print(s);
    CHECKF(!strcmp(before, after) && s->nsteps == nsteps, "%s: failed step changed the state", step);
    free(after);
  }
  free(before);
  cwm_state_free(s);
}

static void test_misfits(void) {
  cwm_dag *mm = dag_of("matmul M=64 N=48 K=32");
  cwm_dag *dn = dag_of("dense M=8 N=16 K=12 bias=1 act=relu");
  cwm_dag *sm = dag_of("softmax B=2 M=4 N=8");
  expect_misfit(mm, "[]", "[\"SP\",7,0,64,[8],1]", "stage 7 out of range");
  expect_misfit(mm, "[]", "[\"SP\",2,5,64,[8],1]", "iterator 5 out of range");
  expect_misfit(mm, "[]", "[\"SP\",2,0,63,[8],1]", "does not match");
  expect_misfit(mm, "[]", "[\"SP\",0,0,64,[8],1]", "placeholder");
  expect_misfit(mm, "[]", "[\"RE\",2,[0,0,1]]", "not a permutation");
  expect_misfit(mm, "[]", "[\"RE\",2,[0,1]]", "order has 2 iterators");
  expect_misfit(mm, "[[\"SP\",2,0,64,[8],1]]", "[\"FU\",2,[0,2]]", "consecutive");
  expect_misfit(mm, "[]", "[\"FU\",2,[1,2]]", "spatial and reduction");
  expect_misfit(mm, "[]", "[\"AN\",2,2,2]", "cannot vectorize reduction");
  expect_misfit(mm, "[]", "[\"AN\",2,0,5]", "not supported on CPU");
  expect_misfit(mm, "[]", "[\"CI\",2]", "output stage");
  expect_misfit(dn, "[]", "[\"CI\",3]", "is a reduction");
  expect_misfit(dn, "[]", "[\"CA\",4,3,0]", "output stage");
  expect_misfit(sm, "[]", "[\"CA\",2,3,0]", "holds all its readers");
  /* Ansor's common root: the exponentials may go in the division's loop once the sum is there,
   * not inside the loop the sum is at, and the sum cannot leave while they are there */
  expect_misfit(sm, "[[\"CA\",3,4,0]]", "[\"CA\",2,4,1]", "s is outside");
  expect_misfit(sm, "[[\"CA\",3,4,1],[\"CA\",2,4,1]]", "[\"CR\",3]", "outside that loop");
  expect_misfit(mm, "[[\"SP\",2,0,64,[8],1]]", "[\"CHW\",2,\"local\"]", "untransformed");
  expect_misfit(mm, "[]", "[\"CHW\",2,\"shared\"]", "not supported");
  expect_misfit(mm, "[]", "[\"RF\",2,0,0]", "not a reduction iterator");
  expect_misfit(mm, "[]", "[\"FSP\",2,0,0,2]", "out of range");
  expect_misfit(mm, "[[\"RE\",2,[1,0,2]]]", "[\"FSP\",2,0,0,2]", "is RE, not SP");
  expect_misfit(mm, "[]", "[\"SA\",2,0,4,0]", "not supported");
  expect_misfit(mm, "[]", "[\"CR\",0]", "placeholder");
  expect_misfit(dn, "[[\"CA\",3,4,1]]", "[\"CI\",4]", "output stage");
  expect_misfit(dn, "[[\"CA\",3,4,0],[\"SP\",4,0,8,[2],1]]", "[\"FU\",4,[1,2]]", "stages attached");

  cwm_dag_free(mm);
  cwm_dag_free(dn);
  cwm_dag_free(sm);
}

static void test_replay_trace(void) {
  cwm_dag *d = dag_of("dense M=8 N=16 K=12 bias=1 act=gelu");
  cwm_rng r;
  cwm_rng_seed(&r, 42);
  for (int k = 0; k < 50; k++) {
    cwm_state *s;
    cwm_err e = {0};
    cwm_sample_steps(d, &r, 10, &s, &e);
    cwm_state **trace = NULL;
    int rc = cwm_state_replay(d, s->steps, s->nsteps, NULL, &trace, &e);
    CHECK(rc == 0);
    if (rc) continue;
    /* trace[i] is the state after the first i steps, built independently */
    cwm_state *cur = cwm_state_init(d);
    for (int i = 0; i <= s->nsteps; i++) {
      char *a = cwm_state_print(trace[i]), *b = cwm_state_print(cur), *b2 = cwm_state_print(cur);
      CHECKF(!strcmp(a, b), "trace state %d differs", i);
      CHECK(!strcmp(b, b2));
      CHECK(trace[i]->nsteps == i);
      free(a);
      free(b);
      free(b2);
      if (i < s->nsteps) CHECK(cwm_state_apply(cur, &s->steps[i], &e) == 0);
      cwm_state_free(trace[i]);
    }
    char *fin = cwm_state_print(s), *c2 = cwm_state_print(cur);
    CHECK(!strcmp(fin, c2));
    cwm_state *cl = cwm_state_clone(s);
    char *c3 = cwm_state_print(cl);
    CHECK(!strcmp(fin, c3));
    free(fin);
    free(c2);
    free(c3);
    cwm_state_free(cl);
    cwm_state_free(cur);
    free(trace);
    cwm_state_free(s);
  }
  cwm_dag_free(d);
}

static void test_print_shape(void) {
  cwm_dag *d = dag_of("matmul M=10 N=8 K=4");
  cwm_state *s = replay(d, "[[\"SP\",2,0,10,[4],1],[\"AN\",2,0,3],[\"AN\",2,2,2]]");
  CHECK(s != NULL);
  char *t = cwm_state_print(s);
  CHECKF(strstr(t, "parallel i.0 (0,3)") != NULL, "%s", t);
  CHECKF(strstr(t, "vectorize j (0,8)") != NULL, "%s", t);
  CHECKF(strstr(t, "if (") != NULL, "uneven split prints a guard: %s", t);
  free(t);
  cwm_state_free(s);
  cwm_dag_free(d);
}

/* The step list of a real Ansor record (reference/ansor.md section 1) on the same matmul. */
static void test_ansor_example(void) {
  cwm_dag *d = dag_of("matmul M=512 N=64 K=1024");
  const char *steps =
      "[[\"CHW\",2,\"local\"],[\"SP\",2,0,512,[1,64,8],1],[\"SP\",2,4,64,[2,32,1],1],"
      "[\"SP\",2,8,1024,[16],1],[\"RE\",2,[0,4,1,5,8,2,6,9,3,7]],[\"FSP\",3,0,1,2],"
      "[\"FSP\",3,3,2,2],[\"RE\",3,[0,3,1,4,2,5]],[\"CA\",2,3,3],[\"FU\",3,[0,1,2,3]],"
      "[\"AN\",3,0,3],[\"PR\",2,0,\"auto_unroll_max_step$64\"],[\"AN\",2,9,2],[\"AN\",3,2,2]]";
  cwm_state *s = replay(d, steps);
  CHECK(s != NULL);
  if (s) {
    char *t = cwm_state_print(s);
    CHECKF(strstr(t, "parallel i.0@j.0@i.1@j.1 (0,2)") != NULL, "%s", t);
    CHECKF(strstr(t, "allocate out.local[512, 32]") != NULL, "%s", t);
    free(t);
    cwm_err e = {0};
    cwm_workload *w = cwm_workload_from_spec("matmul M=512 N=64 K=1024", NULL, &e);
    cwm_measure_opts mo;
    cwm_measure_opts_default(&mo);
    test_env_measure(&mo);
    mo.repeats = 1;
    cwm_task *task = cwm_task_new(w, &mo, &e);
    cwm_state *sd = replay((cwm_dag *)cwm_task_dag(task), steps);
    cwm_record rec;
    int rc = cwm_task_measure(task, &sd, 1, &rec, &e);
    CHECKF(rc == 0 && rec.error == 0, "ansor example: %s %s", e.msg, rec.msg);
    cwm_record_free(&rec);
    cwm_state_free(sd);
    cwm_task_free(task);
    cwm_workload_free(w);
    cwm_state_free(s);
  }
  cwm_dag_free(d);
}

/* Regression: an attached stage with a heap buffer (> 256 KB) was freed before its consumer read it. */
static void test_heap_local(void) {
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec("matmul M=512 N=512 K=1", NULL, &e);
  cwm_measure_opts mo;
  cwm_measure_opts_default(&mo);
  test_env_measure(&mo);
  mo.repeats = 1;
  cwm_task *task = cwm_task_new(w, &mo, &e);
  cwm_state *sd = replay((cwm_dag *)cwm_task_dag(task), "[[\"CHW\",2,\"local\"],[\"SP\",3,0,512,[512],1],[\"CA\",2,3,0]]");
  CHECK(sd != NULL);
  cwm_record rec;
  int rc = cwm_task_measure(task, &sd, 1, &rec, &e);
  CHECKF(rc == 0 && rec.error == 0, "heap local: %s %s", e.msg, rec.msg);
  cwm_record_free(&rec);
  cwm_state_free(sd);
  cwm_task_free(task);
  cwm_workload_free(w);
}

/* A workload of more tensors than a state has stages (the parser takes up to CWM_MAX_OPS): the
 * DAG refuses it. Before, cwm_state_init wrote past stages[] into the step list (found with a
 * 17-tensor chain of matrix products: sketches then replayed garbage steps). */
static void test_too_many_tensors(void) {
  for (int n = CWM_MAX_STAGES - 2; n <= CWM_MAX_OPS - 1; n++) {
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_buf_puts(&b, "input B0[4, 4]\n");
    for (int s = 1; s <= n; s++) cwm_buf_printf(&b, "B%d[i:4, j:4] = sum(k:4 : B%d[i, k] * B0[k, j])\n", s, s - 1);
    cwm_buf_printf(&b, "output B%d\n", n);
    cwm_err e = {0};
    cwm_workload *w = cwm_workload_parse(b.s, &e);
    CHECKF(w != NULL, "%d products: %s", n, e.msg);
    if (w) {
      cwm_dag *d = cwm_dag_new(w, &e);
      if (n + 1 > CWM_MAX_STAGES) {
        CHECKF(d == NULL && e.code == CWM_EPARSE, "%d tensors: the DAG must refuse them", n + 1);
      } else {
        CHECKF(d != NULL, "%d tensors: %s", n + 1, e.msg);
        cwm_state *s = d ? cwm_state_init(d) : NULL;
        CHECK(!d || (s && s->nstages == n + 1 && s->nsteps == 0));
        cwm_state_free(s);
      }
      cwm_dag_free(d);
      cwm_workload_free(w);
    }
    cwm_buf_free(&b);
  }
}

/* cwm_divisors against trial division, with the value and count caps */
static void test_divisors(void) {
  int out[2048];
  for (int n = 1; n <= 5000; n += (n < 200 ? 1 : 37)) {
    int cap = n % 3 ? n : 64, k = cwm_divisors(n, cap, out, 2048), m = 0;
    for (int d = 1; d <= n; d++)
      if (n % d == 0 && d <= cap) {
        CHECKF(m < k && out[m] == d, "n %d cap %d: divisor %d at %d", n, cap, d, m);
        m++;
      }
    CHECKF(m == k, "n %d: %d divisors, %d returned", n, m, k);
  }
  CHECK(cwm_divisors(720720, 1 << 30, out, 5) == 5 && out[4] == 5);
  CHECK(cwm_divisors(1023, 1 << 30, out, 2048) == 8 && out[7] == 1023 && out[3] == 31);
}

int main(void) {
  test_divisors();
  test_heap_local();
  test_misfits();
  test_replay_trace();
  test_print_shape();
  test_ansor_example();
  test_too_many_tensors();
  return test_done();
}

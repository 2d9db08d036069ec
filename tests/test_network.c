/* test_network.c: whole networks. The shipped network files parse and add up to the known FLOP
 * counts; malformed lines are refused with file:line:col and what is wrong; the task scheduler
 * picks what Ansor's gradient formula says on made-up histories (no measuring); a tiny network
 * is tuned end to end with the random model, its estimate is sum(weight x best), a resumed run
 * measures nothing twice and the stop flag ends a run after the round in flight. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cwm/costmodel.h"
#include "cwm/scheduler.h"
#include "testlib.h"

static char tmpdir[64];

static const char *source_dir(void) {
  const char *d = getenv("CWM_SOURCE_DIR");
  return d && *d ? d : ".";
}

/* ------------------------------------------------------------------ files */

static void test_shipped(void) {
  char path[1024];
  cwm_err e = {0};
  /* BERT-base, seq 128: 2 x 11.17 GMACs in the matrix products */
  snprintf(path, sizeof path, "%s/networks/bert_base_seq128.tsv", source_dir());
  cwm_network *bert = cwm_network_load(path, &e);
  CHECKF(bert != NULL, "%s", e.msg);
  if (bert) {
    CHECK(bert->n == 8);
    CHECK(!strcmp(bert->name, "bert_base_seq128"));
    double mm = 0, total = cwm_network_flops(bert), wsum = 0;
    for (int i = 0; i < bert->n; i++) {
      wsum += bert->sub[i].weight;
      if (!strcmp(bert->sub[i].op, "dense") || !strcmp(bert->sub[i].op, "batch_matmul"))
        mm += bert->sub[i].weight * cwm_workload_flops(bert->sub[i].w);
      CHECK(!strcmp(bert->sub[i].w->name, bert->sub[i].name));
    }
    CHECK(wsum == 12 * 7 + 24);
    CHECKF(fabs(mm / 22.35e9 - 1) < 0.01, "BERT matrix products: %.4g FLOPs", mm);
    CHECKF(fabs(total / 22.35e9 - 1) < 0.03, "BERT total: %.4g FLOPs", total);
    cwm_network_free(bert);
  }
  /* ResNet-50, batch 1, 224x224: 4.09 GMACs */
  snprintf(path, sizeof path, "%s/networks/resnet50_b1.tsv", source_dir());
  cwm_network *rn = cwm_network_load(path, &e);
  CHECKF(rn != NULL, "%s", e.msg);
  if (rn) {
    double convs = 0, total = cwm_network_flops(rn);
    for (int i = 0; i < rn->n; i++)
      if (!strcmp(rn->sub[i].op, "conv2d")) convs += rn->sub[i].weight;
    CHECKF(convs == 53, "%g convolutions", convs);
    CHECKF(fabs(total / 8.18e9 - 1) < 0.03, "ResNet-50 total: %.4g FLOPs", total);
    /* the stem's output is 112x112, the last stage's 7x7 */
    CHECK(!strcmp(rn->sub[0].name, "stem") && rn->sub[0].w->ops[rn->sub[0].w->output].shape[2] == 112);
    cwm_network_free(rn);
  }
}

static void expect_error(const char *text, const char *want) {
  cwm_err e = {0};
  cwm_network *n = cwm_network_parse(text, "t.tsv", &e);
  CHECKF(n == NULL, "accepted: %s", text);
  cwm_network_free(n);
  CHECKF(e.code == CWM_EPARSE && strstr(e.msg, want) != NULL, "for [%s]: got '%s', want '%s'", text, e.msg, want);
}

static void test_parse(void) {
  cwm_err e = {0};
  const char *ok = "# a comment\n"
                   "\n"
                   "mm\t2\tdense\tM=4 N=8 K=8  # trailing remark\r\n"
                   "  sm \t 1.5 \tsoftmax\tB=1 M=1 N=16\n"
                   "conv\t3\tconv2d\tC=2 H=5 W=5 K=4 R=3 S=3 stride=1 pad=1 bias=1 act=relu";
  cwm_network *n = cwm_network_parse(ok, "dir/tiny.net.tsv", &e);
  CHECKF(n != NULL, "%s", e.msg);
  if (n) {
    CHECK(n->n == 3 && !strcmp(n->name, "tiny.net"));
    CHECK(!strcmp(n->sub[0].name, "mm") && n->sub[0].weight == 2 && n->sub[0].line == 3);
    CHECK(!strcmp(n->sub[1].name, "sm") && n->sub[1].weight == 1.5 && !strcmp(n->sub[1].op, "softmax"));
    CHECK(!strcmp(n->sub[1].spec, "softmax B=1 M=1 N=16"));
    CHECK(!strcmp(n->sub[2].op, "conv2d") && n->sub[2].line == 5);
    /* the same workload as the op spec gives on its own (logs are shared with `cwm tune --workload`) */
    cwm_workload *w = cwm_workload_from_spec("dense M=4 N=8 K=8", NULL, &e);
    char k1[17], k2[17];
    cwm_workload_key(w, k1);
    cwm_workload_key(n->sub[0].w, k2);
    CHECK(!strcmp(k1, k2));
    cwm_workload_free(w);
    CHECK(cwm_network_flops(n) == 2 * 512 + 1.5 * cwm_workload_flops(n->sub[1].w) + 3 * cwm_workload_flops(n->sub[2].w));
    cwm_network_free(n);
  }
  expect_error("", "t.tsv: no subgraphs");
  expect_error("# only a comment\n\n", "t.tsv: no subgraphs");
  expect_error("a\t1\tdense\n", "t.tsv:1:10: expected 4 tab-separated fields (name, weight, op, params), found 3: no params");
  expect_error("a 1 dense M=4 N=8 K=8\n", "t.tsv:1:22: expected 4 tab-separated fields (name, weight, op, params), found 1: no weight");
  expect_error("a\t1\tdense\tM=4 N=8 K=8\tx\n", "t.tsv:1:23: unexpected fifth field");
  expect_error("1x\t1\tdense\tM=4 N=8 K=8\n", "t.tsv:1:1: name '1x' is not a C identifier");
  expect_error("a-b\t1\tdense\tM=4 N=8 K=8\n", "t.tsv:1:1: name 'a-b' is not a C identifier");
  expect_error("a\t0\tdense\tM=4 N=8 K=8\n", "t.tsv:1:3: weight '0' is not a positive number");
  expect_error("a\t-2\tdense\tM=4 N=8 K=8\n", "t.tsv:1:3: weight '-2' is not a positive number");
  expect_error("a\t2x\tdense\tM=4 N=8 K=8\n", "t.tsv:1:3: weight '2x' is not a positive number");
  expect_error("a\tnan\tdense\tM=4 N=8 K=8\n", "t.tsv:1:3: weight 'nan' is not a positive number");
  expect_error("a\t\tdense\tM=4 N=8 K=8\n", "t.tsv:1:3: empty weight field");
  expect_error("a\t1\tdens\tM=4 N=8 K=8\n", "t.tsv:1:5: unknown op 'dens'");
  expect_error("a\t1\tdense\tM=4 N=8 Q=8\n", "t.tsv:1:19: dense: unknown key 'Q'");
  expect_error("a\t1\tdense\tM=4 N=8\n", "t.tsv:1:5: dense: missing key 'K'");
  expect_error("a\t1\tdense\tM=4 N=0 K=8\n", "t.tsv:1:15: dense: key 'N' must be an integer");
  expect_error("a\t1\tdense\tM=4 N=8 K=8\n\n# c\nb\t1\tsoftmax\tB=1 M=1 N=16 act=relu\n", "t.tsv:4:26: softmax: unknown key 'act'");
  expect_error("a\t1\tdense\tM=4 N=8 K=8\na\t1\tdense\tM=4 N=8 K=16\n", "t.tsv:2:1: name 'a' already used on line 1");
  expect_error("a\t1\tdense\tM=4 N=8 K=8\nb\t1\tdense\t M=4  K=8 N=8\n",
               "t.tsv:2:5: same workload as 'a' on line 1 (one line per workload: add the weights)");
  expect_error("a\t1\tdense x\tM=4 N=8 K=8\n", "t.tsv:1:5: op 'dense x' is not an op name");
  /* a missing file */
  cwm_network *m = cwm_network_load("/nonexistent/net.tsv", &e);
  CHECK(m == NULL && e.code == CWM_EIO);
}

/* ------------------------------------------------------------------ the choice */

static cwm_sched *sched3(const double *w, const double *f, const int *g, double eps, uint64_t seed) {
  cwm_sched_opts o;
  cwm_sched_opts_default(&o);
  o.eps_greedy = eps;
  o.seed = seed;
  return cwm_sched_new(3, w, f, g, &o);
}

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-300; }

static void test_choice(void) {
  /* warm-up: every task once, in order, whatever the histories say */
  double w[3] = {1, 2, 1}, f[3] = {1e9, 1e9, 1e9};
  int g[3] = {0, 1, 2};
  cwm_sched *s = sched3(w, f, g, 0, 1);
  CHECK(cwm_sched_next(s) == 0);
  cwm_sched_update(s, 0, 5e-3, 8);
  CHECK(cwm_sched_next(s) == 1);
  cwm_sched_update(s, 1, 1e-3, 8);
  CHECK(cwm_sched_next(s) == 2);
  cwm_sched_update(s, 2, 3e-3, 8);
  /* one round each, no similar tasks: grad = w * (1 - alpha) * (-best / 1) */
  CHECK(near(cwm_sched_gradient(s, 0), 1 * 0.8 * -5e-3));
  CHECK(near(cwm_sched_gradient(s, 1), 2 * 0.8 * -1e-3));
  CHECK(near(cwm_sched_gradient(s, 2), 1 * 0.8 * -3e-3));
  CHECK(cwm_sched_next(s) == 0);
  /* the objective is sum weight x best */
  int missing = -1;
  CHECK(near(cwm_sched_objective(s, &missing), 5e-3 + 2e-3 + 3e-3) && missing == 0);
  cwm_sched_free(s);

  /* backward gradient: a task that improved fast over the last 3 rounds beats a slower one that
   * stalled. A: 10, 5, 2, 1 ms (4 rounds); B: 3 ms for 4 rounds. */
  double w2[3] = {1, 1, 1};
  int g2[3] = {0, 1, 2};
  s = sched3(w2, f, g2, 0, 1);
  double ha[4] = {10e-3, 5e-3, 2e-3, 1e-3}, hb[4] = {3e-3, 3e-3, 3e-3, 3e-3}, hc[1] = {0.5e-3};
  cwm_sched_restore(s, 0, ha, 4);
  cwm_sched_restore(s, 1, hb, 4);
  cwm_sched_restore(s, 2, hc, 1);
  double ga = 0.2 * ((1e-3 - 10e-3) / 3) + 0.8 * (-1e-3 / 4);
  double gb = 0.2 * 0 + 0.8 * (-3e-3 / 4);
  double gc = 0.8 * -0.5e-3;
  CHECKF(near(cwm_sched_gradient(s, 0), ga), "%g vs %g", cwm_sched_gradient(s, 0), ga);
  CHECK(near(cwm_sched_gradient(s, 1), gb));
  CHECK(near(cwm_sched_gradient(s, 2), gc));
  CHECK(cwm_sched_next(s) == 0); /* -2.0e-3 < -0.6e-3 < -0.4e-3 */
  /* with only three rounds there is no backward term yet */
  cwm_sched_restore(s, 0, ha, 3);
  CHECK(near(cwm_sched_gradient(s, 0), 0.8 * (-2e-3 / 3)));
  cwm_sched_free(s);

  /* similar tasks: task 1 (same op as task 0) is 5x slower per FLOP than task 0, so it is
   * expected to reach beta x task 0's speed: forward = beta * f1 / speed0 - best1 */
  double w3[3] = {1, 1, 1}, f3[3] = {1e9, 1e9, 4e9};
  int g3[3] = {0, 0, 1};
  s = sched3(w3, f3, g3, 0, 1);
  double h0[10], h1[10], h2[10];
  for (int i = 0; i < 10; i++) h0[i] = 1e-3, h1[i] = 5e-3, h2[i] = 4.5e-3;
  cwm_sched_restore(s, 0, h0, 10);
  cwm_sched_restore(s, 1, h1, 10);
  cwm_sched_restore(s, 2, h2, 10);
  double g1 = 0.8 * ((2 * 1e9 / (1e9 / 1e-3)) - 5e-3); /* min(5e-3 - 5e-4, 2e-3) - 5e-3 */
  double gg2 = 0.8 * (-4.5e-3 / 10);
  CHECKF(near(cwm_sched_gradient(s, 1), g1), "%g vs %g", cwm_sched_gradient(s, 1), g1);
  CHECK(near(cwm_sched_gradient(s, 0), 0.8 * (-1e-3 / 10)));
  CHECK(near(cwm_sched_gradient(s, 2), gg2));
  CHECK(cwm_sched_next(s) == 1); /* without the similar-task bound task 2 (4.5 ms) would win */
  /* Ansor's regrouping: task 1 tuned 6 more rounds than task 0 and still slower than
   * speed0 / beta leaves the group; then only -best / r is left and task 2 wins */
  for (int i = 0; i < 6; i++) cwm_sched_update(s, 1, 5e-3, 8);
  CHECKF(near(cwm_sched_gradient(s, 1), 0.8 * (-5e-3 / 16)), "%g", cwm_sched_gradient(s, 1));
  CHECK(cwm_sched_next(s) == 2);
  cwm_sched_free(s);

  /* done tasks: only errors, a search space that ran dry, a lower bound reached */
  s = sched3(w, f, g, 0, 1);
  cwm_sched_update(s, 0, 1e10, 8); /* every candidate failed */
  cwm_sched_update(s, 1, 1e-3, 8);
  cwm_sched_update(s, 2, 2e-3, 8);
  /* a task of which nothing ran yet is the first choice, for error_rounds (3) rounds */
  CHECK(!cwm_sched_done(s, 0) && cwm_sched_next(s) == 0);
  cwm_sched_update(s, 0, 1e10, 8);
  CHECK(!cwm_sched_done(s, 0) && cwm_sched_next(s) == 0);
  cwm_sched_update(s, 0, 1e10, 8);
  CHECK(cwm_sched_done(s, 0) && !cwm_sched_done(s, 1));
  CHECK(cwm_sched_gradient(s, 0) == 0);
  CHECK(cwm_sched_objective(s, &missing) > 0 && missing == 1);
  for (int k = 0; k < 20; k++) CHECK(cwm_sched_next(s) != 0);
  cwm_sched_update(s, 2, 2e-3, 0); /* no new candidates */
  CHECK(cwm_sched_done(s, 2));
  CHECK(cwm_sched_next(s) == 1);
  cwm_sched_set_lower_bound(s, 1, 1e-3);
  CHECK(cwm_sched_done(s, 1));
  CHECK(cwm_sched_next(s) == -1);
  cwm_sched_free(s);

  /* early stopping after idle rounds, when asked for */
  cwm_sched_opts eo;
  cwm_sched_opts_default(&eo);
  eo.early_stopping = 2;
  s = cwm_sched_new(3, w, f, g, &eo);
  for (int i = 0; i < 3; i++) cwm_sched_update(s, i, 1e-3 * (i + 1), 8);
  cwm_sched_update(s, 0, 1e-3, 8);
  CHECK(!cwm_sched_done(s, 0));
  cwm_sched_update(s, 0, 1e-3, 8);
  CHECK(!cwm_sched_done(s, 0));
  cwm_sched_update(s, 0, 1e-3, 8);
  CHECK(cwm_sched_done(s, 0));
  cwm_sched_free(s);

  /* equal gradients: a random live task; eps-greedy 1: random live tasks; both fixed by the seed */
  double we[3] = {1, 1, 1};
  int seqa[40], seqb[40], count[3] = {0, 0, 0};
  for (int rep = 0; rep < 2; rep++) {
    s = sched3(we, f, g, 1.0, 7);
    cwm_sched_update(s, 0, 2e-3, 0); /* done: its search space ran dry */
    cwm_sched_update(s, 1, 1e-3, 8);
    cwm_sched_update(s, 2, 1e-3, 8);
    for (int k = 0; k < 40; k++) {
      int t = cwm_sched_next(s);
      (rep ? seqb : seqa)[k] = t;
      if (!rep && t >= 0) count[t]++;
    }
    cwm_sched_free(s);
  }
  CHECK(memcmp(seqa, seqb, sizeof seqa) == 0);
  CHECKF(count[0] == 0 && count[1] > 5 && count[2] > 5, "%d %d %d", count[0], count[1], count[2]);
  s = sched3(we, f, g, 0, 3);
  for (int i = 0; i < 3; i++) cwm_sched_update(s, i, 1e-3, 8);
  int seen[3] = {0, 0, 0};
  for (int k = 0; k < 40; k++) seen[cwm_sched_next(s)]++;
  CHECKF(seen[0] && seen[1] && seen[2], "ties: %d %d %d", seen[0], seen[1], seen[2]);
  cwm_sched_free(s);
}

/* ------------------------------------------------------------------ tuning a tiny network */

static const char *TINY = "mm\t2\tdense\tM=4 N=8 K=8\n"
                          "sm\t1\tsoftmax\tB=1 M=1 N=16\n";

typedef struct {
  int n, warm, task[16], stop_after;
  volatile int *stop;
  double est[16], best[16];
} seen_t;

static void on_progress(void *ud, const cwm_net_progress *p) {
  seen_t *s = ud;
  if (s->n < 16) {
    s->task[s->n] = p->task;
    s->est[s->n] = p->est_latency;
    s->best[s->n] = p->task_best;
  }
  s->n++;
  s->warm += p->warmup;
  if (s->stop_after && s->n >= s->stop_after) *s->stop = 1;
}

static int tune_tiny(const char *log, int trials, seen_t *seen, volatile int *stop, cwm_net_result *res, cwm_err *e) {
  cwm_network *net = cwm_network_parse(TINY, "tiny.tsv", e);
  if (!net) return e->code;
  cwm_measure_opts mo = test_measure_opts(1);
  cwm_net_opts o;
  cwm_net_opts_default(&o);
  o.trials = trials;
  o.per_round = 8;
  o.sched.eps_greedy = 0; /* so that the third round's task is the formula's */
  o.tune.population = 64;
  o.tune.generations = 2;
  o.tune.init_min_population = 16;
  o.log_path = log;
  o.progress = on_progress;
  o.ud = seen;
  o.stop = stop;
  seen->stop = stop;
  cwm_costmodel *m = cwm_costmodel_random(5);
  int rc = cwm_tune_network(net, m, &mo, &o, res, e);
  cwm_costmodel_free(m);
  cwm_network_free(net);
  return rc;
}

/* (key, steps) of every record of a log. */
static int log_entries(const char *path, char ***out) {
  cwm_record *recs;
  int n, nbad;
  cwm_err e;
  if (cwm_log_read(path, &recs, &n, &nbad, &e)) return -1;
  char **s = calloc((size_t)n + 1, sizeof *s);
  for (int i = 0; i < n; i++) {
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_buf_printf(&b, "%s ", recs[i].key);
    cwm_steps_print(recs[i].steps, recs[i].nsteps, &b);
    s[i] = cwm_buf_take(&b);
  }
  cwm_records_free(recs, n);
  *out = s;
  return n;
}

static void free_entries(char **s, int n) {
  for (int i = 0; i < n; i++) free(s[i]);
  free(s);
}

static int no_duplicates(char **s, int n) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++)
      if (!strcmp(s[i], s[j])) return 0;
  return 1;
}

static void test_tune_tiny(void) {
  char log[128];
  snprintf(log, sizeof log, "%s/net.jsonl", tmpdir);
  volatile int stop = 0;
  seen_t seen = {0};
  cwm_net_result r;
  cwm_err e = {0};
  CHECKF(tune_tiny(log, 24, &seen, &stop, &r, &e) == 0, "%s", e.msg);
  CHECK(r.ntasks == 2 && r.trials == 24 && r.measured == 24 && r.resumed == 0 && r.rounds == 3);
  CHECK(seen.n == 3 && seen.warm == 2 && seen.task[0] == 0 && seen.task[1] == 1);
  double sum = 0;
  for (int i = 0; i < r.ntasks; i++) {
    CHECKF(r.tasks[i].measured > 0 && r.tasks[i].best_cost < 1e9 && r.tasks[i].best_nsteps > 0, "task %d", i);
    sum += r.tasks[i].weight * r.tasks[i].best_cost;
  }
  CHECK(r.missing == 0 && near(r.est_latency, sum));
  CHECK(near(seen.est[2], sum));
  CHECK(r.tasks[0].measured + r.tasks[1].measured == 24);
  /* after one round each, different ops: grad = w * 0.8 * (-best), so the task with the larger
   * weight x best (as the progress lines reported them) gets round 3 */
  double wb0 = 2 * seen.best[0], wb1 = 1 * seen.best[1];
  CHECKF(seen.task[2] == (wb0 > wb1 ? 0 : 1), "round 3 went to %d (w x best %g, %g)", seen.task[2], wb0, wb1);
  char **s1;
  int n1 = log_entries(log, &s1);
  CHECK(n1 == 24 && no_duplicates(s1, n1));
  free_entries(s1, n1);
  cwm_net_result_free(&r);

  /* resume: 16 more trials measure only new programs; each task's history continues */
  seen_t seen2 = {0};
  CHECKF(tune_tiny(log, 40, &seen2, &stop, &r, &e) == 0, "%s", e.msg);
  CHECK(r.resumed == 24 && r.measured == 16 && r.trials == 40 && seen2.warm == 0 && seen2.n == 2);
  char **s2;
  int n2 = log_entries(log, &s2);
  CHECK(n2 == 40 && no_duplicates(s2, n2));
  free_entries(s2, n2);
  sum = 0;
  for (int i = 0; i < r.ntasks; i++) sum += r.tasks[i].weight * r.tasks[i].best_cost;
  CHECK(near(r.est_latency, sum));
  cwm_net_result_free(&r);
  /* asking for no more than the log holds measures nothing */
  seen_t seen3 = {0};
  CHECK(tune_tiny(log, 40, &seen3, &stop, &r, &e) == 0 && r.measured == 0 && r.resumed == 40 && seen3.n == 0);
  cwm_net_result_free(&r);

  /* the stop flag (Ctrl-C) set during round 1 ends the run after it; its records stay */
  char log2[128];
  snprintf(log2, sizeof log2, "%s/stop.jsonl", tmpdir);
  seen_t seen4 = {.stop_after = 1};
  CHECK(tune_tiny(log2, 24, &seen4, &stop, &r, &e) == 0);
  CHECK(seen4.n == 1 && r.measured == 8 && r.missing == 1);
  char **s4;
  CHECK(log_entries(log2, &s4) == 8);
  free_entries(s4, 8);
  cwm_net_result_free(&r);
  stop = 0;

  /* too few trials for the subgraphs */
  seen_t seen5 = {0};
  CHECK(tune_tiny(log2, 1, &seen5, &stop, &r, &e) == CWM_EUSAGE && strstr(e.msg, "fewer than one per subgraph"));
  cwm_net_result_free(&r);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cwm-network-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  test_shipped();
  test_parse();
  test_choice();
  test_tune_tiny();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
  return test_done();
}

/* test_record.c: step text (print/parse round trips, strict rejection of malformed text), tuning
 * records as JSON lines, the append-only log surviving a cut last line and corrupt lines, the
 * target description, and random mutations that must never crash the parsers. */
#define _GNU_SOURCE
#include "cwm/record.h"
#include "cwm/state.h"
#include "testlib.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *print_step(const cwm_step *st) {
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_step_print(st, &b);
  return cwm_buf_take(&b);
}

static char *print_steps(const cwm_step *st, int n) {
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_steps_print(st, n, &b);
  return cwm_buf_take(&b);
}

/* Parses text as one step, prints it, and compares with expect (text itself if NULL). */
static void roundtrip_one(const char *text, const char *expect) {
  cwm_step st;
  cwm_err err = {0};
  int rc = cwm_step_parse(text, &st, &err);
  CHECKF(rc == CWM_OK, "%s: %s", text, err.msg);
  if (rc) return;
  char *p = print_step(&st);
  CHECKF(strcmp(p, expect ? expect : text) == 0, "%s printed back as %s", text, p);
  cwm_step st2;
  CHECK(cwm_step_parse(p, &st2, &err) == CWM_OK);
  CHECK(memcmp(&st, &st2, sizeof st) == 0);
  free(p);
}

static void test_step_kinds(void) {
  const char *one[] = {
    "[\"AN\",3,0,3]",
    "[\"FU\",3,[0,1,2,3]]",
    "[\"PR\",2,0,\"auto_unroll_max_step$64\"]",
    "[\"RE\",2,[0,4,1,5,8,2,6,9,3,7]]",
    "[\"SP\",2,0,512,[1,64,8],1]",
    "[\"SP\",2,4,0,[null,32,null],0]",
    "[\"SP\",2,4,64,[],1]",
    "[\"FSP\",3,0,1,2]",
    "[\"FFSP\",3,1,[2,3],1,0]",
    "[\"FFSP\",3,1,[2],0,1]",
    "[\"SA\",2,1,16,3]",
    "[\"CA\",2,3,3]",
    "[\"CI\",1]",
    "[\"CR\",4]",
    "[\"CHR\",0,\"shared\",[2,3]]",
    "[\"CHR\",0,\"local.x_1\",[]]",
    "[\"CHW\",2,\"local\"]",
    "[\"RF\",2,1,0]",
  };
  int seen[CWM_S__COUNT] = {0};
  for (size_t i = 0; i < sizeof one / sizeof *one; i++) {
    roundtrip_one(one[i], NULL);
    cwm_step st;
    if (cwm_step_parse(one[i], &st, NULL) == CWM_OK) seen[st.kind] = 1;
  }
  for (int k = 0; k < CWM_S__COUNT; k++)
    CHECKF(seen[k], "kind %s not covered", cwm_step_kind_name((cwm_step_kind)k));

  /* Field mapping per state.h. */
  cwm_step st;
  CHECK(cwm_step_parse("[\"SP\",2,4,0,[null,32,null],0]", &st, NULL) == CWM_OK);
  CHECK(st.kind == CWM_S_SP && st.stage == 2 && st.iter == 4 && st.extent == 0 && st.n == 3 &&
        st.v[0] == 0 && st.v[1] == 32 && st.v[2] == 0 && st.inner_to_outer == 0);
  CHECK(cwm_step_parse("[\"PR\",2,1,\"auto_unroll_max_step$512\"]", &st, NULL) == CWM_OK);
  CHECK(st.kind == CWM_S_PR && st.iter == 1 && st.a == 512);
  CHECK(cwm_step_parse("[\"FFSP\",3,1,[2,5],1,1]", &st, NULL) == CWM_OK);
  CHECK(st.n == 2 && st.v[1] == 5 && st.a == 1 && st.b == 1);
  CHECK(cwm_step_parse("[\"CA\",2,3,4]", &st, NULL) == CWM_OK);
  CHECK(st.a == 3 && st.b == 4);
  CHECK(cwm_step_parse("[\"CHR\",0,\"shared\",[2,3]]", &st, NULL) == CWM_OK);
  CHECK(strcmp(st.scope, "shared") == 0 && st.n == 2 && st.v[0] == 2 && st.v[1] == 3);
  CHECK(cwm_step_parse("[\"SA\",2,1,16,-3]", &st, NULL) == CWM_OK);
  CHECK(st.a == 16 && st.b == -3);

  /* Whitespace anywhere and booleans. */
  roundtrip_one(" [ \"SP\" ,\n 2 ,\t0, 512 , [ 1 , null ] , true ] ", "[\"SP\",2,0,512,[1,null],1]");
  roundtrip_one("[\"FFSP\",3,1,[2],0,false]", "[\"FFSP\",3,1,[2],0,0]");

  /* Built in C, printed, parsed, printed. */
  cwm_step b;
  memset(&b, 0, sizeof b);
  b.kind = CWM_S_CHW;
  b.stage = 7;
  strcpy(b.scope, "local");
  char *p = print_step(&b);
  CHECK(strcmp(p, "[\"CHW\",7,\"local\"]") == 0);
  free(p);
  CHECK(strcmp(cwm_step_kind_name(CWM_S_FFSP), "FFSP") == 0);
  CHECK(strcmp(cwm_step_kind_name((cwm_step_kind)99), "?") == 0);
}

static const char *ansor_example =
    "[\"CHW\",2,\"local\"], [\"SP\",2,0,512,[1,64,8],1], [\"SP\",2,4,64,[2,32,1],1],\n"
    "[\"SP\",2,8,1024,[16],1], [\"RE\",2,[0,4,1,5,8,2,6,9,3,7]], [\"FSP\",3,0,1,2], [\"FSP\",3,3,2,2],\n"
    "[\"RE\",3,[0,3,1,4,2,5]], [\"CA\",2,3,3], [\"FU\",3,[0,1,2,3]], [\"AN\",3,0,3],\n"
    "[\"PR\",2,0,\"auto_unroll_max_step$64\"], [\"AN\",2,9,2], [\"AN\",3,2,2]";

static char *bracketed(const char *s) {
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_printf(&b, "[%s]", s);
  return cwm_buf_take(&b);
}

static void test_step_lists(void) {
  char *with = bracketed(ansor_example);
  char *compact = cwm_xmalloc(strlen(with) + 1);
  size_t k = 0;
  for (const char *s = with; *s; s++)
    if (*s != ' ' && *s != '\n') compact[k++] = *s;
  compact[k] = 0;

  cwm_step *steps = NULL;
  int n = 0;
  cwm_err err = {0};
  CHECKF(cwm_steps_parse(with, &steps, &n, &err) == CWM_OK, "%s", err.msg);
  CHECK(n == 14);
  char *p = print_steps(steps, n);
  CHECKF(strcmp(p, compact) == 0, "printed %s", p);
  cwm_step *steps2 = NULL;
  int n2 = 0;
  CHECK(cwm_steps_parse(p, &steps2, &n2, &err) == CWM_OK);
  CHECK(n2 == n && memcmp(steps, steps2, (size_t)n * sizeof *steps) == 0);
  char *p2 = print_steps(steps2, n2);
  CHECK(strcmp(p, p2) == 0);
  free(p);
  free(p2);
  free(steps);
  free(steps2);
  free(with);
  free(compact);

  CHECK(cwm_steps_parse(" [ ] ", &steps, &n, &err) == CWM_OK && n == 0);
  free(steps);
  p = print_steps(NULL, 0);
  CHECK(strcmp(p, "[]") == 0);
  free(p);

  /* CWM_MAX_STEPS steps are fine, one more is not. */
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_putc(&b, '[');
  for (int i = 0; i < CWM_MAX_STEPS + 1; i++) {
    if (i == CWM_MAX_STEPS) {
      char *ok = cwm_xmalloc(b.len + 2);
      memcpy(ok, b.s, b.len);
      ok[b.len] = ']';
      ok[b.len + 1] = 0;
      CHECK(cwm_steps_parse(ok, &steps, &n, &err) == CWM_OK && n == CWM_MAX_STEPS);
      free(steps);
      free(ok);
    }
    cwm_buf_puts(&b, i ? ",[\"CI\",1]" : "[\"CI\",1]");
  }
  cwm_buf_putc(&b, ']');
  CHECK(cwm_steps_parse(b.s, &steps, &n, &err) == CWM_EPARSE && steps == NULL && n == 0);
  cwm_buf_free(&b);
}

typedef struct { const char *text; const char *want; } bad_case;

static void test_step_malformed(void) {
  /* One step (cwm_step_parse). */
  bad_case one[] = {
    {"[\"XX\",1]", "field 1 (kind): unknown step kind"},
    {"[\"sp\",2,0,512,[1],1]", "field 1 (kind)"},
    {"[]", "field 1 (kind)"},
    {"[3,1]", "field 1 (kind)"},
    {"{\"SP\":1}", "expected an array"},
    {"[\"SP\",2,0,512,[1,64]]", "step (SP): field 6 (inner_to_outer): missing"},
    {"[\"CA\",2,3]", "field 4 (target_iter): missing"},
    {"[\"AN\",\"3\",0,3]", "field 2 (stage): expected an integer"},
    {"[\"AN\",3,0.5,3]", "field 3 (iter): expected an integer"},
    {"[\"AN\",3,0,12]", "field 4 (annotation): integer out of range"},
    {"[\"AN\",-1,0,3]", "field 2 (stage): integer out of range"},
    {"[\"FU\",3,[0,-1]]", "field 3 (fused_ids): element 2 out of range"},
    {"[\"SP\",2,0,512,[1,-64],1]", "field 5 (lengths): element 2 out of range"},
    {"[\"SP\",2,0,512,[1,2,3,4,5,6,7],1]", "field 5 (lengths): array longer than 6"},
    {"[\"SP\",2,0,512,\"x\",1]", "step (SP): field 5 (lengths): expected an array of integers"},
    {"[\"SP\",2,0,512,[1],2]", "field 6 (inner_to_outer): expected 0, 1, true or false"},
    {"[\"SP\",2,0,512,[1],1,0]", "field 7 (extra): unexpected"},
    {"[\"RE\",2,[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24]]",
     "field 3 (order): array longer than 24"},
    {"[\"FU\",3,[0,[1]]]", "field 3 (fused_ids): expected an array of integers"},
    {"[\"FU\",3,[0,null]]", "field 3 (fused_ids)"},
    {"[\"PR\",2,0,\"auto_unroll_max_step$\"]", "field 4 (pragma)"},
    {"[\"PR\",2,0,\"auto_unroll_max_step$-4\"]", "field 4 (pragma)"},
    {"[\"PR\",2,0,\"auto_unroll_max_step$6x\"]", "field 4 (pragma)"},
    {"[\"PR\",2,0,\"unroll$64\"]", "field 4 (pragma)"},
    {"[\"PR\",2,0,\"auto_unroll_max_step$99999999999\"]", "field 4 (pragma)"},
    {"[\"PR\",2,0,64]", "field 4 (pragma)"},
    {"[\"CHW\",2,\"lo\\\"cal\"]", "field 3 (scope): may contain only"},
    {"[\"CHW\",2,\"lo cal\"]", "field 3 (scope): may contain only"},
    {"[\"CHW\",2,\"local;int\"]", "field 3 (scope)"},
    {"[\"CHW\",2,\"abcdefghijklmnop\"]", "field 3 (scope): longer than 15"},
    {"[\"CHR\",2,3,[1]]", "field 3 (scope): expected a string"},
    {"[\"CI\",99999999999999999999]", "field 2 (stage): integer out of range"},
    {"[\"CI\",2147483648]", "field 2 (stage): integer out of range"},
    {"[\"SA\",2,1,16,-2147483649]", "field 5 (offset): integer out of range"},
    {"[\"CI\",1]x", "column 9: JSON syntax error"},
    {"[\"CI\",1] [\"CR\",2]", "column 10: JSON syntax error"},
    {"[\"SP\",2,0,512,[1,6", "JSON syntax error"},
    {"[\"SP\",2,0,", "JSON syntax error"},
    {"", "column 1: JSON syntax error"},
    {"[\"CI\",1e400]", "field 2 (stage)"},
    {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", "column 17: nested too deep"},
  };
  for (size_t i = 0; i < sizeof one / sizeof *one; i++) {
    cwm_step st;
    cwm_err err = {0};
    int rc = cwm_step_parse(one[i].text, &st, &err);
    CHECKF(rc == CWM_EPARSE && err.code == CWM_EPARSE, "%s: rc %d", one[i].text, rc);
    CHECKF(strstr(err.msg, one[i].want) != NULL, "%s: message \"%s\" lacks \"%s\"", one[i].text,
           err.msg, one[i].want);
  }

  /* Lists (cwm_steps_parse): the step index is 1-based. */
  bad_case list[] = {
    {"[[\"CI\",1],[\"CR\",1],[\"SP\",2,0,512,5,1]]", "step 3 (SP): field 5 (lengths): expected an array of integers"},
    {"[[\"CI\",1],[\"ZZ\",1]]", "step 2 (?): field 1 (kind)"},
    {"[[\"CI\",1],3]", "step 2 (?): expected an array"},
    {"[\"CI\",1]", "step 1 (?): expected an array"},
    {"{}", "expected a list of steps"},
    {"[[\"CI\",1],]", "column 11: JSON syntax error"},
    {"[[\"CI\",1]", "JSON syntax error"},
    {"[[\"CI\",1]] trailing", "column 12: JSON syntax error"},
  };
  for (size_t i = 0; i < sizeof list / sizeof *list; i++) {
    cwm_step *steps = (cwm_step *)1;
    int n = -1;
    cwm_err err = {0};
    int rc = cwm_steps_parse(list[i].text, &steps, &n, &err);
    CHECKF(rc == CWM_EPARSE && steps == NULL && n == 0, "%s: rc %d", list[i].text, rc);
    CHECKF(strstr(err.msg, list[i].want) != NULL, "%s: message \"%s\" lacks \"%s\"", list[i].text,
           err.msg, list[i].want);
  }

  /* Very deep nesting does not reach cJSON's recursion. */
  size_t deep = 200000;
  char *d = cwm_xmalloc(2 * deep + 1);
  memset(d, '[', deep);
  memset(d + deep, ']', deep);
  d[2 * deep] = 0;
  cwm_step *steps = NULL;
  int n = 0;
  cwm_err err = {0};
  CHECK(cwm_steps_parse(d, &steps, &n, &err) == CWM_EPARSE && strstr(err.msg, "nested too deep"));
  free(d);
  CHECK(cwm_step_parse(NULL, &(cwm_step){0}, &err) == CWM_EPARSE);
}

/* ------------------------------------------------------------------ records */

static void make_record(cwm_record *r, int i) {
  cwm_record_init(r);
  snprintf(r->key, sizeof r->key, "%016llx", 0x0123456789abcdefULL + (unsigned)i);
  snprintf(r->name, sizeof r->name, "matmul_%d", i);
  r->workload = cwm_xstrdup("input A[64, 32]\ninput B[32, 16]\n"
                            "C[i, j] = sum(k: 32) A[i, k] * B[k, j] # \"quoted\" \\ back\\slash\t\n");
  r->target = cwm_xstrdup("c -keys=cpu -mcpu=AMD_EPYC -threads=1 -vec=32 -cc=gcc -cflags=-O3");
  r->hw[0] = 16;
  r->hw[1] = 32;
  r->hw[2] = 64;
  cwm_step *steps = NULL;
  int n = 0;
  char *with = bracketed(ansor_example);
  cwm_steps_parse(with, &steps, &n, NULL);
  free(with);
  cwm_record_set_steps(r, steps, n - (i % 5));
  free(steps);
  r->ncosts = 3;
  r->costs[0] = 1.25e-4 * (i + 1);
  r->costs[1] = 1.0 / 3.0;
  r->costs[2] = 0.000123456789123;
  r->all_cost = 1.5 + i;
  r->timestamp = 1700000000L + i;
}

static char *to_json(const cwm_record *r) {
  cwm_buf b;
  cwm_buf_init(&b);
  CHECK(cwm_record_to_json(r, &b) == CWM_OK);
  return cwm_buf_take(&b);
}

static void test_record_json(void) {
  cwm_record r, q;
  make_record(&r, 0);
  char *line = to_json(&r);
  CHECK(strchr(line, '\n') == NULL);
  CHECK(strncmp(line, "{\"i\":[[\"0123456789abcdef\",\"c -keys=cpu", 38) == 0);
  CHECK(strstr(line, ",[16,32,64,0,0,0,0,0],\"\",0,[]],[[],[[\"CHW\",2,\"local\"],") != NULL);
  CHECK(strstr(line, "\"r\":[[0.000125,0.333333333,0.000123456789],0,1.5,1700000000],\"v\":\"v0.6\","
                     "\"cwm\":{\"version\":\"" CWM_VERSION "\",\"name\":\"matmul_0\",\"workload\":") != NULL);
  cwm_err err = {0};
  CHECKF(cwm_record_parse(line, &q, &err) == CWM_OK, "%s", err.msg);
  CHECK(strcmp(q.key, r.key) == 0 && strcmp(q.name, r.name) == 0);
  CHECK(q.workload && strcmp(q.workload, r.workload) == 0);
  CHECK(q.target && strcmp(q.target, r.target) == 0);
  CHECK(memcmp(q.hw, r.hw, sizeof r.hw) == 0);
  CHECK(q.nsteps == r.nsteps && memcmp(q.steps, r.steps, (size_t)r.nsteps * sizeof *r.steps) == 0);
  CHECK(q.ncosts == 3 && q.costs[0] == 0.000125 && q.costs[1] == 0.333333333);
  CHECK(q.error == 0 && q.all_cost == 1.5 && q.timestamp == 1700000000L);
  CHECK(strcmp(q.version, CWM_VERSION) == 0 && q.msg[0] == 0);
  char *line2 = to_json(&q);
  CHECKF(strcmp(line, line2) == 0, "\n%s\n%s", line, line2);
  free(line2);

  /* The steps are exactly cwm_steps_print's text. */
  char *sp = print_steps(r.steps, r.nsteps);
  CHECK(strstr(line, sp) != NULL);
  free(sp);

  cwm_record c;
  cwm_record_copy(&c, &q);
  line2 = to_json(&c);
  CHECK(strcmp(line, line2) == 0);
  CHECK(c.steps != q.steps && c.workload != q.workload);
  free(line2);
  cwm_record_free(&c);
  cwm_record_free(&q);
  free(line);

  /* A failed record: costs [1e10], error code and message. */
  r.ncosts = 0;
  r.error = 2;
  snprintf(r.msg, sizeof r.msg, "compile error: 'x' undeclared\n\"here\"");
  line = to_json(&r);
  CHECK(strstr(line, "\"r\":[[1e+10],2,") != NULL);
  CHECKF(cwm_record_parse(line, &q, &err) == CWM_OK, "%s", err.msg);
  CHECK(q.error == 2 && q.ncosts == 1 && q.costs[0] == 1e10 && strcmp(q.msg, r.msg) == 0);
  CHECK(cwm_record_cost(&q) == CWM_FAILED_COST);
  line2 = to_json(&q);
  CHECK(strcmp(line, line2) == 0);
  free(line2);
  cwm_record_free(&q);
  free(line);

  /* The host that timed a record round-trips; none (older logs) prints no "host"; a host name
   * longer than the field is refused. */
  snprintf(r.host, sizeof r.host, "node-7.cluster");
  line = to_json(&r);
  CHECK(strstr(line, "\"host\":\"node-7.cluster\"") != NULL);
  CHECKF(cwm_record_parse(line, &q, &err) == CWM_OK, "%s", err.msg);
  CHECK(strcmp(q.host, "node-7.cluster") == 0);
  cwm_record_free(&q);
  char *at = strstr(line, "node-7.cluster");
  cwm_buf lb;
  cwm_buf_init(&lb);
  cwm_buf_append(&lb, line, (size_t)(at - line));
  for (int i = 0; i < 70; i++) cwm_buf_putc(&lb, 'h');
  cwm_buf_puts(&lb, at + strlen("node-7.cluster"));
  CHECK(cwm_record_parse(lb.s, &q, &err) == CWM_EPARSE && strstr(err.msg, "host") != NULL);
  cwm_buf_free(&lb);
  free(line);
  r.host[0] = 0;
  line = to_json(&r);
  CHECK(strstr(line, "\"host\"") == NULL);
  free(line);

  /* Non-finite costs never produce invalid JSON; no steps, no workload. */
  cwm_record e;
  cwm_record_init(&e);
  strcpy(e.key, "ffffffffffffffff");
  e.ncosts = 1;
  e.costs[0] = 1.0 / 0.0;
  line = to_json(&e);
  CHECKF(cwm_record_parse(line, &q, &err) == CWM_OK, "%s", err.msg);
  CHECK(q.nsteps == 0 && q.costs[0] == 1e10);
  CHECK(cwm_record_cost(&q) == 1e10);
  cwm_record_free(&q);
  free(line);
  cwm_record_free(&e);

  /* Invalid UTF-8 is replaced, valid UTF-8 kept. */
  free(r.workload);
  r.workload = cwm_xstrdup("caf\xc3\xa9 \xff\xfe end");
  line = to_json(&r);
  CHECK(cwm_record_parse(line, &q, &err) == CWM_OK);
  CHECK(q.workload && strcmp(q.workload, "caf\xc3\xa9 ?? end") == 0);
  cwm_record_free(&q);
  free(line);

  /* Malformed records. */
  bad_case bads[] = {
    {"", "column 1"},
    {"[]", "expected a JSON object"},
    {"{\"i\":1}", "\"i\""},
    {"{\"i\":[[\"0123\",\"\",[0,0,0,0,0,0,0,0]],[[],[]]],\"r\":[[1],0,1,1]}", "workload key"},
    {"{\"i\":[[\"0123456789abcdef\",\"\",[0,0,0]],[[],[]]],\"r\":[[1],0,1,1]}", "hardware"},
    {"{\"i\":[[\"0123456789abcdef\",\"\",[0,0,0,0,0,0,0,0]],[[],[[\"XX\",1]]]],\"r\":[[1],0,1,1]}",
     "steps): step 1 (?): field 1 (kind)"},
    {"{\"i\":[[\"0123456789abcdef\",\"\",[0,0,0,0,0,0,0,0]],[[],[]]],\"r\":[[\"a\"],0,1,1]}", "costs"},
    {"{\"i\":[[\"0123456789abcdef\",\"\",[0,0,0,0,0,0,0,0]],[[],[]]],\"r\":[[1],-1,1,1]}", "error"},
    {"{\"i\":[[\"0123456789abcdef\",\"\",[0,0,0,0,0,0,0,0]],[[],[]]],\"r\":[[1],0,1]}", "\"r\""},
    {"{\"i\":[[\"0123456789abcdef\",\"\",[0,0,0,0,0,0,0,0]],[[],[]]],\"r\":[[1],0,1,1.5]}", "timestamp"},
    {"{\"i\":[[\"0123456789abcdef\",\"\",[0,0,0,0,0,0,0,0]],[[],[]]],\"r\":[[1],0,1,1],\"cwm\":{\"name\":3}}", "name"},
    {"{\"i\":[[\"0123456789abcdef\",\"\",[0,0,0,0,0,0,0,0]],[[],[]]],\"r\":[[1],0,1,1]} x", "JSON syntax"},
  };
  for (size_t i = 0; i < sizeof bads / sizeof *bads; i++) {
    cwm_err e2 = {0};
    int rc = cwm_record_parse(bads[i].text, &q, &e2);
    CHECKF(rc == CWM_EPARSE, "%s: rc %d", bads[i].text, rc);
    CHECKF(strstr(e2.msg, bads[i].want) != NULL, "%s: \"%s\" lacks \"%s\"", bads[i].text, e2.msg, bads[i].want);
    CHECK(q.steps == NULL && q.workload == NULL && q.target == NULL);
  }
  /* A minimal Ansor-like line (no "cwm" object) is a record. */
  CHECK(cwm_record_parse("{\"i\": [[\"0123456789abcdef\", \"llvm\", [16,64,64,0,0,0,0,0], \"\", 0, []],"
                         " [[], [[\"CI\", 1]]]], \"r\": [[0.5], 0, 1.0, 17], \"v\": \"v0.6\"}",
                         &q, &err) == CWM_OK);
  CHECK(q.nsteps == 1 && q.workload == NULL && q.hw[1] == 64 && q.timestamp == 17);
  cwm_record_free(&q);
  cwm_record_free(&r);
}

/* ---------------------------------------------------------------------- log */

static char tmpdir[256];

static long file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static void test_log(void) {
  char path[512];
  snprintf(path, sizeof path, "%s/tune.jsonl", tmpdir);
  cwm_err err = {0};
  cwm_log *log = cwm_log_open(path, &err);
  CHECKF(log != NULL, "%s", err.msg);
  if (!log) return;
  long before_last = 0;
  for (int i = 0; i < 100; i++) {
    cwm_record r;
    make_record(&r, i);
    if (i == 99) before_last = file_size(path);
    CHECK(cwm_log_append(log, &r, &err) == CWM_OK);
    cwm_record_free(&r);
  }
  cwm_log_close(log);

  cwm_record *recs = NULL;
  int n = 0, nbad = -1;
  CHECK(cwm_log_read(path, &recs, &n, &nbad, &err) == CWM_OK);
  CHECK(n == 100 && nbad == 0);
  for (int i = 0; i < n; i++) {
    cwm_record want;
    make_record(&want, i);
    char *a = to_json(&want), *b = to_json(&recs[i]);
    CHECKF(strcmp(a, b) == 0, "record %d differs", i);
    free(a);
    free(b);
    cwm_record_free(&want);
  }
  cwm_records_free(recs, n);

  /* Cut in the middle of the last line, as a kill would. */
  long size = file_size(path);
  CHECK(truncate(path, before_last + (size - before_last) / 2) == 0);
  CHECK(cwm_log_read(path, &recs, &n, &nbad, &err) == CWM_OK);
  CHECK(n == 99 && nbad == 1);
  cwm_records_free(recs, n);

  /* Appending afterwards keeps the new record intact. */
  log = cwm_log_open(path, &err);
  CHECK(log != NULL);
  cwm_record r;
  make_record(&r, 1000);
  CHECK(cwm_log_append(log, &r, &err) == CWM_OK);
  cwm_log_close(log);
  CHECK(cwm_log_read(path, &recs, &n, &nbad, &err) == CWM_OK);
  CHECK(n == 100 && nbad == 1);
  if (n == 100) {
    char *a = to_json(&r), *b = to_json(&recs[99]);
    CHECK(strcmp(a, b) == 0);
    free(a);
    free(b);
  }
  cwm_records_free(recs, n);
  cwm_record_free(&r);

  /* A corrupt line in the middle and blank lines: skipped; only the corrupt one counts. */
  char *text = cwm_read_file(path, NULL, &err);
  CHECK(text != NULL);
  if (text) {
    char *mid = text;
    for (int i = 0; i < 50; i++) mid = strchr(mid, '\n') + 1;
    mid[10] = '#';
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_buf_puts(&b, "\n   \n");
    cwm_buf_puts(&b, text);
    cwm_buf_puts(&b, "\r\n\n");
    CHECK(cwm_write_file_atomic(path, b.s, b.len, &err) == CWM_OK);
    cwm_buf_free(&b);
    free(text);
  }
  CHECK(cwm_log_read(path, &recs, &n, &nbad, &err) == CWM_OK);
  CHECK(n == 99 && nbad == 2);
  cwm_records_free(recs, n);

  /* The streaming iterator agrees and reports where. */
  cwm_log_iter *it = cwm_log_iter_open(path, &err);
  CHECK(it != NULL);
  int good = 0, rc;
  while ((rc = cwm_log_iter_next(it, &r, &err)) == 1) {
    good++;
    cwm_record_free(&r);
  }
  CHECK(rc == 0 && good == 99 && cwm_log_iter_nbad(it) == 2);
  CHECK(cwm_log_iter_line(it) == 103);
  CHECKF(strncmp(cwm_log_iter_last_bad(it), "line 102: record:", 17) == 0, "%s", cwm_log_iter_last_bad(it));
  cwm_log_iter_close(it);

  /* A very long line (workload text of 1 MB) reads back. */
  snprintf(path, sizeof path, "%s/long.jsonl", tmpdir);
  log = cwm_log_open(path, &err);
  make_record(&r, 5);
  free(r.workload);
  r.workload = cwm_xmalloc(1 << 20);
  memset(r.workload, 'x', (1 << 20) - 1);
  r.workload[(1 << 20) - 1] = 0;
  CHECK(cwm_log_append(log, &r, &err) == CWM_OK);
  cwm_log_close(log);
  CHECK(cwm_log_read(path, &recs, &n, &nbad, &err) == CWM_OK && n == 1 && nbad == 0);
  if (n == 1) CHECK(strcmp(recs[0].workload, r.workload) == 0);
  cwm_records_free(recs, n);
  cwm_record_free(&r);

  /* Errors. */
  snprintf(path, sizeof path, "%s/missing.jsonl", tmpdir);
  CHECK(cwm_log_read(path, &recs, &n, &nbad, &err) == CWM_EIO && strstr(err.msg, path));
  CHECK(recs == NULL && n == 0);
  snprintf(path, sizeof path, "%s/no/such/dir/log.jsonl", tmpdir);
  CHECK(cwm_log_open(path, &err) == NULL && err.code == CWM_EIO && strstr(err.msg, path));
  CHECK(cwm_log_open(tmpdir, &err) == NULL && err.code == CWM_EIO);
  CHECK(cwm_log_read(tmpdir, &recs, &n, &nbad, &err) == CWM_EIO);
}

/* Records trusted on resume: a zero or negative latency is not a record (it would become the best
 * schedule); a second writer on one log is refused while the first holds it; the target match
 * ignores the CPU's name but not the threads, vector width, compiler or flags. */
static void test_untrusted(void) {
  cwm_record r;
  make_record(&r, 0);
  cwm_err err = {0};
  const double bad_costs[] = {-1, 0, -1e-9};
  for (int k = 0; k < 3; k++) {
    r.costs[1] = bad_costs[k];
    char *j = to_json(&r);
    cwm_record back;
    CHECKF(cwm_record_parse(j, &back, &err) == CWM_EPARSE && strstr(err.msg, "positive"), "cost %g: %s", bad_costs[k],
           err.msg);
    free(j);
  }
  /* a failed record keeps Ansor's 1e10 and stays readable */
  r.error = 4;
  r.ncosts = 1;
  r.costs[0] = 1e10;
  char *j = to_json(&r);
  cwm_record back;
  CHECKF(cwm_record_parse(j, &back, &err) == CWM_OK, "%s", err.msg);
  cwm_record_free(&back);
  free(j);
  CHECK(cwm_record_same_target(&r, "c -keys=cpu -mcpu=Other_CPU -threads=1 -vec=32 -cc=gcc -cflags=-O3"));
  /* another CPU model resumes (the tuner counts such records: test_tune) */
  CHECK(cwm_record_same_target(&r, "c -keys=cpu -mcpu=AMD_EPYC -cpuid=26.2 -threads=1 -vec=32 -cc=gcc -cflags=-O3"));
  CHECK(!cwm_record_same_target(&r, "c -keys=cpu -mcpu=AMD_EPYC -threads=2 -vec=32 -cc=gcc -cflags=-O3"));
  CHECK(!cwm_record_same_target(&r, "c -keys=cpu -mcpu=AMD_EPYC -threads=1 -vec=64 -cc=gcc -cflags=-O3"));
  CHECK(!cwm_record_same_target(&r, "c -keys=cpu -mcpu=AMD_EPYC -threads=1 -vec=32 -cc=clang -cflags=-O3"));
  free(r.target);
  r.target = NULL;
  CHECK(cwm_record_same_target(&r, "c -keys=cpu -mcpu=AMD_EPYC -threads=2 -vec=32 -cc=gcc -cflags=-O3"));
  cwm_record_free(&r);

  char path[512];
  snprintf(path, sizeof path, "%s/locked.jsonl", tmpdir);
  cwm_log *a = cwm_log_open(path, &err);
  CHECKF(a != NULL, "%s", err.msg);
  cwm_log *b = cwm_log_open(path, &err);
  CHECKF(b == NULL && err.code == CWM_EIO && strstr(err.msg, "another cwm run") && strstr(err.msg, path),
         "second writer: %s", b ? "opened" : err.msg);
  cwm_log_close(b);
  cwm_log_close(a);
  a = cwm_log_open(path, &err);
  CHECKF(a != NULL, "after the first closed: %s", err.msg);
  cwm_log_close(a);
}

static void test_target(void) {
  cwm_target t;
  cwm_target_detect(&t, 0, "gcc", "-O3 -march=native");
  CHECK(t.cores >= 1 && t.threads == t.cores);
  CHECK(t.vec_bytes == 16 || t.vec_bytes == 32 || t.vec_bytes == 64);
  CHECK(t.cache_line == 64 && t.model[0]);
  for (const char *p = t.model; *p; p++) CHECK(*p >= 0x20 && *p < 0x7f);
  char s[1024];
  cwm_target_string(&t, s, sizeof s);
  CHECKF(strncmp(s, "c -keys=cpu -mcpu=", 18) == 0, "%s", s);
  CHECKF(strstr(s, " -cc=gcc -cflags=-O3_-march=native") != NULL, "%s", s);
  int spaces = 0;
  for (const char *p = s; *p; p++) spaces += *p == ' ';
  CHECKF(spaces == (t.cpuid[0] ? 8 : 7), "%s", s);
  /* the family and model numbers, where /proc/cpuinfo has them (x86) */
  char id[24];
  FILE *ci = fopen("/proc/cpuinfo", "r");
  char line[256];
  int has_family = 0;
  while (ci && fgets(line, sizeof line, ci)) has_family |= strncmp(line, "cpu family", 10) == 0;
  if (ci) fclose(ci);
  CHECKF(has_family == (t.cpuid[0] != 0), "cpuid '%s'", t.cpuid);
  CHECK(cwm_target_string_field(s, "cpuid", id, sizeof id) == has_family && !strcmp(id, t.cpuid));
  if (has_family) CHECKF(strchr(id, '.') && id[0] >= '0' && id[0] <= '9', "%s", id);
  /* -march=native builds for the host's instruction set, and the string says which */
  const cwm_isa *host = cwm_isa_host();
  CHECK(!strcmp(t.isa, host->name) && t.vec_bytes == host->vec_bytes);
  CHECK(cwm_isa_runs_here(host, NULL, 0));
  CHECK(cwm_target_string_isa(s) == host);
  char v[64];
  CHECK(cwm_target_string_field(s, "cc", v, sizeof v) && !strcmp(v, "gcc"));
  CHECK(!cwm_target_string_field(s, "nosuch", v, sizeof v) && !v[0]);
  /* explicit instruction sets: the flags say which, and -march=native is replaced */
  const cwm_isa *avx2 = cwm_isa_find("avx2"), *avx512 = cwm_isa_find("avx512"), *gen = cwm_isa_find("generic");
  CHECK(avx2 && avx512 && gen && !cwm_isa_find("native") && !cwm_isa_find(NULL));
  CHECK(avx2->lanes == 8 && avx512->lanes == 16 && avx2->vec_bytes == 32);
  CHECK(cwm_isa_of_cflags("-O3 -mavx2 -mfma -fopenmp") == avx2);
  CHECK(cwm_isa_of_cflags("-O3 -mavx2 -fopenmp") != avx2); /* FMA missing: not the avx2 target */
  CHECK(cwm_isa_of_cflags(avx512->flags) == avx512);
  CHECK(cwm_isa_of_cflags("-O3") == gen && cwm_isa_of_cflags(NULL) == gen);
  char f[256];
  CHECK(cwm_isa_cflags(avx2, "-O3 -march=native -fopenmp", f, sizeof f) == 0);
  CHECKF(!strcmp(f, "-O3 -mavx2 -mfma -fopenmp"), "%s", f);
  CHECK(cwm_isa_cflags(avx2, "-O3 -fopenmp", f, sizeof f) == 0);
  CHECKF(!strcmp(f, "-O3 -mavx2 -mfma -fopenmp"), "%s", f);
  CHECK(cwm_isa_cflags(gen, "-O3 -march=native -fopenmp", f, sizeof f) == 0);
  CHECKF(!strcmp(f, "-O3 -fopenmp"), "%s", f);
  CHECK(cwm_isa_cflags(NULL, "-O3 -march=native", f, sizeof f) == 0 && !strcmp(f, "-O3 -march=native"));
  CHECK(cwm_isa_cflags(avx512, "-O3 -march=native", f, 8) == CWM_EUSAGE);
  cwm_target_detect(&t, 1, "gcc", "-O3 -mavx2 -mfma");
  CHECK(!strcmp(t.isa, "avx2") && t.vec_bytes == 32);
  cwm_target_string(&t, s, sizeof s);
  CHECKF(strstr(s, " -isa=avx2 -threads=1 -vec=32 ") != NULL, "%s", s);
  CHECK(cwm_target_string_isa(s) == avx2);
  /* strings of older logs: no -isa, the width tells */
  CHECK(cwm_target_string_isa("c -keys=cpu -mcpu=x -threads=1 -vec=64 -cc=gcc -cflags=") == avx512);
  CHECK(cwm_target_string_isa("c -keys=cpu -mcpu=x -threads=1 -vec=16 -cc=gcc -cflags=") == NULL);
  char miss[32];
  const cwm_isa *neon = cwm_isa_find("neon");
#if defined(__x86_64__)
  CHECK(!cwm_isa_runs_here(neon, miss, sizeof miss) && !strcmp(miss, "aarch64"));
#endif
  CHECK(cwm_isa_runs_here(gen, miss, sizeof miss) && !miss[0]);
  cwm_target_detect(&t, 3, NULL, NULL);
  CHECK(t.threads == 3 && strcmp(t.cc, "cc") == 0 && t.cflags[0] == 0);
  char small[8];
  cwm_target_string(&t, small, sizeof small);
  CHECK(strcmp(small, "c -keys") == 0);
  cwm_record r;
  cwm_record_init(&r);
  cwm_record_set_target(&r, &t);
  CHECK(r.target && r.hw[0] == t.cores && r.hw[1] == t.vec_bytes && r.hw[2] == 64);
  cwm_record_free(&r);
}

/* -------------------------------------------------------------------- fuzz */

static void mutate(cwm_rng *g, char *s, size_t len) {
  static const char pool[] = "[]{},:\"\\0123456789-.eE nulltrue\x01\xff";
  int k = 1 + cwm_rng_int(g, 4);
  for (int m = 0; m < k; m++) {
    size_t at = (size_t)cwm_rng_int(g, (int)len);
    switch (cwm_rng_int(g, 3)) {
    case 0: s[at] = pool[cwm_rng_int(g, (int)sizeof pool - 1)]; break;
    case 1: s[at] = (char)(1 + cwm_rng_int(g, 255)); break;
    default: s[at] = 0; break; /* truncation */
    }
  }
}

static void test_fuzz(void) {
  cwm_rng g;
  cwm_rng_seed(&g, 42);
  cwm_record r;
  make_record(&r, 3);
  char *line = to_json(&r);
  cwm_record_free(&r);
  size_t len = strlen(line);
  char *buf = cwm_xmalloc(len + 1);
  int ok = 0;
  for (int it = 0; it < 20000; it++) {
    memcpy(buf, line, len + 1);
    mutate(&g, buf, len);
    cwm_record q;
    cwm_err err = {0};
    if (cwm_record_parse(buf, &q, &err) == CWM_OK) {
      ok++;
      char *again = to_json(&q);
      cwm_record q2;
      CHECKF(cwm_record_parse(again, &q2, &err) == CWM_OK, "reprint does not parse: %s", err.msg);
      cwm_record_free(&q2);
      free(again);
      cwm_record_free(&q);
    } else {
      CHECK(err.code == CWM_EPARSE && q.steps == NULL);
    }
  }
  CHECK(ok > 0);
  free(buf);
  free(line);

  char *steps = bracketed(ansor_example);
  len = strlen(steps);
  buf = cwm_xmalloc(len + 1);
  for (int it = 0; it < 20000; it++) {
    memcpy(buf, steps, len + 1);
    mutate(&g, buf, len);
    cwm_step *st = NULL;
    int n = 0;
    cwm_err err = {0};
    if (cwm_steps_parse(buf, &st, &n, &err) == CWM_OK) {
      char *p = print_steps(st, n);
      cwm_step *st2 = NULL;
      int n2 = 0;
      CHECKF(cwm_steps_parse(p, &st2, &n2, &err) == CWM_OK && n2 == n, "%s", p);
      if (st2) CHECK(memcmp(st, st2, (size_t)n * sizeof *st) == 0);
      char *p2 = print_steps(st2, n2);
      CHECK(strcmp(p, p2) == 0);
      free(p2);
      free(st2);
      free(p);
      free(st);
    } else {
      CHECK(err.code == CWM_EPARSE && st == NULL);
    }
  }
  free(buf);
  free(steps);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cwm_test_record.XXXXXX");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_step_kinds();
  test_step_lists();
  test_step_malformed();
  test_record_json();
  test_log();
  test_target();
  test_untrusted();
  test_fuzz();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  return test_done();
}

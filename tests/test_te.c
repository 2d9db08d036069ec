/* test_te.c: the workload front end. Suite workloads parse and print as fixed points, the op
 * library produces the documented stage structure, malformed text fails with the right position,
 * and random mutations of valid text never crash the parser. */
#define _POSIX_C_SOURCE 200809L /* mkstemp, write, unlink */
#include "cwm/te.h"
#include "testlib.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* print -> parse -> print must give the same bytes. Bodies compare equal too unless the text
 * has rounded floats or the tree was built by hand (a built negative constant reads back as
 * a negation). */
static void check_roundtrip(const cwm_workload *w, const char *what, int same_tree) {
  char *a = cwm_workload_print(w);
  cwm_err err = {0};
  cwm_workload *w2 = cwm_workload_parse(a, &err);
  CHECKF(w2 != NULL, "%s: reparse failed: %s\n%s", what, err.msg, a);
  if (w2) {
    char *b = cwm_workload_print(w2);
    CHECKF(strcmp(a, b) == 0, "%s: round trip differs:\n%s---\n%s", what, a, b);
    CHECK(w2->nops == w->nops && w2->output == w->output);
    for (int i = 0; i < w->nops && i < w2->nops; i++)
      if (!w->ops[i].is_input && !cwm_expr_equal(w->ops[i].body, w2->ops[i].body) &&
          same_tree && strchr(a, '.') == NULL)
        CHECKF(0, "%s: op %d body differs after round trip", what, i);
    char k1[17], k2[17];
    cwm_workload_key(w, k1);
    cwm_workload_key(w2, k2);
    CHECK(strcmp(k1, k2) == 0);
    free(b);
    cwm_workload_free(w2);
  }
  free(a);
}

static void test_suite(void) {
  const char *path = cwm_suite_default_path();
  cwm_err err = {0};
  char *text = cwm_read_file(path, NULL, &err);
  CHECKF(text != NULL, "suite %s: %s", path, err.msg);
  if (!text) return;
  int rows = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    if (line[0] == '#' || !line[0]) continue;
    char id[64];
    size_t n = strcspn(line, "\t");
    if (n >= sizeof id) continue;
    memcpy(id, line, n);
    id[n] = 0;
    rows++;
    cwm_workload *w = cwm_workload_from_spec(id, NULL, &err);
    CHECKF(w != NULL, "suite row %s: %s", id, err.msg);
    if (!w) continue;
    CHECKF(strcmp(w->name, id) == 0, "name %s != %s", w->name, id);
    CHECK(w->output == w->nops - 1);
    CHECK(strcmp(w->ops[w->output].name, "out") == 0);
    CHECK(cwm_workload_flops(w) > 0);
    check_roundtrip(w, id, 1);
    /* the op spec column gives the same workload as the id */
    char spec[512];
    CHECK(cwm_suite_lookup(path, id, spec, sizeof spec, &err) == 0);
    cwm_workload *w2 = cwm_workload_from_spec(spec, NULL, &err);
    CHECKF(w2 != NULL, "spec %s: %s", spec, err.msg);
    if (w2) {
      char k1[17], k2[17];
      cwm_workload_key(w, k1);
      cwm_workload_key(w2, k2);
      CHECK(strcmp(k1, k2) == 0);
      cwm_workload_free(w2);
    }
    cwm_workload_free(w);
  }
  CHECKF(rows >= 15, "only %d suite rows", rows);
  free(text);

  CHECK(cwm_suite_lookup(path, "no_such_id", (char[64]){0}, 64, &err) != 0);
  CHECK(err.code == CWM_EPARSE);
  CHECK(cwm_workload_from_spec("no_such_id", NULL, &err) == NULL);
  CHECK(err.code == CWM_EPARSE && strstr(err.msg, "no_such_id"));
  CHECK(cwm_suite_lookup("/nonexistent/suite.tsv", "x", (char[64]){0}, 64, &err) == CWM_EIO);
}

static void test_oplib(void) {
  cwm_err err = {0};
  cwm_workload *w = cwm_workload_from_spec("matmul_1024", NULL, &err);
  CHECKF(w != NULL, "%s", err.msg);
  if (w) {
    CHECK(cwm_workload_flops(w) == 2.0 * 1024 * 1024 * 1024);
    cwm_workload_free(w);
  }

  w = cwm_workload_from_spec("conv_stem", NULL, &err);
  CHECKF(w != NULL, "%s", err.msg);
  if (w) {
    const cwm_op *o = &w->ops[w->output];
    CHECK(o->ndim == 4 && o->shape[0] == 1 && o->shape[1] == 64 && o->shape[2] == 112 &&
          o->shape[3] == 112);
    /* I, Wt, bias, P, conv, out */
    CHECK(w->nops == 6);
    CHECK(strcmp(w->ops[3].name, "P") == 0 && w->ops[3].shape[2] == 230);
    CHECK(cwm_expr_has_select(w->ops[3].body));
    CHECK(strcmp(w->ops[4].name, "conv") == 0 && w->ops[4].reduce == CWM_RED_SUM &&
          w->ops[4].nred == 3);
    CHECK(cwm_expr_reads(w->ops[4].body, 3) && cwm_expr_reads(w->ops[4].body, 1));
    CHECK(!cwm_expr_reads(w->ops[4].body, 0));
    double conv = 64.0 * 112 * 112 * 3 * 7 * 7 * 2, pad = 3.0 * 230 * 230, epi = 64.0 * 112 * 112 * 2;
    CHECKF(cwm_workload_flops(w) == conv + pad + epi, "conv_stem flops %g", cwm_workload_flops(w));
    cwm_workload_free(w);
  }

  char *t = cwm_op_to_text("dense M=128 N=3072 K=768 bias=1 act=gelu", &err);
  CHECKF(t && strcmp(t, "input A[128, 768]\ninput W[3072, 768] const\ninput bias[3072] const\n"
                        "D[i:128, j:3072] = sum(k:768 : A[i, k] * W[j, k])\n"
                        "out[i:128, j:3072] = gelu(D[i, j] + bias[j])\noutput out\n") == 0,
         "%s", t ? t : err.msg);
  free(t);
  t = cwm_op_to_text("dense K=8 M=2 N=4 act=relu", &err); /* any key order, bias default 0 */
  CHECKF(t && strstr(t, "out[i:2, j:4] = relu(D[i, j])\n") && !strstr(t, "bias"), "%s",
         t ? t : err.msg);
  free(t);
  t = cwm_op_to_text("dense M=2 N=4 K=8", &err);
  CHECKF(t && strstr(t, "out[i:2, j:4] = sum(k:8 : A[i, k] * W[j, k])\noutput out\n"), "%s",
         t ? t : err.msg);
  free(t);
  t = cwm_op_to_text("conv2d C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3 bias=1 act=relu", &err);
  CHECKF(t && strstr(t, "P[n:1, c:3, h:230, w:230] = select(h >= 3 && h < 227 && w >= 3 && "
                        "w < 227, I[n, c, h - 3, w - 3], 0)\n") &&
             strstr(t, "conv[n:1, k:64, y:112, x:112] = sum(rc:3, ry:7, rx:7 : P[n, rc, y * 2 + "
                       "ry, x * 2 + rx] * Wt[k, rc, ry, rx])\n") &&
             strstr(t, "out[n:1, k:64, y:112, x:112] = relu(conv[n, k, y, x] + bias[k])\n"),
         "%s", t ? t : err.msg);
  free(t);
  /* a pointwise convolution: a matrix product over the flattened image */
  t = cwm_op_to_text("conv2d C=64 H=56 W=56 K=256 R=1 S=1 stride=1 pad=0", &err);
  CHECKF(t && strstr(t, "input I[1, 64, 3136]\ninput Wt[256, 64, 1, 1] const\n") &&
             strstr(t, "out[n:1, k:256, p:3136] = sum(rc:64 : I[n, rc, p] * Wt[k, rc, 0, 0])\n") && !strstr(t, "P["),
         "%s", t ? t : err.msg);
  free(t);
  /* strided, it keeps the image's two axes */
  t = cwm_op_to_text("conv2d C=64 H=56 W=56 K=128 R=1 S=1 stride=2 pad=0", &err);
  CHECKF(t && strstr(t, "out[n:1, k:128, y:28, x:28] = sum(rc:64, ry:1, rx:1 : I[n, rc, y * 2 + ry, x * 2 + rx]"),
         "%s", t ? t : err.msg);
  free(t);
  t = cwm_op_to_text("dwconv2d C=32 H=112 W=112 R=3 S=3 stride=2 pad=1 bias=1 act=relu", &err);
  CHECKF(t && strstr(t, "input Wt[32, 1, 3, 3] const\n") &&
             strstr(t, "conv[n:1, c:32, y:56, x:56] = sum(ry:3, rx:3 : P[n, c, y * 2 + ry, x * 2 + "
                       "rx] * Wt[c, 0, ry, rx])\n") &&
             strstr(t, "out[n:1, c:32, y:56, x:56] = relu(conv[n, c, y, x] + bias[c])\n"),
         "%s", t ? t : err.msg);
  free(t);
  t = cwm_op_to_text("softmax B=2 M=3 N=4", &err);
  CHECKF(t && strcmp(t, "input X[2, 3, 4]\nmx[b:2, i:3] = max(k:4 : X[b, i, k])\n"
                        "e[b:2, i:3, j:4] = exp(X[b, i, j] - mx[b, i])\n"
                        "s[b:2, i:3] = sum(k:4 : e[b, i, k])\n"
                        "out[b:2, i:3, j:4] = e[b, i, j] / s[b, i]\noutput out\n") == 0,
         "%s", t ? t : err.msg);
  free(t);
  t = cwm_op_to_text("layernorm M=128 N=768", &err);
  CHECKF(t && strstr(t, "mu[i:128] = sum(k:768 : X[i, k] * 0.00130208333)\n") &&
             strstr(t, "var[i:128] = sum(k:768 : X[i, k] * X[i, k] * 0.00130208333)\n") &&
             strstr(t, "out[i:128, j:768] = (X[i, j] - mu[i]) * rsqrt(var[i] - mu[i] * mu[i] + "
                       "1e-05) * gamma[j] + beta[j]\n"),
         "%s", t ? t : err.msg);
  /* the op library's text is already canonical */
  if (t) {
    cwm_workload *lw = cwm_workload_parse(t, &err);
    char *p = lw ? cwm_workload_print(lw) : NULL;
    CHECKF(p && strcmp(p, t) == 0, "layernorm text not canonical:\n%s", p ? p : err.msg);
    free(p);
    cwm_workload_free(lw);
  }
  free(t);
  CHECK(cwm_ident_valid("var"));

  /* op spec errors name the culprit */
  static const struct { const char *spec, *needle; } bad[] = {
      {"foo M=1", "'foo'"},
      {"conv2d C=3 H=8 W=8 K=4 R=3 S=3 stride=1", "'pad'"},
      {"matmul M=4 N=4 K=x", "'K'"},
      {"matmul M=4 N=4 K=4 Q=1", "'Q'"},
      {"matmul M=0 N=4 K=4", "'M'"},
      {"matmul M=-3 N=4 K=4", "'M'"},
      {"matmul M=4 N=99999999999999 K=4", "'N'"},
      {"matmul M=4 N=4 K=4 M=5", "'M'"},
      {"matmul M=4 N=4 K", "'K'"},
      {"dense M=4 N=4 K=4 act=tanh", "'act'"},
      {"dense M=4 N=4 K=4 bias=2", "'bias'"},
      {"conv2d C=3 H=4 W=4 K=4 R=9 S=3 stride=1 pad=0", "'R'"},
      {"batch_matmul B=2 M=4 N=4", "'K'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset(&err, 0, sizeof err);
    char *x = cwm_op_to_text(bad[i].spec, &err);
    CHECKF(x == NULL && err.code == CWM_EPARSE && strstr(err.msg, bad[i].needle),
           "spec '%s' gave '%s'", bad[i].spec, err.msg);
    free(x);
    cwm_workload *bw = cwm_workload_from_spec(bad[i].spec, NULL, &err);
    CHECKF(bw == NULL && err.code == CWM_EPARSE && strstr(err.msg, bad[i].needle),
           "from_spec '%s' gave '%s'", bad[i].spec, err.msg);
    cwm_workload_free(bw);
  }
  /* a bare op name is read as an incomplete op spec, not as an unknown id */
  CHECK(cwm_workload_from_spec("matmul", NULL, &err) == NULL && strstr(err.msg, "'M'"));
  /* a too-large product is caught by the parser */
  CHECK(cwm_workload_from_spec("matmul M=65536 N=65536 K=4", NULL, &err) == NULL &&
        err.code == CWM_EPARSE);
  /* op spec given directly: name is the op */
  w = cwm_workload_from_spec("  softmax B=1 M=2 N=3", NULL, &err);
  CHECKF(w && strcmp(w->name, "softmax") == 0, "%s", err.msg);
  cwm_workload_free(w);
  /* suite ids that equal op names resolve through the suite */
  w = cwm_workload_from_spec("layernorm", NULL, &err);
  CHECKF(w && w->ops[0].shape[1] == 768, "%s", err.msg);
  cwm_workload_free(w);

  /* @file */
  char path[] = "/tmp/cwm_test_te_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd >= 0) {
    const char *src = "input A[4]\nB[i:4] = A[i] * 2\n";
    CHECK(write(fd, src, strlen(src)) == (ssize_t)strlen(src));
    close(fd);
    char spec[64];
    snprintf(spec, sizeof spec, "@%s", path);
    w = cwm_workload_from_spec(spec, NULL, &err);
    CHECKF(w && w->nops == 2 && strncmp(w->name, "cwm_test_te_", 12) == 0, "%s", err.msg);
    cwm_workload_free(w);
    unlink(path);
    CHECK(cwm_workload_from_spec(spec, NULL, &err) == NULL && err.code == CWM_EIO);
  }
}

/* Each case: text, the expected "line L, column C:" prefix, and a word the message must hold. */
static void test_errors(void) {
  static char deep[512], deepneg[512], many[2048];
  strcpy(deep, "input A[4]\nout[i:4] = ");
  for (int i = 0; i < 100; i++) strcat(deep, "(");
  strcat(deep, "A[i]");
  for (int i = 0; i < 100; i++) strcat(deep, ")");
  strcpy(deepneg, "input A[4]\nout[i:4] = ");
  for (int i = 0; i < 100; i++) strcat(deepneg, "-");
  strcat(deepneg, "A[i]\n");
  many[0] = 0;
  for (int i = 0; i < 25; i++) sprintf(many + strlen(many), "input A%d[4]\n", i);

  static const struct { const char *text, *pos, *word; } cases[] = {
      {"input A[4, 4\nout[i:4] = A[i, 0]\n", "line 1, column 13:", "expected ',' or ']'"},
      {"input A[4]\nout[i:4 = A[i]\n", "line 2, column 9:", "expected ',' or ']'"},
      {"input A[4]\nout[i:4] = B[i]\n", "line 2, column 12:", "unknown tensor 'B'"},
      {"input A[4, 4]\nout[i:4] = A[i]\n", "line 2, column 12:", "2 dimensions"},
      {"input A[4]\nout[i:4] = A[i, i]\n", "line 2, column 12:", "1 dimension"},
      {"input A[4, 4]\nout[i:4] = 1 + sum(k:4 : A[i, k])\n", "line 2, column 16:",
       "whole right-hand side"},
      {"input A[4, 4]\nout[i:4] = sum(k:4 : A[i, k]) * 2\n", "line 2, column 31:",
       "whole right-hand side"},
      {"input A[4]\nout[i:4] = A[1.5]\n", "line 2, column 14:", "float literal"},
      {"input A[4]\nout[i:4] = A[A[i]]\n", "line 2, column 14:", "tensor read"},
      {"input A[4]\nout[i:4] = A[i] * i\n", "line 2, column 19:", "loop variable 'i'"},
      {"input A[4]\nint[i:4] = A[i]\n", "line 2, column 1:", "'int' is not a permitted name"},
      {"input A[4]\nout[for:4] = A[for]\n", "line 2, column 5:", "'for' is not a permitted"},
      {"input _Bool[4]\n", "line 1, column 7:", "not a permitted"},
      {"input A__b[4]\n", "line 1, column 7:", "'A__b' is not a permitted name"},
      {"input cwmA[4]\n", "line 1, column 7:", "not a permitted"},
      {"input A;system(\"x\")[4]\n", "line 1, column 8:", "found character ';'"},
      {"input A[4]\nout[i:4] = A[i]\"; system(\"x\")\n", "line 2, column 16:",
       "found character '\"'"},
      {"input A[4]\nout[i:4] = A[i]\nsystem(\"rm\")\n", "line 3, column 7:", "expected '['"},
      {"input A[4]\nout[i:4] = A[i] + `x`\n", "line 2, column 19:", "character '`'"},
      {"input A[4]\n\n  input A[4]\n", "line 3, column 9:", "duplicate tensor name 'A'"},
      {"input A[4]\nout[i:4, i:4] = A[i]\n", "line 2, column 10:", "duplicate axis name 'i'"},
      {"input A[4]\nout[A:4] = 1\n", "line 2, column 5:", "already used as a tensor"},
      {"input A[4]\nout[i:4] = sum(i:4 : A[i])\n", "line 2, column 16:", "duplicate axis"},
      {"input A[4]\nB[i:4] = A[i]\ni[j:4] = B[j]\n", "line 3, column 1:", "axis name"},
      {"input A[4]\nB[i:4] = A[i]\noutput B\nC[i:4] = B[i]\n", "line 3, column 8:",
       "not the last compute"},
      {"input A[4]\nB[i:4] = A[i]\noutput A\n", "line 3, column 8:", "is an input"},
      {"input A[4]\nB[i:4] = A[i]\noutput B\noutput B\n", "line 4, column 1:", "duplicate output"},
      {"input A[16777217]\n", "line 1, column 9:", "extent"},
      {"input A[0]\n", "line 1, column 9:", "extent"},
      {"input A[99999999999999999999]\n", "line 1, column 9:", "extent"},
      {"input A[65536, 65536]\n", "line 1, column 7:", "2^31"},
      {"input A[4]\nout[i:4] = A[i] * 1e999\n", "line 2, column 19:", "too large"},
      {deep, "line 2, column 76:", "nested too deeply"},
      {deepneg, "line 2, column 76:", "nested too deeply"},
      {"input A[4]\nout[i:4] = foo(A[i])\n", "line 2, column 12:", "unknown function 'foo'"},
      {"input A[4]\nout[i:4] = max(A[i])\n", "line 2, column 12:", "'max' takes 2 arguments"},
      {"input A[4]\nout[i:4] = exp(A[i], A[i])\n", "line 2, column 20:", "'exp' takes 1"},
      {"input A[4]\nout[i:4] = A[i / 0]\n", "line 2, column 18:", "positive integer constant"},
      {"input A[4]\nout[i:4] = A[i % i]\n", "line 2, column 18:", "positive integer constant"},
      {"input A[4]\nout[i:4] = A[i] % 2\n", "line 2, column 17:", "'%'"},
      {"input A[4]\nout[i:4] = select(A[i] < 1, A[i], 0)\n", "line 2, column 19:", "tensor read"},
      {"input A[4]\nout[i:4] = select(i, A[i], 0)\n", "line 2, column 20:", "comparison"},
      {"input A[4]\nout[i:4] = select(i < 1.5, A[i], 0)\n", "line 2, column 23:", "float"},
      {"input A[4]\nout[i:4] = A\n", "line 2, column 13:", "expected '['"},
      {"input A[4]\nout[i:4] = q\n", "line 2, column 12:", "unknown name 'q'"},
      {"input A[4]\nout[i:4] = sum(A[i])\n", "line 2, column 12:", "reduction"},
      {"", "line 1, column 1:", "input"},
      {"# only a comment\n\ninput A[4]\n", "line 4, column 1:", "compute"},
      {"input A[1,2,3,4,5,6,7,8,9]\n", "line 1, column 25:", "at most 8"},
      {"input A[4] extra\n", "line 1, column 12:", "end of line"},
      {"[\n", "line 1, column 1:", "statement"},
      {many, "line 25, column 7:", "too many tensors"},
      {"input A[4]\naVeryLongTensorNameThatIsWayTooLong[i:4] = A[i]\n", "line 2, column 1:",
       "not a permitted name"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cwm_err err = {0};
    cwm_workload *w = cwm_workload_parse(cases[i].text, &err);
    CHECKF(w == NULL, "case %zu parsed", i);
    cwm_workload_free(w);
    CHECKF(err.code == CWM_EPARSE, "case %zu: code %d", i, err.code);
    CHECKF(strncmp(err.msg, cases[i].pos, strlen(cases[i].pos)) == 0 &&
               strstr(err.msg, cases[i].word),
           "case %zu: want '%s ... %s', got '%s'", i, cases[i].pos, cases[i].word, err.msg);
  }
}

/* Hand-written text: canonical form, precedence and the expression helpers. */
static void test_language(void) {
  const char *src =
      "# a comment\n"
      "input A[8, 8]   # trailing comment\n"
      "\n"
      "input v[8]\n"
      "B[i:8, j:8] = A[i, j] - (A[j, i] - 1.5) * -(v[i] + 2)\n"
      "C[i:8, j:8] = select(!(i < 2) || i > 3 && (i + 1) * 2 != j, B[i, (j + 1) % 8], -0.25e-3)\n"
      "D[i:8] = max(k:4, l:2 : C[i, k * 2 + l] / (B[i, 0] / 3))\n"
      "E[i:8] = max(relu(D[i]), min(tanh(D[i]), sqrt(D[i]))) + erf(rsqrt(exp(D[i])))\n"
      "F[i:4] = E[i * 2 + -1 + 1] - -E[(i - (1 - 1)) / 2]\n"
      "output F\n";
  const char *canon =
      "input A[8, 8]\n"
      "input v[8]\n"
      "B[i:8, j:8] = A[i, j] - (A[j, i] - 1.5) * -(v[i] + 2)\n"
      "C[i:8, j:8] = select(!(i < 2) || i > 3 && (i + 1) * 2 != j, B[i, (j + 1) % 8], -0.00025)\n"
      "D[i:8] = max(k:4, l:2 : C[i, k * 2 + l] / (B[i, 0] / 3))\n"
      "E[i:8] = max(relu(D[i]), min(tanh(D[i]), sqrt(D[i]))) + erf(rsqrt(exp(D[i])))\n"
      "F[i:4] = E[i * 2 + -1 + 1] - -E[(i - (1 - 1)) / 2]\n"
      "output F\n";
  cwm_err err = {0};
  cwm_workload *w = cwm_workload_parse(src, &err);
  CHECKF(w != NULL, "%s", err.msg);
  if (!w) return;
  char *p = cwm_workload_print(w);
  CHECKF(strcmp(p, canon) == 0, "canonical:\n%s", p);
  free(p);
  check_roundtrip(w, "language", 1);
  CHECK(w->nops == 7 && w->output == 6);
  const cwm_op *d = &w->ops[4];
  CHECK(d->reduce == CWM_RED_MAX && d->nred == 2 && d->red_extent[1] == 2);
  CHECK(strcmp(d->red_axis[0], "k") == 0);
  /* C[i, k * 2 + l]: k is var 1 (ndim 1 + reduce index 0) */
  const cwm_expr *rd = d->body->args[0];
  CHECK(rd->kind == CWM_X_READ && rd->tensor == 3 && rd->args[1]->is_int);
  CHECK(rd->args[1]->args[0]->args[0]->kind == CWM_X_VAR && rd->args[1]->args[0]->args[0]->var == 1);
  const cwm_expr *c = w->ops[3].body;
  CHECK(c->kind == CWM_X_SELECT && c->args[0]->kind == CWM_X_OR && c->args[0]->is_int);
  CHECK(c->args[0]->args[0]->kind == CWM_X_NOT);
  CHECK(c->args[0]->args[1]->kind == CWM_X_AND);
  CHECK(c->args[0]->args[1]->args[1]->kind == CWM_X_CMP && c->args[0]->args[1]->args[1]->op == '!');
  CHECK(!c->is_int && c->args[2]->kind == CWM_X_NEG &&
        c->args[2]->args[0]->value == 0.00025);
  CHECK(cwm_expr_has_select(c) && !cwm_expr_has_call(c));
  CHECK(!cwm_expr_has_call(w->ops[2].body));
  CHECK(cwm_expr_has_call(w->ops[5].body));
  CHECK(cwm_expr_reads(w->ops[2].body, 0) && cwm_expr_reads(w->ops[2].body, 1));
  CHECK(!cwm_expr_reads(w->ops[2].body, 2));

  /* relu/max/min alone are cheap */
  cwm_workload *w2 = cwm_workload_parse(
      "input A[4]\nB[i:4] = relu(max(A[i], min(A[i], 0)))\nC[i:4] = gelu(B[i])\n", &err);
  CHECKF(w2 != NULL, "%s", err.msg);
  if (w2) {
    CHECK(!cwm_expr_has_call(w2->ops[1].body) && cwm_expr_has_call(w2->ops[2].body));
    CHECK(cwm_workload_flops(w2) == 4 * 3 + 4 * 1);
    cwm_workload_free(w2);
  }

  /* clone/equal */
  cwm_expr *cl = cwm_expr_clone(w->ops[5].body);
  CHECK(cwm_expr_equal(cl, w->ops[5].body));
  CHECK(!cwm_expr_equal(cl, w->ops[6].body));
  cl->args[1]->args[0]->op = CWM_FN_TANH;
  CHECK(!cwm_expr_equal(cl, w->ops[5].body));
  cwm_expr_free(cl);
  CHECK(cwm_expr_clone(NULL) == NULL);
  cwm_expr_free(NULL);

  /* keys: stable, 16 hex digits, and whitespace/comments do not matter */
  char k1[17], k2[17];
  cwm_workload_key(w, k1);
  CHECK(strlen(k1) == 16 && strspn(k1, "0123456789abcdef") == 16);
  cwm_workload *w3 = cwm_workload_parse(canon, &err);
  if (w3) {
    cwm_workload_key(w3, k2);
    CHECK(strcmp(k1, k2) == 0);
    w3->ops[0].shape[0] = 9;
    cwm_workload_key(w3, k2);
    CHECK(strcmp(k1, k2) != 0);
    cwm_workload_free(w3);
  }
  cwm_workload_free(w);

  /* built trees with negative constants and a-(b-c) print as fixed points */
  w = cwm_workload_parse("input A[4]\nB[i:4] = A[i] - (A[i] - A[i])\n", &err);
  CHECKF(w != NULL, "%s", err.msg);
  if (w) {
    p = cwm_workload_print(w);
    CHECK(strstr(p, "A[i] - (A[i] - A[i])") != NULL);
    free(p);
    cwm_expr *neg = cwm_expr_new(CWM_X_CONST);
    neg->value = -3;
    cwm_expr *mul = cwm_expr_new(CWM_X_BIN);
    mul->op = '*';
    mul->nargs = 2;
    mul->args = calloc(2, sizeof *mul->args);
    mul->args[0] = neg;
    mul->args[1] = w->ops[1].body;
    w->ops[1].body = mul;
    p = cwm_workload_print(w);
    CHECKF(strstr(p, "B[i:4] = -3 * (A[i] - (A[i] - A[i]))\n") != NULL, "%s", p);
    free(p);
    check_roundtrip(w, "built", 0);
    cwm_workload_free(w);
  }

  /* the output line is optional; CRLF line ends are accepted */
  w = cwm_workload_parse("input A[4]\r\nB[i:4] = A[i]\r\n", &err);
  CHECKF(w && w->output == 1, "%s", err.msg);
  cwm_workload_free(w);
  CHECK(cwm_workload_parse(NULL, &err) == NULL && err.code == CWM_EPARSE);
  CHECK(cwm_workload_parse("garbage", NULL) == NULL); /* err may be NULL */
}

static void test_idents(void) {
  static const char *good[] = {"A", "var", "x1_y", "Wt", "bias", "conv", "mx", "e", "Z9",
                               "abcdefghijabcdefghijabcdefghij1"};
  static const char *bad[] = {"", "1a", "_x", "a-b", "a b", "a;", "a__b", "x__", "int", "_Bool",
                              "_Static_assert", "restrict", "cwm", "CWMx", "cWm_y", "select",
                              "omp", "main", "exp", "expf", "sum", "input", "output", "args",
                              "aligned_alloc", "abcdefghijabcdefghijabcdefghij12", "caf\xc3\xa9"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    CHECKF(cwm_ident_valid(good[i]), "'%s' should be valid", good[i]);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECKF(!cwm_ident_valid(bad[i]), "'%s' should be invalid", bad[i]);
  CHECK(!cwm_ident_valid(NULL));
  CHECK(strcmp(cwm_fn_name(CWM_FN_RSQRT), "rsqrt") == 0 && strcmp(cwm_fn_name(CWM_FN_GELU), "gelu") == 0);
  CHECK(strcmp(cwm_fn_name(CWM_FN__COUNT), "?") == 0);
}

/* Random byte mutations of valid texts: never crash; whatever parses must be a print fixed point. */
static void test_fuzz(void) {
  cwm_err err = {0};
  char *seeds[4];
  int nseeds = 0;
  const char *ids[] = {"conv_stem", "layernorm", "softmax_attn"};
  for (int i = 0; i < 3; i++) {
    cwm_workload *w = cwm_workload_from_spec(ids[i], NULL, &err);
    if (w) seeds[nseeds++] = cwm_workload_print(w);
    cwm_workload_free(w);
  }
  seeds[nseeds++] = cwm_xstrdup(
      "input A[8, 8]\ninput v[8]\n"
      "C[i:8, j:8] = select(!(i < 2) || i > 3 && (i + 1) * 2 != j, A[i, (j + 1) % 8], -0.5)\n"
      "D[i:8] = max(k:4, l:2 : C[i, k * 2 + l] / (v[i] / 3))\n"
      "E[i:8] = max(relu(D[i]), min(tanh(D[i]), sqrt(D[i]))) - -D[i]\n");
  static const char alphabet[] = "[](),:=+-*/%<>!&|#\n\t .0123456789eEijkAB_xsumaxinpt\"';\\\x01\xff";
  cwm_rng rng;
  cwm_rng_seed(&rng, 12345);
  int accepted = 0, total = 30000;
  for (int it = 0; it < total; it++) {
    const char *seed = seeds[cwm_rng_int(&rng, nseeds)];
    size_t n = strlen(seed);
    char *buf = malloc(n * 2 + 64);
    memcpy(buf, seed, n + 1);
    int muts = 1 + cwm_rng_int(&rng, 4);
    for (int m = 0; m < muts; m++) {
      n = strlen(buf);
      size_t pos = n ? (size_t)cwm_rng_int(&rng, (int)n) : 0;
      int kind = cwm_rng_int(&rng, 5);
      char c = cwm_rng_int(&rng, 4) == 0 ? (char)(1 + cwm_rng_int(&rng, 255))
                                         : alphabet[cwm_rng_int(&rng, (int)sizeof alphabet - 1)];
      if (kind == 0 && n) buf[pos] = c;                                      /* replace */
      else if (kind == 1) memmove(buf + pos + 1, buf + pos, n - pos + 1), buf[pos] = c; /* insert */
      else if (kind == 2 && n) memmove(buf + pos, buf + pos + 1, n - pos);   /* delete */
      else if (kind == 3 && n) {                                             /* duplicate a run */
        size_t len = 1 + (size_t)cwm_rng_int(&rng, 16);
        if (pos + len > n) len = n - pos;
        memmove(buf + pos + len, buf + pos, n - pos + 1); /* at most 64 bytes of growth */
      } else if (n) buf[pos] = '\n';
    }
    cwm_workload *w = cwm_workload_parse(buf, &err);
    if (w) {
      accepted++;
      char *a = cwm_workload_print(w);
      cwm_workload *w2 = cwm_workload_parse(a, &err);
      CHECKF(w2 != NULL, "fuzz: printed text does not parse: %s\n%s", err.msg, a);
      if (w2) {
        char *b = cwm_workload_print(w2);
        CHECKF(strcmp(a, b) == 0, "fuzz: not a fixed point:\n%s---\n%s", a, b);
        free(b);
      }
      cwm_workload_free(w2);
      free(a);
      cwm_workload_free(w);
    } else {
      CHECK(err.code == CWM_EPARSE && strncmp(err.msg, "line ", 5) == 0);
    }
    free(buf);
  }
  CHECKF(accepted > 0 && accepted < total, "fuzz accepted %d of %d", accepted, total);
  for (int i = 0; i < nseeds; i++) free(seeds[i]);

  /* pathological sizes: long chains and long lines stay bounded, moderate ones pass */
  size_t big = 200000;
  char *s = malloc(big + 64);
  strcpy(s, "input A[4]\nB[i:4] = A[i]");
  for (int i = 0; i < 40; i++) strcat(s, " + A[i]");
  cwm_workload *ok = cwm_workload_parse(s, &err);
  CHECKF(ok != NULL, "40-term sum: %s", err.msg);
  cwm_workload_free(ok);
  strcpy(s, "input A[4]\nB[i:4] = A[i]");
  size_t o = strlen(s);
  while (o + 8 < big) memcpy(s + o, " + A[i]", 7), o += 7;
  s[o] = 0;
  cwm_workload *w = cwm_workload_parse(s, &err);
  CHECK(w == NULL && strstr(err.msg, "too large"));
  cwm_workload_free(w);
  memset(s, '(', big);
  s[big] = 0;
  CHECK(cwm_workload_parse(s, &err) == NULL);
  strcpy(s, "input A[4]\nB[i:4] = select(");
  o = strlen(s);
  memset(s + o, '(', big - o);
  s[big] = 0;
  CHECK(cwm_workload_parse(s, &err) == NULL && strstr(err.msg, "deeply"));
  free(s);
}

/* Reads outside a tensor are refused at parse time, with the statement's line and the expression
 * (before, A[i + 1000000] crashed the reference child and A[i - 5] passed the reference check). */
static void test_bounds(void) {
  static const struct { const char *text, *needle; } bad[] = {
      {"input A[16]\nB[i:16] = A[i + 1000000]\n", "line 2, column 1: statement 'B': index 1 of A (i + 1000000) ranges over [1000000, 1000015]"},
      {"input A[16]\nB[i:16] = A[i - 5]\n", "(i - 5) ranges over [-5, 10], outside [0, 16)"},
      {"input A[4, 8]\nB[i:4, j:8] = A[j, i]\n", "index 1 of A (j)"},
      {"input A[16]\nB[i:16] = sum(k:17 : A[k])\n", "index 1 of A (k) ranges over [0, 16]"},
      {"input A[16]\nB[i:16] = select(i >= 4, A[i - 5], 0)\n", "ranges over [-1, 10]"},
      {"input A[16]\nB[i:16] = A[i * 100000 * 100000 - i * 100000 * 100000]\n", "outside"},
      {"input A[16]\nB[i:16] = A[i % 17]\n", "ranges over [0, 16]"},
      /* a condition on an expression bounds that expression only, where it recurs */
      {"input A[16]\nB[p:2, j:8] = select(j * 2 + p >= 0, A[j * 2 + p - 1], 0)\n", "ranges over [-1, 14]"},
      {"input A[16]\nB[p:2, j:9] = select(j * 2 + p >= 1, A[j * 2 + p - 1], 0)\n", "ranges over [0, 16]"},
      {"input A[16]\nB[p:2, j:8] = select(j * 2 + p >= 1, A[j * 2 - 1], 0)\n", "ranges over [-1, 13]"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cwm_err err = {0};
    cwm_workload *w = cwm_workload_parse(bad[i].text, &err);
    CHECKF(w == NULL && err.code == CWM_EPARSE && strstr(err.msg, bad[i].needle), "%s: %s", bad[i].text,
           w ? "accepted" : err.msg);
    cwm_workload_free(w);
  }
  static const char *const good[] = {
      "input A[16]\nB[i:16] = select(i >= 5, A[i - 5], 0)\n",
      "input A[16]\nB[i:8] = A[i * 2 + 1]\n",
      "input A[16]\nB[i:16] = A[15 - i]\n",
      "input A[16]\nB[i:16] = A[i / 2 + i % 2 * 8]\n",
      "input A[16]\nB[i:18] = select(i >= 1 && i < 17, A[i - 1], 0)\n",
      /* a stride-2 convolution's padded input split into even and odd columns */
      "input A[16]\nB[p:2, j:9] = select(j * 2 + p >= 1 && j * 2 + p < 17, A[j * 2 + p - 1], 0)\n",
      "input A[16]\nB[j:20] = select(15 - j >= 0, A[15 - j], 0)\n",
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    cwm_err err = {0};
    cwm_workload *w = cwm_workload_parse(good[i], &err);
    CHECKF(w != NULL, "%s: %s", good[i], err.msg);
    cwm_workload_free(w);
  }
}

int main(void) {
  test_bounds();
  test_idents();
  test_language();
  test_errors();
  test_oplib();
  test_suite();
  test_fuzz();
  {
    /* regression (found by fuzz_opspec): each value in range, but the tensor too large */
    cwm_err e2 = {0};
    char *t = cwm_op_to_text("dense M=1255558 N=768 K=12555768 bias=1 act=none", &e2);
    CHECKF(t == NULL && e2.code == CWM_EPARSE && strstr(e2.msg, "out of range"), "%s", e2.msg);
    free(t);
  }
  return test_done();
}

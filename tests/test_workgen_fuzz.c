/* test_workgen_fuzz.c: random workloads of the tensor language, seeded and deterministic. Each
 * case is a small program (inputs, one to three computes, reductions, selects, calls) with random
 * names (C keywords, libc and macro names, names the generator might use for itself, double
 * underscores, long ones) and random index expressions (offsets, strides, floor divisions and
 * remainders, sums of axes, products of constants, guarded reads, out-of-bounds ones). Each must
 * either be rejected with a parse error that names a line and column, or be accepted and then:
 * print and parse back to the same text, read only inside its tensors when an independent
 * interpreter (below, over the parsed program, C's integer semantics) runs it, and have a
 * reference kernel that computes what the interpreter computes and an initial-state kernel and a
 * randomly scheduled one that pass the reference check.
 *
 * Input shapes come from a first parse with large placeholder shapes: the interpreter records the
 * largest index each input dimension is read at, and the shape is set to fit it (sometimes one
 * too small, which must be rejected). Usage: test_workgen_fuzz [COUNT [SEED]]; also
 * CWM_WORKGEN_COUNT (default 200), CWM_WORKGEN_SEED (default 1), CWM_WORKGEN_SCHEDULES (random
 * schedules per accepted case, default 1) and CWM_WORKGEN_VERBOSE (print every case). */
#define _GNU_SOURCE /* nftw */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cwm/codegen.h"
#include "cwm/search.h"
#include "cwm/te.h"
#include "testlib.h"

/* ---- the interpreter ------------------------------------------------------------------------ */

typedef struct {
  const cwm_workload *w;
  float *buf[CWM_MAX_OPS];   /* every tensor's values, inputs seeded as the runner seeds them */
  int discover;              /* inputs have placeholder shapes: record reads instead of checking */
  long hi[CWM_MAX_OPS][CWM_MAX_DIMS]; /* discover: the largest index read, -1 if never */
  int neg;                   /* discover: some input index was negative */
  int oob;                   /* a read outside its tensor */
  char oob_msg[200];
  long var[2 * CWM_MAX_DIMS];
} interp;

static long ev_int(interp *m, const cwm_expr *e) {
  switch (e->kind) {
  case CWM_X_CONST: return (long)e->value;
  case CWM_X_VAR: return m->var[e->var];
  case CWM_X_NEG: return -ev_int(m, e->args[0]);
  case CWM_X_BIN: {
    long a = ev_int(m, e->args[0]), b = ev_int(m, e->args[1]);
    /* the generated C computes indices in int, where '/' and '%' truncate toward zero */
    switch (e->op) {
    case '+': return a + b;
    case '-': return a - b;
    case '*': return a * b;
    case '/': return b ? a / b : 0;
    case '%': return b ? a % b : 0;
    }
    break;
  }
  default: break;
  }
  CHECKF(0, "index expression of kind %d", (int)e->kind);
  return 0;
}

static int ev_cond(interp *m, const cwm_expr *e) {
  switch (e->kind) {
  case CWM_X_AND: return ev_cond(m, e->args[0]) && ev_cond(m, e->args[1]);
  case CWM_X_OR: return ev_cond(m, e->args[0]) || ev_cond(m, e->args[1]);
  case CWM_X_NOT: return !ev_cond(m, e->args[0]);
  case CWM_X_CMP: {
    long a = ev_int(m, e->args[0]), b = ev_int(m, e->args[1]);
    switch (e->op) {
    case '<': return a < b;
    case 'l': return a <= b;
    case '>': return a > b;
    case 'g': return a >= b;
    case '=': return a == b;
    default: return a != b;
    }
  }
  default: break;
  }
  CHECKF(0, "condition of kind %d", (int)e->kind);
  return 0;
}

static double ev_read(interp *m, const cwm_expr *e) {
  const cwm_op *t = &m->w->ops[e->tensor];
  long flat = 0;
  for (int d = 0; d < t->ndim; d++) {
    long i = ev_int(m, e->args[d]);
    if (m->discover && t->is_input) {
      if (i < 0) m->neg = 1;
      if (i > m->hi[e->tensor][d]) m->hi[e->tensor][d] = i;
      continue;
    }
    if (i < 0 || i >= t->shape[d]) {
      if (!m->oob)
        snprintf(m->oob_msg, sizeof m->oob_msg, "%s index %d is %ld, outside [0, %d)", t->name, d + 1, i, t->shape[d]);
      m->oob = 1;
      return 0;
    }
    flat = flat * t->shape[d] + i;
  }
  return m->discover && t->is_input ? 0 : (double)m->buf[e->tensor][flat];
}

/* A value in double, as the reference kernel computes it (stores round to float). */
static double ev_val(interp *m, const cwm_expr *e) {
  switch (e->kind) {
  case CWM_X_CONST: return e->value;
  case CWM_X_READ: return ev_read(m, e);
  case CWM_X_NEG: return -ev_val(m, e->args[0]);
  case CWM_X_SELECT: return ev_cond(m, e->args[0]) ? ev_val(m, e->args[1]) : ev_val(m, e->args[2]);
  case CWM_X_BIN: {
    double a = ev_val(m, e->args[0]), b = ev_val(m, e->args[1]);
    return e->op == '+' ? a + b : e->op == '-' ? a - b : e->op == '*' ? a * b : a / b;
  }
  case CWM_X_CALL: {
    double x = ev_val(m, e->args[0]), y = e->nargs > 1 ? ev_val(m, e->args[1]) : 0;
    switch (e->op) {
    case CWM_FN_EXP: return exp(x);
    case CWM_FN_TANH: return tanh(x);
    case CWM_FN_ERF: return erf(x);
    case CWM_FN_SQRT: return sqrt(x);
    case CWM_FN_RSQRT: return 1.0 / sqrt(x);
    case CWM_FN_MAX: return fmax(x, y);
    case CWM_FN_MIN: return fmin(x, y);
    case CWM_FN_GELU: return 0.5 * x * (1.0 + erf(x * 0.70710678118654752));
    case CWM_FN_RELU: return x > 0 ? x : 0.0;
    }
    break;
  }
  default: break;
  }
  CHECKF(0, "value expression of kind %d", (int)e->kind);
  return 0;
}

static long elems(const cwm_op *o) {
  long n = 1;
  for (int d = 0; d < o->ndim; d++) n *= o->shape[d];
  return n;
}

/* counts the odometer v over ext[0..n) one step on; 0 once it has wrapped */
static int odo_next(long *v, const int *ext, int n) {
  for (int d = n - 1; d >= 0; d--) {
    if (++v[d] < ext[d]) return 1;
    v[d] = 0;
  }
  return 0;
}

static void run_op(interp *m, int t) {
  const cwm_op *o = &m->w->ops[t];
  long *sp = m->var, *rd = m->var + o->ndim;
  memset(m->var, 0, sizeof m->var);
  long flat = 0;
  do {
    double acc;
    if (o->reduce == CWM_RED_NONE) {
      acc = ev_val(m, o->body);
    } else {
      acc = o->reduce == CWM_RED_SUM ? 0 : o->reduce == CWM_RED_MAX ? -INFINITY : INFINITY;
      memset(rd, 0, sizeof *rd * (size_t)o->nred);
      do {
        double v = ev_val(m, o->body);
        acc = o->reduce == CWM_RED_SUM ? acc + v : o->reduce == CWM_RED_MAX ? (v > acc ? v : acc) : (v < acc ? v : acc);
      } while (odo_next(rd, o->red_extent, o->nred));
    }
    m->buf[t][flat++] = (float)acc;
  } while (odo_next(sp, o->shape, o->ndim));
}

/* Runs w; inputs are seeded as the runner seeds them (argument i: the i-th input). */
static void interp_run(interp *m, const cwm_workload *w, int discover, unsigned long long seed) {
  memset(m, 0, sizeof *m);
  m->w = w;
  m->discover = discover;
  memset(m->hi, 0xff, sizeof m->hi);
  int arg = 0;
  for (int t = 0; t < w->nops; t++) {
    const cwm_op *o = &w->ops[t];
    if (o->is_input && discover) continue;
    m->buf[t] = malloc(sizeof(float) * (size_t)elems(o));
    if (o->is_input) cwm_measure_fill(m->buf[t], elems(o), seed, arg++);
    else run_op(m, t);
  }
}

static void interp_free(interp *m) {
  for (int t = 0; t < CWM_MAX_OPS; t++) free(m->buf[t]);
}

/* ---- the generator -------------------------------------------------------------------------- */

/* Names a kernel's C could trip on that the parser accepts: libc functions outside its refused
 * list (a parameter may shadow a function), function-like macros (harmless unless followed by '('),
 * math.h's Bessel functions, typedef names, names a code generator picks for itself, the
 * schedule's words. */
static const char *const TRICKY[] = {
    "acc", "tmp", "out", "in", "ptr", "buf", "idx", "n0", "i0", "x0", "j0", "j1", "y0", "y1", "jn", "yn",
    "index", "rindex", "div", "ldiv", "abs", "labs", "fma", "fmaf", "round", "trunc", "log2", "exp2", "expm1",
    "log1p", "hypot", "cbrt", "gamma", "lgamma", "signbit", "time", "clock", "signal", "raise", "assert",
    "offsetof", "alloca", "FILE", "CHAR_BIT", "omp_get_wtime", "omp_get_max_threads", "qsort", "system",
    "getenv", "remove", "rename", "scanf", "putchar", "timespec", "Pragma", "pragma", "define", "include",
    "elif", "endif", "entry", "kernel", "pack", "src", "dst", "n", "s", "p", "e", "f", "i", "j", "k", "A", "B",
    "W", "x", "y", "I", "m256", "m512", "float4", "v8sf", "int8_t", "uint8_t", "intptr_t", "wchar_t",
    "max_align_t", "noreturn", "complex", "PRId64", "OMP", "simd", "unroll", "vectorize", "parallel", "local",
    "global", "shared", "placeholder", "allocate", "for_", "auto_unroll", "exp_", "gelu_", "relu1", "lo", "hi",
    "ext", "tid", "nthreads", "len", "N", "M", "K"};
/* Names the parser must refuse: C keywords (GNU C's and C23's too) and the library names it
 * lists, the headers' object-like macros, the language's words, the generator's prefixes, double
 * underscores, a leading underscore or digit, too long. */
static const char *const REFUSED[] = {
    "int", "for", "double", "restrict", "static", "exp", "printf", "malloc", "sqrtf", "main", "NULL", "sum",
    "input", "output", "select", "max", "min", "const", "gelu", "omp", "args", "cwm", "cwm_k", "CWMX", "cWm1",
    "a__b", "x__0", "_x", "_n0", "__m256", "9x", "sizeof", "while", "return", "memcpy",
    "abcdefghijklmnopqrstuvwxyz012345", "a_name_that_goes_on_well_past_forty_chars", "errno", "EOF", "BUFSIZ",
    "M_PI", "M_E", "HUGE_VAL", "RAND_MAX", "EXIT_SUCCESS", "EXIT_FAILURE", "FP_NAN", "FLT_MIN", "INT_MAX",
    "SIZE_MAX", "CLOCK_MONOTONIC", "asm", "typeof", "nullptr", "static_assert", "alignas", "thread_local",
    "UINT64_C"};

typedef struct {
  char name[48];
  int ndim, shape[CWM_MAX_DIMS]; /* an input's shape is decided after the first parse */
  int is_input, is_const;
} gtensor;

typedef struct {
  cwm_rng r;
  int wild;                      /* names from anywhere, duplicates allowed */
  char used[64][48];
  int nused;
  gtensor t[8];
  int nt;
  char ax[2 * CWM_MAX_DIMS][48]; /* the current statement's axes, spatial then reduction */
  int axext[2 * CWM_MAX_DIMS], nax;
} gen;

static int rnd(gen *g, int n) { return cwm_rng_int(&g->r, n); }
static int chance(gen *g, double p) { return cwm_rng_unit(&g->r) < p; }

static void rand_ident(gen *g, char *out, int len) {
  static const char first[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  static const char rest[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
  out[0] = first[rnd(g, (int)sizeof first - 1)];
  for (int i = 1; i < len; i++) out[i] = rest[rnd(g, (int)sizeof rest - 1)];
  out[len] = 0;
}

static void new_name(gen *g, char out[48]) {
  for (int tries = 0;; tries++) {
    int k = rnd(g, 100);
    if (g->wild && k < 25) snprintf(out, 48, "%s", REFUSED[rnd(g, (int)(sizeof REFUSED / sizeof *REFUSED))]);
    else if (k < 55) snprintf(out, 48, "%s", TRICKY[rnd(g, (int)(sizeof TRICKY / sizeof *TRICKY))]);
    else rand_ident(g, out, chance(g, 0.1) ? 24 + rnd(g, 8) : 1 + rnd(g, 8));
    int dup = 0;
    for (int i = 0; i < g->nused; i++) dup |= !strcmp(g->used[i], out);
    if (!dup || (g->wild && chance(g, 0.3)) || tries > 50) break;
  }
  if (g->nused < 64) snprintf(g->used[g->nused++], 48, "%s", out);
}

/* An axis of the statement with an extent at most lim (any axis when none is), or -1. */
static int pick_axis(gen *g, int lim) {
  int c[2 * CWM_MAX_DIMS], n = 0;
  for (int i = 0; i < g->nax; i++)
    if (!lim || g->axext[i] <= lim) c[n++] = i;
  return n ? c[rnd(g, n)] : -1;
}

/* An index expression of any shape: constant products, offsets, strides, sums of axes, division
 * and remainder, negations; depth bounds the nesting. */
static void wild_index(gen *g, cwm_buf *o, int depth) {
  const char *a = g->ax[pick_axis(g, 0)];
  int c = rnd(g, 4), d = 1 + rnd(g, 3);
  switch (depth > 1 ? rnd(g, 6) : rnd(g, 12)) {
  case 0: cwm_buf_printf(o, "%s", a); break;
  case 1: cwm_buf_printf(o, "%s + %d", a, c); break;
  case 2: cwm_buf_printf(o, "%d * %s", d, a); break;
  case 3: cwm_buf_printf(o, "%s * %d + %s", a, d, g->ax[pick_axis(g, 0)]); break;
  case 4: cwm_buf_printf(o, "(%s + %d) / %d", a, c, d + 1); break;
  case 5: cwm_buf_printf(o, "%d*%d", rnd(g, 3), 1 + rnd(g, 2)); break;
  case 6: /* negative at 0: out of bounds, and the inputs' shapes cannot be fitted: wild cases only */
    if (g->wild) cwm_buf_printf(o, "%s - %d", a, 1 + rnd(g, 2));
    else cwm_buf_printf(o, "%s * %d", a, c);
    break;
  case 7: cwm_buf_printf(o, "(%s - %d) %% %d + %d", a, c, d + 1, d); break; /* C's remainder of a negative */
  case 8: cwm_buf_printf(o, "(%s - %d) / %d + %d", a, 1 + c, d + 1, 1 + c); break; /* truncation toward 0 */
  case 9: cwm_buf_printf(o, "-%s + %d", a, 8); break;
  case 10:
    cwm_buf_puts(o, "(");
    wild_index(g, o, depth + 1);
    cwm_buf_printf(o, ") * %d + ", 1 + rnd(g, 2));
    wild_index(g, o, depth + 1);
    break;
  default: cwm_buf_printf(o, "(%s + %s) %% %d", a, g->ax[pick_axis(g, 0)], d + 1); break;
  }
}

/* An index into a dimension of extent ext (0: an input's, sized to fit later): mostly in bounds
 * by construction for a computed tensor. */
static void gen_index(gen *g, cwm_buf *o, int ext) {
  if (!ext || chance(g, 0.08)) {
    wild_index(g, o, 0);
    return;
  }
  int a = pick_axis(g, ext);
  switch (rnd(g, 5)) {
  case 0:
    if (a >= 0) {
      cwm_buf_printf(o, "%s", g->ax[a]);
      break;
    }
    /* fall through */
  case 1: cwm_buf_printf(o, "(%s + %d) %% %d", g->ax[pick_axis(g, 0)], rnd(g, 3), ext); break;
  case 2: cwm_buf_printf(o, "%d", rnd(g, ext)); break;
  case 3:
    if (a >= 0) cwm_buf_printf(o, "%d - %s", ext - 1, g->ax[a]);
    else cwm_buf_printf(o, "%s %% %d", g->ax[pick_axis(g, 0)], ext);
    break;
  default: cwm_buf_printf(o, "%s / %d", g->ax[pick_axis(g, 0)], 1 + 8 / ext); break; /* axes stop at 8 */
  }
}

/* A read of an earlier tensor; guard_axis >= 0 reads its first dimension at "axis - off" (the
 * then-branch of a select that ensures axis >= off). */
static void gen_read(gen *g, cwm_buf *o, int guard_axis, int off) {
  const gtensor *t = &g->t[rnd(g, g->nt)];
  cwm_buf_printf(o, "%s[", t->name);
  for (int d = 0; d < t->ndim; d++) {
    if (d) cwm_buf_puts(o, chance(g, 0.8) ? ", " : ",");
    if (d == 0 && guard_axis >= 0) cwm_buf_printf(o, "%s - %d", g->ax[guard_axis], off);
    else gen_index(g, o, t->is_input ? 0 : t->shape[d]);
  }
  cwm_buf_puts(o, "]");
}

static void gen_cond(gen *g, cwm_buf *o) {
  static const char *const cmp[] = {"<", "<=", ">", ">=", "==", "!="};
  const char *a = g->ax[pick_axis(g, 0)];
  switch (rnd(g, 4)) {
  case 0: cwm_buf_printf(o, "%s %s %d", a, cmp[rnd(g, 6)], rnd(g, 5)); break;
  case 1: cwm_buf_printf(o, "%s >= 1 && %s < %d", a, g->ax[pick_axis(g, 0)], 1 + rnd(g, 5)); break;
  case 2: cwm_buf_printf(o, "!(%s == %d) || (%s + 1) %% 2 == 0", a, rnd(g, 3), g->ax[pick_axis(g, 0)]); break;
  default: cwm_buf_printf(o, "(%s + %s) < %d", a, g->ax[pick_axis(g, 0)], 2 + rnd(g, 6)); break;
  }
}

/* A value expression; calls whose argument could leave their domain get one that cannot (sqrt of
 * v*v + 1), so that outputs stay finite. */
static void gen_value(gen *g, cwm_buf *o, int depth) {
  static const char *const calls[] = {"tanh", "erf", "gelu", "relu"};
  if (depth >= 3 || chance(g, 0.35)) {
    if (chance(g, 0.9)) gen_read(g, o, -1, 0);
    else cwm_buf_printf(o, "%s", (const char *[]){"0.5", "2", "1e-3", "0.125", "3.0", ".25"}[rnd(g, 6)]);
    return;
  }
  switch (rnd(g, 9)) {
  case 0:
  case 1:
    cwm_buf_puts(o, "(");
    gen_value(g, o, depth + 1);
    cwm_buf_printf(o, " %c ", "+-*"[rnd(g, 3)]);
    gen_value(g, o, depth + 1);
    cwm_buf_puts(o, ")");
    break;
  case 2:
    gen_value(g, o, depth + 1);
    cwm_buf_puts(o, " / (");
    gen_value(g, o, depth + 2);
    cwm_buf_puts(o, " * ");
    gen_value(g, o, depth + 2);
    cwm_buf_puts(o, " + 1.5)");
    break;
  case 3:
    cwm_buf_puts(o, "-");
    gen_value(g, o, depth + 1);
    break;
  case 4:
    cwm_buf_printf(o, "%s(", calls[rnd(g, 4)]);
    gen_value(g, o, depth + 1);
    cwm_buf_puts(o, ")");
    break;
  case 5: { /* the same read twice: v*v + c stays in sqrt's and rsqrt's domain */
    int k = rnd(g, 3);
    cwm_buf rd;
    cwm_buf_init(&rd);
    gen_read(g, &rd, -1, 0);
    if (k < 2) cwm_buf_printf(o, "%s(%s * %s + %s)", k ? "rsqrt" : "sqrt", rd.s, rd.s, k ? "0.5" : "1");
    else cwm_buf_printf(o, "exp(0.25 * %s)", rd.s);
    cwm_buf_free(&rd);
    break;
  }
  case 6:
    cwm_buf_printf(o, "%s(", chance(g, 0.5) ? "max" : "min");
    gen_value(g, o, depth + 1);
    cwm_buf_puts(o, ", ");
    gen_value(g, o, depth + 1);
    cwm_buf_puts(o, ")");
    break;
  case 7: { /* the padding pattern: a read at axis - off where axis >= off (mostly not dead code) */
    int a = pick_axis(g, 0), off = 1 + rnd(g, g->axext[a] > 2 && chance(g, 0.9) ? 2 : 1);
    cwm_buf_printf(o, "select(%s >= %d, ", g->ax[a], off);
    gen_read(g, o, a, off);
    cwm_buf_puts(o, ", 0)");
    break;
  }
  default:
    cwm_buf_puts(o, "select(");
    gen_cond(g, o);
    cwm_buf_puts(o, ", ");
    gen_value(g, o, depth + 1);
    cwm_buf_puts(o, ", ");
    gen_value(g, o, depth + 1);
    cwm_buf_puts(o, ")");
    break;
  }
}

/* One compute statement: NAME[axes] = body, or a reduction over one or two more axes. */
static void gen_compute(gen *g, cwm_buf *o) {
  gtensor *t = &g->t[g->nt];
  new_name(g, t->name);
  t->ndim = 1 + rnd(g, 3);
  g->nax = 0;
  cwm_buf_printf(o, "%s[", t->name);
  for (int d = 0; d < t->ndim; d++) {
    new_name(g, g->ax[g->nax]);
    t->shape[d] = chance(g, 0.1) ? 7 + rnd(g, 3) : 1 + rnd(g, 6);
    g->axext[g->nax] = t->shape[d];
    cwm_buf_printf(o, "%s%s:%d", d ? ", " : "", g->ax[g->nax], t->shape[d]);
    g->nax++;
  }
  cwm_buf_puts(o, "] = ");
  if (chance(g, 0.45)) {
    int nred = 1 + rnd(g, 2);
    cwm_buf_printf(o, "%s(", (const char *[]){"sum", "sum", "max", "min"}[rnd(g, 4)]);
    for (int r = 0; r < nred; r++) {
      new_name(g, g->ax[g->nax]);
      g->axext[g->nax] = 1 + rnd(g, 6);
      cwm_buf_printf(o, "%s%s:%d", r ? ", " : "", g->ax[g->nax], g->axext[g->nax]);
      g->nax++;
    }
    cwm_buf_puts(o, " : ");
    gen_value(g, o, 0);
    cwm_buf_puts(o, ")\n");
  } else {
    gen_value(g, o, 0);
    cwm_buf_puts(o, "\n");
  }
  g->nt++;
}

/* The inputs (their names and ranks) and the computes after them, into body. */
static void gen_program(gen *g, uint64_t seed, cwm_buf *body) {
  memset(g, 0, sizeof *g);
  cwm_rng_seed(&g->r, seed);
  g->wild = chance(g, 0.25);
  int nin = 1 + rnd(g, 3), nc = 1 + rnd(g, 3);
  for (int i = 0; i < nin; i++) {
    gtensor *t = &g->t[g->nt++];
    new_name(g, t->name);
    t->is_input = 1;
    t->is_const = chance(g, 0.4);
    t->ndim = 1 + rnd(g, 3);
  }
  for (int c = 0; c < nc; c++) gen_compute(g, body);
  if (chance(g, 0.4)) cwm_buf_printf(body, "output %s\n", g->t[g->nt - 1].name);
  else if (g->wild && chance(g, 0.2)) cwm_buf_printf(body, "output %s\n", g->t[rnd(g, g->nt)].name);
}

/* The whole text: input lines with shape (placeholder: every dimension 1000), then body. */
static char *assemble(const gen *g, int placeholder, const char *body) {
  cwm_buf o;
  cwm_buf_init(&o);
  cwm_buf_puts(&o, "# generated\n");
  for (int i = 0; i < g->nt; i++) {
    const gtensor *t = &g->t[i];
    if (!t->is_input) continue;
    cwm_buf_printf(&o, "input %s[", t->name);
    for (int d = 0; d < t->ndim; d++) cwm_buf_printf(&o, "%s%d", d ? ", " : "", placeholder ? 1000 : t->shape[d]);
    cwm_buf_printf(&o, "]%s\n", t->is_const ? " const" : "");
  }
  cwm_buf_puts(&o, body);
  return cwm_buf_take(&o);
}

/* Input shapes that fit the reads the interpreter saw in the placeholder program (random ones when
 * that did not parse); sometimes one dimension one too small. Returns 1 when that makes a read
 * fall outside (the parser must refuse the program). */
static int fit_shapes(gen *g, const char *body) {
  cwm_err e = {0};
  char *text = assemble(g, 1, body);
  cwm_workload *w = cwm_workload_parse(text, &e);
  free(text);
  interp m;
  if (w) interp_run(&m, w, 1, 1);
  int shrunk = 0;
  for (int i = 0, k = 0; i < g->nt; i++) {
    gtensor *t = &g->t[i];
    if (!t->is_input) continue;
    for (int d = 0; d < t->ndim; d++) {
      long hi = w ? m.hi[k][d] : -1;
      t->shape[d] = hi >= 0 ? (int)hi + 1 + (chance(g, 0.2) ? rnd(g, 3) : 0) : 1 + rnd(g, 5);
      if (hi >= 0 && !shrunk && chance(g, 0.06)) t->shape[d] = (int)hi, shrunk = 1;
    }
    k++;
  }
  if (w) interp_free(&m);
  cwm_workload_free(w);
  return shrunk;
}

/* ---- the cases ------------------------------------------------------------------------------ */

typedef struct {
  int cases, rejected, accepted, measured, nonfinite;
} tally;

/* Random schedules measured per accepted case (CWM_WORKGEN_SCHEDULES, default 1). */
#define MAX_SCHED 16
static int g_schedules = 1;

/* The reference kernel's output against the interpreter's, then the initial state's kernel and
 * random schedules' through the library's own check. */
static void measure_case(const cwm_workload *w, const float *expect, long len, cwm_measure_opts *mo, uint64_t seed,
                         const char *text) {
  cwm_err e = {0};
  cwm_task *t = cwm_task_new(w, mo, &e);
  CHECKF(t != NULL, "cwm_task_new: %s\n%s", e.msg, text);
  if (!t) return;
  cwm_state *s[1 + MAX_SCHED] = {cwm_state_init(cwm_task_dag(t))};
  cwm_kernel k;
  cwm_codegen_opts co = {.reference = 1};
  int rc = cwm_codegen(s[0], &co, &k, &e);
  CHECKF(rc == 0, "reference codegen: %s\n%s", e.msg, text);
  if (rc == 0) {
    cwm_candidate c;
    cwm_kernel_candidate(&k, &c);
    cwm_reference *ref = NULL;
    rc = cwm_reference_compute(mo, &c, k.red_len, &ref, &e);
    CHECKF(rc == 0, "reference: %s\n%s", e.msg, text);
    char msg[256] = "";
    CHECKF(rc || ref->len != len || cwm_measure_check(expect, ref, mo->tol, msg, sizeof msg),
           "the reference kernel differs from the interpreter: %s\n%s", msg, text);
    cwm_reference_free(ref);
    cwm_kernel_free(&k);
  }
  cwm_rng r;
  cwm_rng_seed(&r, seed);
  int n = 1;
  for (int i = 0; i < g_schedules; i++, n++) {
    rc = cwm_sample_steps(cwm_task_dag(t), &r, 1 + cwm_rng_int(&r, 10), &s[n], &e);
    CHECKF(rc == 0, "cwm_sample_steps: %s\n%s", e.msg, text);
    if (rc) break;
  }
  cwm_record rec[1 + MAX_SCHED];
  memset(rec, 0, sizeof rec);
  rc = cwm_task_measure(t, s, n, rec, &e);
  CHECKF(rc == 0, "cwm_task_measure: %s\n%s", e.msg, text);
  for (int i = 0; i < n && rc == 0; i++) {
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_steps_print(s[i]->steps, s[i]->nsteps, &b);
    CHECKF(rec[i].error == 0, "%s kernel: %s: %s\n  steps: %s\n%s", i ? "scheduled" : "initial",
           cwm_merr_name(rec[i].error), rec[i].msg, b.s ? b.s : "[]", text);
    cwm_buf_free(&b);
    cwm_record_free(&rec[i]);
  }
  for (int i = 0; i < n; i++) cwm_state_free(s[i]);
  cwm_task_free(t);
}

/* A refusal is a parse error "line L, column C: ..." with something after it, and printable. */
static void check_refusal(const cwm_err *e, const char *text) {
  int line = 0, col = 0, at = 0;
  CHECKF(e->code == CWM_EPARSE, "refused with code %d: %s\n%s", e->code, e->msg, text);
  CHECKF(sscanf(e->msg, "line %d, column %d: %n", &line, &col, &at) == 2 && at > 0 && e->msg[at] && line > 0 &&
             col > 0,
         "refusal names no place: '%s'\n%s", e->msg, text);
  for (const char *p = e->msg; *p; p++) CHECKF((unsigned char)*p >= 0x20, "control byte in '%s'", e->msg);
}

static void run_case(uint64_t seed, cwm_measure_opts *mo, tally *n) {
  gen g;
  cwm_buf body;
  cwm_buf_init(&body);
  gen_program(&g, seed, &body);
  int shrunk = fit_shapes(&g, body.s);
  char *text = assemble(&g, 0, body.s);
  cwm_buf_free(&body);
  n->cases++;
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_parse(text, &e);
  if (getenv("CWM_WORKGEN_VERBOSE"))
    fprintf(stderr, "---- case %llu: %s\n%s", (unsigned long long)seed, w ? "accepted" : e.msg, text);
  if (!w) {
    check_refusal(&e, text);
    n->rejected++;
    free(text);
    return;
  }
  n->accepted++;
  /* printing is canonical: the printed text parses back to itself */
  char *p1 = cwm_workload_print(w);
  cwm_workload *w2 = cwm_workload_parse(p1, &e);
  char *p2 = w2 ? cwm_workload_print(w2) : NULL;
  CHECKF(p2 && !strcmp(p1, p2), "printed text does not parse back to itself: %s\n%s", w2 ? p2 : e.msg, p1);
  free(p1);
  free(p2);
  cwm_workload_free(w2);

  interp m;
  interp_run(&m, w, 0, mo->seed);
  CHECKF(!m.oob, "accepted a read outside its tensor (%s)%s\n%s", m.oob_msg,
         shrunk ? " (an input made one too small)" : "", text);
  const cwm_op *out = &w->ops[w->output];
  long len = elems(out);
  int finite = 1;
  for (long i = 0; i < len; i++) finite &= isfinite(m.buf[w->output][i]) != 0;
  if (!m.oob && finite) {
    measure_case(w, m.buf[w->output], len, mo, seed, text);
    n->measured++;
  } else if (!finite) {
    n->nonfinite++;
  }
  interp_free(&m);
  cwm_workload_free(w);
  free(text);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

int main(int argc, char **argv) {
  const char *v = getenv("CWM_WORKGEN_COUNT");
  int count = argc > 1 ? atoi(argv[1]) : v ? atoi(v) : 200;
  v = getenv("CWM_WORKGEN_SCHEDULES");
  if (v && atoi(v) >= 0) g_schedules = atoi(v) < MAX_SCHED ? atoi(v) : MAX_SCHED;
  v = getenv("CWM_WORKGEN_SEED");
  uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : v ? strtoull(v, NULL, 10) : 1;
  /* a cache of its own: the cases' kernels are of no use to any other test */
  char dir[] = "/tmp/cwm-workgen-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  cwm_measure_opts mo = test_measure_opts(0);
  mo.cache_dir = dir;
  mo.run_timeout_s = 20;
  for (size_t i = 0; i < sizeof REFUSED / sizeof *REFUSED; i++)
    CHECKF(!cwm_ident_valid(REFUSED[i]), "'%s' is a permitted name", REFUSED[i]);
  tally n = {0};
  for (int i = 0; i < count; i++) run_case(seed * 1000003ULL + (uint64_t)i, &mo, &n);
  fprintf(stderr,
          "%d workloads: %d refused with a parse error, %d accepted (%d measured, %d with a non-finite output)\n",
          n.cases, n.rejected, n.accepted, n.measured, n.nonfinite);
  /* both outcomes must be common, or the generator has drifted and tests one side only */
  if (count >= 50) CHECKF(n.rejected >= count / 10 && n.measured >= count / 5, "lopsided outcomes");
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return test_done();
}

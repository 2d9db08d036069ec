/* bounds.c: every tensor read of a workload proven inside the tensor, at parse time. Each index
 * expression is evaluated over intervals: a loop variable ranges over its axis, constants are
 * points, + - * / % combine the bounds. Inside the `then` branch of a select, the conjuncts of its
 * condition that compare a loop variable with a constant narrow that variable (the padding of a
 * convolution reads I[h - 1] only where h >= 1). A read not proven in bounds, or an index whose
 * arithmetic could leave the 32-bit range the generated C computes it in, is an error naming the
 * statement, the tensor and the expression: such a kernel would read outside its arrays. */
#include "cwm/te.h"

#include <stdio.h>
#include <string.h>

#define BIG 2147483647.0 /* an index's arithmetic is int in the generated C */
#define MAX_FACTS 8      /* conditions on expressions kept per select branch; more are ignored */

typedef struct {
  double lo, hi;
} ival;

typedef struct {
  const cwm_workload *w;
  const cwm_op *op;
  ival var[2 * CWM_MAX_DIMS];
  const cwm_expr *fact[MAX_FACTS]; /* expressions a select's condition bounds (j * 2 + p >= 1) */
  ival fact_iv[MAX_FACTS];
  int nfacts;
  cwm_err *err;
  int failed;
} bctx;

static ival iv(double lo, double hi) { return (ival){lo, hi}; }

static ival mul(ival a, ival b) {
  double p[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  ival r = iv(p[0], p[0]);
  for (int i = 1; i < 4; i++) r.lo = p[i] < r.lo ? p[i] : r.lo, r.hi = p[i] > r.hi ? p[i] : r.hi;
  return r;
}

/* The interval of an integer expression; *ok = 0 when it cannot be bounded (a tensor read inside an
 * index, a division by a range that holds 0). */
static ival eval_plain(const bctx *c, const cwm_expr *e, int *ok);

static ival eval(const bctx *c, const cwm_expr *e, int *ok) {
  ival r = eval_plain(c, e, ok);
  for (int i = 0; i < c->nfacts; i++)
    if (cwm_expr_equal(e, c->fact[i])) {
      if (c->fact_iv[i].lo > r.lo) r.lo = c->fact_iv[i].lo;
      if (c->fact_iv[i].hi < r.hi) r.hi = c->fact_iv[i].hi;
    }
  return r;
}

static ival eval_plain(const bctx *c, const cwm_expr *e, int *ok) {
  switch (e->kind) {
  case CWM_X_CONST: return iv(e->value, e->value);
  case CWM_X_VAR:
    if (e->var < 0 || e->var >= 2 * CWM_MAX_DIMS) break;
    return c->var[e->var];
  case CWM_X_NEG: {
    ival a = eval(c, e->args[0], ok);
    return iv(-a.hi, -a.lo);
  }
  case CWM_X_BIN: {
    ival a = eval(c, e->args[0], ok), b = eval(c, e->args[1], ok);
    switch (e->op) {
    case '+': return iv(a.lo + b.lo, a.hi + b.hi);
    case '-': return iv(a.lo - b.hi, a.hi - b.lo);
    case '*': return mul(a, b);
    case '/':
      if (b.lo > 0) { /* C division truncates toward zero, monotone in each operand: the corners bound it */
        double q[4] = {a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi};
        ival r = iv(1e300, -1e300);
        for (int i = 0; i < 4; i++) {
          double t = q[i] < 0 ? -(double)(long long)(-q[i]) : (double)(long long)q[i];
          r.lo = t < r.lo ? t : r.lo, r.hi = t > r.hi ? t : r.hi;
        }
        return r;
      }
      break;
    case '%':
      if (b.lo > 0) return iv(a.lo < 0 ? -(b.hi - 1) : 0, a.hi > 0 ? b.hi - 1 : 0);
      break;
    }
    break;
  }
  default: break;
  }
  *ok = 0;
  return iv(0, 0);
}

static void print_expr(const bctx *c, const cwm_expr *e, char *out, size_t n) {
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_expr_print(&b, c->w, c->op, e);
  snprintf(out, n, "%s", b.s ? b.s : "?");
  cwm_buf_free(&b);
}

/* A condition's conjuncts "var OP const" (either side) narrow var in c; "expr OP const" with any other
 * integer expression becomes a fact: that expression, wherever it recurs inside the then branch
 * (as in I[j * 2 + p - 1] under j * 2 + p >= 1), has the narrowed interval. */
static void narrow(bctx *c, const cwm_expr *cond) {
  if (cond->kind == CWM_X_AND) {
    for (int i = 0; i < cond->nargs; i++) narrow(c, cond->args[i]);
    return;
  }
  if (cond->kind != CWM_X_CMP || cond->nargs != 2) return;
  const cwm_expr *l = cond->args[0], *r = cond->args[1];
  int op = cond->op, ok = 1;
  ival k = eval(c, r, &ok);
  if (!ok || k.lo != k.hi) { /* const OP subject: mirror it */
    const cwm_expr *t = l;
    l = r, r = t;
    op = op == '<' ? '>' : op == '>' ? '<' : op == 'l' ? 'g' : op == 'g' ? 'l' : op;
    ok = 1;
    k = eval(c, r, &ok);
    if (!ok || k.lo != k.hi) return;
  }
  ival *v, fv;
  if (l->kind == CWM_X_VAR) {
    if (l->var < 0 || l->var >= 2 * CWM_MAX_DIMS) return;
    v = &c->var[l->var];
  } else {
    int lok = 1;
    fv = eval(c, l, &lok);
    if (!lok || c->nfacts >= MAX_FACTS) return;
    v = &fv;
  }
  double x = k.lo;
  if (op == '<' && x - 1 < v->hi) v->hi = x - 1;
  else if (op == 'l' && x < v->hi) v->hi = x;
  else if (op == '>' && x + 1 > v->lo) v->lo = x + 1;
  else if (op == 'g' && x > v->lo) v->lo = x;
  else if (op == '=') v->lo = x > v->lo ? x : v->lo, v->hi = x < v->hi ? x : v->hi;
  if (v == &fv) c->fact[c->nfacts] = l, c->fact_iv[c->nfacts++] = fv;
}

static void check(bctx *c, const cwm_expr *e) {
  if (!e || c->failed) return;
  if (e->kind == CWM_X_SELECT && e->nargs == 3) {
    check(c, e->args[0]);
    bctx then = *c;
    narrow(&then, e->args[0]);
    check(&then, e->args[1]);
    if (then.failed) c->failed = 1;
    check(c, e->args[2]);
    return;
  }
  if (e->kind == CWM_X_READ) {
    const cwm_op *t = &c->w->ops[e->tensor];
    for (int d = 0; d < e->nargs && d < t->ndim && !c->failed; d++) {
      int ok = 1;
      ival r = eval(c, e->args[d], &ok);
      char ex[256];
      if (!ok || r.lo < 0 || r.hi > t->shape[d] - 1 || r.lo < -BIG || r.hi > BIG) {
        print_expr(c, e->args[d], ex, sizeof ex);
        if (!ok)
          cwm_fail(c->err, CWM_EPARSE, "statement '%s': index %d of %s (%s) cannot be bounded", c->op->name, d + 1,
                   t->name, ex);
        else
          cwm_fail(c->err, CWM_EPARSE, "statement '%s': index %d of %s (%s) ranges over [%.0f, %.0f], outside [0, %d)",
                   c->op->name, d + 1, t->name, ex, r.lo, r.hi, t->shape[d]);
        c->failed = 1;
      }
    }
  }
  for (int i = 0; i < e->nargs; i++) check(c, e->args[i]);
}

int cwm_op_check_bounds(const cwm_workload *w, int i, cwm_err *err) {
  const cwm_op *op = &w->ops[i];
  if (op->is_input || !op->body) return CWM_OK;
  bctx c;
  memset(&c, 0, sizeof c);
  c.w = w, c.op = op, c.err = err;
  for (int d = 0; d < op->ndim; d++) c.var[d] = iv(0, op->shape[d] - 1);
  for (int d = 0; d < op->nred && op->ndim + d < 2 * CWM_MAX_DIMS; d++) c.var[op->ndim + d] = iv(0, op->red_extent[d] - 1);
  check(&c, op->body);
  return c.failed ? CWM_EPARSE : CWM_OK;
}

int cwm_workload_check_bounds(const cwm_workload *w, cwm_err *err) {
  for (int i = 0; i < w->nops; i++)
    if (cwm_op_check_bounds(w, i, err)) return CWM_EPARSE;
  return CWM_OK;
}

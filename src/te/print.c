/* print.c: canonical workload text, the workload key and the flop count. The printed form is
 * the identity of a workload (records and caches key on its hash), so it must be a fixed point:
 * parse(print(w)) prints the same bytes, with parentheses only where precedence needs them. */
#include "cwm/te.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { P_OR = 1, P_AND, P_CMP, P_ADD, P_MUL, P_UNARY, P_PRIMARY };

/* A negative constant prints as "-x", so it binds like a unary minus: the parser reads that
 * text back as NEG(x), which prints identically. */
static int prec(const cwm_expr *e) {
  switch (e->kind) {
  case CWM_X_CONST: return signbit(e->value) ? P_UNARY : P_PRIMARY;
  case CWM_X_NEG: case CWM_X_NOT: return P_UNARY;
  case CWM_X_BIN: return (e->op == '+' || e->op == '-') ? P_ADD : P_MUL;
  case CWM_X_CMP: return P_CMP;
  case CWM_X_AND: return P_AND;
  case CWM_X_OR: return P_OR;
  default: return P_PRIMARY;
  }
}

static const char *cmp_text(int op) {
  switch (op) {
  case '<': return "<";
  case 'l': return "<=";
  case '>': return ">";
  case 'g': return ">=";
  case '=': return "==";
  case '!': return "!=";
  default: return "?";
  }
}

static void put_const(cwm_buf *b, double v, int is_int) {
  /* Index constants must read back as integer literals, which %.9g would not give above 1e9. */
  if (is_int && v == floor(v) && fabs(v) < 9.2e18) cwm_buf_printf(b, "%lld", (long long)v);
  else cwm_buf_printf(b, "%.9g", v);
}

static void put_expr(cwm_buf *b, const cwm_workload *w, const cwm_op *op, const cwm_expr *e);

static void put_sub(cwm_buf *b, const cwm_workload *w, const cwm_op *op, const cwm_expr *e,
                    int paren) {
  if (paren) cwm_buf_putc(b, '(');
  put_expr(b, w, op, e);
  if (paren) cwm_buf_putc(b, ')');
}

static const cwm_expr *arg(const cwm_expr *e, int i) {
  return (e->args && i < e->nargs) ? e->args[i] : NULL;
}

/* e's arguments, comma-separated, between the two brackets of br */
static void put_args(cwm_buf *b, const cwm_workload *w, const cwm_op *op, const cwm_expr *e, const char *br) {
  cwm_buf_putc(b, br[0]);
  for (int i = 0; i < e->nargs; i++) {
    if (i) cwm_buf_puts(b, ", ");
    put_expr(b, w, op, arg(e, i));
  }
  cwm_buf_putc(b, br[1]);
}

static void put_expr(cwm_buf *b, const cwm_workload *w, const cwm_op *op, const cwm_expr *e) {
  if (!e) {
    cwm_buf_puts(b, "?");
    return;
  }
  int p = prec(e);
  switch (e->kind) {
  case CWM_X_CONST:
    if (signbit(e->value)) {
      cwm_buf_putc(b, '-');
      put_const(b, -e->value, e->is_int);
    } else {
      put_const(b, e->value, e->is_int);
    }
    break;
  case CWM_X_VAR:
    if (op && e->var >= 0 && e->var < op->ndim) cwm_buf_puts(b, op->axis[e->var]);
    else if (op && e->var >= op->ndim && e->var < op->ndim + op->nred)
      cwm_buf_puts(b, op->red_axis[e->var - op->ndim]);
    else cwm_buf_printf(b, "?%d", e->var);
    break;
  case CWM_X_READ:
    if (e->tensor >= 0 && e->tensor < w->nops) cwm_buf_puts(b, w->ops[e->tensor].name);
    else cwm_buf_printf(b, "?%d", e->tensor);
    put_args(b, w, op, e, "[]");
    break;
  case CWM_X_CALL: case CWM_X_SELECT:
    cwm_buf_puts(b, e->kind == CWM_X_SELECT ? "select" : cwm_fn_name((cwm_fn)e->op));
    put_args(b, w, op, e, "()");
    break;
  case CWM_X_NEG: case CWM_X_NOT: {
    const cwm_expr *x = arg(e, 0);
    cwm_buf_putc(b, e->kind == CWM_X_NEG ? '-' : '!');
    put_sub(b, w, op, x, x && prec(x) < P_UNARY);
    break;
  }
  case CWM_X_BIN: case CWM_X_CMP: case CWM_X_AND: case CWM_X_OR: {
    const cwm_expr *l = arg(e, 0), *r = arg(e, 1);
    /* Left-associative: an equal-precedence operand needs parentheses only on the right. */
    put_sub(b, w, op, l, l && prec(l) < p);
    if (e->kind == CWM_X_BIN) cwm_buf_printf(b, " %c ", (char)e->op);
    else if (e->kind == CWM_X_CMP) cwm_buf_printf(b, " %s ", cmp_text(e->op));
    else cwm_buf_puts(b, e->kind == CWM_X_AND ? " && " : " || ");
    put_sub(b, w, op, r, r && prec(r) <= p);
    break;
  }
  }
}

char *cwm_workload_print(const cwm_workload *w) {
  cwm_buf b;
  cwm_buf_init(&b);
  if (!w) return cwm_buf_take(&b);
  int n = w->nops < CWM_MAX_OPS ? w->nops : CWM_MAX_OPS;
  int last = -1;
  for (int i = 0; i < n; i++) {
    const cwm_op *o = &w->ops[i];
    int nd = o->ndim < CWM_MAX_DIMS ? o->ndim : CWM_MAX_DIMS;
    if (o->is_input) {
      cwm_buf_printf(&b, "input %s[", o->name);
      for (int d = 0; d < nd; d++) cwm_buf_printf(&b, "%s%d", d ? ", " : "", o->shape[d]);
      cwm_buf_puts(&b, o->is_const ? "] const\n" : "]\n");
      continue;
    }
    last = i;
    cwm_buf_printf(&b, "%s[", o->name);
    for (int d = 0; d < nd; d++)
      cwm_buf_printf(&b, "%s%s:%d", d ? ", " : "", o->axis[d], o->shape[d]);
    cwm_buf_puts(&b, "] = ");
    if (o->reduce != CWM_RED_NONE) {
      int nr = o->nred < CWM_MAX_DIMS ? o->nred : CWM_MAX_DIMS;
      cwm_buf_puts(&b, o->reduce == CWM_RED_SUM ? "sum(" : o->reduce == CWM_RED_MAX ? "max(" : "min(");
      for (int d = 0; d < nr; d++)
        cwm_buf_printf(&b, "%s%s:%d", d ? ", " : "", o->red_axis[d], o->red_extent[d]);
      cwm_buf_puts(&b, " : ");
      put_expr(&b, w, o, o->body);
      cwm_buf_putc(&b, ')');
    } else {
      put_expr(&b, w, o, o->body);
    }
    cwm_buf_putc(&b, '\n');
  }
  int out = (w->output >= 0 && w->output < n) ? w->output : last;
  if (out >= 0) cwm_buf_printf(&b, "output %s\n", w->ops[out].name);
  return cwm_buf_take(&b);
}

void cwm_workload_key(const cwm_workload *w, char out[17]) {
  char *text = cwm_workload_print(w);
  cwm_hash_hex(cwm_hash64(text, strlen(text)), out);
  free(text);
}

/* Arithmetic on values only: index and condition nodes (is_int) are address computation,
 * which flop counts conventionally leave out. */
static double count_ops(const cwm_expr *e) {
  if (!e) return 0;
  double n = 0;
  if (!e->is_int && (e->kind == CWM_X_BIN || e->kind == CWM_X_NEG || e->kind == CWM_X_CALL ||
                     e->kind == CWM_X_SELECT))
    n = 1;
  for (int i = 0; i < e->nargs; i++) n += count_ops(e->args[i]);
  return n;
}

double cwm_workload_flops(const cwm_workload *w) {
  double total = 0;
  if (!w) return 0;
  for (int i = 0; i < w->nops && i < CWM_MAX_OPS; i++) {
    const cwm_op *o = &w->ops[i];
    if (o->is_input) continue;
    double sp = 1;
    for (int d = 0; d < o->ndim; d++) sp *= o->shape[d];
    double ops = count_ops(o->body);
    if (o->reduce != CWM_RED_NONE) {
      double rd = 1;
      for (int d = 0; d < o->nred; d++) rd *= o->red_extent[d];
      total += sp * rd * (ops + 1);
    } else {
      total += sp * (ops > 1 ? ops : 1);
    }
  }
  return total;
}

void cwm_expr_print(cwm_buf *b, const cwm_workload *w, const cwm_op *op, const cwm_expr *e) { put_expr(b, w, op, e); }

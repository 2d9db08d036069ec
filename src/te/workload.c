/* workload.c: the statements of the workload language (inputs, computes, reductions) and
 * cwm_workload_parse, over the expressions of parse.c; every index is proven in bounds at the end
 * (bounds.c). */
#include "parse_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int end_of_statement(parser *p) {
  if (!at_eol(&p->cur)) {
    te_expected(p, "end of line");
    return 0;
  }
  if (p->cur.kind == T_NL) advance(p);
  return 1;
}

/* Reads an extent/dimension: a positive integer no larger than 2^24. */
static int take_extent(parser *p, int *out) {
  tok t = p->cur;
  if (t.kind != T_INT || t.overflow || t.ival < 1 || t.ival > MAX_EXTENT) {
    te_expected(p, "an extent between 1 and 16777216");
    return 0;
  }
  *out = (int)t.ival;
  advance(p);
  return 1;
}

/* A new tensor name: permitted, not already a tensor, not an axis of an earlier statement. */
static int take_tensor_name(parser *p, char out[CWM_MAX_NAME]) {
  tok t = p->cur;
  if (!te_take_name(p, out, "a tensor name")) return 0;
  if (te_find_tensor(p, out) >= 0) {
    te_perr(p, &t, "duplicate tensor name '%s'", out);
    return 0;
  }
  if (te_is_axis_anywhere(p, out)) {
    te_perr(p, &t, "'%s' is already used as an axis name", out);
    return 0;
  }
  advance(p);
  return 1;
}

/* Checked before the op slot is touched: ops[] has no room past CWM_MAX_OPS. */
static int room_for_op(parser *p, const tok *at) {
  if (p->w->nops < CWM_MAX_OPS) return 1;
  te_perr(p, at, "too many tensors (at most %d)", CWM_MAX_OPS);
  return 0;
}

/* A new axis of the current statement (spatial or reduction). */
static int take_axis(parser *p, const char *opname, char out[CWM_MAX_NAME], int *extent) {
  tok t = p->cur;
  if (!te_take_name(p, out, "an axis name")) return 0;
  if (te_find_axis(p, out) >= 0) {
    te_perr(p, &t, "duplicate axis name '%s'", out);
    return 0;
  }
  if (te_find_tensor(p, out) >= 0 || strcmp(out, opname) == 0) {
    te_perr(p, &t, "'%s' is already used as a tensor name", out);
    return 0;
  }
  advance(p);
  if (!te_expect_punct(p, ':', "':'")) return 0;
  if (!take_extent(p, extent)) return 0;
  memcpy(p->ax[p->nax++], out, CWM_MAX_NAME);
  return 1;
}

static int check_size(parser *p, const tok *at, const char *name, const int *ext, int n,
                      const char *what) {
  long long prod = 1;
  for (int i = 0; i < n; i++) {
    prod *= ext[i];
    if (prod > MAX_ELEMS) {
      te_perr(p, at, "%s of '%s' has more than 2^31 elements", what, name);
      return 0;
    }
  }
  return 1;
}

/* "a:N, b:M, ..." (or, names NULL, "N, M, ...") up to and including the closing punct: the names and
 * extents, their count in *n */
static int take_axes(parser *p, const char *opname, char names[][CWM_MAX_NAME], int *extent, int *n, char close,
                     const char *what) {
  char expect_next[16], at_most[64];
  snprintf(expect_next, sizeof expect_next, "',' or '%c'", close);
  snprintf(at_most, sizeof at_most, "'%c' (at most %d %s)", close, CWM_MAX_DIMS, what);
  for (;;) {
    if (*n == CWM_MAX_DIMS) {
      te_expected(p, at_most);
      return 0;
    }
    if (names ? !take_axis(p, opname, names[*n], &extent[*n]) : !take_extent(p, &extent[*n])) return 0;
    (*n)++;
    if (is_punct(&p->cur, ',')) {
      advance(p);
      continue;
    }
    return te_expect_punct(p, close, expect_next);
  }
}

/* the start of an input or compute statement, "NAME [": the new op (not counted yet), or NULL */
static cwm_op *begin_op(parser *p, tok *nt) {
  *nt = p->cur;
  if (!room_for_op(p, nt)) return NULL;
  cwm_op *o = &p->w->ops[p->w->nops];
  memset(o, 0, sizeof *o);
  if (!take_tensor_name(p, o->name)) return NULL;
  return te_expect_punct(p, '[', "'['") ? o : NULL;
}

static int parse_input(parser *p) {
  advance(p); /* input */
  tok nt;
  cwm_op *o = begin_op(p, &nt);
  if (!o) return 0;
  o->is_input = 1;
  if (!take_axes(p, o->name, NULL, o->shape, &o->ndim, ']', "dimensions")) return 0;
  if (!check_size(p, &nt, o->name, o->shape, o->ndim, "tensor")) return 0;
  /* `const` marks a weight: the schedule may store it in the layout it reads (src/codegen/layout.c) */
  if (p->cur.kind == T_IDENT && is_word(&p->cur, "const")) {
    o->is_const = 1;
    advance(p);
  }
  if (!end_of_statement(p)) return 0;
  p->w->nops++;
  return 1;
}


static int parse_reduction(parser *p, cwm_op *o) {
  tok kt = p->cur;
  o->reduce = is_word(&kt, "sum") ? CWM_RED_SUM : is_word(&kt, "max") ? CWM_RED_MAX : CWM_RED_MIN;
  advance(p); /* kind */
  advance(p); /* '(' */
  if (!take_axes(p, o->name, o->red_axis, o->red_extent, &o->nred, ':', "reduction axes")) return 0;
  if (!check_size(p, &kt, o->name, o->red_extent, o->nred, "the reduction")) return 0;
  int h;
  o->body = te_parse_value(p, &h);
  if (!o->body) return 0;
  if (!te_expect_punct(p, ')', "')'")) return 0;
  if (!at_eol(&p->cur)) {
    char d[256];
    te_perr(p, &p->cur, "a reduction must be the whole right-hand side, found %s",
         te_tok_desc(&p->cur, d, sizeof d));
    return 0;
  }
  return 1;
}

static int parse_compute(parser *p) {
  tok nt;
  cwm_op *o = begin_op(p, &nt);
  if (!o) return 0;
  p->nax = 0;
  if (!take_axes(p, o->name, o->axis, o->shape, &o->ndim, ']', "axes")) return 0;
  if (!check_size(p, &nt, o->name, o->shape, o->ndim, "tensor")) return 0;
  if (!te_expect_punct(p, '=', "'='")) return 0;
  int ok;
  if (te_at_reduction(p)) {
    ok = parse_reduction(p, o);
  } else {
    int h;
    o->body = te_parse_value(p, &h);
    ok = o->body != NULL;
  }
  if (!ok || !end_of_statement(p)) {
    cwm_expr_free(o->body);
    o->body = NULL;
    return 0;
  }
  p->w->nops++;
  cwm_err be = {0};
  if (cwm_op_check_bounds(p->w, p->w->nops - 1, &be)) {
    te_perr(p, &nt, "%s", be.msg);
    return 0;
  }
  return 1;
}

void cwm_workload_free(cwm_workload *w) {
  if (!w) return;
  for (int i = 0; i < w->nops && i < CWM_MAX_OPS; i++) cwm_expr_free(w->ops[i].body);
  free(w);
}

cwm_workload *cwm_workload_parse(const char *text, cwm_err *err) {
  parser p;
  memset(&p, 0, sizeof p);
  p.lx.s = text ? text : "";
  p.lx.line = 1;
  p.lx.col = 1;
  p.err = err;
  p.w = cwm_xcalloc(1, sizeof *p.w);
  p.w->output = -1;
  tok out_tok;
  int out_index = -1;
  memset(&out_tok, 0, sizeof out_tok);
  advance(&p);
  while (!p.failed && p.cur.kind != T_EOF) {
    if (p.cur.kind == T_NL) {
      advance(&p);
    } else if (p.cur.kind != T_IDENT) {
      te_expected(&p, "a statement (input, output or a compute)");
    } else if (is_word(&p.cur, "input")) {
      parse_input(&p);
    } else if (is_word(&p.cur, "output")) {
      if (out_index >= 0) {
        te_perr(&p, &p.cur, "duplicate output statement");
        break;
      }
      advance(&p);
      out_tok = p.cur;
      if (p.cur.kind != T_IDENT) {
        te_expected(&p, "a tensor name");
        break;
      }
      char name[CWM_MAX_NAME];
      tok_name(&p.cur, name);
      int ti = p.cur.len < CWM_MAX_NAME ? te_find_tensor(&p, name) : -1;
      char d[256];
      if (ti < 0) {
        te_perr(&p, &p.cur, "unknown tensor %s", te_tok_desc(&p.cur, d, sizeof d));
        break;
      }
      if (p.w->ops[ti].is_input) {
        te_perr(&p, &p.cur, "output '%s' is an input, not a compute", name);
        break;
      }
      out_index = ti;
      advance(&p);
      end_of_statement(&p);
    } else {
      parse_compute(&p);
    }
  }
  if (!p.failed) {
    int last = -1, ninputs = 0;
    for (int i = 0; i < p.w->nops; i++) {
      if (p.w->ops[i].is_input) ninputs++;
      else last = i;
    }
    if (ninputs == 0) te_expected(&p, "an input statement");
    else if (last < 0) te_expected(&p, "a compute statement");
    else if (out_index >= 0 && out_index != last)
      te_perr(&p, &out_tok, "output '%s' is not the last compute ('%s' is)",
           p.w->ops[out_index].name, p.w->ops[last].name);
    p.w->output = last;
  }
  if (p.failed) {
    cwm_workload_free(p.w);
    return NULL;
  }
  return p.w;
}

/* parse.c: the lexer and the expressions of the workload language (index, value and condition
 * expressions; the statements are workload.c). Input may be hostile (it is fuzzed, and every name
 * it accepts is pasted into generated C), so the lexer is lazy and allocation-free, recursion and
 * tree height are bounded, every integer is range-checked and every name passes cwm_ident_valid. */
#include "parse_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

void te_lex_next(lexer *lx, tok *t) {
  const char *s = lx->s;
  for (;;) {
    char c = s[lx->pos];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
      lx->pos++, lx->col++;
    } else if (c == '#') {
      while (s[lx->pos] && s[lx->pos] != '\n') lx->pos++, lx->col++;
    } else {
      break;
    }
  }
  memset(t, 0, sizeof *t);
  t->start = s + lx->pos;
  t->line = lx->line;
  t->col = lx->col;
  char c = s[lx->pos];
  size_t n = 1;
  if (c == 0) {
    t->kind = T_EOF;
    n = 0;
  } else if (c == '\n') {
    t->kind = T_NL;
    lx->pos++;
    lx->line++;
    lx->col = 1;
    t->len = 1;
    return;
  } else if (is_alpha((unsigned char)c)) {
    t->kind = T_IDENT;
    n = 0;
    while (is_alpha((unsigned char)s[lx->pos + n]) || is_digit((unsigned char)s[lx->pos + n])) n++;
  } else if (is_digit((unsigned char)c) || (c == '.' && is_digit((unsigned char)s[lx->pos + 1]))) {
    const char *p = s + lx->pos, *q = p;
    int is_float = 0;
    while (is_digit((unsigned char)*q)) q++;
    if (*q == '.') {
      is_float = 1;
      q++;
      while (is_digit((unsigned char)*q)) q++;
    }
    if ((*q == 'e' || *q == 'E') &&
        (is_digit((unsigned char)q[1]) ||
         ((q[1] == '+' || q[1] == '-') && is_digit((unsigned char)q[2])))) {
      is_float = 1;
      q += 2;
      while (is_digit((unsigned char)*q)) q++;
    }
    n = (size_t)(q - p);
    t->kind = is_float ? T_FLOAT : T_INT;
    if (n > MAX_NUMLEN) {
      t->overflow = 1;
    } else if (is_float) {
      char buf[MAX_NUMLEN + 1];
      memcpy(buf, p, n);
      buf[n] = 0;
      t->fval = strtod(buf, NULL);
      if (!isfinite(t->fval)) t->overflow = 1;
    } else {
      long long v = 0;
      for (const char *r = p; r < q; r++) {
        v = v * 10 + (*r - '0');
        if (v > 2147483647LL) { t->overflow = 1; break; }
      }
      t->ival = v;
      t->fval = (double)v;
    }
  } else {
    char d = s[lx->pos + 1];
    t->kind = T_PUNCT;
    t->op = c;
    if (c == '<' && d == '=') t->op = 'l', n = 2;
    else if (c == '>' && d == '=') t->op = 'g', n = 2;
    else if (c == '=' && d == '=') t->op = 'e', n = 2;
    else if (c == '!' && d == '=') t->op = 'n', n = 2;
    else if (c == '&' && d == '&') t->op = '&', n = 2;
    else if (c == '|' && d == '|') t->op = '|', n = 2;
    else if (!strchr("[](),:=+-*/%<>!", c)) t->kind = T_BAD;
  }
  t->len = n;
  lx->pos += n;
  lx->col += (int)n;
}

/* Token text for messages: shortened, and anything unprintable escaped so an error message
 * never carries raw control bytes. */
const char *te_tok_text(const tok *t, char *buf, size_t n) {
  size_t o = 0, lim = t->len < 40 ? t->len : 40;
  for (size_t i = 0; i < lim && o + 8 < n; i++) {
    unsigned char c = (unsigned char)t->start[i];
    if (c >= 0x20 && c < 0x7f) buf[o++] = (char)c;
    else o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
  }
  if (lim < t->len && o + 4 < n) memcpy(buf + o, "...", 3), o += 3;
  buf[o] = 0;
  return buf;
}

const char *te_tok_desc(const tok *t, char *buf, size_t n) {
  char txt[200];
  switch (t->kind) {
  case T_EOF: snprintf(buf, n, "end of input"); break;
  case T_NL: snprintf(buf, n, "end of line"); break;
  case T_IDENT: snprintf(buf, n, "'%s'", te_tok_text(t, txt, sizeof txt)); break;
  case T_INT: snprintf(buf, n, "number '%s'", te_tok_text(t, txt, sizeof txt)); break;
  case T_FLOAT: snprintf(buf, n, "float literal '%s'", te_tok_text(t, txt, sizeof txt)); break;
  case T_PUNCT: snprintf(buf, n, "'%s'", te_tok_text(t, txt, sizeof txt)); break;
  case T_BAD: snprintf(buf, n, "character '%s'", te_tok_text(t, txt, sizeof txt)); break;
  }
  return buf;
}

void te_perr(parser *p, const tok *t, const char *fmt, ...) {
  if (p->failed) return;
  p->failed = 1;
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  cwm_fail(p->err, CWM_EPARSE, "line %d, column %d: %s", t->line, t->col, msg);
}

/* "expected X, found <current token>" */
void te_expected(parser *p, const char *what) {
  char d[256];
  te_perr(p, &p->cur, "expected %s, found %s", what, te_tok_desc(&p->cur, d, sizeof d));
}

int te_expect_punct(parser *p, int op, const char *what) {
  if (!is_punct(&p->cur, op)) {
    te_expected(p, what);
    return 0;
  }
  advance(p);
  return 1;
}


/* Reads a name token that will become a tensor or axis name; every name reaching generated C
 * passes through here. */
int te_take_name(parser *p, char out[CWM_MAX_NAME], const char *what) {
  if (p->cur.kind != T_IDENT) {
    te_expected(p, what);
    return 0;
  }
  char txt[200];
  te_tok_text(&p->cur, txt, sizeof txt);
  if (p->cur.len >= CWM_MAX_NAME) {
    te_perr(p, &p->cur, "'%s' is not a permitted name (longer than %d characters)", txt,
         CWM_MAX_NAME - 1);
    return 0;
  }
  tok_name(&p->cur, out);
  if (!cwm_ident_valid(out)) {
    te_perr(p, &p->cur, "'%s' is not a permitted name", txt);
    return 0;
  }
  return 1;
}

int te_find_tensor(const parser *p, const char *name) {
  for (int i = 0; i < p->w->nops; i++)
    if (strcmp(p->w->ops[i].name, name) == 0) return i;
  return -1;
}

int te_find_axis(const parser *p, const char *name) {
  for (int i = 0; i < p->nax; i++)
    if (strcmp(p->ax[i], name) == 0) return i;
  return -1;
}

/* An axis of any earlier compute: tensor and loop names share the generated C scope. */
int te_is_axis_anywhere(const parser *p, const char *name) {
  for (int i = 0; i < p->w->nops; i++) {
    const cwm_op *o = &p->w->ops[i];
    if (o->is_input) continue;
    for (int j = 0; j < o->ndim; j++) if (strcmp(o->axis[j], name) == 0) return 1;
    for (int j = 0; j < o->nred; j++) if (strcmp(o->red_axis[j], name) == 0) return 1;
  }
  return 0;
}

static int tok_fn(const tok *t) {
  for (int f = 0; f < CWM_FN__COUNT; f++)
    if (is_word(t, cwm_fn_name((cwm_fn)f))) return f;
  return -1;
}

static int fn_arity(int f) { return (f == CWM_FN_MAX || f == CWM_FN_MIN) ? 2 : 1; }

/* A reduction starts with sum/max/min '(' IDENT ':'; max(a, b) is the binary function. */
int te_at_reduction(const parser *p) {
  if (!(is_word(&p->cur, "sum") || is_word(&p->cur, "max") || is_word(&p->cur, "min"))) return 0;
  tok a = peek(p, 1), b = peek(p, 2), c = peek(p, 3);
  return is_punct(&a, '(') && b.kind == T_IDENT && is_punct(&c, ':');
}

static cwm_expr *node(cwm_xkind kind, int is_int, int nargs) {
  cwm_expr *e = cwm_expr_new(kind);
  e->is_int = is_int;
  e->nargs = nargs;
  if (nargs) e->args = cwm_xcalloc((size_t)nargs, sizeof *e->args);
  return e;
}

static int enter(parser *p) {
  if (++p->depth > MAX_DEPTH) {
    te_perr(p, &p->cur, "expression nested too deeply (more than %d levels)", MAX_DEPTH);
    return 0;
  }
  return 1;
}

/* Joins two operands; checks the height so that no later recursive walk can overflow. */
/* at a number: an integer constant of an index expression or a float of a value expression */
static cwm_expr *p_number(parser *p, int is_int) {
  tok t = p->cur;
  char d[256];
  if (t.overflow) {
    te_perr(p, &t, "number '%s' is too large", te_tok_text(&t, d, sizeof d));
    return NULL;
  }
  advance(p);
  cwm_expr *e = node(CWM_X_CONST, is_int, 0);
  e->value = is_int ? (double)t.ival : t.fval;
  return e;
}

/* the operator at t over x (of height *h), unless that makes the tree too high */
static cwm_expr *unary_node(parser *p, const tok *t, cwm_xkind kind, int is_int, cwm_expr *x, int *h) {
  if (*h + 1 > MAX_HEIGHT) {
    te_perr(p, t, "expression too large (tree height above %d)", MAX_HEIGHT);
    cwm_expr_free(x);
    return NULL;
  }
  cwm_expr *e = node(kind, is_int, 1);
  e->args[0] = x;
  (*h)++;
  return e;
}

/* at '(': "( inner )" */
static cwm_expr *p_paren(parser *p, int *h, cwm_expr *(*inner)(parser *, int *)) {
  if (!enter(p)) return NULL;
  advance(p);
  cwm_expr *e = inner(p, h);
  p->depth--;
  if (e && !te_expect_punct(p, ')', "')'")) {
    cwm_expr_free(e);
    return NULL;
  }
  return e;
}

static cwm_expr *join2(parser *p, const tok *at, cwm_xkind kind, int op, int is_int, cwm_expr *l,
                       int hl, cwm_expr *r, int hr, int *h) {
  int hh = 1 + (hl > hr ? hl : hr);
  if (hh > MAX_HEIGHT) {
    te_perr(p, at, "expression too large (tree height above %d)", MAX_HEIGHT);
    cwm_expr_free(l);
    cwm_expr_free(r);
    return NULL;
  }
  cwm_expr *e = node(kind, is_int, 2);
  e->op = op;
  e->args[0] = l;
  e->args[1] = r;
  *h = hh;
  return e;
}

/* ---------------------------------------------------------------- index expressions */

static cwm_expr *pi_add(parser *p, int *h);
static cwm_expr *pv_primary(parser *p, int *h);

static cwm_expr *pi_primary(parser *p, int *h) {
  tok t = p->cur;
  char d[256];
  *h = 1;
  if (t.kind == T_INT) return p_number(p, 1);
  if (t.kind == T_FLOAT) {
    te_perr(p, &t, "expected an integer index expression, found %s", te_tok_desc(&t, d, sizeof d));
    return NULL;
  }
  if (is_punct(&t, '(')) return p_paren(p, h, pi_add);
  if (t.kind == T_IDENT) {
    char name[CWM_MAX_NAME];
    tok_name(&t, name);
    int a = t.len < CWM_MAX_NAME ? te_find_axis(p, name) : -1;
    if (a >= 0) {
      advance(p);
      cwm_expr *e = node(CWM_X_VAR, 1, 0);
      e->var = a;
      return e;
    }
    tok nx = peek(p, 1);
    if (is_punct(&nx, '[') || is_punct(&nx, '('))
      te_perr(p, &t, "expected an integer index expression, found %s %s",
           is_punct(&nx, '[') ? "tensor read" : "call", te_tok_desc(&t, d, sizeof d));
    else
      te_perr(p, &t, "unknown axis %s", te_tok_desc(&t, d, sizeof d));
    return NULL;
  }
  te_expected(p, "an integer index expression");
  return NULL;
}

/* ---------------------------------------------------------------- conditions */

static cwm_expr *pc_or(parser *p, int *h);

/* In a condition, '(' opens either a parenthesised condition or an index expression that a
 * comparison follows: `(h < 3) && ...` versus `(h + 1) < 3`. The token after the matching ')'
 * decides, since a comparison can never directly follow a parenthesised condition. */
static int paren_is_cond(const parser *p) {
  lexer lx = p->lx;
  tok t;
  int depth = 1;
  while (depth > 0) {
    te_lex_next(&lx, &t);
    if (t.kind == T_EOF || t.kind == T_NL || t.kind == T_BAD) return 0;
    if (is_punct(&t, '(')) depth++;
    else if (is_punct(&t, ')')) depth--;
  }
  te_lex_next(&lx, &t);
  return is_punct(&t, '&') || is_punct(&t, '|') || is_punct(&t, ')') || is_punct(&t, ',') ||
         at_eol(&t);
}

static int cmp_op(const tok *t) {
  if (t->kind != T_PUNCT) return 0;
  switch (t->op) {
  case '<': return '<';
  case 'l': return 'l';
  case '>': return '>';
  case 'g': return 'g';
  case 'e': return '=';
  case 'n': return '!';
  default: return 0;
  }
}

static cwm_expr *pc_atom(parser *p, int *h) {
  if (is_punct(&p->cur, '(') && paren_is_cond(p)) return p_paren(p, h, pc_or);
  int hl, hr;
  cwm_expr *l = pi_add(p, &hl);
  if (!l) return NULL;
  tok t = p->cur;
  int op = cmp_op(&t);
  if (!op) {
    te_expected(p, "a comparison operator");
    cwm_expr_free(l);
    return NULL;
  }
  advance(p);
  cwm_expr *r = pi_add(p, &hr);
  if (!r) {
    cwm_expr_free(l);
    return NULL;
  }
  return join2(p, &t, CWM_X_CMP, op, 1, l, hl, r, hr, h);
}

static cwm_expr *pc_not(parser *p, int *h) {
  if (!is_punct(&p->cur, '!')) return pc_atom(p, h);
  tok t = p->cur;
  if (!enter(p)) return NULL;
  advance(p);
  cwm_expr *x = pc_not(p, h);
  p->depth--;
  return x ? unary_node(p, &t, CWM_X_NOT, 1, x, h) : NULL;
}

/* a left-associative chain "a OP b OP c" of one boolean operator over the level below */
static cwm_expr *pc_chain(parser *p, int *h, char punct, cwm_xkind kind, cwm_expr *(*sub)(parser *, int *)) {
  cwm_expr *l = sub(p, h);
  while (l && is_punct(&p->cur, punct)) {
    tok t = p->cur;
    advance(p);
    int hr;
    cwm_expr *r = sub(p, &hr);
    if (!r) {
      cwm_expr_free(l);
      return NULL;
    }
    l = join2(p, &t, kind, 0, 1, l, *h, r, hr, h);
  }
  return l;
}

static cwm_expr *pc_and(parser *p, int *h) { return pc_chain(p, h, '&', CWM_X_AND, pc_not); }

static cwm_expr *pc_or(parser *p, int *h) { return pc_chain(p, h, '|', CWM_X_OR, pc_and); }

/* ---------------------------------------------------------------- value expressions */


/* At '(': parses "(a, b, ...)" into args, as value expressions, or for select a condition first. */
static int call_args(parser *p, const tok *fn, const char *fname, int want, int first_cond,
                     cwm_expr **args, int *h) {
  if (!enter(p)) return 0;
  advance(p); /* '(' */
  int n = 0, ok = 1;
  *h = 0;
  for (;;) {
    int ha;
    cwm_expr *a = (n == 0 && first_cond) ? pc_or(p, &ha) : te_parse_value(p, &ha);
    if (!a) { ok = 0; break; }
    args[n++] = a;
    if (ha > *h) *h = ha;
    if (is_punct(&p->cur, ',')) {
      if (n == want) {
        te_perr(p, &p->cur, "'%s' takes %d argument%s, found more", fname, want, want == 1 ? "" : "s");
        ok = 0;
        break;
      }
      advance(p);
      continue;
    }
    if (!is_punct(&p->cur, ')')) {
      te_expected(p, n < want ? "',' or ')'" : "')'");
      ok = 0;
      break;
    }
    if (n < want) {
      te_perr(p, fn, "'%s' takes %d arguments, found %d", fname, want, n);
      ok = 0;
      break;
    }
    advance(p);
    break;
  }
  p->depth--;
  if (ok && *h + 1 > MAX_HEIGHT) {
    te_perr(p, fn, "expression too large (tree height above %d)", MAX_HEIGHT);
    ok = 0;
  }
  if (!ok) {
    for (int i = 0; i < n; i++) cwm_expr_free(args[i]);
    return 0;
  }
  (*h)++;
  return 1;
}

static cwm_expr *p_read(parser *p, int t_index, int *h) {
  tok nt = p->cur;
  const cwm_op *o = &p->w->ops[t_index];
  advance(p); /* name */
  if (!enter(p)) return NULL;
  advance(p); /* '[' */
  cwm_expr *args[CWM_MAX_DIMS];
  int n = 0, ok = 1;
  *h = 0;
  for (;;) {
    if (n == CWM_MAX_DIMS) {
      te_perr(p, &nt, "tensor '%s' has %d dimension%s, found more indices", o->name, o->ndim,
           o->ndim == 1 ? "" : "s");
      ok = 0;
      break;
    }
    int ha;
    cwm_expr *a = pi_add(p, &ha);
    if (!a) { ok = 0; break; }
    args[n++] = a;
    if (ha > *h) *h = ha;
    if (is_punct(&p->cur, ',')) { advance(p); continue; }
    if (!is_punct(&p->cur, ']')) { te_expected(p, "',' or ']'"); ok = 0; break; }
    advance(p);
    break;
  }
  p->depth--;
  if (ok && n != o->ndim) {
    te_perr(p, &nt, "tensor '%s' has %d dimension%s, found %d ind%s", o->name, o->ndim,
         o->ndim == 1 ? "" : "s", n, n == 1 ? "ex" : "ices");
    ok = 0;
  }
  if (ok && *h + 1 > MAX_HEIGHT) {
    te_perr(p, &nt, "expression too large (tree height above %d)", MAX_HEIGHT);
    ok = 0;
  }
  if (!ok) {
    for (int i = 0; i < n; i++) cwm_expr_free(args[i]);
    return NULL;
  }
  cwm_expr *e = node(CWM_X_READ, 0, n);
  e->tensor = t_index;
  memcpy(e->args, args, (size_t)n * sizeof *args);
  (*h)++;
  return e;
}

static cwm_expr *pv_primary(parser *p, int *h) {
  tok t = p->cur;
  char d[256];
  *h = 1;
  if (t.kind == T_INT || t.kind == T_FLOAT) return p_number(p, 0);
  if (is_punct(&t, '(')) return p_paren(p, h, te_parse_value);
  if (t.kind != T_IDENT) {
    te_expected(p, "a value expression");
    return NULL;
  }
  tok nx = peek(p, 1);
  char name[CWM_MAX_NAME];
  tok_name(&t, name);
  int fits = t.len < CWM_MAX_NAME;
  if (is_punct(&nx, '[')) {
    int ti = fits ? te_find_tensor(p, name) : -1;
    if (ti < 0) {
      te_perr(p, &t, "unknown tensor %s", te_tok_desc(&t, d, sizeof d));
      return NULL;
    }
    return p_read(p, ti, h);
  }
  if (is_punct(&nx, '(')) {
    if (te_at_reduction(p)) {
      te_perr(p, &t, "a reduction must be the whole right-hand side");
      return NULL;
    }
    cwm_expr *args[3];
    if (is_word(&t, "select")) {
      advance(p);
      if (!call_args(p, &t, "select", 3, 1, args, h)) return NULL;
      cwm_expr *e = node(CWM_X_SELECT, 0, 3);
      memcpy(e->args, args, sizeof args);
      return e;
    }
    int f = tok_fn(&t);
    if (f < 0) {
      if (is_word(&t, "sum"))
        te_perr(p, &t, "expected a reduction 'sum(axis:extent : expr)', found 'sum' used as a call");
      else
        te_perr(p, &t, "unknown function %s", te_tok_desc(&t, d, sizeof d));
      return NULL;
    }
    advance(p);
    int want = fn_arity(f);
    if (!call_args(p, &t, cwm_fn_name((cwm_fn)f), want, 0, args, h)) return NULL;
    cwm_expr *e = node(CWM_X_CALL, 0, want);
    e->op = f;
    memcpy(e->args, args, (size_t)want * sizeof *args);
    return e;
  }
  if (fits && te_find_axis(p, name) >= 0)
    te_perr(p, &t, "loop variable '%s' cannot be used as a value", name);
  else if (fits && te_find_tensor(p, name) >= 0)
    te_perr(p, &nx, "expected '[' after tensor '%s', found %s", name, te_tok_desc(&nx, d, sizeof d));
  else
    te_perr(p, &t, "unknown name %s", te_tok_desc(&t, d, sizeof d));
  return NULL;
}

/* ---------------------------------------------------------------- the expression grammar */

/* One grammar for both kinds of expression: sums of products of (possibly negated) atoms.
 * is_int picks the atoms (pi_primary: integer constants and axes; pv_primary: numbers, tensor
 * reads and calls) and the division rule: an index divides only by a positive constant (floor
 * division and modulo), a value never takes '%'. */
static cwm_expr *px_unary(parser *p, int is_int, int *h) {
  if (!is_punct(&p->cur, '-')) return is_int ? pi_primary(p, h) : pv_primary(p, h);
  tok t = p->cur;
  if (!enter(p)) return NULL;
  advance(p);
  cwm_expr *x = px_unary(p, is_int, h);
  p->depth--;
  return x ? unary_node(p, &t, CWM_X_NEG, is_int, x, h) : NULL;
}

static cwm_expr *px_mul(parser *p, int is_int, int *h) {
  cwm_expr *l = px_unary(p, is_int, h);
  while (l && (is_punct(&p->cur, '*') || is_punct(&p->cur, '/') || is_punct(&p->cur, '%'))) {
    tok t = p->cur;
    if (!is_int && t.op == '%') {
      te_perr(p, &t, "expected a value operator, found '%%' (only index expressions take '%%')");
      cwm_expr_free(l);
      return NULL;
    }
    advance(p);
    tok rt = p->cur;
    int hr;
    cwm_expr *r = px_unary(p, is_int, &hr);
    if (!r) {
      cwm_expr_free(l);
      return NULL;
    }
    if (is_int && t.op != '*' && !(r->kind == CWM_X_CONST && r->value > 0)) {
      char d[256];
      te_perr(p, &rt, "expected a positive integer constant after '%c', found %s", t.op,
           te_tok_desc(&rt, d, sizeof d));
      cwm_expr_free(l);
      cwm_expr_free(r);
      return NULL;
    }
    l = join2(p, &t, CWM_X_BIN, t.op, is_int, l, *h, r, hr, h);
  }
  return l;
}

static cwm_expr *px_add(parser *p, int is_int, int *h) {
  cwm_expr *l = px_mul(p, is_int, h);
  while (l && (is_punct(&p->cur, '+') || is_punct(&p->cur, '-'))) {
    tok t = p->cur;
    advance(p);
    int hr;
    cwm_expr *r = px_mul(p, is_int, &hr);
    if (!r) {
      cwm_expr_free(l);
      return NULL;
    }
    l = join2(p, &t, CWM_X_BIN, t.op, is_int, l, *h, r, hr, h);
  }
  return l;
}

static cwm_expr *pi_add(parser *p, int *h) { return px_add(p, 1, h); }
cwm_expr *te_parse_value(parser *p, int *h) { return px_add(p, 0, h); }


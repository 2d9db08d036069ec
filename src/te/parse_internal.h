/* parse_internal.h: what the files of the workload language parser share: the tokens, the lexer
 * (parse.c), the parser's state and helpers, and the expression entry point that the statements
 * (workload.c) call. Not a public contract. */
#ifndef CWM_TE_PARSE_INTERNAL_H
#define CWM_TE_PARSE_INTERNAL_H

#include "cwm/te.h"

#include <string.h>

#define MAX_DEPTH 64      /* parser recursion (parentheses, unary operators, calls) */
#define MAX_HEIGHT 64     /* tree height: later passes walk trees recursively (codegen caps at 200) */
#define MAX_EXTENT (1LL << 24)
#define MAX_ELEMS (1LL << 31)
#define MAX_NUMLEN 63

/* ---------------------------------------------------------------- lexer */

typedef enum { T_EOF, T_NL, T_IDENT, T_INT, T_FLOAT, T_PUNCT, T_BAD } tkind;

/* Two-character operators get one-letter codes: 'l' <=, 'g' >=, 'e' ==, 'n' !=, '&' &&, '|' ||. */
typedef struct {
  tkind kind;
  int op;
  const char *start;
  size_t len;
  int line, col;
  double fval;
  long long ival;
  int overflow; /* number too large or too long */
} tok;

typedef struct {
  const char *s;
  size_t pos;
  int line, col;
} lexer;

void te_lex_next(lexer *lx, tok *t);
/* Token text for messages (shortened, control bytes escaped) and a description such as "number '3'". */
const char *te_tok_text(const tok *t, char *buf, size_t n);
const char *te_tok_desc(const tok *t, char *buf, size_t n);

/* ---------------------------------------------------------------- parser state */

typedef struct {
  lexer lx;
  tok cur;
  cwm_err *err;
  int failed;
  cwm_workload *w;
  int depth;
  /* axes visible in the statement being parsed: spatial first, then reduction */
  int nax;
  char ax[2 * CWM_MAX_DIMS][CWM_MAX_NAME];
} parser;

static inline void advance(parser *p) { te_lex_next(&p->lx, &p->cur); }

/* The k-th token after the current one, without consuming anything. */
static inline tok peek(const parser *p, int k) {
  lexer lx = p->lx;
  tok t = p->cur;
  for (int i = 0; i < k && t.kind != T_EOF; i++) te_lex_next(&lx, &t);
  return t;
}

static inline int is_punct(const tok *t, int op) { return t->kind == T_PUNCT && t->op == op; }
static inline int is_word(const tok *t, const char *w) {
  return t->kind == T_IDENT && t->len == strlen(w) && memcmp(t->start, w, t->len) == 0;
}
static inline int at_eol(const tok *t) { return t->kind == T_NL || t->kind == T_EOF; }

static inline void tok_name(const tok *t, char out[CWM_MAX_NAME]) {
  size_t n = t->len < CWM_MAX_NAME - 1 ? t->len : CWM_MAX_NAME - 1;
  memcpy(out, t->start, n);
  out[n] = 0;
}

/* The first error wins: "line L, column C: message" into p->err. */
void te_perr(parser *p, const tok *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "expected X, found <current token>" */
void te_expected(parser *p, const char *what);
int te_expect_punct(parser *p, int op, const char *what);
int te_take_name(parser *p, char out[CWM_MAX_NAME], const char *what);
int te_find_tensor(const parser *p, const char *name);
int te_find_axis(const parser *p, const char *name);
int te_is_axis_anywhere(const parser *p, const char *name);
int te_at_reduction(const parser *p);
/* A value expression (the right-hand side of a compute); *h gets its tree height. */
cwm_expr *te_parse_value(parser *p, int *h);

#endif

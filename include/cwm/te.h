/* te.h: the workload front end. A workload is a small tensor-expression program: inputs with
 * shapes (`input W[768, 768] const` marks a weight, fixed across calls: its layout may be
 * rewritten for the schedule), compute statements (elementwise or a top-level sum/max reduction)
 * and one output.
 * It parses from text, prints back to the same text, and comes from op specs of the suite. */
#ifndef CWM_TE_H
#define CWM_TE_H

#include "cwm/util.h"

#define CWM_MAX_DIMS 8
#define CWM_MAX_NAME 32
#define CWM_MAX_OPS 24

typedef enum {
  CWM_X_CONST,  /* number (int or float context) */
  CWM_X_VAR,    /* loop variable: var = axis index of the owning op (spatial first, then reduce) */
  CWM_X_READ,   /* tensor read: tensor = op index, args = indices */
  CWM_X_BIN,    /* op in '+','-','*','/','%' */
  CWM_X_NEG,
  CWM_X_CALL,   /* fn = cwm_fn */
  CWM_X_SELECT, /* args: cond, then, else */
  CWM_X_CMP,    /* op: '<','l'(<=),'>','g'(>=),'=','!' ; args int */
  CWM_X_AND,
  CWM_X_OR,
  CWM_X_NOT
} cwm_xkind;

typedef enum { CWM_FN_EXP, CWM_FN_TANH, CWM_FN_ERF, CWM_FN_SQRT, CWM_FN_RSQRT, CWM_FN_MAX,
               CWM_FN_MIN, CWM_FN_GELU, CWM_FN_RELU, CWM_FN__COUNT } cwm_fn;

typedef struct cwm_expr {
  cwm_xkind kind;
  int op;         /* BIN/CMP operator, or cwm_fn for CALL */
  int is_int;     /* 1: integer-valued (index/cond context) */
  double value;   /* CONST */
  int var;        /* VAR */
  int tensor;     /* READ */
  int nargs;
  struct cwm_expr **args;
} cwm_expr;

typedef enum { CWM_RED_NONE, CWM_RED_SUM, CWM_RED_MAX, CWM_RED_MIN } cwm_reduce;

/* One tensor of the workload: a placeholder (input) or a compute statement. */
typedef struct {
  char name[CWM_MAX_NAME];
  int is_input;
  int is_const;                            /* input marked `const`: a weight, fixed across calls */
  int ndim;                                /* spatial axes = tensor dims */
  int shape[CWM_MAX_DIMS];
  char axis[CWM_MAX_DIMS][CWM_MAX_NAME];   /* compute only */
  cwm_reduce reduce;
  int nred;
  int red_extent[CWM_MAX_DIMS];
  char red_axis[CWM_MAX_DIMS][CWM_MAX_NAME];
  cwm_expr *body;                          /* the summand for reductions */
} cwm_op;

typedef struct cwm_workload {
  char name[64];       /* suite id or user name; informative only */
  int nops;
  cwm_op ops[CWM_MAX_OPS]; /* topological order: an op reads only earlier ops */
  int output;              /* index of the output op (the last compute) */
} cwm_workload;

/* Parses the language. On error fills err with "line L, column C: expected ..." and returns NULL. */
cwm_workload *cwm_workload_parse(const char *text, cwm_err *err);
void cwm_workload_free(cwm_workload *w);
/* Canonical text: parse(print(w)) == w, and equal workloads print equal bytes. */
char *cwm_workload_print(const cwm_workload *w);
/* Workload key: canonical text hash, hex. */
void cwm_workload_key(const cwm_workload *w, char out[17]);
double cwm_workload_flops(const cwm_workload *w);
/* Every tensor read proven inside the tensor (interval arithmetic over the loop variables' ranges,
 * narrowed inside a select by its condition's "var OP const" conjuncts), every index within int
 * range; CWM_EPARSE naming the statement, the tensor and the expression otherwise. The parser runs
 * it on every statement (its message then starts with the statement's line and column). */
int cwm_workload_check_bounds(const cwm_workload *w, cwm_err *err);
int cwm_op_check_bounds(const cwm_workload *w, int op, cwm_err *err); /* one statement */
/* An expression of op's body as the language writes it. */
void cwm_expr_print(cwm_buf *b, const cwm_workload *w, const cwm_op *op, const cwm_expr *e);

/* Op library. spec is "op k=v k=v ..." as in suite.tsv columns 2 and 3, or a suite id
 * (e.g. "matmul_1024") when suite_path names the suite file, or "@file" for workload text. */
char *cwm_op_to_text(const char *spec, cwm_err *err);
cwm_workload *cwm_workload_from_spec(const char *spec, const char *suite_path, cwm_err *err);
/* Suite lookup: fills op spec for an id; returns 0 on success. */
int cwm_suite_lookup(const char *suite_path, const char *id, char *spec, size_t n, cwm_err *err);
/* Default suite path: the one set by cwm_suite_set_default_path, else the installed or source
 * tree's suite (cwm_data_file), else bench/suite.tsv (relative to the working directory). */
const char *cwm_suite_default_path(void);
/* Sets the path cwm_suite_default_path returns (NULL or "": back to the search above); copied. */
void cwm_suite_set_default_path(const char *path);

/* Expression helpers used by every later part. */
cwm_expr *cwm_expr_new(cwm_xkind kind);
cwm_expr *cwm_expr_clone(const cwm_expr *e);
void cwm_expr_free(cwm_expr *e);
int cwm_expr_equal(const cwm_expr *a, const cwm_expr *b);
/* Does expression e (transitively through op bodies) read tensor t directly? */
int cwm_expr_reads(const cwm_expr *e, int t);
int cwm_expr_has_call(const cwm_expr *e);    /* exp, tanh ... (expensive for inlining) */
int cwm_expr_has_select(const cwm_expr *e);
const char *cwm_fn_name(cwm_fn f);
int cwm_ident_valid(const char *s); /* 1 if s is a permitted identifier */
/* 1 if s is a C keyword or a library name generated or exported code uses (expf, malloc, ...). */
int cwm_c_name_taken(const char *s);

#endif

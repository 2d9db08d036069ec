/* expr.c: construction, copying and inspection of expression trees, plus the identifier
 * policy. Names from workload text end up verbatim in generated C, so cwm_ident_valid is the
 * one gate that keeps anything but a plain, non-reserved identifier out of it. */
#include "cwm/te.h"

#include <stdlib.h>
#include <string.h>

cwm_expr *cwm_expr_new(cwm_xkind kind) {
  cwm_expr *e = cwm_xcalloc(1, sizeof *e);
  e->kind = kind;
  return e;
}

cwm_expr *cwm_expr_clone(const cwm_expr *e) {
  if (!e) return NULL;
  cwm_expr *c = cwm_xmalloc(sizeof *c);
  *c = *e;
  c->args = NULL;
  if (e->nargs > 0) {
    c->args = cwm_xcalloc((size_t)e->nargs, sizeof *c->args);
    for (int i = 0; i < e->nargs; i++) c->args[i] = cwm_expr_clone(e->args[i]);
  }
  return c;
}

void cwm_expr_free(cwm_expr *e) {
  if (!e) return;
  for (int i = 0; i < e->nargs; i++) cwm_expr_free(e->args[i]);
  free(e->args);
  free(e);
}

/* Only the fields that mean something for the kind are compared, so builders that leave
 * stale values in unused fields still compare equal. */
int cwm_expr_equal(const cwm_expr *a, const cwm_expr *b) {
  if (a == b) return 1;
  if (!a || !b) return 0;
  if (a->kind != b->kind || a->is_int != b->is_int || a->nargs != b->nargs) return 0;
  switch (a->kind) {
  case CWM_X_CONST: if (a->value != b->value) return 0; break;
  case CWM_X_VAR: if (a->var != b->var) return 0; break;
  case CWM_X_READ: if (a->tensor != b->tensor) return 0; break;
  case CWM_X_BIN: case CWM_X_CMP: case CWM_X_CALL: if (a->op != b->op) return 0; break;
  default: break;
  }
  for (int i = 0; i < a->nargs; i++)
    if (!cwm_expr_equal(a->args[i], b->args[i])) return 0;
  return 1;
}

int cwm_expr_reads(const cwm_expr *e, int t) {
  if (!e) return 0;
  if (e->kind == CWM_X_READ && e->tensor == t) return 1;
  for (int i = 0; i < e->nargs; i++)
    if (cwm_expr_reads(e->args[i], t)) return 1;
  return 0;
}

/* max/min/relu cost about as much as an add, so they do not make a body "expensive". */
int cwm_expr_has_call(const cwm_expr *e) {
  if (!e) return 0;
  if (e->kind == CWM_X_CALL && e->op != CWM_FN_MAX && e->op != CWM_FN_MIN && e->op != CWM_FN_RELU)
    return 1;
  for (int i = 0; i < e->nargs; i++)
    if (cwm_expr_has_call(e->args[i])) return 1;
  return 0;
}

int cwm_expr_has_select(const cwm_expr *e) {
  if (!e) return 0;
  if (e->kind == CWM_X_SELECT) return 1;
  for (int i = 0; i < e->nargs; i++)
    if (cwm_expr_has_select(e->args[i])) return 1;
  return 0;
}

const char *cwm_fn_name(cwm_fn f) {
  static const char *const names[CWM_FN__COUNT] = {"exp", "tanh", "erf", "sqrt", "rsqrt",
                                                   "max", "min", "gelu", "relu"};
  if ((int)f < 0 || f >= CWM_FN__COUNT) return "?";
  return names[f];
}

/* C's keywords and the library names that generated kernels, exported files and the headers they
 * include (math.h, stdlib.h, string.h, stdio.h, omp.h) declare or use. */
static const char *const c_taken[] = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
    "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed",
    "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while",
    "_Alignas", "_Alignof", "_Atomic", "_Bool", "_Complex", "_Generic", "_Imaginary", "_Noreturn",
    "_Static_assert", "_Thread_local", "bool", "true", "false", "NULL", "main", "malloc", "calloc", "realloc",
    "aligned_alloc", "free", "abort", "exit", "atoi", "atof", "rand", "srand", "printf", "fprintf", "sprintf",
    "snprintf", "puts", "fputs", "fopen", "fclose", "fread", "fwrite", "stdin", "stdout", "stderr", "memcpy",
    "memset", "memmove", "memcmp", "strlen", "strcmp", "strcpy", "exp", "expf", "log", "logf", "sqrt", "sqrtf",
    "tanh", "tanhf", "erf", "erff", "fabs", "fabsf", "fmax", "fmaxf", "fmin", "fminf", "pow", "powf", "floor",
    "floorf", "ceil", "ceilf", "sin", "sinf", "cos", "cosf", "isnan", "isinf", "isfinite", "INFINITY", "NAN",
    "FLT_MAX", "DBL_MAX", "size_t", "ptrdiff_t", "int64_t", "uint64_t", "int32_t", "uint32_t",
    "omp_get_num_threads", "omp_get_thread_num", "omp_set_num_threads"};

/* the workload language's own words */
static const char *const lang_words[] = {"args", "select", "sum",   "max",    "min", "gelu",
                                         "relu", "rsqrt",  "input", "output", "omp"};

/* Object-like macros of those headers (and of gcc, whose default gnu modes define linux and unix)
 * and the keywords of GNU C and C23: a tensor named FP_NAN or EOF became a number in the kernel's
 * parameter list, one named typeof or asm a syntax error, so the kernel did not build. Exact names
 * first, then the families the C standard and POSIX reserve for these headers, so that another
 * C library's extra errno or clock names are refused as well. */
static const char *const c_macros[] = {
    "EOF", "BUFSIZ", "TMP_MAX", "FOPEN_MAX", "FILENAME_MAX", "RAND_MAX", "DECIMAL_DIG", "CLOCKS_PER_SEC",
    "FD_SETSIZE", "NFDBITS", "BIG_ENDIAN", "LITTLE_ENDIAN", "PDP_ENDIAN", "BYTE_ORDER", "SIZE_MAX", "TIME_UTC",
    "P_tmpdir", "WCONTINUED", "WEXITED", "WNOHANG", "WNOWAIT", "WSTOPPED", "WUNTRACED", "errno", "linux", "unix",
    "i386", "math_errhandling", "asm", "typeof", "typeof_unqual", "constexpr", "nullptr", "alignas", "alignof",
    "static_assert", "thread_local"};
static const char *const c_macro_prefixes[] = {"FP_",   "FLT_",   "DBL_",     "LDBL_",    "M_",       "CLOCK_",
                                               "TIMER_", "SEEK_",  "MATH_",    "HUGE_VAL", "WCHAR_",   "WINT_",
                                               "PTRDIFF_", "SIG_ATOMIC_", "EXIT_", "MB_",  "L_",       "INTMAX_",
                                               "UINTMAX_", "INTPTR_", "UINTPTR_"};

static int ends_with(const char *s, const char *t) {
  size_t n = strlen(s), m = strlen(t);
  return n >= m && strcmp(s + n - m, t) == 0;
}

static int c_macro(const char *s) {
  for (size_t i = 0; i < sizeof c_macros / sizeof c_macros[0]; i++)
    if (strcmp(s, c_macros[i]) == 0) return 1;
  for (size_t i = 0; i < sizeof c_macro_prefixes / sizeof c_macro_prefixes[0]; i++)
    if (strncmp(s, c_macro_prefixes[i], strlen(c_macro_prefixes[i])) == 0) return 1;
  /* errno.h: E and a digit or an uppercase letter; stdint.h: INT or UINT ... _MAX, _MIN, _C */
  if (s[0] == 'E' && ((s[1] >= '0' && s[1] <= '9') || (s[1] >= 'A' && s[1] <= 'Z'))) return 1;
  if ((strncmp(s, "INT", 3) == 0 || strncmp(s, "UINT", 4) == 0) &&
      (ends_with(s, "_MAX") || ends_with(s, "_MIN") || ends_with(s, "_C")))
    return 1;
  return 0;
}

int cwm_c_name_taken(const char *s) {
  for (size_t i = 0; i < sizeof c_taken / sizeof c_taken[0]; i++)
    if (strcmp(s, c_taken[i]) == 0) return 1;
  return c_macro(s);
}

/* Explicit ranges rather than <ctype.h>: the answer must not depend on the locale. */
static int is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_alnum_(int c) { return is_alpha(c) || (c >= '0' && c <= '9') || c == '_'; }

int cwm_ident_valid(const char *s) {
  if (!s || !is_alpha((unsigned char)s[0])) return 0;
  size_t n = 0;
  for (; s[n]; n++) {
    if (!is_alnum_((unsigned char)s[n])) return 0;
    if (n + 1 >= CWM_MAX_NAME) return 0;
  }
  if (strstr(s, "__")) return 0;
  if ((s[0] | 0x20) == 'c' && (s[1] | 0x20) == 'w' && (s[2] | 0x20) == 'm') return 0;
  /* every name the code generator makes up for itself has a double underscore or the cwm prefix,
   * both refused above, so a tensor or axis name can never meet one of them */
  if (cwm_c_name_taken(s)) return 0;
  for (size_t i = 0; i < sizeof lang_words / sizeof lang_words[0]; i++)
    if (strcmp(s, lang_words[i]) == 0) return 0;
  return 1;
}

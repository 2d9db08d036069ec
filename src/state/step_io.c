/* step_io.c: schedule steps as text, in Ansor's record layout (one compact JSON array per step,
 * a list as "[step,step,...]"). The parser is strict and total: any input gives either steps or
 * CWM_EPARSE naming the step (1-based position in the list), the field (1-based, the kind name is
 * field 1) or, for JSON syntax errors, the column. */
#include "cwm/state.h"

#include <cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANN_MAX 11      /* Ansor's annotation codes run 0..11 */
#define NEST_MAX 16     /* steps need depth 3; deeper text is rejected before cJSON sees it */
#define PR_PREFIX "auto_unroll_max_step$"

static const char *const kind_names[CWM_S__COUNT] = {
  "AN", "FU", "PR", "RE", "SP", "FSP", "FFSP", "SA", "CA", "CI", "CR", "CHR", "CHW", "RF"};

const char *cwm_step_kind_name(cwm_step_kind k) {
  if ((int)k < 0 || (int)k >= CWM_S__COUNT) return "?";
  return kind_names[k];
}

/* ---------------------------------------------------------------- printing */

static void put_ints(cwm_buf *b, const int *v, int n, int null_zero) {
  if (n < 0) n = 0;
  if (n > CWM_MAX_ITERS) n = CWM_MAX_ITERS;
  cwm_buf_putc(b, '[');
  for (int i = 0; i < n; i++) {
    if (i) cwm_buf_putc(b, ',');
    if (null_zero && v[i] == 0)
      cwm_buf_puts(b, "null");
    else
      cwm_buf_printf(b, "%d", v[i]);
  }
  cwm_buf_putc(b, ']');
}

/* The scope is validated on parse; escape anyway so that printing never yields invalid JSON. */
static void put_scope(cwm_buf *b, const char *s) {
  cwm_buf_putc(b, '"');
  for (size_t i = 0; i < sizeof ((cwm_step *)0)->scope && s[i]; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      cwm_buf_printf(b, "\\%c", c);
    else if (c < 0x20 || c >= 0x7f)
      cwm_buf_printf(b, "\\u%04x", c);
    else
      cwm_buf_putc(b, (char)c);
  }
  cwm_buf_putc(b, '"');
}

void cwm_step_print(const cwm_step *st, cwm_buf *out) {
  cwm_buf_printf(out, "[\"%s\",%d", cwm_step_kind_name(st->kind), st->stage);
  switch (st->kind) {
  case CWM_S_AN: cwm_buf_printf(out, ",%d,%d", st->iter, st->a); break;
  case CWM_S_FU:
  case CWM_S_RE: cwm_buf_putc(out, ','); put_ints(out, st->v, st->n, 0); break;
  case CWM_S_PR: cwm_buf_printf(out, ",%d,\"" PR_PREFIX "%d\"", st->iter, st->a); break;
  case CWM_S_SP:
    cwm_buf_printf(out, ",%d,%d,", st->iter, st->extent);
    put_ints(out, st->v, st->n > CWM_MAX_SPLIT ? CWM_MAX_SPLIT : st->n, 1);
    cwm_buf_printf(out, ",%d", st->inner_to_outer ? 1 : 0);
    break;
  case CWM_S_FSP: cwm_buf_printf(out, ",%d,%d,%d", st->iter, st->a, st->b); break;
  case CWM_S_FFSP:
    cwm_buf_printf(out, ",%d,", st->iter);
    put_ints(out, st->v, st->n, 0);
    cwm_buf_printf(out, ",%d,%d", st->a, st->b ? 1 : 0);
    break;
  case CWM_S_SA: cwm_buf_printf(out, ",%d,%d,%d", st->iter, st->a, st->b); break;
  case CWM_S_CA: cwm_buf_printf(out, ",%d,%d", st->a, st->b); break;
  case CWM_S_CI:
  case CWM_S_CR: break;
  case CWM_S_CHR:
    cwm_buf_putc(out, ',');
    put_scope(out, st->scope);
    cwm_buf_putc(out, ',');
    put_ints(out, st->v, st->n, 0);
    break;
  case CWM_S_CHW: cwm_buf_putc(out, ','); put_scope(out, st->scope); break;
  case CWM_S_RF: cwm_buf_printf(out, ",%d,%d", st->iter, st->a); break;
  default: break;
  }
  cwm_buf_putc(out, ']');
}

void cwm_steps_print(const cwm_step *steps, int n, cwm_buf *out) {
  cwm_buf_putc(out, '[');
  for (int i = 0; i < n; i++) {
    if (i) cwm_buf_putc(out, ',');
    cwm_step_print(&steps[i], out);
  }
  cwm_buf_putc(out, ']');
}

/* ----------------------------------------------------------------- parsing */

typedef struct {
  cwm_err *err;
  int index;          /* 1-based position in a list, 0 for a single step */
  const char *kind;   /* kind name once known */
} pctx;

static void where(const pctx *c, char *buf, size_t n) {
  if (c->index > 0)
    snprintf(buf, n, "step %d (%s)", c->index, c->kind ? c->kind : "?");
  else
    snprintf(buf, n, "step (%s)", c->kind ? c->kind : "?");
}

static int field_fail(const pctx *c, int field, const char *fname, const char *what) {
  char w[48];
  where(c, w, sizeof w);
  return cwm_fail(c->err, CWM_EPARSE, "%s: field %d (%s): %s", w, field, fname, what);
}

/* An integral JSON number within [lo, hi]. */
static int get_int(const pctx *c, const cJSON *j, int field, const char *fname, long lo, long hi,
                   int *out) {
  if (!cJSON_IsNumber(j)) return field_fail(c, field, fname, "expected an integer");
  double d = j->valuedouble;
  if (!isfinite(d) || d != floor(d)) return field_fail(c, field, fname, "expected an integer");
  if (d < (double)lo || d > (double)hi) {
    char what[96];
    if (hi == INT_MAX)
      snprintf(what, sizeof what, "integer out of range (must be >= %ld and fit in an int)", lo);
    else
      snprintf(what, sizeof what, "integer out of range [%ld, %ld]", lo, hi);
    return field_fail(c, field, fname, what);
  }
  *out = (int)d;
  return CWM_OK;
}

static int get_flag(const pctx *c, const cJSON *j, int field, const char *fname, int *out) {
  if (cJSON_IsBool(j)) {
    *out = cJSON_IsTrue(j) ? 1 : 0;
    return CWM_OK;
  }
  if (cJSON_IsNumber(j) && (j->valuedouble == 0.0 || j->valuedouble == 1.0)) {
    *out = j->valuedouble == 1.0;
    return CWM_OK;
  }
  return field_fail(c, field, fname, "expected 0, 1, true or false");
}

/* An array of non-negative ints (null allowed as 0 when nulls is set), at most max long. */
static int get_ints(const pctx *c, const cJSON *j, int field, const char *fname, int max,
                    int nulls, int *v, int *n) {
  const char *what = nulls ? "expected an array of integers or nulls" : "expected an array of integers";
  if (!cJSON_IsArray(j)) return field_fail(c, field, fname, what);
  int k = 0;
  for (const cJSON *e = j->child; e; e = e->next) {
    if (k >= max) {
      char m[64];
      snprintf(m, sizeof m, "array longer than %d", max);
      return field_fail(c, field, fname, m);
    }
    if (nulls && cJSON_IsNull(e)) {
      v[k++] = 0;
      continue;
    }
    if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || e->valuedouble != floor(e->valuedouble))
      return field_fail(c, field, fname, what);
    if (e->valuedouble < 0 || e->valuedouble > (double)INT_MAX) {
      char m[80];
      snprintf(m, sizeof m, "element %d out of range (must be >= 0 and fit in an int)", k + 1);
      return field_fail(c, field, fname, m);
    }
    v[k++] = (int)e->valuedouble;
  }
  *n = k;
  return CWM_OK;
}

static int get_scope(const pctx *c, const cJSON *j, int field, char *out, size_t cap) {
  if (!cJSON_IsString(j) || !j->valuestring) return field_fail(c, field, "scope", "expected a string");
  const char *s = j->valuestring;
  size_t len = strlen(s);
  if (len >= cap) return field_fail(c, field, "scope", "longer than 15 characters");
  for (size_t i = 0; i < len; i++) {
    char ch = s[i];
    int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
             ch == '_' || ch == '.';
    if (!ok) return field_fail(c, field, "scope", "may contain only letters, digits, '_' and '.'");
  }
  memcpy(out, s, len + 1);
  return CWM_OK;
}

static int get_pragma(const pctx *c, const cJSON *j, int field, int *out) {
  static const char *const what = "expected \"" PR_PREFIX "N\" with N a non-negative integer";
  if (!cJSON_IsString(j) || !j->valuestring) return field_fail(c, field, "pragma", what);
  const char *s = j->valuestring;
  size_t pl = strlen(PR_PREFIX);
  if (strncmp(s, PR_PREFIX, pl) != 0) return field_fail(c, field, "pragma", what);
  s += pl;
  if (!*s) return field_fail(c, field, "pragma", what);
  long long v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return field_fail(c, field, "pragma", what);
    v = v * 10 + (*s - '0');
    if (v > INT_MAX) return field_fail(c, field, "pragma", "auto_unroll_max_step does not fit in an int");
  }
  *out = (int)v;
  return CWM_OK;
}

/* Field descriptors per kind: the letters say what each field after the kind name is.
 *  s stage, i iter, e extent, a/b int >= 0 into a/b, o int (any) into b, n annotation code,
 *  L ids into v, S SP lengths into v (nulls), f flag into inner_to_outer, g flag into b,
 *  p pragma into a, c scope. */
typedef struct { const char *fmt; const char *names[6]; } kind_desc;
static const kind_desc descs[CWM_S__COUNT] = {
  [CWM_S_AN] = {"sin", {"stage", "iter", "annotation"}},
  [CWM_S_FU] = {"sL", {"stage", "fused_ids"}},
  [CWM_S_PR] = {"sip", {"stage", "iter", "pragma"}},
  [CWM_S_RE] = {"sL", {"stage", "order"}},
  [CWM_S_SP] = {"sieSf", {"stage", "iter", "extent", "lengths", "inner_to_outer"}},
  [CWM_S_FSP] = {"siab", {"stage", "iter", "src_step_id", "n_split"}},
  [CWM_S_FFSP] = {"siLag", {"stage", "iter", "src_step_ids", "level", "factor_or_nparts"}},
  [CWM_S_SA] = {"siao", {"stage", "iter", "factor", "offset"}},
  [CWM_S_CA] = {"sab", {"stage", "target_stage", "target_iter"}},
  [CWM_S_CI] = {"s", {"stage"}},
  [CWM_S_CR] = {"s", {"stage"}},
  [CWM_S_CHR] = {"scL", {"stage", "scope", "reader_stage_ids"}},
  [CWM_S_CHW] = {"sc", {"stage", "scope"}},
  [CWM_S_RF] = {"sia", {"stage", "iter", "factor_iter_id"}},
};

static int step_from_json(const cJSON *j, int index, cwm_step *st, cwm_err *err) {
  pctx c = {err, index, NULL};
  memset(st, 0, sizeof *st);
  char w[48];
  if (!cJSON_IsArray(j)) {
    where(&c, w, sizeof w);
    return cwm_fail(err, CWM_EPARSE, "%s: expected an array [\"KIND\", stage, ...]", w);
  }
  const cJSON *e = j->child;
  if (!cJSON_IsString(e) || !e->valuestring) return field_fail(&c, 1, "kind", "expected a step kind string");
  int kind = -1;
  for (int k = 0; k < CWM_S__COUNT; k++)
    if (strcmp(e->valuestring, kind_names[k]) == 0) kind = k;
  if (kind < 0) return field_fail(&c, 1, "kind", "unknown step kind (expected AN FU PR RE SP FSP FFSP SA CA CI CR CHR CHW RF)");
  c.kind = kind_names[kind];
  st->kind = (cwm_step_kind)kind;
  const kind_desc *d = &descs[kind];
  int nf = (int)strlen(d->fmt);
  int field = 1;
  for (int f = 0; f < nf; f++) {
    e = e->next;
    field = f + 2;
    const char *fname = d->names[f];
    if (!e) {
      char m[64];
      snprintf(m, sizeof m, "missing (%s takes %d fields after the kind)", c.kind, nf);
      return field_fail(&c, field, fname, m);
    }
    int rc = CWM_OK;
    switch (d->fmt[f]) {
    case 's': rc = get_int(&c, e, field, fname, 0, INT_MAX, &st->stage); break;
    case 'i': rc = get_int(&c, e, field, fname, 0, INT_MAX, &st->iter); break;
    case 'e': rc = get_int(&c, e, field, fname, 0, INT_MAX, &st->extent); break;
    case 'a': rc = get_int(&c, e, field, fname, 0, INT_MAX, &st->a); break;
    case 'b': rc = get_int(&c, e, field, fname, 0, INT_MAX, &st->b); break;
    case 'o': rc = get_int(&c, e, field, fname, INT_MIN, INT_MAX, &st->b); break;
    case 'n': rc = get_int(&c, e, field, fname, 0, ANN_MAX, &st->a); break;
    case 'L': rc = get_ints(&c, e, field, fname, CWM_MAX_ITERS, 0, st->v, &st->n); break;
    case 'S': rc = get_ints(&c, e, field, fname, CWM_MAX_SPLIT, 1, st->v, &st->n); break;
    case 'f': rc = get_flag(&c, e, field, fname, &st->inner_to_outer); break;
    case 'g': rc = get_flag(&c, e, field, fname, &st->b); break;
    case 'p': rc = get_pragma(&c, e, field, &st->a); break;
    case 'c': rc = get_scope(&c, e, field, st->scope, sizeof st->scope); break;
    default: rc = cwm_fail(err, CWM_EINTERNAL, "step descriptor");
    }
    if (rc) {
      memset(st, 0, sizeof *st);
      return rc;
    }
  }
  if (e && e->next) {
    char m[64];
    snprintf(m, sizeof m, "unexpected (%s takes %d fields after the kind)", c.kind, nf);
    memset(st, 0, sizeof *st);
    return field_fail(&c, nf + 2, "extra", m);
  }
  return CWM_OK;
}

/* Rejects nesting deeper than NEST_MAX before cJSON recurses into it. */
static int check_depth(const char *text, cwm_err *err) {
  long col = cwm_json_too_deep(text, NEST_MAX);
  if (col) return cwm_fail(err, CWM_EPARSE, "column %ld: nested too deep (more than %d levels)", col, NEST_MAX);
  return CWM_OK;
}

static cJSON *parse_json(const char *text, cwm_err *err) {
  if (!text) {
    cwm_fail(err, CWM_EPARSE, "column 1: no text");
    return NULL;
  }
  if (check_depth(text, err)) return NULL;
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithOpts(text, &end, 1);
  if (!j) {
    long col = end && end >= text ? (long)(end - text) + 1 : 1;
    const char *at = end && *end ? "" : " (unexpected end of text)";
    cwm_fail(err, CWM_EPARSE, "column %ld: JSON syntax error%s", col, at);
  }
  return j;
}

int cwm_step_parse(const char *text, cwm_step *st, cwm_err *err) {
  cJSON *j = parse_json(text, err);
  if (!j) {
    memset(st, 0, sizeof *st);
    return CWM_EPARSE;
  }
  int rc = step_from_json(j, 0, st, err);
  cJSON_Delete(j);
  return rc;
}

int cwm_steps_parse(const char *text, cwm_step **steps, int *n, cwm_err *err) {
  *steps = NULL;
  *n = 0;
  cJSON *j = parse_json(text, err);
  if (!j) return CWM_EPARSE;
  if (!cJSON_IsArray(j)) {
    cJSON_Delete(j);
    return cwm_fail(err, CWM_EPARSE, "column 1: expected a list of steps [[\"KIND\", ...], ...]");
  }
  int count = cJSON_GetArraySize(j);
  if (count > CWM_MAX_STEPS) {
    cJSON_Delete(j);
    return cwm_fail(err, CWM_EPARSE, "step list has %d steps, more than %d", count, CWM_MAX_STEPS);
  }
  cwm_step *out = cwm_xcalloc((size_t)(count ? count : 1), sizeof *out);
  int k = 0;
  for (const cJSON *e = j->child; e; e = e->next, k++) {
    int rc = step_from_json(e, k + 1, &out[k], err);
    if (rc) {
      free(out);
      cJSON_Delete(j);
      return rc;
    }
  }
  cJSON_Delete(j);
  *steps = out;
  *n = k;
  return CWM_OK;
}

cwm_step cwm_step_of(cwm_step_kind k, int stage) {
  cwm_step st;
  memset(&st, 0, sizeof st);
  st.kind = k;
  st.stage = stage;
  return st;
}

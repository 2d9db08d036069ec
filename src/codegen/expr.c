/* expr.c: names and values in generated code: buffer and loop-variable names, the value of a loop
 * node or a linear form, and body expressions, as C (float, or double in the reference kernel) or
 * as the text of cwm_state_print. */
#include "lower_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lower_sanitize(const char *in, char *out, size_t n) {
  size_t j = 0;
  for (size_t i = 0; in[i] && j + 3 < n; i++) {
    char ch = in[i];
    if (ch == '.') { out[j++] = '_'; out[j++] = '_'; }
    else if (ch == '@') out[j++] = '_';
    else out[j++] = ch;
  }
  out[j] = 0;
}

void lower_buf_name(ctx_t *c, int tid, char *out, size_t n) {
  const cwm_op *op = tensor_op(c, tid);
  if (c->text) snprintf(out, n, "%s", op->name);
  else lower_sanitize(op->name, out, n);
  /* the kernel's parameter for a rewritten input holds the converted copy */
  if (!c->text && tid >= 0 && tid < CWM_MAX_OPS && c->rw[tid]) {
    size_t len = strlen(out);
    snprintf(out + len, n - len, "__packed");
  }
}

void lower_var_name(ctx_t *c, int p, int node, char *out, size_t n) {
  for (int i = 0; i < c->nov; i++)
    if (c->ov_stage == p && c->ov_node[i] == node) {
      snprintf(out, n, "%ld", c->ov_val[i]);
      return;
    }
  char nm[256];
  cwm_node_name(c->s, p, node, nm, sizeof nm);
  if (c->text) {
    snprintf(out, n, "%s", nm);
    return;
  }
  char san[256];
  size_t j = 0;
  for (size_t i = 0; nm[i] && j + 2 < sizeof san && j < 40; i++)
    san[j++] = (nm[i] == '.' || nm[i] == '@') ? '_' : nm[i];
  san[j] = 0;
  snprintf(out, n, "%s__%d_%d", san, p, node);
}

void lower_emit_node_value(ctx_t *c, int p, int node, cwm_buf *o, int depth) {
  const cwm_stage *st = &c->L[p].st;
  const cwm_node *n = &st->nodes[node];
  char nm[300];
  if (depth > 64) { cwm_buf_puts(o, "0"); return; }
  if (n->extent == 1 && (is_leaf(st, node) || !n->nparts)) {
    cwm_buf_puts(o, "0"); /* a loop or fused component of extent 1 is always 0 */
  } else if (is_leaf(st, node)) {
    lower_var_name(c, p, node, nm, sizeof nm);
    cwm_buf_puts(o, nm);
  } else if (n->nparts) {
    int first = 1;
    for (int k = 0; k < n->nparts; k++) {
      long stride = lower_split_stride(st, n, k);
      const cwm_node *pk = &st->nodes[n->parts[k]];
      if (pk->extent == 1 && (is_leaf(st, n->parts[k]) || !pk->nparts) && k < n->nparts - 1) continue;
      if (!first) cwm_buf_puts(o, " + ");
      first = 0;
      if (stride != 1) {
        cwm_buf_puts(o, "(");
        lower_emit_node_value(c, p, n->parts[k], o, depth + 1);
        cwm_buf_printf(o, ")*%ld", stride);
      } else {
        lower_emit_node_value(c, p, n->parts[k], o, depth + 1);
      }
    }
  } else if (n->fused >= 0) {
    long stride = lower_fuse_stride(st, n->fused, node);
    const cwm_node *f = &st->nodes[n->fused];
    int outermost = f->sub[0] == node;
    cwm_buf_puts(o, "((");
    lower_emit_node_value(c, p, n->fused, o, depth + 1);
    cwm_buf_puts(o, ")");
    if (stride != 1) cwm_buf_printf(o, " / %ld", stride);
    if (!outermost) cwm_buf_printf(o, " %% %d", n->extent);
    cwm_buf_puts(o, ")");
  } else {
    cwm_buf_puts(o, "0");
  }
}

void lower_emit_lin(ctx_t *c, const lin_t *l, cwm_buf *o) {
  if (l->c0 || !l->n) cwm_buf_printf(o, "%ld", l->c0);
  for (int i = 0; i < l->n; i++) {
    const atom_t *a = &l->a[i];
    char nm[300];
    lower_var_name(c, a->stage, a->node, nm, sizeof nm);
    if (i || l->c0) cwm_buf_puts(o, " + ");
    if (l->coef[i] != 1) cwm_buf_printf(o, "%ld*", l->coef[i]);
    if (a->div == 1 && !a->mod) cwm_buf_puts(o, nm);
    else {
      cwm_buf_printf(o, "(%s", nm);
      if (a->div != 1) cwm_buf_printf(o, " / %ld", a->div);
      if (a->mod) cwm_buf_printf(o, " %% %ld", a->mod);
      cwm_buf_puts(o, ")");
    }
  }
}

/* Value of root r of stage p: local part only (for local buffers) or global. */
char *lower_root_value(ctx_t *c, int p, int r, int global) {
  const cwm_stage *st = &c->L[p].st;
  cwm_buf o;
  cwm_buf_init(&o);
  int node = -1;
  for (int i = 0; i < st->nnodes; i++)
    if (st->nodes[i].root == r) { node = i; break; }
  int based = global && c->L[p].local && r < body_op(c, p)->ndim && (c->L[p].base[r].n || c->L[p].base[r].c0);
  if (based) {
    cwm_buf_puts(&o, "(");
    lower_emit_lin(c, &c->L[p].base[r], &o);
    cwm_buf_puts(&o, " + ");
  }
  if (node >= 0) lower_emit_node_value(c, p, node, &o, 0);
  else cwm_buf_puts(&o, "0");
  if (based) cwm_buf_puts(&o, ")");
  /* parenthesise compound values: they are substituted into larger index expressions */
  if (!based && strpbrk(o.s, " +*/%")) {
    cwm_buf w;
    cwm_buf_init(&w);
    cwm_buf_printf(&w, "(%s)", o.s);
    cwm_buf_free(&o);
    return cwm_buf_take(&w);
  }
  return cwm_buf_take(&o);
}

void lower_emit_float(ctx_t *c, double v, cwm_buf *o) {
  char t[64];
  snprintf(t, sizeof t, "%.9g", v);
  if (c->text) { cwm_buf_puts(o, t); return; }
  if (!strchr(t, '.') && !strchr(t, 'e') && !strchr(t, 'n')) strcat(t, ".0");
  if (strchr(t, 'n')) snprintf(t, sizeof t, "%s", v > 0 ? "INFINITY" : v < 0 ? "(-INFINITY)" : "NAN");
  cwm_buf_puts(o, t);
  if (!c->ref && !strchr(t, 'I') && !strchr(t, 'N')) cwm_buf_puts(o, "f");
}

void lower_emit_read(ctx_t *c, const cwm_expr *e, char **env, cwm_buf *o, int depth) {
  int nidx = e->nargs;
  char *idx[CWM_MAX_DIMS + 1];
  for (int i = 0; i < nidx && i <= CWM_MAX_DIMS; i++) {
    cwm_buf t;
    cwm_buf_init(&t);
    lower_emit_expr(c, e->args[i], env, &t, depth + 1);
    idx[i] = cwm_buf_take(&t);
  }
  int q = state_stage_of_tid(c->s, e->tensor);
  if (q >= 0 && c->s->stages[q].loc == CWM_LOC_INLINE && depth < 32) {
    char *env2[CWM_MAX_DIMS * 2];
    for (int i = 0; i < nidx; i++) {
      size_t n = strlen(idx[i]) + 3;
      env2[i] = cwm_xmalloc(n);
      snprintf(env2[i], n, "(%s)", idx[i]);
    }
    cwm_buf_puts(o, "(");
    lower_emit_expr(c, body_op(c, q)->body, env2, o, depth + 1);
    cwm_buf_puts(o, ")");
    for (int i = 0; i < nidx; i++) free(env2[i]);
  } else if (e->tensor >= 0 && e->tensor < CWM_MAX_OPS && c->rw[e->tensor]) {
    /* a rewritten input: indexed by the loops its layout follows */
    const rewrite_t *rw = c->rw[e->tensor];
    char nm[128];
    lower_buf_name(c, e->tensor, nm, sizeof nm);
    if (rw->stage != c->cur_stage && !c->failed) {
      c->failed = 1;
      cwm_fail(c->err, CWM_EINTERNAL, "rewritten input %s read outside stage %d", nm, rw->stage);
    }
    cwm_buf_printf(o, "%s[", nm);
    for (int d = 0; d < rw->ndim; d++) {
      if (c->text) {
        cwm_buf_puts(o, d ? ", " : "");
        lower_emit_lin(c, &rw->val[d], o);
      } else {
        cwm_buf_puts(o, d ? " + (" : "(");
        lower_emit_lin(c, &rw->val[d], o);
        cwm_buf_puts(o, ")");
        if (rw->stride[d] != 1) cwm_buf_printf(o, "*%ld", rw->stride[d]);
      }
    }
    if (!rw->ndim) cwm_buf_puts(o, "0");
    cwm_buf_puts(o, "]");
  } else {
    char nm[128];
    lower_buf_name(c, e->tensor, nm, sizeof nm);
    const cwm_op *op = tensor_op(c, e->tensor);
    if (c->ref && !c->text) cwm_buf_puts(o, "(double)");
    if (c->text) {
      cwm_buf_printf(o, "%s[", nm);
      for (int i = 0; i < nidx; i++) cwm_buf_printf(o, "%s%s", i ? ", " : "", idx[i]);
      cwm_buf_puts(o, "]");
    } else {
      int local = q >= 0 && c->L[q].local;
      cwm_buf_printf(o, "%s[", nm);
      for (int i = 0; i < nidx; i++) {
        long stride = 1;
        for (int j = i + 1; j < nidx; j++) stride *= local ? c->L[q].dims[j] : op->shape[j];
        if (i) cwm_buf_puts(o, " + ");
        cwm_buf_printf(o, "(%s", idx[i]);
        if (local && (c->L[q].base[i].n || c->L[q].base[i].c0)) {
          cwm_buf_puts(o, " - (");
          lower_emit_lin(c, &c->L[q].base[i], o);
          cwm_buf_puts(o, ")");
        }
        cwm_buf_puts(o, ")");
        if (stride != 1) cwm_buf_printf(o, "*%ld", stride);
      }
      if (!nidx) cwm_buf_puts(o, "0");
      cwm_buf_puts(o, "]");
    }
  }
  for (int i = 0; i < nidx; i++) free(idx[i]);
}

const char *lower_fn_c(ctx_t *c, int fn) {
  static const char *f32[] = {"cwm_expf", "tanhf", "cwm_erff", "sqrtf", "rsqrt", "cwm_fmaxf", "cwm_fminf", "gelu", "relu"};
  if (!c->ref && (fn == CWM_FN_EXP || fn == CWM_FN_ERF || fn == CWM_FN_MAX || fn == CWM_FN_MIN)) c->used_math = 1;
  static const char *f64[] = {"exp", "tanh", "erf", "sqrt", "rsqrt", "fmax", "fmin", "gelu", "relu"};
  return (c->ref ? f64 : f32)[fn];
}

/* "pre a)" for a unary operator (mid NULL), "pre a mid b)" for a binary one */
static void emit_op(ctx_t *c, const cwm_expr *e, char **env, cwm_buf *o, int depth, const char *pre,
                    const char *mid) {
  cwm_buf_puts(o, pre);
  lower_emit_expr(c, e->args[0], env, o, depth + 1);
  if (mid) {
    cwm_buf_puts(o, mid);
    lower_emit_expr(c, e->args[1], env, o, depth + 1);
  }
  cwm_buf_puts(o, ")");
}

void lower_emit_expr(ctx_t *c, const cwm_expr *e, char **env, cwm_buf *o, int depth) {
  if (depth > 200) { cwm_buf_puts(o, "0"); return; }
  switch (e->kind) {
  case CWM_X_CONST:
    if (e->is_int) cwm_buf_printf(o, "%ld", (long)e->value);
    else lower_emit_float(c, e->value, o);
    break;
  case CWM_X_VAR: cwm_buf_puts(o, env[e->var]); break;
  case CWM_X_READ: lower_emit_read(c, e, env, o, depth); break;
  case CWM_X_BIN: {
    char op[4] = {' ', (char)e->op, ' ', 0};
    /* a / b as a * (1 / b): the compiler hoists 1 / b out of the loops b does not vary in (the
     * softmax's normalisation, a mean's count), and a vector division costs what 10-20
     * multiplications do; the result differs from a / b by at most an ulp */
    if (e->op == '/' && !e->is_int && !c->ref && !c->text) {
      emit_op(c, e, env, o, depth, "(", " * (1.0f / ");
      cwm_buf_puts(o, ")");
    } else {
      emit_op(c, e, env, o, depth, "(", op);
    }
    break;
  }
  case CWM_X_NEG: emit_op(c, e, env, o, depth, "(-", NULL); break;
  case CWM_X_CALL: {
    const char *half = c->ref ? "0.5" : "0.5f", *one = c->ref ? "1.0" : "1.0f";
    if (c->text) {
      cwm_buf_printf(o, "%s(", cwm_fn_name((cwm_fn)e->op));
      for (int i = 0; i < e->nargs; i++) {
        if (i) cwm_buf_puts(o, ", ");
        lower_emit_expr(c, e->args[i], env, o, depth + 1);
      }
      cwm_buf_puts(o, ")");
    } else if (e->op == CWM_FN_GELU || e->op == CWM_FN_RELU || e->op == CWM_FN_RSQRT) {
      /* statement expression: the argument is evaluated once */
      int t = c->tmp++;
      const char *ty = c->ref ? "double" : "float";
      cwm_buf_printf(o, "({ %s x__%d = ", ty, t);
      lower_emit_expr(c, e->args[0], env, o, depth + 1);
      cwm_buf_puts(o, "; ");
      if (e->op == CWM_FN_GELU)
        cwm_buf_printf(o, "%s * x__%d * (%s + %s(x__%d * %s));", half, t, one, lower_fn_c(c, CWM_FN_ERF), t,
                       c->ref ? "0.70710678118654752" : "0.707106781f");
      else if (e->op == CWM_FN_RELU)
        cwm_buf_printf(o, "x__%d > 0 ? x__%d : %s;", t, t, c->ref ? "0.0" : "0.0f");
      else
        cwm_buf_printf(o, "%s / %s(x__%d);", one, c->ref ? "sqrt" : "sqrtf", t);
      cwm_buf_puts(o, " })");
    } else {
      cwm_buf_printf(o, "%s(", lower_fn_c(c, e->op));
      for (int i = 0; i < e->nargs; i++) {
        if (i) cwm_buf_puts(o, ", ");
        lower_emit_expr(c, e->args[i], env, o, depth + 1);
      }
      cwm_buf_puts(o, ")");
    }
    break;
  }
  case CWM_X_SELECT:
    cwm_buf_puts(o, "(");
    lower_emit_expr(c, e->args[0], env, o, depth + 1);
    cwm_buf_puts(o, " ? ");
    lower_emit_expr(c, e->args[1], env, o, depth + 1);
    cwm_buf_puts(o, " : ");
    lower_emit_expr(c, e->args[2], env, o, depth + 1);
    cwm_buf_puts(o, ")");
    break;
  case CWM_X_CMP: {
    const char *op = e->op == '<' ? "<" : e->op == 'l' ? "<=" : e->op == '>' ? ">" : e->op == 'g' ? ">="
                   : e->op == '=' ? "==" : "!=";
    cwm_buf_puts(o, "(");
    lower_emit_expr(c, e->args[0], env, o, depth + 1);
    cwm_buf_printf(o, " %s ", op);
    lower_emit_expr(c, e->args[1], env, o, depth + 1);
    cwm_buf_puts(o, ")");
    break;
  }
  case CWM_X_AND:
  case CWM_X_OR: emit_op(c, e, env, o, depth, "(", e->kind == CWM_X_AND ? " && " : " || "); break;
  case CWM_X_NOT: emit_op(c, e, env, o, depth, "(!", NULL); break;
  }
}

/* codegen.c: cwm_codegen, a complete state to a C kernel: the typed function, its args[] entry,
 * the argument table and the conversions of packed weights, named by a hash of the code. Also
 * the host's vector width and the kernel's helpers. */
#include "lower_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The longest reduction of the workload: the reference check's tolerance grows with it. */
static long max_reduction(const cwm_workload *w) {
  long m = 1;
  for (int i = 0; i < w->nops; i++) {
    long r = 1;
    for (int k = 0; k < w->ops[i].nred; k++) r *= w->ops[i].red_extent[k];
    if (r > m) m = r;
  }
  return m;
}

int cwm_codegen_host_lanes(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return 16;
#endif
  return 8;
}

/* The caller's target width, 0 until set: the sampler's defaults, the hand schedules and every
 * kernel generated without options must agree on it, and none of them has options of its own. */
static int g_lanes;

void cwm_codegen_set_lanes(int lanes) { g_lanes = lanes == 8 || lanes == 16 ? lanes : 0; }

int cwm_codegen_lanes(void) { return g_lanes ? g_lanes : cwm_codegen_host_lanes(); }

/* The kernel's body into c->b: inputs converted on every call (runtime packs), intermediate
 * buffers at root, every root stage's nest, then the frees. */
static void emit_body(ctx_t *c) {
  const cwm_state *s = c->s;
  const cwm_workload *w = cwm_dag_workload(s->dag);
  for (int t = 0; t < w->nops && t < CWM_MAX_OPS && !c->ref; t++)
    if (c->rw[t] && c->rw[t]->runtime) lower_emit_runtime_pack(c, c->rw[t], &w->ops[t], c->b);
  for (int p = 0; p < s->nstages; p++) {
    if (cwm_stage_is_placeholder(s, p) || is_output(s, p) || s->stages[p].loc != CWM_LOC_ROOT) continue;
    const cwm_op *op = tensor_op(c, s->stages[p].tid);
    long size = 1;
    for (int d = 0; d < op->ndim; d++) size *= op->shape[d];
    char nm[128];
    lower_buf_name(c, s->stages[p].tid, nm, sizeof nm);
    lower_line(c, 1, "float *restrict %s = (float *)aligned_alloc(64, %ld);", nm, ((size * 4 + 63) / 64) * 64 + LOWER_ROOT_SLACK * 4);
    lower_line(c, 1, "if (!%s) abort();", nm);
  }
  for (int p = 0; p < s->nstages; p++) {
    if (cwm_stage_is_placeholder(s, p) || s->stages[p].loc != CWM_LOC_ROOT) continue;
    if (c->ref) lower_emit_stage_ref(c, p, 1);
    else lower_emit_stage(c, p, 1);
  }
  for (int p = 0; p < s->nstages; p++) {
    if (cwm_stage_is_placeholder(s, p) || is_output(s, p) || s->stages[p].loc != CWM_LOC_ROOT) continue;
    char nm[128];
    lower_buf_name(c, s->stages[p].tid, nm, sizeof nm);
    lower_line(c, 1, "free(%s);", nm);
  }
  for (int t = 0; t < w->nops && t < CWM_MAX_OPS && !c->ref; t++)
    if (c->rw[t] && c->rw[t]->runtime) {
      char nm[128];
      lower_buf_name(c, t, nm, sizeof nm);
      lower_line(c, 1, "free(%s);", nm);
    }
}

/* The argument table: inputs in workload order, then the output; a weight the kernel takes in a
 * rewritten layout gets its length in that layout and the layout's description. */
static void fill_args(ctx_t *c, cwm_kernel *k) {
  const cwm_workload *w = cwm_dag_workload(c->s->dag);
  for (int i = 0; i < w->nops; i++)
    if (w->ops[i].is_input && k->nargs < CWM_MAX_ARGS - 1) k->arg_tid[k->nargs++] = i;
  k->arg_tid[k->nargs++] = w->output;
  for (int a = 0; a < k->nargs; a++) {
    const cwm_op *op = &w->ops[k->arg_tid[a]];
    long n = 1;
    for (int d = 0; d < op->ndim; d++) n *= op->shape[d];
    k->arg_len[a] = n;
    snprintf(k->arg_name[a], CWM_MAX_NAME, "%s", op->name);
    const rewrite_t *rw = a < k->nargs - 1 && k->arg_tid[a] < CWM_MAX_OPS ? c->rw[k->arg_tid[a]] : NULL;
    if (rw && !rw->runtime) {
      k->src_len[a] = n;
      k->arg_len[a] = rw->size;
      k->npacked++;
      lower_layout_text(c->s, rw, op, k->layout[a], sizeof k->layout[a]);
    }
  }
  k->red_len = max_reduction(w);
}

/* k->fn and k->entry: the caller's name, or one that hashes the loop nest and the conversions
 * (they fix the layouts it reads). */
static void name_kernel(ctx_t *c, const cwm_codegen_opts *o, const cwm_buf *body, cwm_kernel *k) {
  const cwm_workload *w = cwm_dag_workload(c->s->dag);
  cwm_buf packs;
  cwm_buf_init(&packs);
  for (int a = 0; a < k->nargs; a++)
    if (k->src_len[a]) lower_emit_pack(c, c->rw[k->arg_tid[a]], &w->ops[k->arg_tid[a]], "PACK", &packs);
  char key[17];
  uint64_t h = cwm_hash64(body->s ? body->s : "", body->len);
  if (packs.len) h ^= cwm_hash64(packs.s, packs.len) * 0x9e3779b97f4a7c15ULL;
  cwm_buf_free(&packs);
  cwm_hash_hex(h ^ (c->ref ? 0x5bd1e995ULL : 0), key);
  if (o && o->fn_name) snprintf(k->fn, sizeof k->fn, "%s", o->fn_name);
  else snprintf(k->fn, sizeof k->fn, "cwm_%s_%s", c->ref ? "ref" : "k", key);
  snprintf(k->entry, sizeof k->entry, "%s_entry", k->fn);
}

/* The conversions into the layouts the kernel reads, run once per weight, not per call: one
 * function per packed argument and pack_entry calling them all. */
static void emit_packs(ctx_t *c, cwm_kernel *k, cwm_buf *b) {
  const cwm_workload *w = cwm_dag_workload(c->s->dag);
  for (int a = 0; a < k->nargs; a++) {
    if (!k->src_len[a]) continue;
    snprintf(k->pack_fn[a], sizeof k->pack_fn[a], "%s_pack_%s", k->fn, k->arg_name[a]);
    cwm_buf_printf(b, "/* %s: %s %s */\n", k->pack_fn[a], k->arg_name[a], k->layout[a]);
    lower_emit_pack(c, c->rw[k->arg_tid[a]], &w->ops[k->arg_tid[a]], k->pack_fn[a], b);
  }
  snprintf(k->pack_entry, sizeof k->pack_entry, "%s_pack_entry", k->fn);
  cwm_buf_printf(b, "void %s(float *const *src, float *const *dst) {", k->pack_entry);
  for (int a = 0; a < k->nargs; a++)
    if (k->src_len[a]) cwm_buf_printf(b, " %s(src[%d], dst[%d]);", k->pack_fn[a], a, a);
  cwm_buf_puts(b, " }\n");
}

int cwm_codegen(const cwm_state *s, const cwm_codegen_opts *o, cwm_kernel *k, cwm_err *err) {
  memset(k, 0, sizeof *k);
  if (!cwm_state_is_complete(s))
    return cwm_fail(err, CWM_ESTEP, "the state is a sketch: some split lengths are unknown");
  const cwm_workload *w = cwm_dag_workload(s->dag);
  ctx_t *c = cwm_xcalloc(1, sizeof *c);
  cwm_buf body, b;
  cwm_buf_init(&body);
  cwm_buf_init(&b);
  c->s = s;
  c->ref = o && o->reference;
  c->max_lanes = o && o->vec_lanes ? o->vec_lanes : cwm_codegen_lanes();
  c->vw = 8;
  c->b = &body;
  c->err = err;
  lower_all(c);
  if (c->ref)
    for (int p = 0; p < s->nstages; p++)
      if (!cwm_stage_is_placeholder(s, p) && (s->stages[p].loc != CWM_LOC_ROOT || s->nsteps)) {
        lower_ctx_free(c);
        cwm_buf_free(&body);
        return cwm_fail(err, CWM_EINTERNAL, "reference code needs the initial state");
      }
  emit_body(c);
  fill_args(c, k);
  if (c->failed) {
    lower_ctx_free(c);
    cwm_buf_free(&body);
    return err && err->code ? (int)err->code : CWM_EINTERNAL;
  }
  name_kernel(c, o, &body, k);
  char wname[sizeof w->name];
  cwm_codegen_safe_name(w->name, wname, sizeof wname); /* names come from files: never raw into C */
  cwm_buf_printf(&b, "/* %s: workload %s, %d steps (generated by cwm %s) */\n", k->fn, wname, s->nsteps, CWM_VERSION);
  lower_put_defs(&b, c->used_vec, c->used_tr8, c->used_math);
  cwm_buf_printf(&b, "void %s(", k->fn);
  for (int a = 0; a < k->nargs; a++)
    cwm_buf_printf(&b, "%s%sfloat *restrict %s%s", a ? ", " : "", a < k->nargs - 1 ? "const " : "", k->arg_name[a],
                   k->src_len[a] ? "__packed" : "");
  cwm_buf_puts(&b, ") {\n");
  cwm_buf_puts(&b, body.s ? body.s : "");
  cwm_buf_puts(&b, "}\n");
  cwm_buf_printf(&b, "void %s(float *const *args) { %s(", k->entry, k->fn);
  for (int a = 0; a < k->nargs; a++) cwm_buf_printf(&b, "%sargs[%d]", a ? ", " : "", a);
  cwm_buf_puts(&b, "); }\n");
  if (k->npacked) emit_packs(c, k, &b);
  k->body = cwm_buf_take(&b);
  cwm_buf_free(&body);
  lower_ctx_free(c);
  return 0;
}

void cwm_kernel_free(cwm_kernel *k) {
  free(k->body);
  k->body = NULL;
}

void cwm_codegen_safe_name(const char *s, char *out, size_t n) {
  if (!n) return;
  size_t i = 0;
  for (; s && s[i] && i + 1 < n; i++) {
    char c = s[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
             c == '+' || c == '-' || c == '=';
    out[i] = ok ? c : '_';
  }
  out[i] = 0;
}

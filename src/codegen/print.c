/* print.c: cwm_state_print, the TensorIR-like text of a state: the placeholders (with the layout a
 * rewritten input is read in), then the walk that writes the C code, in text mode. */
#include "lower_internal.h"

char *cwm_state_print(const cwm_state *s) {
  ctx_t *c = cwm_xcalloc(1, sizeof *c);
  cwm_buf b;
  cwm_buf_init(&b);
  c->s = s;
  c->text = 1;
  c->b = &b;
  lower_all(c);
  for (int p = 0; p < s->nstages; p++) {
    const cwm_op *op = tensor_op(c, s->stages[p].tid);
    if (!cwm_stage_is_placeholder(s, p)) continue;
    cwm_buf_printf(&b, "placeholder %s[", op->name);
    for (int d = 0; d < op->ndim; d++) cwm_buf_printf(&b, "%s%d", d ? ", " : "", op->shape[d]);
    cwm_buf_puts(&b, op->is_const ? "] const" : "]");
    int t = s->stages[p].tid;
    const rewrite_t *rw = t >= 0 && t < CWM_MAX_OPS ? c->rw[t] : NULL;
    if (rw) {
      /* the reads below index this layout: (part:extent, ...) of the reading stage's loops */
      cwm_buf_puts(&b, " layout(");
      for (int d = 0; d < rw->ndim; d++) {
        char nm[256];
        cwm_node_name(s, rw->stage, rw->node[d], nm, sizeof nm);
        cwm_buf_printf(&b, "%s%s:%ld", d ? ", " : "", nm, rw->extent[d]);
      }
      cwm_buf_puts(&b, ")");
    }
    cwm_buf_puts(&b, "\n");
  }
  for (int p = 0; p < s->nstages; p++) {
    if (cwm_stage_is_placeholder(s, p)) continue;
    const cwm_op *op = tensor_op(c, s->stages[p].tid);
    if (s->stages[p].loc == CWM_LOC_INLINE) {
      lower_line(c, 0, "inline %s", op->name);
      continue;
    }
    if (s->stages[p].loc != CWM_LOC_ROOT) continue;
    if (!is_output(s, p)) lower_emit_alloc_and_stage(c, p, 0);
    else lower_emit_stage(c, p, 0);
  }
  lower_ctx_free(c);
  return cwm_buf_take(&b);
}

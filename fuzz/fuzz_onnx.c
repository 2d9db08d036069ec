/* fuzz_onnx.c: libFuzzer target for the ONNX importer: any bytes either load into a graph that
 * infers (every live node's values then have known shapes and a supported op) or fail with a
 * message that starts with the path or names a node; nothing leaks or crashes either way. */
#include <stdlib.h>
#include <string.h>

#include "cwm/graph.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
  cwm_err e = {0};
  cwm_graph *g = cwm_onnx_parse(data, n, "f.onnx", &e);
  if (!g) {
    if (e.code != CWM_EPARSE || strncmp(e.msg, "f.onnx: ", 8)) abort();
    return 0;
  }
  if (cwm_graph_infer(g, &e)) {
    if (e.code != CWM_EPARSE || strncmp(e.msg, "node '", 6)) abort();
  } else {
    for (int i = 0; i < g->nnodes; i++) {
      const cwm_gnode *nd = &g->nodes[i];
      if (nd->dead) continue;
      if (!cwm_graph_op_supported(nd->op_type)) abort();
      for (int k = 0; k < nd->nin; k++)
        if (nd->in[k] >= 0 && !g->values[nd->in[k]].shape_known) abort();
      for (int k = 0; k < nd->nout; k++)
        if (!g->values[nd->out[k]].shape_known) abort();
    }
    for (int k = 0; k < g->noutputs; k++)
      if (g->values[g->outputs[k]].nuses < 1) abort();
  }
  cwm_graph_free(g);
  return 0;
}

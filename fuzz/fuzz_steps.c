/* fuzz_steps.c: libFuzzer target for the step-list parser and for step validation: any parsed
 * list is replayed on a small conv workload; failures must be errors, never crashes, and a list
 * that replays must print and lower without trouble. */
#include <stdlib.h>
#include <string.h>

#include "cwm/codegen.h"

static cwm_dag *g_dag;

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
  cwm_err e;
  if (!g_dag) {
    cwm_workload *w = cwm_workload_from_spec("conv2d C=3 H=9 W=9 K=4 R=3 S=3 stride=1 pad=1 bias=1 act=relu", NULL, &e);
    if (!w) abort();
    g_dag = cwm_dag_new(w, &e);
    cwm_workload_free(w);
  }
  char *s = malloc(n + 1);
  memcpy(s, data, n);
  s[n] = 0;
  cwm_step *steps = NULL;
  int ns = 0;
  if (cwm_steps_parse(s, &steps, &ns, &e) == 0) {
    cwm_state *st = NULL;
    if (cwm_state_replay(g_dag, steps, ns, &st, NULL, &e) == 0) {
      char *t = cwm_state_print(st);
      free(t);
      cwm_kernel k;
      if (cwm_codegen(st, NULL, &k, &e) == 0) cwm_kernel_free(&k);
      cwm_state_free(st);
    }
    free(steps);
  }
  free(s);
  return 0;
}

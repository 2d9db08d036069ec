/* fuzz_workload.c: libFuzzer target for the workload language parser and printer: any text either
 * fails with an error or parses to a workload whose canonical print parses back identically,
 * and whose DAG, initial state, state print and C (kernel and reference) build without trouble. */
#include <stdlib.h>
#include <string.h>

#include "cwm/codegen.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
  char *s = malloc(n + 1);
  memcpy(s, data, n);
  s[n] = 0;
  cwm_err e;
  cwm_workload *w = cwm_workload_parse(s, &e);
  if (w) {
    char *t = cwm_workload_print(w);
    cwm_workload *w2 = cwm_workload_parse(t, &e);
    if (!w2) abort();
    char *t2 = cwm_workload_print(w2);
    if (strcmp(t, t2)) abort();
    free(t2);
    free(t);
    cwm_dag *d = cwm_dag_new(w, &e);
    if (d) {
      cwm_state *st = cwm_state_init(d);
      char *p = cwm_state_print(st);
      free(p);
      cwm_kernel k;
      cwm_codegen_opts ref = {.reference = 1};
      if (cwm_codegen(st, NULL, &k, &e) == 0) cwm_kernel_free(&k);
      if (cwm_codegen(st, &ref, &k, &e) == 0) cwm_kernel_free(&k);
      cwm_state_free(st);
      cwm_dag_free(d);
    }
    cwm_workload_free(w2);
    cwm_workload_free(w);
  }
  free(s);
  return 0;
}

/* fuzz_workload.c: libFuzzer target for the workload language parser and printer: any text either
 * fails with an error or parses to a workload whose canonical print parses back identically. */
#include <stdlib.h>
#include <string.h>

#include "cwm/te.h"

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
    cwm_workload_free(w2);
    cwm_workload_free(w);
  }
  free(s);
  return 0;
}

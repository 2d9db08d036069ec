/* fuzz_opspec.c: libFuzzer target for the op-spec parser (suite columns 2 and 3). */
#include <stdlib.h>
#include <string.h>

#include "cwm/te.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
  if (n > 4096) return 0;
  char *s = malloc(n + 1);
  memcpy(s, data, n);
  s[n] = 0;
  cwm_err e;
  char *t = cwm_op_to_text(s, &e);
  if (t) {
    cwm_workload *w = cwm_workload_parse(t, &e);
    if (!w) abort(); /* the op library must produce valid text */
    cwm_workload_free(w);
    free(t);
  }
  free(s);
  return 0;
}

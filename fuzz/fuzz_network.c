/* fuzz_network.c: libFuzzer target for network files (networks/README.md): any bytes either
 * parse into subgraphs whose workloads are valid, or fail with a "path:line:col:" message. */
#include <stdlib.h>
#include <string.h>

#include "cwm/scheduler.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
  if (n > 8192) return 0;
  char *s = malloc(n + 1);
  memcpy(s, data, n);
  s[n] = 0;
  cwm_err e = {0};
  cwm_network *net = cwm_network_parse(s, "f.tsv", &e);
  if (net) {
    if (net->n < 1) abort();
    for (int i = 0; i < net->n; i++)
      if (!net->sub[i].w || !(net->sub[i].weight > 0) || strcmp(net->sub[i].w->name, net->sub[i].name)) abort();
    cwm_network_free(net);
  } else if (e.code != CWM_EPARSE || strncmp(e.msg, "f.tsv", 5)) {
    abort();
  }
  free(s);
  return 0;
}

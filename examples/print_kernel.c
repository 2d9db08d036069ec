/* print_kernel.c: a program built against an installed cwm (pkg-config --cflags --libs cwm). It
 * reads an op spec or a suite id, takes the initial schedule of its loop nest and prints the C
 * kernel cwm generates for it.
 *   cc print_kernel.c $(pkg-config --cflags --libs cwm) -o print_kernel
 *   ./print_kernel "dense M=8 N=16 K=4 bias=1 act=relu" */
#include <stdio.h>

#include "cwm/codegen.h"
#include "cwm/te.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s SPEC   (an op spec in quotes, or a suite id)\n", argv[0]);
    return 2;
  }
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_from_spec(argv[1], NULL, &e);
  cwm_dag *d = w ? cwm_dag_new(w, &e) : NULL;
  if (!d) {
    fprintf(stderr, "%s\n", e.msg);
    return e.code ? (int)e.code : 1;
  }
  cwm_state *s = cwm_state_init(d);
  cwm_kernel k;
  int rc = cwm_codegen(s, NULL, &k, &e);
  if (rc == 0) {
    printf("/* %s: %d arguments */\n%s", w->name, k.nargs, k.body);
    cwm_kernel_free(&k);
  } else {
    fprintf(stderr, "%s\n", e.msg);
  }
  cwm_state_free(s);
  cwm_dag_free(d);
  cwm_workload_free(w);
  return rc;
}

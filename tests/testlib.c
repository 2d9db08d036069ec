#include "testlib.h"
int test_failures, test_checks;
int test_done(void) {
  fprintf(stderr, "%d checks, %d failures\n", test_checks, test_failures);
  return test_failures ? 1 : 0;
}

cwm_measure_opts test_measure_opts(double min_repeat_ms) {
  cwm_measure_opts mo;
  cwm_measure_opts_default(&mo);
  mo.repeats = 1;
  mo.min_repeat_ms = min_repeat_ms;
  return mo;
}

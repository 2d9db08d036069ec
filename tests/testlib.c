#include "testlib.h"
int test_failures, test_checks;
int test_done(void) {
  fprintf(stderr, "%d checks, %d failures\n", test_checks, test_failures);
  return test_failures ? 1 : 0;
}

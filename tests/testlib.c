#include "testlib.h"

#include <stdlib.h>
#include <string.h>

#include "cwm/codegen.h"
#include "cwm/te.h"

int test_failures, test_checks;
int test_done(void) {
  fprintf(stderr, "%d checks, %d failures\n", test_checks, test_failures);
  return test_failures ? 1 : 0;
}

/* ctest sets CWM_SUITE (and CWM_VEC_LANES for test_layout_lanes8/16) as a user would for cwm; the
 * library reads no environment, so the tests pass them on the way src/cli/env.c does. Run before
 * main so that every test program, whatever its main does first, sees the same settings. */
__attribute__((constructor)) static void test_env_apply(void) {
  const char *v = getenv("CWM_SUITE");
  if (v && *v) cwm_suite_set_default_path(v);
  v = getenv("CWM_VEC_LANES");
  if (v && (!strcmp(v, "8") || !strcmp(v, "16"))) cwm_codegen_set_lanes(atoi(v));
}

void test_env_measure(cwm_measure_opts *mo) {
  const char *v = getenv("CWM_CACHE_DIR");
  if (v && *v) mo->cache_dir = v;
  if ((v = getenv("CC")) && *v) mo->cc = v;
}

cwm_measure_opts test_measure_opts(double min_repeat_ms) {
  cwm_measure_opts mo;
  cwm_measure_opts_default(&mo);
  test_env_measure(&mo);
  mo.repeats = 1;
  mo.min_repeat_ms = min_repeat_ms;
  mo.guard_pages = 1; /* a kernel that reads past an argument faults */
  return mo;
}

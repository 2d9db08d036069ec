/* testlib.h: a minimal assertion harness. CHECK records a failure and continues;
 * the test's main returns test_done(). */
#ifndef CWM_TESTLIB_H
#define CWM_TESTLIB_H
#include <stdio.h>
extern int test_failures, test_checks;
#define CHECK(cond) do { test_checks++; if (!(cond)) { test_failures++; \
  fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { test_checks++; if (!(cond)) { test_failures++; \
  fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
  fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
int test_done(void);

#include "cwm/measure.h"
/* The measuring protocol of tests: one repeat of at least min_repeat_ms (0: one call). */
cwm_measure_opts test_measure_opts(double min_repeat_ms);
/* CWM_CACHE_DIR and CC from the test's environment into measure options just defaulted. */
void test_env_measure(cwm_measure_opts *mo);
#endif

/* fuzz_record.c: libFuzzer target for the tuning-log line parser. */
#include <stdlib.h>
#include <string.h>

#include "cwm/record.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
  char *s = malloc(n + 1);
  memcpy(s, data, n);
  s[n] = 0;
  cwm_record r;
  cwm_err e;
  cwm_record_init(&r);
  if (cwm_record_parse(s, &r, &e) == 0) {
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_record_to_json(&r, &b);
    cwm_record r2;
    cwm_record_init(&r2);
    if (cwm_record_parse(b.s, &r2, &e)) abort(); /* what we print we read */
    cwm_record_free(&r2);
    cwm_buf_free(&b);
  }
  cwm_record_free(&r);
  free(s);
  return 0;
}

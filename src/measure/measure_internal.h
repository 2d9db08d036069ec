/* measure_internal.h: what the builder and runner share inside src/measure. */
#ifndef CWM_MEASURE_INTERNAL_H
#define CWM_MEASURE_INTERNAL_H

#include "cwm/measure.h"

/* The cache directory, created 0700 and checked to be the user's own and writable. */
int cache_prepare(const char *dir, cwm_err *err);
/* Whether the object at so is a valid entry: present, and matching the seal written when it was
 * installed (its use time is refreshed). */
int cache_hit(const char *so);
/* The seal of the object at so (its size and content hash), into text of SEAL_MAX bytes; -1 when
 * it cannot be read. */
#define SEAL_MAX 128
int cache_seal_text(const char *so, char *text, size_t n);
/* Writes the seal of an object just installed at so. */
void cache_write_seal(const char *so, const char *text);
/* Removes compiler temporaries over an hour old and, when the directory holds more than max_mb
 * MB, the least recently used objects and reference outputs until it holds 80% of that. */
void cache_tidy(const char *dir, long max_mb);

#endif

/* fuzz_cliargs.c: libFuzzer target for the command-line syntax (src/cli/args.c): the input, split
 * at newlines into at most 64 arguments, is parsed against an option table like cwm tune's. A
 * parse either fails with a usage error or leaves every value pointing into the arguments, and
 * each option's value is the one the arguments give it. (scripts/fuzz.sh runs it with
 * -close_fd_mask=3: usage errors are expected, their text is not the point.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
  char *s = malloc(n + 1);
  memcpy(s, data, n);
  s[n] = 0;
  char *argv[66];
  int argc = 0;
  argv[argc++] = "tune";
  for (char *p = s, *next; p && argc < 65; p = next) {
    next = strchr(p, '\n');
    if (next) *next++ = 0;
    argv[argc++] = p;
  }
  argv[argc] = NULL;
  cli_opt o[] = {{"--workload", 1, NULL}, {"--trials", 1, NULL}, {"--log", 1, NULL}, {"--quiet", 0, NULL},
                 {"--model", 1, NULL},    {"--seed", 1, NULL},   {"--export", 1, NULL}};
  int nopt = (int)(sizeof o / sizeof o[0]);
  int rc = cli_parse(argc, argv, o, nopt, "usage: tune\n");
  if (rc == 0) {
    for (int k = 0; k < nopt; k++) {
      const char *v = cli_get(o, nopt, o[k].name);
      if (v != o[k].value) abort();
      if (!v) continue;
      if (!o[k].has_value && strcmp(v, "1")) abort();
      /* a value lies inside one of the arguments */
      int inside = 0;
      for (int i = 1; i < argc && !inside; i++) inside = v >= argv[i] && v <= argv[i] + strlen(argv[i]);
      if (o[k].has_value && !inside) abort();
    }
  } else if (rc != -1 && rc != CWM_EUSAGE) {
    abort();
  }
  free(s);
  return 0;
}

/* args.c: the command line's syntax, apart from what the options mean: "--name value" and
 * "--name=value" against a command's option table, and usage errors. Nothing here reads a file
 * or the environment (it is fuzzed alone, fuzz/fuzz_cliargs.c). */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_parse(int argc, char **argv, cli_opt *opts, int nopts, const char *help) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(help, stdout);
      return -1;
    }
    const char *eq = strncmp(argv[i], "--", 2) ? NULL : strchr(argv[i], '=');
    size_t nlen = eq ? (size_t)(eq - argv[i]) : strlen(argv[i]);
    int found = 0;
    for (int k = 0; k < nopts && !found; k++) {
      if (strlen(opts[k].name) != nlen || strncmp(argv[i], opts[k].name, nlen)) continue;
      found = 1;
      if (opts[k].has_value) {
        if (eq) {
          opts[k].value = eq + 1;
        } else {
          if (i + 1 >= argc) return cli_usage(argv[0], help, "option %s needs a value", argv[i]);
          opts[k].value = argv[++i];
        }
      } else {
        if (eq) return cli_usage(argv[0], help, "option %.*s takes no value", (int)nlen, argv[i]);
        opts[k].value = "1";
      }
    }
    if (!found) return cli_usage(argv[0], help, "unknown option '%s'", argv[i]);
  }
  return 0;
}

const char *cli_get(const cli_opt *opts, int nopts, const char *name) {
  for (int k = 0; k < nopts; k++)
    if (!strcmp(opts[k].name, name)) return opts[k].value;
  return NULL;
}

int cli_usage(const char *cmd, const char *help, const char *fmt, ...) {
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cwm %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
  }
  fprintf(fmt ? stderr : stdout, "%s", help);
  return fmt ? CWM_EUSAGE : 0;
}

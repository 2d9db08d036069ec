/* args.c: the command line's syntax, apart from what the options mean: "--name value" and
 * "--name=value" against a command's option table, and usage errors. Nothing here reads a file
 * or the environment (it is fuzzed alone, fuzz/fuzz_cliargs.c). */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_opt_is(const char *arg, const char *name, const char **inline_value) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) || (arg[n] && arg[n] != '=')) return 0;
  *inline_value = arg[n] ? arg + n + 1 : NULL;
  return 1;
}

int cli_parse(int argc, char **argv, cli_opt *opts, int nopts, const char *help) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(help, stdout);
      return -1;
    }
    const char *val = NULL;
    int k = 0;
    while (k < nopts && !cli_opt_is(argv[i], opts[k].name, &val)) k++;
    if (k == nopts) return cli_usage(argv[0], help, "unknown option '%s'", argv[i]);
    if (!opts[k].has_value) {
      if (val) return cli_usage(argv[0], help, "option %s takes no value", opts[k].name);
      val = "1";
    } else if (!val) {
      if (i + 1 >= argc) return cli_usage(argv[0], help, "option %s needs a value", argv[i]);
      val = argv[++i];
    }
    opts[k].value = val;
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

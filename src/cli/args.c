/* args.c: the command line's syntax, apart from what the options mean: "--name value" and
 * "--name=value" against a command's option table, "--" ending the options, global options taken
 * out of argv, and usage errors (one line and a pointer to the command's --help). Nothing here
 * reads a file or the environment (it is fuzzed alone, fuzz/fuzz_cliargs.c). */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void (*cli_json_requested)(void);

/* the command main dispatched to ("tune"), and the one the last cli_parse reported under
 * ("dataset measure"): usage errors name it */
static const char *g_command;
static char g_name[64];

void cli_set_command(const char *cmd) {
  g_command = cmd;
  snprintf(g_name, sizeof g_name, "%s", cmd ? cmd : "");
}

const char *cli_command(void) { return g_name; }

int cli_opt_is(const char *arg, const char *name, const char **inline_value) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) || (arg[n] && arg[n] != '=')) return 0;
  *inline_value = arg[n] ? arg + n + 1 : NULL;
  return 1;
}

/* The name a command reports under: main's command, with a subcommand word (dataset's, train's
 * and eval's argv[0] is theirs: "measure", "all", "score") after it. */
static void set_name(const char *arg0) {
  if (!g_command || !arg0) {
    snprintf(g_name, sizeof g_name, "%s", g_command ? g_command : arg0 ? arg0 : "");
    return;
  }
  int word = *arg0 && strcmp(arg0, g_command) != 0;
  for (const char *p = arg0; *p && word; p++) word = (*p >= 'a' && *p <= 'z') || *p == '-';
  if (word) snprintf(g_name, sizeof g_name, "%s %s", g_command, arg0);
  else snprintf(g_name, sizeof g_name, "%s", g_command);
}

static int has_opt(const cli_opt *opts, int nopts, const char *name) {
  for (int k = 0; k < nopts; k++)
    if (!strcmp(opts[k].name, name)) return 1;
  return 0;
}

int cli_parse_operands(int argc, char **argv, cli_opt *opts, int nopts, const char *help, char **operands, int max,
                       int *noperands) {
  set_name(argc > 0 ? argv[0] : NULL);
  if (noperands) *noperands = 0;
  /* --json (progress as JSON lines) where the command has no --json of its own; first, so that
   * the errors below come out as JSON too */
  if (!has_opt(opts, nopts, "--json"))
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
      if (!strcmp(argv[i], "--json") && cli_json_requested) cli_json_requested();
  int ended = 0, n = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!ended && !strcmp(a, "--")) {
      ended = 1;
      continue;
    }
    if (ended || a[0] != '-' || !a[1]) { /* an operand ("-" is one: standard input by custom) */
      if (n >= max) {
        return max ? cli_usage(NULL, help, "too many arguments ('%s')", a)
                   : cli_usage(NULL, help, "unexpected argument '%s'", a);
      }
      operands[n++] = argv[i];
      if (noperands) *noperands = n;
      continue;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(help, stdout);
      return -1;
    }
    if (!strcmp(a, "--list-options")) {
      for (int k = 0; k < nopts; k++) printf("%s%s\n", opts[k].name, opts[k].has_value ? "=" : "");
      return -1;
    }
    const char *val = NULL;
    int k = 0;
    while (k < nopts && !cli_opt_is(a, opts[k].name, &val)) k++;
    if (k == nopts) {
      if (!strcmp(a, "--json")) continue; /* taken above */
      return cli_usage(NULL, help, "unknown option '%s'", a);
    }
    if (!opts[k].has_value) {
      if (val) return cli_usage(NULL, help, "option %s takes no value", opts[k].name);
      val = "1";
    } else if (!val) {
      if (i + 1 >= argc) return cli_usage(NULL, help, "option %s needs a value", a);
      val = argv[++i];
    }
    opts[k].value = val;
  }
  return 0;
}

int cli_parse(int argc, char **argv, cli_opt *opts, int nopts, const char *help) {
  return cli_parse_operands(argc, argv, opts, nopts, help, NULL, 0, NULL);
}

const char *cli_get(const cli_opt *opts, int nopts, const char *name) {
  for (int k = 0; k < nopts; k++)
    if (!strcmp(opts[k].name, name)) return opts[k].value;
  return NULL;
}

int cli_take_option(int *argc, char **argv, const char *name, int has_value, const char **value) {
  int out = 1, taken = 0, rc = 0;
  for (int i = 1; i < *argc; i++) {
    const char *val = NULL;
    if (!strcmp(argv[i], "--")) { /* the rest are operands: kept as they are */
      while (i < *argc) argv[out++] = argv[i++];
      break;
    }
    if (rc || !cli_opt_is(argv[i], name, &val)) {
      argv[out++] = argv[i];
      continue;
    }
    if (!has_value) {
      if (val) rc = cli_usage("", NULL, "option %s takes no value", name);
      val = "1";
    } else if (!val) {
      if (i + 1 >= *argc) {
        rc = cli_usage("", NULL, "option %s needs a value", name);
        continue;
      }
      val = argv[++i];
    }
    *value = val;
    taken++;
  }
  *argc = out;
  argv[out] = NULL;
  return rc ? -1 : taken;
}

int cli_usage(const char *cmd, const char *help, const char *fmt, ...) {
  if (!fmt) {
    fputs(help, stdout);
    return 0;
  }
  if (!cmd) cmd = g_name;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "cwm%s%s: ", *cmd ? " " : "", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "; see 'cwm%s%s --help'\n", *cmd ? " " : "", cmd);
  va_end(ap);
  return CWM_EUSAGE;
}

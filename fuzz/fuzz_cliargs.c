/* fuzz_cliargs.c: libFuzzer target for the command-line syntax (src/cli/args.c): the input, split
 * at newlines into at most 64 arguments, first has a valued and a flag global option taken out
 * (cli_take_option, as main does with --cache-dir and --mixed-targets), then is parsed against an
 * option table like cwm tune's with up to two operands (cli_parse_operands). Taking leaves the
 * other arguments in their order, ends at "--" and points the value into an argument; a parse
 * either fails with a usage error or leaves every value and operand pointing into the arguments,
 * and each option's value is the one the arguments give it. (scripts/fuzz.sh runs it with
 * -close_fd_mask=3: usage errors are expected, their text is not the point.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int inside(const char *v, char *const *argv, int argc) {
  for (int i = 1; i < argc; i++)
    if (v >= argv[i] && v <= argv[i] + strlen(argv[i])) return 1;
  return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
  char *s = malloc(n + 1);
  memcpy(s, data, n);
  s[n] = 0;
  char *argv[66], *orig[66];
  int argc = 0;
  argv[argc++] = "tune";
  for (char *p = s, *next; p && argc < 65; p = next) {
    next = strchr(p, '\n');
    if (next) *next++ = 0;
    argv[argc++] = p;
  }
  argv[argc] = NULL;
  int n0 = argc;
  memcpy(orig, argv, sizeof argv);

  /* the global options: what stays is the rest, in order; a value lies inside an argument */
  const char *dir = NULL, *flag = NULL;
  int t1 = cli_take_option(&argc, argv, "--cache-dir", 1, &dir);
  int t2 = t1 < 0 ? -1 : cli_take_option(&argc, argv, "--mixed-targets", 0, &flag);
  if (argc < 1 || argc > n0 || argv[argc] != NULL || argv[0] != orig[0]) abort();
  for (int i = 1, j = 1; i < argc; i++, j++) {
    while (j < n0 && orig[j] != argv[i]) j++;
    if (j == n0) abort();
  }
  if (t1 > 0 && (!dir || !inside(dir, orig, n0))) abort();
  if (t2 > 0 && (!flag || (strcmp(flag, "1") && !inside(flag, orig, n0)))) abort();
  if (t1 >= 0 && t2 >= 0) {
    int dd = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) dd |= !strcmp(argv[i], "--mixed-targets");
    if (dd) abort(); /* every one before "--" was taken */
  }

  cli_opt o[] = {{"--workload", 1, NULL}, {"--trials", 1, NULL}, {"--log", 1, NULL}, {"--quiet", 0, NULL},
                 {"--model", 1, NULL},    {"--seed", 1, NULL},   {"--export", 1, NULL}, {"-o", 1, NULL}};
  int nopt = (int)(sizeof o / sizeof o[0]);
  char *ops[2] = {NULL, NULL};
  int nops = -1;
  int rc = cli_parse_operands(argc, argv, o, nopt, "usage: tune\n", ops, 2, &nops);
  if (rc == 0) {
    if (nops < 0 || nops > 2) abort();
    for (int i = 0; i < nops; i++)
      if (!inside(ops[i], argv, argc)) abort();
    for (int k = 0; k < nopt; k++) {
      const char *v = cli_get(o, nopt, o[k].name);
      if (v != o[k].value) abort();
      if (!v) continue;
      if (!o[k].has_value && strcmp(v, "1")) abort();
      /* a value lies inside one of the arguments */
      if (o[k].has_value && !inside(v, argv, argc)) abort();
    }
  } else if (rc != -1 && rc != CWM_EUSAGE) {
    abort();
  }
  free(s);
  return 0;
}

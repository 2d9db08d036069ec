/* test_exitcodes.c: errors a user can act on, through the built `cwm` binary (next to this test
 * or $CWM_BIN): a missing compiler, a missing XGBoost or OpenBLAS, an unwritable log, a model
 * file of another version, a workload the search cannot schedule, a malformed workload, a step
 * that does not fit and a bad command line each end the command with their own exit code (the
 * cwm_status numbers) and one clear line on stderr, and `cwm --help` documents every one of those
 * codes. The command-line conventions too: a usage error is one line naming the command's --help,
 * "--" ends the options, every option of every command's table and every global option and
 * environment variable is in the help, and --json turns stderr into JSON lines. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>

#include "cwm/record.h"
#include "cwm/te.h"
#include "cwm/util.h"
#include "testlib.h"

static char g_bin[PATH_MAX];
static char g_dir[64];

static void find_bin(void) {
  const char *b = getenv("CWM_BIN");
  if (b && *b) {
    snprintf(g_bin, sizeof g_bin, "%s", b);
    return;
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0) n = 0;
  self[n] = 0;
  char *slash = strrchr(self, '/');
  if (slash) *slash = 0;
  snprintf(g_bin, sizeof g_bin, "%.4000s/cwm", slash ? self : ".");
}

/* Runs cwm with argv (NULL-terminated) and the extra environment assignments env ("K=V", NULL
 * terminated; "K=" unsets K); returns the exit status (or 128 + signal) and fills err with
 * stderr and out with stdout (each at most cap bytes). */
static int run_cwm(const char *const *env, const char *const *argv, char *err, size_t cap, char *out) {
  char ef[128], of[128];
  snprintf(ef, sizeof ef, "%s/stderr", g_dir);
  snprintf(of, sizeof of, "%s/stdout", g_dir);
  pid_t pid = fork();
  if (pid == 0) {
    int fe = open(ef, O_WRONLY | O_CREAT | O_TRUNC, 0644), fo = open(of, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fe < 0 || fo < 0) _exit(126);
    dup2(fe, 2);
    dup2(fo, 1);
    /* under AddressSanitizer (the sanitizer build runs this test too) a leak report would replace
     * the exit status under test: error paths that return without freeing are not this test's
     * subject */
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    for (int i = 0; env && env[i]; i++) {
      char kv[1024];
      snprintf(kv, sizeof kv, "%s", env[i]);
      char *eq = strchr(kv, '=');
      if (!eq) continue;
      *eq = 0;
      if (eq[1]) setenv(kv, eq + 1, 1);
      else unsetenv(kv);
    }
    execv(g_bin, (char *const *)argv);
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  for (int k = 0; k < 2; k++) {
    char *dst = k ? out : err;
    if (!dst) continue;
    dst[0] = 0;
    FILE *f = fopen(k ? of : ef, "r");
    if (!f) continue;
    size_t n = fread(dst, 1, cap - 1, f);
    dst[n] = 0;
    fclose(f);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* The case: exit code `code`, exactly one line on stderr that starts with "cwm" and contains
 * `needle` (case-insensitive); a usage error's line ends with where the command's help is. */
static void expect(const char *what, const char *const *env, const char *const *argv, int code, const char *needle) {
  char err[16384], out[8192];
  int rc = run_cwm(env, argv, err, sizeof err, out);
  CHECKF(rc == code, "%s: exit %d, expected %d; stderr: %s", what, rc, code, err);
  CHECKF(count_lines(err) == 1 && !strncmp(err, "cwm", 3), "%s: expected one line on stderr, got: %s", what, err);
  if (code == CWM_EUSAGE) CHECKF(strstr(err, "; see 'cwm") && strstr(err, " --help'\n"), "%s: no help named: %s", what, err);
  CHECKF(strcasestr(err, needle) != NULL, "%s: the message does not say '%s': %s", what, needle, err);
  fprintf(stderr, "exitcodes: %-28s -> %d: %s", what, rc, err);
}

static void write_bytes(const char *path, const unsigned char *d, size_t n) {
  cwm_err e = {0};
  CHECKF(cwm_write_file_atomic(path, d, n, &e) == 0, "%s", e.msg);
}

static void put_le(unsigned char *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}


/* A usage error: exit 2, one line "cwm CMD: ...needle...; see 'cwm CMD --help'" (cmd "" for cwm
 * itself) and nothing on stdout: not the help text. */
static void usage_case(const char *const *argv, const char *cmd, const char *needle) {
  char err[16384], out[16384], head[96], tail[96];
  int rc = run_cwm(NULL, argv, err, sizeof err, out);
  snprintf(head, sizeof head, "cwm%s%s: ", *cmd ? " " : "", cmd);
  snprintf(tail, sizeof tail, "; see 'cwm%s%s --help'\n", *cmd ? " " : "", cmd);
  size_t n = strlen(err), t = strlen(tail);
  CHECKF(rc == CWM_EUSAGE && count_lines(err) == 1 && !strncmp(err, head, strlen(head)) && n > t &&
             !strcmp(err + n - t, tail) && strstr(err, needle) && !out[0],
         "usage error of '%s %s': exit %d, stderr: %s stdout: %.200s", argv[1], argv[2] ? argv[2] : "", rc, err, out);
}

static void check_usage_errors(const char *W) {
  usage_case((const char *const[]){"cwm", "tune", "--no-such-option", NULL}, "tune", "unknown option '--no-such-option'");
  usage_case((const char *const[]){"cwm", "tune", NULL}, "tune", "--workload is required");
  usage_case((const char *const[]){"cwm", "sample", "--workload", W, "--count", "x", NULL}, "sample", "not an integer");
  usage_case((const char *const[]){"cwm", "dataset", "measure", "--bogus", NULL}, "dataset measure", "--bogus");
  usage_case((const char *const[]){"cwm", "train", "all", "--bogus", NULL}, "train all", "--bogus");
  usage_case((const char *const[]){"cwm", "train", NULL}, "train", "which part");
  usage_case((const char *const[]){"cwm", "eval", "score", NULL}, "eval", "--records");
  usage_case((const char *const[]){"cwm", "show", "stray", NULL}, "show", "unexpected argument 'stray'");
  usage_case((const char *const[]){"cwm", "no-such-command", NULL}, "", "unknown command");
  usage_case((const char *const[]){"cwm", "tune", "--cache-max-mb", NULL}, "", "--cache-max-mb needs a value");
  usage_case((const char *const[]){"cwm", "tune", "--worker-timeout", "0", NULL}, "", "--worker-timeout");
  /* "--" ends the options: accepted at the end, and what follows is an operand, not an option */
  char err[16384], out[16384];
  int rc = run_cwm(NULL, (const char *const[]){"cwm", "show", "--workload", W, "--", NULL}, err, sizeof err, out);
  CHECKF(rc == 0 && strstr(out, "# workload"), "show ... --: exit %d: %s", rc, err);
  rc = run_cwm(NULL, (const char *const[]){"cwm", "show", "--workload=dense M=8 N=8 K=8", "--", NULL}, err, sizeof err, out);
  CHECKF(rc == 0 && strstr(out, "# workload"), "show --workload=... --: exit %d: %s", rc, err);
  usage_case((const char *const[]){"cwm", "show", "--workload", W, "--", "--suite", NULL}, "show",
             "unexpected argument '--suite'");
  /* cwm alone: the commands, not the whole help */
  rc = run_cwm(NULL, (const char *const[]){"cwm", NULL}, err, sizeof err, out);
  CHECKF(rc == CWM_EUSAGE && strstr(err, "  tune ") && strstr(err, "see 'cwm --help'") && !strstr(err, "exit codes:") &&
             !strstr(err, "CWM_CACHE_DIR"),
         "cwm alone: exit %d: %s", rc, err);
  fprintf(stderr, "exitcodes: usage errors are one line naming the command's --help; -- accepted\n");
}

/* The subcommands a help text lists: "  name  what" lines, and "cwm CMD a|b" usages. */
static int subcommands(const char *help, const char *cmd, char subs[][32], int max) {
  int n = 0;
  char pat[64];
  snprintf(pat, sizeof pat, "cwm %s ", cmd);
  for (const char *p = help; *p && n < max;) {
    const char *nl = strchr(p, '\n'), *end = nl ? nl : p + strlen(p);
    const char *w = NULL;
    if (p[0] == ' ' && p[1] == ' ' && islower((unsigned char)p[2])) w = p + 2;
    for (const char *q = w ? w : p; w || (q = strstr(q, pat)) != NULL; q += strlen(pat)) {
      if (q >= end) break;
      const char *a = w ? w : q + strlen(pat);
      for (;;) {
        size_t l = 0;
        while (islower((unsigned char)a[l]) || a[l] == '-') l++;
        int dup = 0;
        for (int k = 0; k < n; k++) dup |= strlen(subs[k]) == l && !strncmp(subs[k], a, l);
        if (l && l < 32 && !dup && n < max && (w ? a[l] == ' ' && a[l + 1] == ' ' : 1)) {
          memcpy(subs[n], a, l);
          subs[n++][l] = 0;
        }
        if (w || a[l] != '|') break;
        a += l + 1;
      }
      if (w) break;
    }
    p = nl ? nl + 1 : end;
  }
  return n;
}

/* Every option of the command's table (cwm CMD [SUB] --list-options) is in its --help; a command
 * with subcommands: each of them. */
static void audit_help(const char *cmd, const char *sub) {
  static char out[32768], help[65536], err[8192];
  int rc = run_cwm(NULL, (const char *const[]){"cwm", cmd, sub ? sub : "--list-options", sub ? "--list-options" : NULL, NULL},
                   err, sizeof err, out);
  char opts[32768];
  snprintf(opts, sizeof opts, "%s", out);
  int hrc = run_cwm(NULL, (const char *const[]){"cwm", cmd, sub ? sub : "--help", sub ? "--help" : NULL, NULL}, err,
                    sizeof err, help);
  CHECKF(hrc == 0 && help[0], "cwm %s %s --help: exit %d: %s", cmd, sub ? sub : "", hrc, err);
  if (rc == 0) {
    int n = 0;
    for (char *line = strtok(opts, "\n"); line; line = strtok(NULL, "\n"), n++) {
      line[strcspn(line, "=")] = 0;
      CHECKF(strstr(help, line) != NULL, "cwm %s%s%s --help does not name its option %s", cmd, sub ? " " : "",
             sub ? sub : "", line);
    }
    return;
  }
  if (sub) { /* a leaf with no option table (dataset stats FILE): its usage names no option */
    char *nl = strchr(help, '\n');
    if (nl) *nl = 0;
    CHECKF(!strstr(help, " --"), "cwm %s %s: --list-options refused, but its usage has options: %s", cmd, sub, help);
    return;
  }
  char subs[32][32];
  int n = subcommands(help, cmd, subs, 32);
  CHECKF(n > 0, "cwm %s --list-options refused and its --help lists no subcommands: %s", cmd, err);
  for (int i = 0; i < n; i++) audit_help(cmd, subs[i]);
}

/* The string literals on the line of each `key` in a source file that are option names ("--x";
 * env 0) or environment variables (NAME_2; env 1), into words (space-separated). */
static void literals_after(const char *path, const char *key, int env, cwm_buf *words) {
  cwm_err e = {0};
  char *src = cwm_read_file(path, NULL, &e);
  if (!src) return;
  for (char *p = src; (p = strstr(p, key)) != NULL;) {
    p += strlen(key);
    char *eol = strchr(p, '\n');
    for (char *q = p; (q = strchr(q, '"')) && (!eol || q < eol);) {
      char *end = strchr(q + 1, '"');
      if (!end) break;
      int ok = end - q - 1 >= 2 && (env ? isupper((unsigned char)q[1]) : !strncmp(q + 1, "--", 2) && islower((unsigned char)q[3]));
      for (const char *c = q + 1; ok && c < end; c++)
        ok = env ? isupper((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '_' : islower((unsigned char)*c) || *c == '-';
      if (ok) cwm_buf_printf(words, "%.*s ", (int)(end - q - 1), q + 1);
      q = end + 1;
    }
  }
  free(src);
}

static void check_help_audit(void) {
  static char top[65536], err[8192];
  int rc = run_cwm(NULL, (const char *const[]){"cwm", "--help", NULL}, err, sizeof err, top);
  CHECKF(rc == 0, "cwm --help: exit %d", rc);
  char cmds[64][32];
  const char *list = strstr(top, "commands:\n");
  CHECKF(list != NULL, "cwm --help has no commands: section");
  if (!list) return;
  const char *endl = strstr(list, "\n\n");
  char section[8192];
  snprintf(section, sizeof section, "%.*s", (int)(endl ? endl - list : (long)strlen(list)), list);
  int n = subcommands(section, "", cmds, 64);
  CHECKF(n >= 12, "cwm --help lists %d commands", n);
  for (int i = 0; i < n; i++) audit_help(cmds[i], NULL);
  /* the global options main takes out of argv, and the environment env.c reads */
  const char *src = getenv("CWM_SOURCE_DIR");
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/src/cli", src && *src ? src : ".");
  cwm_buf words;
  cwm_buf_init(&words);
  DIR *d = opendir(dir);
  CHECKF(d != NULL, "%s: cannot list", dir);
  for (struct dirent *de; d && (de = readdir(d));) {
    size_t l = strlen(de->d_name);
    if (l < 3 || strcmp(de->d_name + l - 2, ".c") || !strncmp(de->d_name, "cmd_", 4)) continue;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    literals_after(path, "cli_take_option(", 0, &words);
    literals_after(path, "cli_opt_is(argv", 0, &words);
    if (!strcmp(de->d_name, "env.c")) {
      literals_after(path, "var(", 1, &words);
      literals_after(path, "getenv(", 1, &words);
      literals_after(path, "vars[] = {", 1, &words);
    }
  }
  if (d) closedir(d);
  int nw = 0;
  for (char *w = words.s ? strtok(words.s, " ") : NULL; w; w = strtok(NULL, " "), nw++)
    CHECKF(strstr(top, w) != NULL, "cwm --help does not name %s", w);
  CHECKF(nw >= 10, "the audit found %d global options and variables in %s", nw, dir);
  cwm_buf_free(&words);
  fprintf(stderr, "exitcodes: every option of %d commands' tables and %d global options and variables are in --help\n",
          n, nw);
}

/* Every line of stderr is one JSON object {"cmd", "kind", "msg", "elapsed"}; returns the number
 * of progress lines that count (done, total); *found set when a msg starts with want. */
static int json_lines(const char *what, const char *err, const char *want, int *found) {
  int counted = 0;
  char *copy = strdup(err);
  for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
    cJSON *j = cJSON_Parse(line);
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(j, "cmd"), *kind = cJSON_GetObjectItemCaseSensitive(j, "kind"),
                *msg = cJSON_GetObjectItemCaseSensitive(j, "msg"), *el = cJSON_GetObjectItemCaseSensitive(j, "elapsed");
    CHECKF(cJSON_IsObject(j) && cJSON_IsString(cmd) && cJSON_IsString(kind) && cJSON_IsString(msg) &&
               cJSON_IsNumber(el) && el->valuedouble >= 0,
           "%s: not a JSON progress line: %s", what, line);
    if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "progress") && cJSON_GetObjectItemCaseSensitive(j, "done") &&
        cJSON_GetObjectItemCaseSensitive(j, "total"))
      counted++;
    if (want && cJSON_IsString(msg) && !strncmp(msg->valuestring, want, strlen(want))) *found = 1;
    cJSON_Delete(j);
  }
  free(copy);
  return counted;
}

static void check_json(const char *W) {
  char err[16384], out[8192];
  int found = 0;
  /* before the command or among its options; a usage error is a JSON line too */
  int rc = run_cwm(NULL, (const char *const[]){"cwm", "--json", "tune", "--bogus", NULL}, err, sizeof err, out);
  CHECKF(rc == CWM_EUSAGE && count_lines(err) == 1, "--json tune --bogus: exit %d: %s", rc, err);
  json_lines("--json tune --bogus", err, "unknown option '--bogus'", &found);
  CHECKF(found && strstr(err, "\"cmd\":\"tune\""), "--json usage error: %s", err);
  /* a tuning run: its progress counts, and its notes with a workload name that holds a quote, a
   * tab and a byte that is not UTF-8 (U+FFFD in the JSON) */
  char wf[200];
  snprintf(wf, sizeof wf, "%s/j\"s\xffn\ty.te", g_dir);
  cwm_err e = {0};
  const char *text = cwm_op_to_text(W, &e);
  write_bytes(wf, (const unsigned char *)text, strlen(text));
  free((char *)text);
  rc = run_cwm(NULL,
               (const char *const[]){"cwm", "tune", "--workload-file", wf, "--model", "random", "--trials", "4",
                                     "--per-round", "2", "--population", "8", "--generations", "0", "--repeats", "1",
                                     "--min-repeat-ms", "1", "--confirm", "0", "--json", NULL},
               err, sizeof err, out);
  CHECKF(rc == 0, "tune --json: exit %d: %s", rc, err);
  found = 0;
  int counted = json_lines("tune --json", err, "j\"s\xef\xbf\xbdn\ty, model random", &found);
  CHECKF(counted >= 2 && found, "tune --json: %d counted progress lines, workload note %s: %s", counted,
         found ? "found" : "missing", err);
  fprintf(stderr, "exitcodes: --json: %d lines of stderr, each a JSON object\n", count_lines(err));
}

int main(void) {
  find_bin();
  if (access(g_bin, X_OK) != 0) {
    fprintf(stderr, "no cwm binary at %s (set CWM_BIN)\n", g_bin);
    return 1;
  }
  snprintf(g_dir, sizeof g_dir, "/tmp/cwm-exitcodes-XXXXXX");
  if (!mkdtemp(g_dir)) return 1;
  char cache[128], cachevar[160], log[160], wl[160], chain[160], amodel[160], wmodel[160], notdir[160], logbad[200];
  snprintf(cache, sizeof cache, "%s/cache", g_dir);
  snprintf(cachevar, sizeof cachevar, "CWM_CACHE_DIR=%s", cache); /* empty: every kernel must be compiled */
  snprintf(log, sizeof log, "%s/log.jsonl", g_dir);
  const char *W = "dense M=8 N=8 K=8";
  const char *quick[] = {"--trials", "2", "--per-round", "2", "--population", "8", "--generations", "0", "--quiet"};
#define TUNE(...) ((const char *const[]){"cwm", "tune", "--workload", __VA_ARGS__, quick[0], quick[1], quick[2], \
                                         quick[3], quick[4], quick[5], quick[6], quick[7], quick[8], NULL})

  /* a bad command line; the command line's conventions */
  expect("unknown option", NULL, (const char *const[]){"cwm", "tune", "--no-such-option", NULL}, CWM_EUSAGE,
         "unknown option");
  check_usage_errors(W);
  check_help_audit();
  /* --version names the version, the CPU, the target kernels are built for and the model found */
  {
    char err[8192], out[8192];
    int rc = run_cwm(NULL, (const char *const[]){"cwm", "--version", NULL}, err, sizeof err, out);
    CHECKF(rc == 0 && !strncmp(out, "cwm " CWM_VERSION "\n", strlen("cwm " CWM_VERSION "\n")) &&
               strstr(out, "\ncpu: ") && strstr(out, "\nkernels: ") && strstr(out, "\ncompiler: ") &&
               strstr(out, "\nmodel: "),
           "cwm --version: exit %d: %s%s", rc, out, err);
    rc = run_cwm(NULL, (const char *const[]){"cwm", "--target", "sse4", "--version", NULL}, err, sizeof err, out);
    CHECKF(rc == 0 && strstr(out, "kernels:  sse4, 16-byte vectors") && strstr(out, "-msse4.2"),
           "cwm --target sse4 --version: exit %d: %s%s", rc, out, err);
  }
  check_json(W);
  /* networks from ONNX: a file that is not a model, a missing one, and options checked before work */
  {
    char notonnx[200], model[1200];
    snprintf(notonnx, sizeof notonnx, "%s/notonnx.onnx", g_dir);
    write_bytes(notonnx, (const unsigned char *)"\x0a\xff\xff\xff\xff\x0fnot a model", 17);
    const char *src = getenv("CWM_SOURCE_DIR");
    snprintf(model, sizeof model, "%s/tests/models/tiny_cnn.onnx", src && *src ? src : ".");
    expect("import of a non-model", NULL, (const char *const[]){"cwm", "import", notonnx, NULL}, CWM_EPARSE, "notonnx.onnx");
    expect("import of a missing file", NULL, (const char *const[]){"cwm", "import", "/nonexistent/m.onnx", NULL}, CWM_EIO,
           "/nonexistent/m.onnx");
    expect("compile without --out", NULL, (const char *const[]){"cwm", "compile", model, NULL}, CWM_EUSAGE, "--out");
    expect("compile --name 1bad", NULL,
           (const char *const[]){"cwm", "compile", model, "--out", g_dir, "--name", "1bad", NULL}, CWM_EUSAGE, "identifier");
    expect("tune --onnx with --network", NULL,
           (const char *const[]){"cwm", "tune", "--onnx", model, "--network", "x.tsv", NULL}, CWM_EUSAGE, "--onnx");
    char err[8192], out[8192];
    int rc = run_cwm(NULL, (const char *const[]){"cwm", "import", model, NULL}, err, sizeof err, out);
    CHECKF(rc == 0 && strstr(out, "8 tasks") && strstr(out, "conv2d_0"), "import tiny_cnn: exit %d: %s %s", rc, err, out);
    /* the whole flow through the command line: compile (untuned), build, run */
    char odir[200], runner[260], weights[260];
    snprintf(odir, sizeof odir, "%s/tiny", g_dir);
    rc = run_cwm(NULL, (const char *const[]){"cwm", "compile", model, "--out", odir, "--name", "tiny", "--build", NULL}, err,
                 sizeof err, out);
    CHECKF(rc == 0 && strstr(out, "8 tasks (0 with a schedule from the log)") && strstr(out, "arena"),
           "compile tiny_cnn: exit %d: %s %s", rc, err, out);
    snprintf(runner, sizeof runner, "%s/tiny_runner", odir);
    snprintf(weights, sizeof weights, "%s/tiny_weights.bin", odir);
    CHECKF(access(runner, X_OK) == 0 && access(weights, R_OK) == 0, "%s: no runner or weights", odir);
  }
  /* the measuring protocol: out of range is a usage error; otherwise every record holds that
   * many repeats and the summary says which protocol measured them */
  expect("zero repeats", NULL, TUNE(W, "--model", "random", "--repeats", "0"), CWM_EUSAGE, "--repeats");
  /* --option=value is the same as --option value; a flag takes no value */
  expect("--trials=abc", NULL, (const char *const[]){"cwm", "tune", "--workload", W, "--trials=abc", NULL}, CWM_EUSAGE,
         "not an integer");
  expect("--quiet=1", NULL, (const char *const[]){"cwm", "tune", "--workload", W, "--quiet=1", NULL}, CWM_EUSAGE,
         "takes no value");
  /* late and loose options are caught before any work */
  expect("trials beyond int", NULL,
         (const char *const[]){"cwm", "tune", "--workload", W, "--model", "random", "--trials", "4294967297", NULL},
         CWM_EUSAGE, "out of range");
  expect("export to an empty name", NULL, TUNE(W, "--model", "random", "--export", ""), CWM_EUSAGE, "--export");
  expect("summary in no directory", NULL, TUNE(W, "--model", "random", "--summary", "/nonexistent/dir/s.json"), CWM_EIO,
         "/nonexistent/dir");
  expect("export --name int", NULL, TUNE(W, "--model", "random", "--export", g_dir, "--name", "int"), CWM_EUSAGE,
         "not a C identifier");
  expect("export --name 1bad", NULL, TUNE(W, "--model", "random", "--export", g_dir, "--name", "1bad"), CWM_EUSAGE,
         "not a C identifier");
  expect("valid fraction not a number", NULL,
         (const char *const[]){"cwm", "train", "ansor", "--records", log, "--out", log, "--valid-fraction", "abc", NULL},
         CWM_EUSAGE, "not a number");
  /* endless inputs are refused at a bound, not read until memory runs out */
  expect("steps from /dev/zero", NULL,
         (const char *const[]){"cwm", "replay", "--workload", W, "--steps", "/dev/zero", NULL}, CWM_EIO, "larger than");
  expect("workload from /dev/zero", NULL, (const char *const[]){"cwm", "show", "--workload", "@/dev/zero", NULL},
         CWM_EIO, "larger than");
  expect("model file /dev/zero", NULL, TUNE(W, "--model", "world", "--model-file", "/dev/zero"), CWM_EMODEL,
         "larger than");
  /* the compile cache: a bad bound is a usage error; another user's directory is refused */
  expect("cache bound not a number", NULL, TUNE(W, "--model", "random", "--cache-max-mb", "lots"), CWM_EUSAGE,
         "--cache-max-mb");
  if (geteuid() == 0) {
    char theirs[160];
    snprintf(theirs, sizeof theirs, "%s/their-cache", g_dir);
    mkdir(theirs, 0700);
    CHECK(chown(theirs, 65534, 65534) == 0);
    expect("cache of another user", NULL, TUNE(W, "--model", "random", "--cache-dir", theirs), CWM_EIO,
           "belongs to uid 65534");
  }
  expect("negative repeat time", NULL, TUNE(W, "--model", "random", "--min-repeat-ms", "-5"), CWM_EUSAGE,
         "--min-repeat-ms");
  {
    char plog[160], psum[160], err[8192];
    snprintf(plog, sizeof plog, "%s/protocol.jsonl", g_dir);
    snprintf(psum, sizeof psum, "%s/protocol.json", g_dir);
    int rc = run_cwm(NULL, TUNE(W, "--model", "random", "--repeats", "2", "--min-repeat-ms", "1", "--log", plog,
                                "--summary", psum), err, sizeof err, NULL);
    CHECKF(rc == 0, "tune --repeats 2: exit %d: %s", rc, err);
    cwm_record *recs = NULL;
    int n = 0, nbad = 0;
    cwm_err e = {0};
    CHECKF(cwm_log_read(plog, &recs, &n, &nbad, &e) == 0 && n == 2, "%s: %d records: %s", plog, n, e.msg);
    for (int i = 0; i < n; i++)
      CHECKF(recs[i].error != 0 || recs[i].ncosts == 2, "record %d: %d costs, want 2", i, recs[i].ncosts);
    cwm_records_free(recs, n);
    char *s = cwm_read_file(psum, NULL, &e);
    cJSON *sj = s ? cJSON_Parse(s) : NULL;
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(sj, "repeats"), *mrm = cJSON_GetObjectItemCaseSensitive(sj, "min_repeat_ms");
    CHECKF(cJSON_IsNumber(rep) && rep->valuedouble == 2 && cJSON_IsNumber(mrm) && mrm->valuedouble == 1, "summary: %s",
           s ? s : e.msg);
    cJSON_Delete(sj);
    free(s);
    /* a workload file whose name holds a quote and a newline: the summary stays one valid JSON
     * object with the name as it is (it was printf'ed, so the quote injected keys) */
    {
      char wf[200], qsum[160];
      snprintf(wf, sizeof wf, "%s/q\"x\ny.te", g_dir);
      snprintf(qsum, sizeof qsum, "%s/quoted.json", g_dir);
      const char *text = cwm_op_to_text(W, &e);
      write_bytes(wf, (const unsigned char *)text, strlen(text));
      free((char *)text);
      const char *const qa[] = {"cwm", "tune", "--workload-file", wf, "--model", "random", "--trials", "2", "--per-round", "2",
                                "--population", "8", "--generations", "0", "--quiet", "--repeats", "1", "--min-repeat-ms",
                                "1", "--summary", qsum, NULL};
      rc = run_cwm(NULL, qa, err, sizeof err, NULL);
      CHECKF(rc == 0, "tune --workload-file with a quote: exit %d: %s", rc, err);
      char *qs = cwm_read_file(qsum, NULL, &e);
      cJSON *qj = qs ? cJSON_Parse(qs) : NULL;
      const cJSON *nm = cJSON_GetObjectItemCaseSensitive(qj, "workload");
      CHECKF(cJSON_IsString(nm) && !strcmp(nm->valuestring, "q\"x\ny") && cJSON_GetArraySize(qj) == 18,
             "summary: %s", qs ? qs : e.msg);
      cJSON_Delete(qj);
      free(qs);
    }
    /* the same programs re-measured with another protocol: its records hold 3 repeats */
    char rlog[160], out[8192];
    snprintf(rlog, sizeof rlog, "%s/protocol-again.jsonl", g_dir);
    rc = run_cwm(NULL,
                 (const char *const[]){"cwm", "dataset", "remeasure", "--log", plog, "--out", rlog, "--fraction", "1",
                                       "--repeats", "3", "--min-repeat-ms", "1", NULL},
                 err, sizeof err, out);
    CHECKF(rc == 0 && strstr(out, "(3 repeats of at least 1 ms)"), "remeasure --repeats 3: exit %d: %s %s", rc, err,
           out);
    CHECKF(cwm_log_read(rlog, &recs, &n, &nbad, &e) == 0 && n >= 1, "%s: %d records: %s", rlog, n, e.msg);
    for (int i = 0; i < n; i++)
      CHECKF(recs[i].error != 0 || recs[i].ncosts == 3, "re-measured record %d: %d costs, want 3", i, recs[i].ncosts);
    cwm_records_free(recs, n);
    expect("remeasure, zero repeats", NULL,
           (const char *const[]){"cwm", "dataset", "remeasure", "--log", plog, "--out", rlog, "--repeats", "0", NULL},
           CWM_EUSAGE, "--repeats");
  }
  /* a malformed workload: an op spec and workload text */
  expect("malformed op spec", NULL, TUNE("dense M=8 N=", "--model", "random"), CWM_EPARSE, "N");
  snprintf(wl, sizeof wl, "%s/bad.wl", g_dir);
  const char *bad = "input A[4]\nout[i:4] = A[i] +\noutput out\n";
  write_bytes(wl, (const unsigned char *)bad, strlen(bad));
  char wlspec[200];
  snprintf(wlspec, sizeof wlspec, "@%s", wl);
  expect("malformed workload text", NULL, TUNE(wlspec, "--model", "random"), CWM_EPARSE, "line 2");
  /* a step list that parses but does not fit the workload's state */
  {
    char sf[160];
    snprintf(sf, sizeof sf, "%s/unfit.steps", g_dir);
    const char *unfit = "[[\"SP\",2,7,8,[4],1]]\n";
    write_bytes(sf, (const unsigned char *)unfit, strlen(unfit));
    expect("step that does not fit", NULL, (const char *const[]){"cwm", "replay", "--workload", W, "--steps", sf, NULL},
           CWM_ESTEP, "out of range");
  }
  /* no C compiler (nothing cached, so the first kernel needs one) */
  expect("missing compiler", (const char *const[]){"CC=/nonexistent/bin/cc", cachevar, NULL},
         TUNE(W, "--model", "random"), CWM_ECOMPILER, "compiler");
  /* XGBoost missing at run time */
  expect("missing XGBoost", (const char *const[]){"CWM_XGBOOST_LIB=/nonexistent/libxgboost.so.0", NULL},
         TUNE(W, "--model", "ansor"), CWM_EDEP, "xgboost");
  /* an unwritable log: a directory that cannot exist (root may write anywhere else) */
  expect("log under /proc", NULL, TUNE(W, "--model", "random", "--log", "/proc/nonexistent/log.jsonl"), CWM_EIO,
         "/proc/nonexistent/log.jsonl");
  snprintf(notdir, sizeof notdir, "%s/plainfile", g_dir);
  write_bytes(notdir, (const unsigned char *)"x", 1);
  snprintf(logbad, sizeof logbad, "%s/log.jsonl", notdir);
  expect("log under a file", NULL, TUNE(W, "--model", "random", "--log", logbad), CWM_EIO, "not a directory");
  /* an Ansor model file of another version (its checksum correct) */
  unsigned char am[56];
  memset(am, 0, sizeof am);
  memcpy(am, "CWMANSOR", 8);
  put_le(am + 8, 999, 4); /* version */
  put_le(am + 12, 164, 4);
  put_le(am + 48, cwm_hash64(am, 48), 8);
  snprintf(amodel, sizeof amodel, "%s/other-version.model", g_dir);
  write_bytes(amodel, am, sizeof am);
  expect("ansor model of version 999", NULL, TUNE(W, "--model", "ansor", "--pretrained", amodel), CWM_EMODEL,
         "version");
  /* a world-model file of another version */
  unsigned char wm[32];
  memset(wm, 0, sizeof wm);
  memcpy(wm, "CWMMODEL", 8);
  put_le(wm + 8, 999, 4);
  put_le(wm + 16, sizeof wm, 8);
  put_le(wm + 24, cwm_hash64(wm, 24), 8);
  snprintf(wmodel, sizeof wmodel, "%s/other-version.cwm", g_dir);
  write_bytes(wmodel, wm, sizeof wm);
  expect("world model of version 999", NULL, TUNE(W, "--model", "world", "--model-file", wmodel), CWM_EMODEL,
         "version");
  /* a workload the search cannot schedule: a chain of 14 matrix products, every sketch of
   * which needs more steps than a schedule holds */
  snprintf(chain, sizeof chain, "%s/chain.wl", g_dir);
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_puts(&b, "input B0[8, 8]\n");
  for (int s = 1; s <= 14; s++) cwm_buf_printf(&b, "B%d[i:8, j:8] = sum(k:8 : B%d[i, k] * B0[k, j])\n", s, s - 1);
  cwm_buf_puts(&b, "output B14\n");
  write_bytes(chain, (const unsigned char *)b.s, b.len);
  cwm_buf_free(&b);
  char chainspec[200];
  snprintf(chainspec, sizeof chainspec, "@%s", chain);
  expect("unschedulable workload", NULL, TUNE(chainspec, "--model", "random"), CWM_ENOSCHED, "cannot schedule");

  /* OpenBLAS missing at run time: training the world model needs it. cwm train prints its
   * progress first, so here the error is the last line and the only one that starts "cwm:" */
  {
    char tsv[160], tj[160], mout[160], err[8192];
    snprintf(tsv, sizeof tsv, "%s/wl.tsv", g_dir);
    snprintf(tj, sizeof tj, "%s/traj.jsonl", g_dir);
    snprintf(mout, sizeof mout, "%s/m.cwm", g_dir);
    const char *row = "t1\tdense\tM=8 N=8 K=8\ttest\n";
    write_bytes(tsv, (const unsigned char *)row, strlen(row));
    int rc = run_cwm(NULL,
                     (const char *const[]){"cwm", "dataset", "sample", "--workloads", tsv, "--per-workload", "4",
                                           "--seed", "1", "--out", tj, "--jobs", "1", NULL},
                     err, sizeof err, NULL);
    CHECKF(rc == 0, "dataset sample: %d: %s", rc, err);
    rc = run_cwm((const char *const[]){"CWM_OPENBLAS_LIB=/nonexistent/libopenblas.so.0", NULL},
                 (const char *const[]){"cwm", "train", "all", "--out", mout, "--data", tj, "--epochs", "1", "--quiet",
                                       NULL},
                 err, sizeof err, NULL);
    CHECKF(rc == CWM_EDEP, "missing OpenBLAS: exit %d, expected %d: %s", rc, CWM_EDEP, err);
    int ncwm = 0;
    const char *last = err;
    for (const char *p = err; *p;) {
      const char *nl = strchr(p, '\n');
      if (!strncmp(p, "cwm:", 4)) ncwm++;
      if (!nl) break;
      if (nl[1]) last = nl + 1;
      p = nl + 1;
    }
    CHECKF(ncwm == 1 && !strncmp(last, "cwm:", 4) && strstr(last, "OpenBLAS"),
           "missing OpenBLAS: the error must be the one last 'cwm:' line: %s", err);
    fprintf(stderr, "exitcodes: %-28s -> %d: %s", "missing OpenBLAS", rc, last);
  }

  /* cwm --help documents every code */
  char out[8192], err[8192];
  int rc = run_cwm(NULL, (const char *const[]){"cwm", "--help", NULL}, err, sizeof err, out);
  CHECK(rc == 0);
  static const char *const codes[] = {"2 usage", "3 malformed", "4 step", "5 file", "6 C compiler", "7 measurement",
                                      "8 nothing", "9 model file", "10 runtime library", "70 internal"};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    CHECKF(strstr(out, codes[i]) != NULL, "cwm --help does not document '%s'", codes[i]);

  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", g_dir);
  return test_done();
}

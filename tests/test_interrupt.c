/* test_interrupt.c: interrupted runs lose nothing. `cwm tune` (the built binary, next to this
 * test or $CWM_BIN) runs a small dense uninterrupted into log A; then into log B it is killed
 * with SIGINT, SIGTERM and SIGKILL at several moments (after k records, after random delays),
 * once with a half-written line appended as a killed writer would leave it, and resumed each
 * time until it finishes. After every kill log B must load with at most a final partial line;
 * at the end it must hold exactly the requested records, no candidate twice, no corrupt line
 * but the simulated one, and the same set of measured candidates (step lists) as log A. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cwm/record.h"
#include "testlib.h"

#define TRIALS "16"
#define NTRIALS 16

static char g_bin[PATH_MAX];
static char g_dir[64];

static void find_bin(void) {
  const char *b = getenv("CWM_BIN");
  if (b && *b) {
    snprintf(g_bin, sizeof g_bin, "%s", b);
    return;
  }
  /* ctest runs the test from the build directory, where the cwm binary also is */
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0) n = 0;
  self[n] = 0;
  char *slash = strrchr(self, '/');
  if (slash) *slash = 0;
  snprintf(g_bin, sizeof g_bin, "%.4000s/cwm", slash ? self : ".");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static pid_t start_tune(const char *log) {
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      dup2(devnull, 1);
      dup2(devnull, 2);
    }
    execl(g_bin, "cwm", "tune", "--workload", "dense M=16 N=24 K=32 bias=1 act=relu", "--model", "random", "--seed",
          "5", "--trials", TRIALS, "--per-round", "4", "--population", "64", "--generations", "2", "--log", log,
          "--quiet", (char *)NULL);
    _exit(127);
  }
  return pid;
}

/* Complete lines in the file (newline-terminated). */
static int count_lines(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int n = 0, c;
  while ((c = getc(f)) != EOF) n += c == '\n';
  fclose(f);
  return n;
}

/* Runs tune into log and sends sig once the log holds min_lines lines or delay seconds passed
 * (whichever is given, < 0 = unused); returns 1 if the run ended before the signal. */
static int run_and_kill(const char *log, int sig, int min_lines, double delay) {
  pid_t pid = start_tune(log);
  CHECK(pid > 0);
  double t0 = now_s();
  int st = 0, sent = 0;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (!sent && ((min_lines >= 0 && count_lines(log) >= min_lines) || (delay >= 0 && now_s() - t0 >= delay))) {
      kill(pid, sig);
      sent = 1;
    }
    if (now_s() - t0 > 300) { /* a hung run fails the test, not the machine */
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      CHECKF(0, "cwm tune did not end within 300 s");
      break;
    }
    usleep(10000);
  }
  if (sent && sig == SIGKILL) CHECKF(WIFSIGNALED(st) || WIFEXITED(st), "killed run: status %d", st);
  /* SIGINT and SIGTERM end the run after the measurements in flight, with status 0; one that
   * arrives before the handler is installed (the first milliseconds) kills it, harmlessly */
  if (sent && sig != SIGKILL)
    CHECKF((WIFEXITED(st) && WEXITSTATUS(st) == 0) || (WIFSIGNALED(st) && WTERMSIG(st) == sig),
           "after signal %d the run must end cleanly (status 0x%x)", sig, st);
  if (!sent) CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "run ended with status 0x%x", st);
  return !sent;
}

/* The log's records as step-list strings; *nbad gets the lines that did not parse. With
 * only_last_bad, a bad line is allowed only as the file's final line without a newline. */
static char **log_steps(const char *path, int *n, int *nbad) {
  cwm_record *recs = NULL;
  cwm_err e = {0};
  *n = 0;
  *nbad = 0;
  if (cwm_log_read(path, &recs, n, nbad, &e)) {
    CHECKF(0, "log %s does not load: %s", path, e.msg);
    return NULL;
  }
  char **s = calloc((size_t)*n + 1, sizeof *s);
  for (int i = 0; i < *n; i++) {
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_steps_print(recs[i].steps, recs[i].nsteps, &b);
    s[i] = cwm_buf_take(&b);
  }
  cwm_records_free(recs, *n);
  return s;
}

static void free_strs(char **s, int n) {
  for (int i = 0; s && i < n; i++) free(s[i]);
  free(s);
}

/* Every newline-terminated line of the log is a record; only an unterminated last line may not be. */
static void check_log_loads(const char *path, int allowed_bad_terminated, const char *when) {
  size_t len = 0;
  cwm_err e = {0};
  char *text = cwm_read_file(path, &len, &e);
  if (!text) return; /* killed before the first record: no log yet */
  int bad_terminated = 0, bad_tail = 0, lineno = 0;
  for (char *p = text; *p;) {
    char *nl = strchr(p, '\n');
    if (nl) *nl = 0;
    lineno++;
    cwm_record r;
    cwm_err pe = {0};
    int blank = strspn(p, " \t\r") == strlen(p);
    if (!blank) {
      if (cwm_record_parse(p, &r, &pe) == 0) cwm_record_free(&r);
      else if (nl) bad_terminated++;
      else bad_tail++;
    }
    if (!nl) break;
    p = nl + 1;
  }
  free(text);
  CHECKF(bad_terminated <= allowed_bad_terminated, "%s: %d corrupt lines inside the log (allowed %d)", when,
         bad_terminated, allowed_bad_terminated);
  CHECKF(bad_tail <= 1, "%s: %d corrupt final lines", when, bad_tail);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
  find_bin();
  if (access(g_bin, X_OK) != 0) {
    fprintf(stderr, "no cwm binary at %s (set CWM_BIN)\n", g_bin);
    return 1;
  }
  snprintf(g_dir, sizeof g_dir, "/tmp/cwm-interrupt-XXXXXX");
  if (!mkdtemp(g_dir)) return 1;
  char a[128], b[128];
  snprintf(a, sizeof a, "%s/a.jsonl", g_dir);
  snprintf(b, sizeof b, "%s/b.jsonl", g_dir);

  /* A: uninterrupted */
  double t0 = now_s();
  CHECK(run_and_kill(a, 0, -1, -1) == 1);
  double ta = now_s() - t0;
  int na, nbad_a;
  char **sa = log_steps(a, &na, &nbad_a);
  CHECKF(na == NTRIALS && nbad_a == 0, "log A: %d records, %d bad", na, nbad_a);

  /* B: killed at several moments, resumed each time */
  srand(12345);
  struct { int sig, lines; double delay; } kills[] = {
      {SIGINT, 2, -1},  {SIGTERM, -1, 0.3 + ta * 0.1 * (rand() % 10) / 10.0},
      {SIGKILL, 6, -1}, {SIGKILL, -1, 0.2 + ta * 0.1 * (rand() % 10) / 10.0},
      {SIGTERM, 11, -1}, {SIGINT, -1, 0.1 + ta * 0.05 * (rand() % 10) / 10.0},
      {SIGKILL, 14, -1},
  };
  int nkills = (int)(sizeof kills / sizeof kills[0]), finished = 0, simulated = 0;
  for (int k = 0; k < nkills && !finished; k++) {
    finished = run_and_kill(b, kills[k].sig, kills[k].lines, kills[k].delay);
    char when[64];
    snprintf(when, sizeof when, "after kill %d (signal %d)", k + 1, kills[k].sig);
    check_log_loads(b, simulated, when);
    if (k == 2 && !finished) {
      /* a writer killed in the middle of a line leaves it unterminated: the next run must keep
       * its own records intact (the cut line stays one skipped line) */
      int fd = open(b, O_WRONLY | O_APPEND);
      const char *cut = "{\"i\":[[\"0123456789abcdef\",\"c -keys=cpu\",[2,32,64,0,0,0,0,0],\"\",0,[]],[[],[[\"SP\",2,";
      CHECK(fd >= 0 && write(fd, cut, strlen(cut)) == (ssize_t)strlen(cut));
      if (fd >= 0) close(fd);
      simulated = 1;
      check_log_loads(b, 0, "with the cut line");
    }
  }
  for (int tries = 0; !finished && tries < 3; tries++) finished = run_and_kill(b, 0, -1, -1);
  CHECK(finished);
  check_log_loads(b, simulated, "at the end");
  int nb, nbad_b;
  char **sb = log_steps(b, &nb, &nbad_b);
  CHECKF(nbad_b == simulated, "log B: %d corrupt lines skipped, expected %d (the simulated cut)", nbad_b, simulated);
  CHECKF(nb == NTRIALS, "log B holds %d records, expected %d", nb, NTRIALS);
  if (sb) {
    qsort(sb, (size_t)nb, sizeof *sb, cmp_str);
    for (int i = 1; i < nb; i++) CHECKF(strcmp(sb[i], sb[i - 1]) != 0, "log B measured a candidate twice: %s", sb[i]);
  }
  /* the same set of measured candidates as the uninterrupted run */
  if (sa && sb) {
    qsort(sa, (size_t)na, sizeof *sa, cmp_str);
    int common = 0;
    for (int i = 0, j = 0; i < na && j < nb;) {
      int c = strcmp(sa[i], sb[j]);
      if (c == 0) common++, i++, j++;
      else if (c < 0) i++;
      else j++;
    }
    CHECKF(common == na && na == nb,
           "the interrupted run measured a different set: %d of %d candidates in common with the uninterrupted run",
           common, na);
  }
  free_strs(sa, na);
  free_strs(sb, nb);
  fprintf(stderr, "interrupt: uninterrupted run %.1f s, whole test %.1f s\n", ta, now_s() - t0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", g_dir);
  return test_done();
}

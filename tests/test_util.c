/* test_util.c: the shared helpers' promises that other tests do not reach. An atomic write never
 * follows a file or symlink planted at a guessable temporary name (the old name was
 * "<path>.tmp.<pid>"), replaces the destination whole, leaves no temporary file behind, and gives
 * the file the usual mode; a failed write leaves the old destination as it was. A FIFO (as
 * /dev/null or /dev/stdout would be) is written in place, never replaced by a regular file; a link
 * to one outside /dev and /proc is replaced, not written through; a directory is refused. Killed
 * at random points, a writer leaves the destination either as it was or as it was to become. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cwm/util.h"
#include "testlib.h"

static char tmpdir[64];

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  if (d) closedir(d);
  return n;
}

static void test_atomic_write(void) {
  char dest[128], victim[128], planted[192];
  snprintf(dest, sizeof dest, "%s/summary.json", tmpdir);
  snprintf(victim, sizeof victim, "%s/victim", tmpdir);
  snprintf(planted, sizeof planted, "%s.tmp.%ld", dest, (long)getpid());
  cwm_err e = {0};
  CHECK(cwm_write_file_atomic(victim, "precious\n", 9, &e) == 0);
  CHECK(symlink(victim, planted) == 0);
  CHECKF(cwm_write_file_atomic(dest, "{\"a\": 1}\n", 9, &e) == 0, "%s", e.msg);
  size_t n = 0;
  char *v = cwm_read_file(victim, &n, &e), *d = cwm_read_file(dest, &n, &e);
  CHECKF(v && !strcmp(v, "precious\n"), "the planted symlink's target was overwritten: %s", v ? v : "(gone)");
  CHECK(d && !strcmp(d, "{\"a\": 1}\n"));
  free(v);
  free(d);
  struct stat st;
  CHECK(lstat(dest, &st) == 0 && S_ISREG(st.st_mode));
  mode_t um = umask(0);
  umask(um);
  CHECKF((st.st_mode & 0777) == (0644 & ~um), "mode %o", (unsigned)(st.st_mode & 0777));
  unlink(planted);
  /* dest, victim: nothing else left behind */
  CHECKF(count_entries(tmpdir) == 2, "%d entries in %s", count_entries(tmpdir), tmpdir);
  /* replacing keeps one whole file */
  CHECK(cwm_write_file_atomic(dest, "second\n", 7, &e) == 0);
  d = cwm_read_file(dest, &n, &e);
  CHECK(d && !strcmp(d, "second\n"));
  free(d);
  /* a destination in a missing directory fails cleanly and names the path */
  char bad[160];
  snprintf(bad, sizeof bad, "%s/no/such/dir/x.json", tmpdir);
  CHECK(cwm_write_file_atomic(bad, "x", 1, &e) == CWM_EIO && strstr(e.msg, bad));
}

/* A FIFO destination: a child reads what is written; the FIFO is still a FIFO afterwards. */
static void test_special_files(void) {
  char fifo[128], link[128], dir[128];
  snprintf(fifo, sizeof fifo, "%s/pipe", tmpdir);
  snprintf(link, sizeof link, "%s/to-pipe", tmpdir);
  snprintf(dir, sizeof dir, "%s/adir", tmpdir);
  CHECK(mkfifo(fifo, 0600) == 0);
  char got[128];
  snprintf(got, sizeof got, "%s/got", tmpdir);
  pid_t pid = fork();
  if (pid == 0) { /* the reader: copies the FIFO into `got` */
    FILE *in = fopen(fifo, "r"), *out = fopen(got, "w");
    int c;
    while (in && out && (c = fgetc(in)) != EOF) fputc(c, out);
    _exit(in && out && fclose(out) == 0 ? 0 : 1);
  }
  cwm_err e = {0};
  CHECKF(cwm_write_file_atomic(fifo, "through\n", 8, &e) == 0, "%s", e.msg);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  size_t n = 0;
  char *d = cwm_read_file(got, &n, &e);
  CHECKF(d && !strcmp(d, "through\n"), "the reader got '%s'", d ? d : "(nothing)");
  free(d);
  struct stat st;
  CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
  /* a link to the FIFO where anyone could have planted it: replaced (no reader needed) */
  CHECK(symlink(fifo, link) == 0);
  CHECKF(cwm_write_file_atomic(link, "file\n", 5, &e) == 0, "%s", e.msg);
  CHECK(lstat(link, &st) == 0 && S_ISREG(st.st_mode));
  CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
  CHECK(mkdir(dir, 0700) == 0);
  CHECK(cwm_write_file_atomic(dir, "x", 1, &e) == CWM_EIO && strstr(e.msg, "directory") && strstr(e.msg, dir));
  CHECK(lstat(dir, &st) == 0 && S_ISDIR(st.st_mode));
  unlink(fifo);
  unlink(link);
  unlink(got);
  rmdir(dir);
}

/* A child rewrites one file over and over with one of two contents of 4 MB (larger than a pipe
 * or a page, so a torn write would show) and is killed after a random delay; each time the file
 * must be one of the two, whole. */
static void test_kill_at_random(void) {
  enum { SIZE = 4 << 20, KILLS = 40 };
  char dest[128];
  snprintf(dest, sizeof dest, "%s/killed.bin", tmpdir);
  char *a = malloc(SIZE), *b = malloc(SIZE);
  memset(a, 'a', SIZE);
  memset(b, 'b', SIZE);
  cwm_err e = {0};
  CHECK(cwm_write_file_atomic(dest, a, SIZE, &e) == 0);
  srand((unsigned)time(NULL));
  int whole = 0;
  for (int k = 0; k < KILLS; k++) {
    pid_t pid = fork();
    if (pid == 0) {
      for (unsigned i = 0;; i++) cwm_write_file_atomic(dest, i & 1 ? a : b, SIZE, NULL);
    }
    usleep((useconds_t)(rand() % 30000));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    size_t n = 0;
    char *d = cwm_read_file(dest, &n, &e);
    int ok = d && n == SIZE && (!memcmp(d, a, SIZE) || !memcmp(d, b, SIZE));
    CHECKF(ok, "kill %d: the destination is %zu bytes, not one whole version", k, n);
    whole += ok;
    free(d);
  }
  CHECK(whole == KILLS);
  free(a);
  free(b);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cwm-util-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  test_atomic_write();
  test_special_files();
  test_kill_at_random();
  if (!test_failures) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) return 1;
  }
  return test_done();
}

/* test_util.c: the shared helpers' promises that other tests do not reach. An atomic write never
 * follows a file or symlink planted at a guessable temporary name (the old name was
 * "<path>.tmp.<pid>"), replaces the destination whole, leaves no temporary file behind, and gives
 * the file the usual mode; a failed write leaves the old destination as it was. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cwm-util-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  test_atomic_write();
  if (!test_failures) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) return 1;
  }
  return test_done();
}

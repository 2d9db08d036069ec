/* cache.c: the compile cache's directory and entries. Shared objects are loaded into the process
 * that measures them, so the directory must be the user's own: it is created 0700, refused when
 * another user owns it, and tightened to 0700 when it is the user's but open to others. Each entry
 * <key>.so has a seal <key>.sum with its size and content hash, written after the object is in
 * place; a cache hit needs the seal to match, so a truncated or altered object is rebuilt rather
 * than loaded. The directory is kept under a size bound by evicting the least recently used
 * entries (a hit refreshes an entry's time), and compiler temporaries a killed run left behind are
 * removed once they are an hour old. */
#define _GNU_SOURCE
#include "measure_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SEAL_MAGIC "cwm-seal 1"
#define STALE_TEMP_S 3600

const char *cwm_measure_cache_dir(const cwm_measure_opts *o) {
  static char fallback[64];
  if (o && o->cache_dir && *o->cache_dir) return o->cache_dir;
  /* one per user: a shared fixed name would let another user plant objects in it */
  snprintf(fallback, sizeof fallback, "/tmp/cwm-cache-%ld", (long)geteuid());
  return fallback;
}

int cache_prepare(const char *dir, cwm_err *err) {
  char parent[4096];
  cwm_parent_dir(dir, parent, sizeof parent);
  int rc = cwm_mkdir_p(parent, err);
  if (rc) return rc;
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    return cwm_fail(err, CWM_EIO, "cache directory %s: cannot create: %s", dir, strerror(errno));
  struct stat sb;
  if (stat(dir, &sb) != 0)
    return cwm_fail(err, CWM_EIO, "cache directory %s: %s", dir, strerror(errno));
  if (!S_ISDIR(sb.st_mode)) return cwm_fail(err, CWM_EIO, "cache directory %s: not a directory", dir);
  if (sb.st_uid != geteuid())
    return cwm_fail(err, CWM_EIO,
                    "cache directory %s belongs to uid %ld, not to you (uid %ld): cwm loads the code it finds "
                    "there, so it refuses; choose another with --cache-dir or CWM_CACHE_DIR",
                    dir, (long)sb.st_uid, (long)geteuid());
  if ((sb.st_mode & 077) && chmod(dir, 0700) != 0)
    return cwm_fail(err, CWM_EIO, "cache directory %s is open to other users and cannot be made private: %s", dir,
                    strerror(errno));
  if (!cwm_dir_writable(dir))
    return cwm_fail(err, CWM_EIO, "cache directory %s is not writable: %s", dir, strerror(errno));
  return CWM_OK;
}

int cache_seal_text(const char *so, char *text, size_t n) {
  size_t len = 0;
  char *data = cwm_read_file(so, &len, NULL);
  if (!data) return -1;
  char hex[17];
  cwm_hash_hex(cwm_hash64(data, len), hex);
  free(data);
  snprintf(text, n, SEAL_MAGIC " %zu %s\n", len, hex);
  return 0;
}

static void seal_path(const char *so, char *out, size_t n) {
  size_t len = strlen(so);
  if (len > 3 && !strcmp(so + len - 3, ".so")) len -= 3;
  snprintf(out, n, "%.*s.sum", (int)len, so);
}

void cache_write_seal(const char *so, const char *text) {
  char sp[4200];
  seal_path(so, sp, sizeof sp);
  cwm_write_file_atomic(sp, text, strlen(text), NULL); /* no seal: the next run rebuilds the entry */
}

int cache_hit(const char *so) {
  struct stat sb;
  if (stat(so, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0) return 0;
  char sp[4200], want[SEAL_MAX];
  seal_path(so, sp, sizeof sp);
  char *seal = cwm_read_file(sp, NULL, NULL);
  if (!seal) return 0;
  int ok = cache_seal_text(so, want, sizeof want) == 0 && !strcmp(seal, want);
  free(seal);
  /* a hit is a use: least recently used entries go first when the cache is over its bound */
  if (ok) utimensat(AT_FDCWD, so, NULL, 0);
  return ok;
}

typedef struct {
  char name[256];
  long long size;
  time_t mtime;
} entry;

static int by_age(const void *a, const void *b) {
  const entry *x = a, *y = b;
  return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

static int is_temp(const char *name) {
  return !strncmp(name, ".tmp-", 5) || !strncmp(name, ".probe-", 7) || strstr(name, ".tmp.") != NULL;
}

static int has_suffix(const char *name, const char *suf) {
  size_t n = strlen(name), m = strlen(suf);
  return n > m && !strcmp(name + n - m, suf);
}

void cache_tidy(const char *dir, long max_mb) {
  DIR *d = opendir(dir);
  if (!d) return;
  entry *e = NULL;
  size_t n = 0, cap = 0;
  long long total = 0;
  time_t now = time(NULL);
  char path[4600];
  for (struct dirent *de; (de = readdir(d));) {
    const char *nm = de->d_name;
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, nm);
    if (strlen(nm) >= sizeof e->name || lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    if (is_temp(nm)) {
      if (now - sb.st_mtime > STALE_TEMP_S) unlink(path); /* left by a run that was killed */
      continue;
    }
    total += (long long)sb.st_size;
    if (!has_suffix(nm, ".so") && !has_suffix(nm, ".ref")) continue; /* objects and reference outputs */
    e = cwm_grow(e, n, &cap, sizeof *e);
    snprintf(e[n].name, sizeof e[n].name, "%s", nm);
    e[n].size = (long long)sb.st_size;
    e[n].mtime = sb.st_mtime;
    n++;
  }
  closedir(d);
  long long limit = (long long)max_mb << 20;
  if (max_mb > 0 && total > limit) {
    /* down to 80% of the bound, oldest first, so that eviction is not paid on every build */
    qsort(e, n, sizeof *e, by_age);
    for (size_t i = 0; i < n && total > limit / 10 * 8; i++) {
      snprintf(path, sizeof path, "%s/%s", dir, e[i].name);
      if (unlink(path) != 0) continue;
      total -= e[i].size;
      char sp[4700];
      seal_path(path, sp, sizeof sp);
      unlink(sp);
    }
  }
  free(e);
}

void cwm_measure_cache_tidy(const cwm_measure_opts *o) { cache_tidy(cwm_measure_cache_dir(o), o->cache_max_mb); }

/* log.c: the tuning log file. Appends are one write loop per record followed by fdatasync, after
 * ending any line a killed writer left unterminated; readers go line by line (any length) and
 * skip, counting, the lines that are not records. A writer holds an exclusive flock on the file
 * while it is open, so that two runs on one log do not interleave their records (and time each
 * other's compiles). */
#define _GNU_SOURCE
#include "cwm/record.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct cwm_log {
  int fd;
  int can_read; /* opened O_RDWR, so the last byte can be checked */
  char *path;
};

cwm_log *cwm_log_open(const char *path, cwm_err *err) {
  if (!path || !*path) {
    cwm_fail(err, CWM_EIO, "log: empty path");
    return NULL;
  }
  int can_read = 1;
  int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EACCES) {
    can_read = 0;
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  }
  if (fd < 0) {
    cwm_fail(err, CWM_EIO, "%s: cannot open for appending: %s", path, strerror(errno));
    return NULL;
  }
  struct stat sb;
  if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    close(fd);
    cwm_fail(err, CWM_EIO, "%s: cannot open for appending: is a directory", path);
    return NULL;
  }
  /* a second writer is refused at once; a file system without flock is used without a lock */
  if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    close(fd);
    cwm_fail(err, CWM_EIO, "%s: another cwm run is writing to this log (it is locked); wait for it to end or use "
             "another log", path);
    return NULL;
  }
  cwm_log *log = cwm_xcalloc(1, sizeof *log);
  log->fd = fd;
  log->can_read = can_read;
  log->path = cwm_xstrdup(path);
  return log;
}

/* 1 if the file is non-empty and does not end in '\n'. */
static int needs_newline(const cwm_log *log) {
  if (!log->can_read) return 0;
  struct stat sb;
  if (fstat(log->fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0) return 0;
  char c;
  ssize_t r;
  do {
    r = pread(log->fd, &c, 1, sb.st_size - 1);
  } while (r < 0 && errno == EINTR);
  return r == 1 && c != '\n';
}

int cwm_log_append(cwm_log *log, const cwm_record *r, cwm_err *err) {
  if (!log) return cwm_fail(err, CWM_EIO, "log: not open");
  cwm_buf b;
  cwm_buf_init(&b);
  if (needs_newline(log)) cwm_buf_putc(&b, '\n');
  cwm_record_to_json(r, &b);
  cwm_buf_putc(&b, '\n');
  const char *p = b.s;
  size_t left = b.len;
  while (left) {
    ssize_t w = write(log->fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      cwm_buf_free(&b);
      return cwm_fail(err, CWM_EIO, "%s: write failed: %s", log->path, strerror(e));
    }
    p += w;
    left -= (size_t)w;
  }
  cwm_buf_free(&b);
  if (fdatasync(log->fd) != 0 && errno != EINVAL && errno != EROFS)
    return cwm_fail(err, CWM_EIO, "%s: sync failed: %s", log->path, strerror(errno));
  return CWM_OK;
}

void cwm_log_close(cwm_log *log) {
  if (!log) return;
  close(log->fd);
  free(log->path);
  free(log);
}

/* ------------------------------------------------------------------ reader */

#define MAX_LINE (4 << 20) /* longer lines are corrupt: a record is a few KB */

struct cwm_log_iter {
  cwm_lines *src;
};

cwm_log_iter *cwm_log_iter_open(const char *path, cwm_err *err) {
  cwm_lines *src = cwm_lines_open(path, "log", MAX_LINE, err);
  if (!src) return NULL;
  cwm_log_iter *it = cwm_xcalloc(1, sizeof *it);
  it->src = src;
  return it;
}

static int parse_record_line(const char *line, void *out, void *ctx, cwm_err *e) {
  (void)ctx;
  return cwm_record_parse(line, out, e) == CWM_OK ? 0 : 1;
}

int cwm_log_iter_next(cwm_log_iter *it, cwm_record *r, cwm_err *err) {
  memset(r, 0, sizeof *r);
  return it ? cwm_lines_parse(it->src, parse_record_line, r, NULL, err) : 0;
}

int cwm_log_iter_nbad(const cwm_log_iter *it) { return it ? (int)cwm_lines_nbad(it->src) : 0; }
long cwm_log_iter_line(const cwm_log_iter *it) { return it ? cwm_lines_last_good(it->src) : 0; }
const char *cwm_log_iter_last_bad(const cwm_log_iter *it) { return it ? cwm_lines_last_bad(it->src) : ""; }

void cwm_log_iter_close(cwm_log_iter *it) {
  if (!it) return;
  cwm_lines_close(it->src);
  free(it);
}

int cwm_log_read(const char *path, cwm_record **recs, int *n, int *nbad, cwm_err *err) {
  *recs = NULL;
  *n = 0;
  if (nbad) *nbad = 0;
  cwm_log_iter *it = cwm_log_iter_open(path, err);
  if (!it) return CWM_EIO;
  cwm_record *out = NULL;
  int cnt = 0, cap = 0, rc;
  cwm_record r;
  while ((rc = cwm_log_iter_next(it, &r, err)) == 1) {
    if (cnt == cap) {
      if (cap > INT_MAX / 2) {
        cwm_record_free(&r);
        rc = -1;
        cwm_fail(err, CWM_EIO, "%s: too many records", path);
        break;
      }
      cap = cap ? cap * 2 : 64;
      out = cwm_xrealloc(out, (size_t)cap * sizeof *out);
    }
    out[cnt++] = r;
  }
  int bad = cwm_log_iter_nbad(it);
  cwm_log_iter_close(it);
  if (rc < 0) {
    cwm_records_free(out, cnt);
    return CWM_EIO;
  }
  *recs = out;
  *n = cnt;
  if (nbad) *nbad = bad;
  return CWM_OK;
}

void cwm_records_free(cwm_record *recs, int n) {
  if (!recs) return;
  for (int i = 0; i < n; i++) cwm_record_free(&recs[i]);
  free(recs);
}

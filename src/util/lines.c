/* lines.c: reading a text file of records a line at a time (logs and trajectory files), with a
 * bound on a line's length so that a corrupt file cannot make the reader hold it whole. */
#include "cwm/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct cwm_lines {
  FILE *f;
  char *line;
  size_t cap, max_line;
  long lineno, last_good, nbad;
  char last_bad[512];
  char rbuf[1 << 16];
  size_t rpos, rlen;
  char path[]; /* the file's path, allocated with the reader */
};

cwm_lines *cwm_lines_open(const char *path, const char *what, size_t max_line, cwm_err *err) {
  FILE *f = cwm_open_read(path, what, err);
  if (!f) return NULL;
  size_t np = strlen(path) + 1;
  cwm_lines *l = cwm_xcalloc(1, sizeof *l + np);
  memcpy(l->path, path, np);
  l->f = f;
  l->max_line = max_line;
  l->cap = max_line < (1 << 14) ? max_line + 1 : 1 << 14;
  l->line = cwm_xmalloc(l->cap);
  return l;
}

void cwm_lines_close(cwm_lines *l) {
  if (!l) return;
  fclose(l->f);
  free(l->line);
  free(l);
}

size_t cwm_lines_bufsize(const cwm_lines *l) { return l ? l->cap : 0; }

/* Reads one line (without its '\n', NULs kept) into l->line; 1 ok, 0 end, -1 read error, 2 a
 * line longer than max_line (its text dropped as it streams by). */
static int read_line(cwm_lines *l, size_t *len) {
  size_t n = 0;
  int too_long = 0, any = 0;
  for (;;) {
    if (l->rpos == l->rlen) {
      l->rlen = fread(l->rbuf, 1, sizeof l->rbuf, l->f);
      l->rpos = 0;
      if (l->rlen == 0) {
        if (ferror(l->f)) return -1;
        if (!any) return 0;
        break;
      }
    }
    any = 1;
    const char *p = l->rbuf + l->rpos;
    size_t avail = l->rlen - l->rpos;
    const char *nl = memchr(p, '\n', avail);
    size_t take = nl ? (size_t)(nl - p) : avail;
    l->rpos += take + (nl ? 1 : 0);
    if (!too_long && n + take + 1 > l->cap) {
      size_t cap = l->cap;
      while (cap < n + take + 1 && cap < l->max_line + 1) cap *= 2;
      if (cap > l->max_line + 1) cap = l->max_line + 1;
      if (n + take + 1 > cap) {
        too_long = 1;
      } else {
        l->line = cwm_xrealloc(l->line, cap);
        l->cap = cap;
      }
    }
    if (!too_long) {
      memcpy(l->line + n, p, take);
      n += take;
    }
    if (nl) break;
  }
  l->line[too_long ? 0 : n] = 0;
  *len = too_long ? 0 : n;
  return too_long ? 2 : 1;
}

static int is_blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\f' && s[i] != '\v') return 0;
  return 1;
}

/* The next line that is not blank, leading blanks skipped: 1 and *line (valid until the next
 * call); 0 at the end; 2 for a line that is too long or holds a NUL byte (err says which; the
 * reader goes on after it); -1 on a read error (err names the file and line). */
static int next_line(cwm_lines *l, const char **line, cwm_err *err) {
  *line = "";
  for (;;) {
    size_t len = 0;
    errno = 0;
    int rc = read_line(l, &len);
    if (rc == 0) return 0;
    if (rc < 0) {
      cwm_fail(err, CWM_EIO, "%s: read error after line %ld: %s", l->path, l->lineno, strerror(errno ? errno : EIO));
      return -1;
    }
    l->lineno++;
    if (rc == 2) {
      cwm_fail(err, CWM_EPARSE, "longer than %zu bytes", l->max_line);
      return 2;
    }
    while (len && l->line[len - 1] == '\r') l->line[--len] = 0;
    if (strlen(l->line) != len) {
      cwm_fail(err, CWM_EPARSE, "contains a NUL byte");
      return 2;
    }
    if (is_blank(l->line, len)) continue;
    const char *p = l->line;
    while (*p == ' ' || *p == '\t') p++;
    *line = p;
    return 1;
  }
}

int cwm_lines_parse(cwm_lines *l, cwm_line_parser parse, void *out, void *ctx, cwm_err *err) {
  for (;;) {
    const char *line;
    cwm_err why = {0};
    int rc = next_line(l, &line, &why), prc = 1;
    if (rc == 0) return 0;
    if (rc < 0) {
      if (err) *err = why;
      return -1;
    }
    if (rc == 1) prc = parse(line, out, ctx, &why);
    if (prc == 0) {
      l->last_good = l->lineno;
      return 1;
    }
    if (prc < 0) continue;
    l->nbad++;
    snprintf(l->last_bad, sizeof l->last_bad, "line %ld: %.480s", l->lineno, why.msg);
  }
}

long cwm_lines_nbad(const cwm_lines *l) { return l ? l->nbad : 0; }
long cwm_lines_last_good(const cwm_lines *l) { return l ? l->last_good : 0; }
const char *cwm_lines_last_bad(const cwm_lines *l) { return l ? l->last_bad : ""; }

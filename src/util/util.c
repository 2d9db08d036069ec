/* util.c: errors, string buffers, hashing, PRNG, files. See cwm/util.h. */
#define _GNU_SOURCE
#include "cwm/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int cwm_fail(cwm_err *err, cwm_status code, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->code = code;
  }
  return code;
}

void *cwm_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) { fputs("cwm: out of memory\n", stderr); abort(); }
  return p;
}
void *cwm_xcalloc(size_t n, size_t m) {
  void *p = calloc(n ? n : 1, m ? m : 1);
  if (!p) { fputs("cwm: out of memory\n", stderr); abort(); }
  return p;
}
void *cwm_xrealloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p) { fputs("cwm: out of memory\n", stderr); abort(); }
  return p;
}
char *cwm_xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = cwm_xmalloc(n);
  memcpy(d, s, n);
  return d;
}

void cwm_buf_init(cwm_buf *b) { b->s = NULL; b->len = b->cap = 0; }
void cwm_buf_free(cwm_buf *b) { free(b->s); cwm_buf_init(b); }
static void buf_reserve(cwm_buf *b, size_t extra) {
  if (b->len + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) cap *= 2;
  b->s = cwm_xrealloc(b->s, cap);
  b->cap = cap;
}
void cwm_buf_putc(cwm_buf *b, char c) {
  buf_reserve(b, 1);
  b->s[b->len++] = c;
  b->s[b->len] = 0;
}
void cwm_buf_puts(cwm_buf *b, const char *s) {
  size_t n = strlen(s);
  buf_reserve(b, n);
  memcpy(b->s + b->len, s, n + 1);
  b->len += n;
}
void cwm_buf_append(cwm_buf *b, const void *data, size_t n) {
  buf_reserve(b, n);
  if (n) memcpy(b->s + b->len, data, n);
  b->len += n;
  b->s[b->len] = 0;
}
void cwm_buf_vprintf(cwm_buf *b, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return;
  buf_reserve(b, (size_t)n);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
}
void cwm_buf_printf(cwm_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cwm_buf_vprintf(b, fmt, ap);
  va_end(ap);
}
/* The length of the valid UTF-8 sequence at p (1..4), 0 when it is not one: no overlong forms,
 * no surrogates, nothing past U+10FFFF. */
static int utf8_len(const unsigned char *p) {
  unsigned c = p[0];
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return (p[1] & 0xc0) == 0x80 ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    return p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    return p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 && (p[3] & 0xc0) == 0x80 ? 4 : 0;
  }
  return 0;
}

void cwm_buf_json_str(cwm_buf *b, const char *s, const char *bad) {
  cwm_buf_putc(b, '"');
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  while (*p) {
    unsigned c = *p;
    const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
    int n = esc || c < 0x20 || c == 0x7f ? 1 : utf8_len(p);
    if (esc) cwm_buf_puts(b, esc);
    else if (c < 0x20 || c == 0x7f) cwm_buf_printf(b, "\\u%04x", c);
    else if (n) cwm_buf_append(b, p, (size_t)n);
    else cwm_buf_puts(b, bad), n = 1;
    p += n;
  }
  cwm_buf_putc(b, '"');
}

void cwm_buf_indent(cwm_buf *b, int depth) {
  for (int i = 0; i < depth; i++) cwm_buf_puts(b, "  ");
}
char *cwm_buf_take(cwm_buf *b) {
  char *s = b->s ? b->s : cwm_xstrdup("");
  cwm_buf_init(b);
  return s;
}

uint64_t cwm_hash64(const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}
void cwm_hash_hex(uint64_t h, char out[17]) { snprintf(out, 17, "%016llx", (unsigned long long)h); }

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
void cwm_rng_seed(cwm_rng *r, uint64_t seed) {
  uint64_t x = seed;
  r->s = splitmix(&x);
  if (!r->s) r->s = 0x2545F4914F6CDD1DULL;
}
uint64_t cwm_rng_next(cwm_rng *r) {
  uint64_t x = r->s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->s = x;
  return x * 0x2545F4914F6CDD1DULL;
}
int cwm_rng_int(cwm_rng *r, int n) { return n <= 1 ? 0 : (int)(cwm_rng_next(r) % (uint64_t)n); }
double cwm_rng_unit(cwm_rng *r) { return (double)(cwm_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

double cwm_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

FILE *cwm_open_read(const char *path, const char *what, cwm_err *err) {
  if (!path || !*path) {
    cwm_fail(err, CWM_EIO, "%s: empty path", what);
    return NULL;
  }
  FILE *f = fopen(path, "re");
  if (!f) {
    cwm_fail(err, CWM_EIO, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  struct stat sb;
  if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
    fclose(f);
    cwm_fail(err, CWM_EIO, "%s: cannot read: is a directory", path);
    return NULL;
  }
  return f;
}

char *cwm_read_file_max(const char *path, size_t max, size_t *len, cwm_err *err) {
  FILE *f = cwm_open_read(path, "file", err);
  if (!f) return NULL;
  cwm_buf b;
  cwm_buf_init(&b);
  char tmp[65536];
  size_t n;
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) {
    if (b.len + n > max) {
      /* /dev/zero, a FIFO that never ends or a file far too big for what it claims to be */
      fclose(f);
      cwm_buf_free(&b);
      cwm_fail(err, CWM_EIO, "%s: larger than %zu MB, more than such a file can be", path, max >> 20);
      return NULL;
    }
    buf_reserve(&b, n);
    memcpy(b.s + b.len, tmp, n);
    b.len += n;
    b.s[b.len] = 0;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    cwm_buf_free(&b);
    cwm_fail(err, CWM_EIO, "%s: read error", path);
    return NULL;
  }
  if (len) *len = b.len;
  return cwm_buf_take(&b);
}

char *cwm_read_file(const char *path, size_t *len, cwm_err *err) {
  return cwm_read_file_max(path, (size_t)2 << 30, len, err);
}

char *cwm_read_text(const char *path, cwm_err *err) {
  size_t len = 0;
  char *text = cwm_read_file_max(path, (size_t)256 << 20, &len, err);
  if (text && strlen(text) != len) {
    cwm_fail(err, CWM_EPARSE, "%s: contains a NUL byte", path);
    free(text);
    return NULL;
  }
  return text;
}

/* Written beside the destination under a name nobody can guess (mkstemp: O_EXCL, so a planted
 * file or symlink is never followed), synced, renamed over the destination, and the directory
 * synced, so that a crash leaves either the old file or the new one, whole. */
/* Writes all of data to fd; 0 or the errno of the failed write. */
static int write_all(int fd, const void *data, size_t n) {
  const char *p = data;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* An output path that is a character device or a FIFO (/dev/null, /dev/stdout, a named pipe) is
 * written in place: renaming a temporary file over it would replace the device node itself (as
 * root, /dev/null became a regular file). A symbolic link to one is followed only where no other
 * user can plant links (/dev, /proc); elsewhere the link is replaced as any other file would be,
 * never written through. A directory, a block device or a socket is refused. 1: written in place
 * (rc set), 0: a regular file or nothing yet, to be written atomically. */
static int write_in_place(const char *path, const void *data, size_t n, int *rc, cwm_err *err) {
  struct stat l, t;
  if (lstat(path, &l) != 0 || S_ISREG(l.st_mode)) return 0;
  int follow = S_ISLNK(l.st_mode) && (!strncmp(path, "/dev/", 5) || !strncmp(path, "/proc/", 6));
  if (S_ISLNK(l.st_mode) && !follow) return 0;
  if (stat(path, &t) != 0) return 0;
  if (S_ISREG(t.st_mode)) return 0;
  if (!S_ISCHR(t.st_mode) && !S_ISFIFO(t.st_mode)) {
    *rc = cwm_fail(err, CWM_EIO, "%s: cannot write: %s", path,
                   S_ISDIR(t.st_mode) ? "it is a directory" : "not a regular file, a character device or a FIFO");
    return 1;
  }
  int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
  int e = fd < 0 ? errno : write_all(fd, data, n);
  if (fd >= 0 && close(fd) != 0 && !e) e = errno;
  *rc = e ? cwm_fail(err, CWM_EIO, "%s: cannot write: %s", path, strerror(e)) : CWM_OK;
  return 1;
}

int cwm_write_file_atomic(const char *path, const void *data, size_t n, cwm_err *err) {
  int in_place_rc;
  if (write_in_place(path, data, n, &in_place_rc, err)) return in_place_rc;
  char tmp[4200];
  if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp)
    return cwm_fail(err, CWM_EIO, "%.200s...: path too long", path);
  int fd = mkstemp(tmp);
  if (fd < 0) return cwm_fail(err, CWM_EIO, "%s: cannot write: %s", path, strerror(errno));
  mode_t um = umask(0);
  umask(um);
  int rc = fchmod(fd, 0644 & ~um) == 0 ? 0 : errno;
  if (!rc) rc = write_all(fd, data, n);
  if (rc) {
    close(fd);
    unlink(tmp);
    return cwm_fail(err, CWM_EIO, "%s: write failed: %s", path, strerror(rc));
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    unlink(tmp);
    return cwm_fail(err, CWM_EIO, "%s: sync failed: %s", path, strerror(errno));
  }
  if (rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return cwm_fail(err, CWM_EIO, "%s: rename failed: %s", path, strerror(e));
  }
  char dir[4200];
  cwm_parent_dir(path, dir, sizeof dir);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) { /* the rename itself made durable; a directory that cannot be opened is left as it is */
    fsync(dfd);
    close(dfd);
  }
  return CWM_OK;
}

int cwm_mkdir_p(const char *path, cwm_err *err) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p == '/') {
      *p = 0;
      if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return cwm_fail(err, CWM_EIO, "%s: cannot create directory: %s", tmp, strerror(errno));
      *p = '/';
    }
  }
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
    return cwm_fail(err, CWM_EIO, "%s: cannot create directory: %s", tmp, strerror(errno));
  return CWM_OK;
}

void cwm_progressf(cwm_progress_fn fn, void *ud, const char *fmt, ...) {
  if (!fn) return;
  char buf[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fn(ud, buf);
}

int cwm_divisors(int n, int maxval, int *out, int maxout) {
  int lo = 0, hi[1600], nhi = 0; /* no int has more than 1600 divisors */
  for (long d = 1; d * d <= n; d++)
    if (n % d == 0) {
      if (d <= maxval && lo < maxout) out[lo++] = (int)d;
      if (d * d != n && n / d <= maxval && nhi < 1600) hi[nhi++] = (int)(n / d);
    }
  while (nhi > 0 && lo < maxout) out[lo++] = hi[--nhi];
  return lo;
}

long cwm_json_too_deep(const char *text, int max) {
  int depth = 0, in_str = 0;
  for (const char *p = text; *p; p++) {
    if (in_str) {
      if (*p == '\\') {
        if (!p[1]) break;
        p++;
      } else if (*p == '"') {
        in_str = 0;
      }
    } else if (*p == '"') {
      in_str = 1;
    } else if (*p == '[' || *p == '{') {
      if (++depth > max) return (long)(p - text) + 1;
    } else if (*p == ']' || *p == '}') {
      depth--;
    }
  }
  return 0;
}

int cwm_hset_has(const cwm_hset *s, uint64_t h) {
  if (!h) h = 1;
  if (!s->cap) return 0;
  for (size_t i = h & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
    if (s->h[i] == 0) return 0;
    if (s->h[i] == h) return 1;
  }
}

void cwm_hset_add(cwm_hset *s, uint64_t h) {
  if (!h) h = 1;
  if (cwm_hset_has(s, h)) return;
  if ((s->n + 1) * 2 > s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 256, oldcap = s->cap;
    uint64_t *old = s->h;
    s->h = cwm_xcalloc(cap, sizeof *s->h);
    s->cap = cap;
    s->n = 0;
    for (size_t i = 0; i < oldcap; i++)
      if (old[i]) cwm_hset_add(s, old[i]);
    free(old);
  }
  size_t i = h & (s->cap - 1);
  while (s->h[i]) i = (i + 1) & (s->cap - 1);
  s->h[i] = h;
  s->n++;
}

void *cwm_grow(void *p, size_t n, size_t *cap, size_t elem) {
  if (n < *cap) return p;
  size_t c = *cap ? *cap : 64;
  while (c <= n) c *= 2;
  *cap = c;
  return cwm_xrealloc(p, c * elem);
}

typedef struct {
  double v;
  int i;
} sort_item;

static int item_asc(const void *a, const void *b) {
  const sort_item *x = a, *y = b;
  return x->v < y->v ? -1 : x->v > y->v ? 1 : (x->i > y->i) - (x->i < y->i);
}

static int item_desc(const void *a, const void *b) {
  const sort_item *x = a, *y = b;
  return x->v > y->v ? -1 : x->v < y->v ? 1 : (x->i > y->i) - (x->i < y->i);
}

void cwm_argsort(const double *v, int n, int desc, int *idx) {
  sort_item *s = cwm_xmalloc(sizeof *s * (size_t)(n > 0 ? n : 1));
  for (int k = 0; k < n; k++) s[k] = (sort_item){isnan(v[k]) ? -INFINITY : v[k], k};
  qsort(s, (size_t)(n > 0 ? n : 0), sizeof *s, desc ? item_desc : item_asc);
  for (int k = 0; k < n; k++) idx[k] = s[k].i;
  free(s);
}

void *cwm_memdup(const void *p, size_t n) {
  void *q = cwm_xmalloc(n ? n : 1);
  if (n) memcpy(q, p, n);
  return q;
}

void cwm_parent_dir(const char *path, char *out, size_t n) {
  snprintf(out, n, "%s", path);
  char *slash = strrchr(out, '/');
  if (!slash) snprintf(out, n, ".");
  else if (slash == out) out[1] = 0;
  else *slash = 0;
}

int cwm_dir_writable(const char *dir) {
  char probe[4200];
  snprintf(probe, sizeof probe, "%s/.cwm-probe-XXXXXX", dir);
  int fd = mkstemp(probe);
  if (fd < 0) return 0;
  close(fd);
  unlink(probe);
  return 1;
}

void cwm_hostname(char *out, size_t n) {
  char h[256];
  if (!n) return;
  if (gethostname(h, sizeof h) != 0 || !h[0]) snprintf(h, sizeof h, "unknown");
  h[sizeof h - 1] = 0;
  size_t i = 0;
  for (; h[i] && i + 1 < n; i++) {
    char c = h[i];
    out[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ? c : '_';
  }
  out[i] = 0;
}

const char *cwm_data_file(const char *installed, const char *in_source, char *out, size_t n) {
  /* beside the running program, as installed: <prefix>/bin/cwm and <prefix>/share/cwm/<file> */
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = 0;
    char bin[4096], prefix[4096];
    cwm_parent_dir(exe, bin, sizeof bin);
    cwm_parent_dir(bin, prefix, sizeof prefix);
    snprintf(out, n, "%s/share/cwm/%s", prefix, installed);
    if (access(out, R_OK) == 0) return out;
  }
#ifdef CWM_SOURCE_DIR
  /* a program run from its build tree: the source tree, while it is there */
  snprintf(out, n, "%s/%s", CWM_SOURCE_DIR, in_source);
  if (access(out, R_OK) == 0) return out;
#endif
#ifdef CWM_DATA_DIR
  snprintf(out, n, "%s/%s", CWM_DATA_DIR, installed);
  if (access(out, R_OK) == 0) return out;
#endif
  return NULL;
}

void cwm_data_default_set(cwm_data_default *d, const char *path) {
  snprintf(d->chosen, sizeof d->chosen, "%s", path ? path : "");
}

const char *cwm_data_default_path(cwm_data_default *d) {
  if (d->chosen[0]) return d->chosen;
  return cwm_data_file(d->installed, d->in_source, d->found, sizeof d->found);
}

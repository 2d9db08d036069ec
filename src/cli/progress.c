/* progress.c: what a command says on stderr while it works.
 *
 * Plain (stderr not a terminal): cli_progress prints "cwm CMD: line", as the commands print their
 * own notes and errors. --json: every line on stderr is one JSON object, {"cmd", "kind", "msg",
 * "elapsed"} and "done", "total", "eta_s" where the line counts toward a total: stderr is replaced
 * by a stream (glibc's fopencookie) that turns each line written to it into one, so the notes and
 * errors commands print themselves come out as JSON too. On a terminal (TERM not dumb) the lines
 * scroll as before and a line that counts DONE/TOTAL also draws a bar under them (done/total,
 * rate, ETA), redrawn by the next such line and erased by any other output on stderr or once
 * DONE reaches TOTAL. The library's progress callbacks stay text lines; the counts are read from
 * them (the first "N/M" in a line, "ETA S s"). */
#define _GNU_SOURCE
#include "cli.h"
#include "env.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

enum { PLAIN, JSON, BAR };
static int g_mode = PLAIN;
static double g_t0;
static int g_wrapped;

/* the counts of the last line that had them, and whether the bar is the terminal's last line */
static struct {
  int up, active, nobs;
  char cmd[64];
  long done, total, done0;
  double t, t0, eta;
} g_bar;

static void put(const char *s, size_t n) {
  while (n > 0) {
    ssize_t k = write(2, s, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return;
    s += k;
    n -= (size_t)k;
  }
}

static void puts2(const char *s) { put(s, strlen(s)); }

/* The first "N/M" of a line that is not part of a path, a word or a decimal (0 <= N <= M, M > 0),
 * and the seconds of an "ETA S s" (-1 without). */
static int parse_counts(const char *line, long *done, long *total, double *eta) {
  int found = 0;
  *eta = -1;
  for (const char *p = line; *p && !found; p++) {
    if (!isdigit((unsigned char)*p)) continue;
    char *e, *f;
    long a = strtol(p, &e, 10);
    int glued = p > line && (isalnum((unsigned char)p[-1]) || strchr("/._-", p[-1]));
    if (glued || *e != '/' || !isdigit((unsigned char)e[1])) {
      p = e - 1;
      continue;
    }
    long b = strtol(e + 1, &f, 10);
    if (!isalnum((unsigned char)*f) && *f != '/' && !(*f == '.' && isdigit((unsigned char)f[1])) && a >= 0 && b > 0 &&
        a <= b) {
      *done = a;
      *total = b;
      found = 1;
    }
    p = f - 1;
  }
  const char *q = strstr(line, "ETA ");
  if (q) {
    char *e;
    double v = strtod(q + 4, &e);
    if (e != q + 4 && !strncmp(e, " s", 2) && isfinite(v) && v >= 0) *eta = v;
  }
  return found;
}

/* s as a JSON string: escapes, and a byte that is not valid UTF-8 as U+FFFD */
static void json_str(cwm_buf *b, const char *s) { cwm_buf_json_str(b, s, "\\ufffd"); }

static void emit_json(const char *cmd, const char *kind, const char *msg) {
  cwm_buf b;
  cwm_buf_init(&b);
  cwm_buf_puts(&b, "{\"cmd\":");
  json_str(&b, cmd);
  cwm_buf_printf(&b, ",\"kind\":\"%s\",\"msg\":", kind);
  json_str(&b, msg);
  cwm_buf_printf(&b, ",\"elapsed\":%.3f", cwm_now() - g_t0);
  long done, total;
  double eta;
  if (parse_counts(msg, &done, &total, &eta)) cwm_buf_printf(&b, ",\"done\":%ld,\"total\":%ld", done, total);
  if (eta >= 0) cwm_buf_printf(&b, ",\"eta_s\":%.0f", eta);
  cwm_buf_puts(&b, "}\n");
  put(b.s, b.len);
  cwm_buf_free(&b);
}

static void duration(char *buf, size_t n, double s) {
  if (s < 0) snprintf(buf, n, "?");
  else if (s < 60) snprintf(buf, n, "%.0fs", s);
  else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
  else snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
}

static void erase_bar(void) {
  if (!g_bar.up) return;
  puts2("\r\033[K");
  g_bar.up = 0;
}

static void draw_bar(void) {
  struct winsize ws;
  int w = ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
  if (w > 300) w = 300;
  double rate = g_bar.nobs >= 2 && g_bar.t > g_bar.t0 ? (g_bar.done - g_bar.done0) / (g_bar.t - g_bar.t0) : 0;
  char r[32] = "", eta[32], tail[128], line[512];
  if (rate >= 1) snprintf(r, sizeof r, "  %.1f/s", rate);
  else if (rate > 0) snprintf(r, sizeof r, "  %.1f/min", rate * 60);
  duration(eta, sizeof eta, g_bar.eta >= 0 ? g_bar.eta : rate > 0 ? (g_bar.total - g_bar.done) / rate : -1);
  double frac = (double)g_bar.done / (double)g_bar.total;
  snprintf(tail, sizeof tail, " %ld/%ld %3.0f%%%s  ETA %s", g_bar.done, g_bar.total, 100 * frac, r, eta);
  int head = snprintf(line, sizeof line, "cwm %s ", g_bar.cmd);
  int width = w - 1 - head - (int)strlen(tail) - 2;
  if (width > 40) width = 40;
  if (width >= 5) {
    int fill = (int)(frac * width + 0.5);
    line[head++] = '[';
    for (int i = 0; i < width; i++) line[head++] = i < fill ? '#' : '-';
    line[head++] = ']';
  }
  snprintf(line + head, sizeof line - (size_t)head, "%s", tail);
  if ((int)strlen(line) > w - 1) line[w - 1] = 0;
  puts2(line);
  g_bar.up = 1;
}

/* A line in bar mode: printed above the bar; its counts move the bar. Another progress line keeps
 * the bar; anything else on stderr takes it down until the next count. */
static void bar_line(const char *cmd, int progress, const char *text) {
  erase_bar();
  puts2(text);
  puts2("\n");
  long done, total;
  double eta;
  if (parse_counts(text, &done, &total, &eta)) {
    double now = cwm_now();
    if (total != g_bar.total || !g_bar.active || done < g_bar.done) {
      g_bar.done0 = done;
      g_bar.t0 = now;
      g_bar.nobs = 0;
    }
    snprintf(g_bar.cmd, sizeof g_bar.cmd, "%s", *cmd ? cmd : "cwm");
    g_bar.done = done;
    g_bar.total = total;
    g_bar.t = now;
    g_bar.eta = eta;
    g_bar.nobs++;
    g_bar.active = done < total;
    if (g_bar.active) draw_bar();
  } else if (progress && g_bar.active) {
    draw_bar();
  }
}

/* The command a line names, "cwm CMD: message" (CMD of lowercase words), into cmd; the message,
 * or NULL for a line in another form. */
static const char *split_prefix(const char *line, char *cmd, size_t n) {
  if (strncmp(line, "cwm ", 4)) return NULL;
  const char *p = line + 4;
  while ((*p >= 'a' && *p <= 'z') || *p == ' ' || *p == '-') p++;
  if (p == line + 4 || p[0] != ':' || p[1] != ' ' || (size_t)(p - line - 4) >= n) return NULL;
  snprintf(cmd, n, "%.*s", (int)(p - line - 4), line + 4);
  return p + 2;
}

/* A line written to stderr by anything but cli_progress: "cwm CMD: message", "cwm: message" or
 * other text (under the name of the command cli_parse last saw). */
static void text_line(const char *line) {
  char cmd[64] = "";
  const char *msg = split_prefix(line, cmd, sizeof cmd);
  if (g_mode == BAR) {
    bar_line(cmd, 0, line);
  } else if (msg) {
    emit_json(cmd, "text", msg);
  } else {
    emit_json(cli_command(), "text", strncmp(line, "cwm: ", 5) ? line : line + 5);
  }
}

#ifdef __GLIBC__
/* the replaced stderr: bytes gathered into lines (the stream's lock serializes the writers) */
static char *g_line;
static size_t g_len, g_cap;

static void flush_partial(void) {
  if (!g_len) return;
  g_line[g_len] = 0;
  g_len = 0;
  text_line(g_line);
}

static ssize_t cookie_write(void *cookie, const char *buf, size_t n) {
  (void)cookie;
  for (size_t i = 0; i < n; i++) {
    if (buf[i] == '\n') {
      if (!g_line) g_line = cwm_xmalloc(g_cap = 256);
      g_line[g_len] = 0;
      g_len = 0;
      text_line(g_line);
      continue;
    }
    if (g_len + 2 > g_cap) g_line = cwm_xrealloc(g_line, g_cap = g_cap ? g_cap * 2 : 256);
    g_line[g_len++] = buf[i];
    if (g_len >= 1 << 20) flush_partial(); /* a line without an end is cut, not held */
  }
  return (ssize_t)n;
}

static void wrap_stderr(void) {
  if (g_wrapped) return;
  cookie_io_functions_t io = {.write = cookie_write};
  FILE *f = fopencookie(NULL, "w", io);
  if (!f) return;
  setvbuf(f, NULL, _IONBF, 0);
  fflush(stderr);
  stderr = f;
  g_wrapped = 1;
}

/* stdout on the same terminal as the bar: a line printed there takes the bar down first */
static ssize_t stdout_write(void *cookie, const char *buf, size_t n) {
  (void)cookie;
  if (g_bar.up) {
    flockfile(stderr);
    erase_bar();
    funlockfile(stderr);
  }
  for (size_t left = n; left > 0;) {
    ssize_t k = write(1, buf + (n - left), left);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return n - left ? (ssize_t)(n - left) : -1;
    left -= (size_t)k;
  }
  return (ssize_t)n;
}

static void wrap_stdout(void) {
  cookie_io_functions_t io = {.write = stdout_write};
  FILE *f = fopencookie(NULL, "w", io);
  if (!f) return;
  setvbuf(f, NULL, _IOLBF, BUFSIZ);
  fflush(stdout);
  stdout = f;
}
#else
static void flush_partial(void) {}
static void wrap_stderr(void) {} /* only cli_progress's lines change where stderr cannot be replaced */
static void wrap_stdout(void) {}
#endif

static void report_end(void) {
  fflush(stdout);
  if (g_wrapped) {
    flockfile(stderr);
    flush_partial();
    erase_bar();
    funlockfile(stderr);
  }
}

void cli_report_begin(void) {
  g_t0 = cwm_now();
  atexit(report_end);
  if (isatty(2) && !cli_env_plain_terminal()) {
    wrap_stderr();
    if (g_wrapped) g_mode = BAR; /* the bar needs to see every other line, to get out of its way */
    if (g_wrapped && isatty(1)) wrap_stdout();
  }
}

void cli_report_json(void) {
  if (g_mode == JSON) return;
  flockfile(stderr);
  erase_bar();
  g_mode = JSON;
  funlockfile(stderr);
  wrap_stderr();
}

void cli_progress(void *ud, const char *line) {
  const cli_say *s = ud;
  if (s->quiet) return;
  if (g_mode == PLAIN) {
    fprintf(stderr, "cwm %s: %s\n", s->cmd, line);
    return;
  }
  flockfile(stderr);
  if (g_mode == JSON) {
    emit_json(s->cmd, "progress", line);
  } else {
    cwm_buf b;
    cwm_buf_init(&b);
    cwm_buf_printf(&b, "cwm %s: %s", s->cmd, line);
    bar_line(s->cmd, 1, b.s);
    cwm_buf_free(&b);
  }
  funlockfile(stderr);
}

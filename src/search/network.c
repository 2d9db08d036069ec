/* network.c: network files. One subgraph per line, "name <TAB> weight <TAB> op <TAB> params",
 * '#' to the end of a line is a comment. Each line is checked whole so that a mistake is reported
 * where it is (path:line:col) instead of surfacing later as a workload nobody asked for. */
#include "cwm/scheduler.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 4

static int is_ident(const char *s, size_t n) {
  if (n == 0 || n > 60 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '_') return 0;
  return 1;
}

typedef struct {
  const char *path;
  int line;
  cwm_err *err;
} ctx;

static int at(const ctx *c, int col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int at(const ctx *c, int col, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return cwm_fail(c->err, CWM_EPARSE, "%s:%d:%d: %s", c->path, c->line, col, msg);
}

/* The column of the first 'quoted' word of an op-library message inside the spec, so that
 * "unknown key 'Q'" points at Q; the op column when the word is not found. */
static int col_of_quoted(const char *msg, const char *line, const char *from, int dflt) {
  const char *q = strchr(msg, '\'');
  if (!q) return dflt;
  const char *e = strchr(q + 1, '\'');
  if (!e || e == q + 1) return dflt;
  size_t n = (size_t)(e - q - 1);
  for (const char *p = from; *p; p++) {
    /* a whole word, or a key followed by '=' */
    if (strncmp(p, q + 1, n) == 0 && (p == from || isspace((unsigned char)p[-1]) || p[-1] == '=') &&
        (!p[n] || isspace((unsigned char)p[n]) || p[n] == '='))
      return (int)(p - line) + 1;
  }
  return dflt;
}

static int trim_field(const char *b, const char *e, const char **fb, const char **fe) {
  while (b < e && (*b == ' ' || *b == '\r')) b++;
  while (e > b && (e[-1] == ' ' || e[-1] == '\r')) e--;
  *fb = b;
  *fe = e;
  return (int)(e - b);
}

static int parse_line(const ctx *c, char *line, cwm_network *net, int *cap) {
  char *hash = strchr(line, '#');
  if (hash) *hash = 0;
  size_t len = strlen(line);
  while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) line[--len] = 0;
  const char *p = line;
  while (*p == ' ') p++;
  if (!*p) return 0;
  const char *fb[MAX_FIELDS], *fe[MAX_FIELDS];
  int nf = 0;
  const char *s = line;
  for (;;) {
    const char *tab = strchr(s, '\t');
    const char *e = tab ? tab : s + strlen(s);
    if (nf == MAX_FIELDS)
      return at(c, (int)(s - line) + 1, "unexpected fifth field: a line is name<TAB>weight<TAB>op<TAB>params");
    trim_field(s, e, &fb[nf], &fe[nf]);
    nf++;
    if (!tab) break;
    s = tab + 1;
  }
  static const char *const what[MAX_FIELDS] = {"name", "weight", "op", "params"};
  if (nf < MAX_FIELDS)
    return at(c, (int)len + 1, "expected 4 tab-separated fields (name, weight, op, params), found %d: no %s", nf,
              what[nf]);
  for (int i = 0; i < MAX_FIELDS; i++)
    if (fb[i] == fe[i]) return at(c, (int)(fb[i] - line) + 1, "empty %s field", what[i]);
  int ncol = (int)(fb[0] - line) + 1, wcol = (int)(fb[1] - line) + 1, ocol = (int)(fb[2] - line) + 1;
  size_t nn = (size_t)(fe[0] - fb[0]);
  if (!is_ident(fb[0], nn))
    return at(c, ncol, "name '%.*s' is not a C identifier (letters, digits and '_', not starting with a digit, "
                       "at most 60 characters)", (int)(nn < 80 ? nn : 80), fb[0]);
  for (int i = 0; i < net->n; i++)
    if (strlen(net->sub[i].name) == nn && memcmp(net->sub[i].name, fb[0], nn) == 0)
      return at(c, ncol, "name '%s' already used on line %d", net->sub[i].name, net->sub[i].line);
  char wtxt[64];
  size_t wn = (size_t)(fe[1] - fb[1]);
  double weight = 0;
  char *end = NULL;
  if (wn < sizeof wtxt) {
    memcpy(wtxt, fb[1], wn);
    wtxt[wn] = 0;
    weight = strtod(wtxt, &end);
  }
  if (wn >= sizeof wtxt || end == wtxt || *end || !isfinite(weight) || weight <= 0 || weight > 1e9)
    return at(c, wcol, "weight '%.*s' is not a positive number (how often the subgraph runs, at most 1e9)",
              (int)(wn < 40 ? wn : 40), fb[1]);
  size_t on = (size_t)(fe[2] - fb[2]), pn = (size_t)(fe[3] - fb[2]);
  if (on >= sizeof net->sub[0].op || memchr(fb[2], ' ', on))
    return at(c, ocol, "op '%.*s' is not an op name (dense, matmul, batch_matmul, conv2d, dwconv2d, softmax, "
                       "layernorm)", (int)(on < 40 ? on : 40), fb[2]);
  if (pn >= sizeof net->sub[0].spec) return at(c, ocol, "op spec longer than %zu characters", sizeof net->sub[0].spec - 1);
  /* the op and its params as one spec, the tab between them a space */
  char spec[512];
  memcpy(spec, fb[2], pn);
  spec[pn] = 0;
  for (char *q = spec; *q; q++)
    if (*q == '\t') *q = ' ';
  cwm_err e = {0};
  char *text = cwm_op_to_text(spec, &e);
  if (!text) return at(c, col_of_quoted(e.msg, line, fb[2], ocol), "%s", e.msg);
  cwm_workload *w = cwm_workload_parse(text, &e);
  free(text);
  if (!w) return at(c, ocol, "%s", e.msg);
  memcpy(w->name, fb[0], nn);
  w->name[nn] = 0;
  char key[17];
  cwm_workload_key(w, key);
  for (int i = 0; i < net->n; i++) {
    char k2[17];
    cwm_workload_key(net->sub[i].w, k2);
    if (!strcmp(key, k2)) {
      cwm_workload_free(w);
      return at(c, ocol, "same workload as '%s' on line %d (one line per workload: add the weights)",
                net->sub[i].name, net->sub[i].line);
    }
  }
  if (net->n == *cap) {
    *cap = *cap ? *cap * 2 : 16;
    net->sub = cwm_xrealloc(net->sub, sizeof *net->sub * (size_t)*cap);
  }
  cwm_subgraph *g = &net->sub[net->n++];
  memset(g, 0, sizeof *g);
  memcpy(g->name, fb[0], nn);
  g->weight = weight;
  memcpy(g->op, fb[2], on);
  snprintf(g->spec, sizeof g->spec, "%s", spec);
  g->w = w;
  g->line = c->line;
  return 0;
}

cwm_network *cwm_network_parse(const char *text, const char *path, cwm_err *err) {
  if (!path) path = "<network>";
  cwm_network *net = cwm_xcalloc(1, sizeof *net);
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *dot = strrchr(base, '.');
  size_t bn = dot && dot != base ? (size_t)(dot - base) : strlen(base);
  if (bn >= sizeof net->name) bn = sizeof net->name - 1;
  memcpy(net->name, base, bn);
  int cap = 0;
  ctx c = {path, 0, err};
  const char *p = text ? text : "";
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    c.line++;
    char *line = cwm_xmalloc(n + 1);
    memcpy(line, p, n);
    line[n] = 0;
    int rc = parse_line(&c, line, net, &cap);
    free(line);
    if (rc) {
      cwm_network_free(net);
      return NULL;
    }
    p += n + (nl ? 1 : 0);
  }
  if (net->n == 0) {
    cwm_fail(err, CWM_EPARSE, "%s: no subgraphs (one line per subgraph: name<TAB>weight<TAB>op<TAB>params)", path);
    cwm_network_free(net);
    return NULL;
  }
  return net;
}

cwm_network *cwm_network_load(const char *path, cwm_err *err) {
  char *text = cwm_read_text(path, err);
  if (!text) return NULL;
  cwm_network *net = cwm_network_parse(text, path, err);
  free(text);
  return net;
}

void cwm_network_free(cwm_network *net) {
  if (!net) return;
  for (int i = 0; i < net->n; i++) cwm_workload_free(net->sub[i].w);
  free(net->sub);
  free(net);
}

double cwm_network_flops(const cwm_network *net) {
  double f = 0;
  for (int i = 0; i < net->n; i++) f += net->sub[i].weight * cwm_workload_flops(net->sub[i].w);
  return f;
}

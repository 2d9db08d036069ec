/* dataset.c: trajectories as JSON lines, the streaming reader for trajectory files and tuning logs
 * (one bounded line buffer; bad lines skipped and counted), the split by workload key, a DAG
 * cache for replaying. It knows nothing of models or measuring. */
#define _GNU_SOURCE
#include "cwm/dataset.h"
#include "cwm/codegen.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_LINE (4 << 20) /* longer lines are corrupt: a trajectory is a few KB */

/* ------------------------------------------------------------------ format */

void cwm_traj_free(cwm_traj *t) {
  if (!t) return;
  free(t->workload);
  free(t->steps);
  free(t->target);
  memset(t, 0, sizeof *t);
}

static void put_str(cwm_buf *b, const char *s) {
  cwm_buf_putc(b, '"');
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    unsigned c = *p;
    if (c == '"' || c == '\\') cwm_buf_putc(b, '\\'), cwm_buf_putc(b, (char)c);
    else if (c == '\n') cwm_buf_puts(b, "\\n");
    else if (c == '\t') cwm_buf_puts(b, "\\t");
    else if (c == '\r') cwm_buf_puts(b, "\\r");
    else if (c < 0x20 || c == 0x7f) cwm_buf_printf(b, "\\u%04x", c);
    else cwm_buf_putc(b, (char)c);
  }
  cwm_buf_putc(b, '"');
}

void cwm_traj_to_json(const cwm_traj *t, cwm_buf *out) {
  cwm_buf_puts(out, "{\"key\":");
  put_str(out, t->key);
  cwm_buf_puts(out, ",\"name\":");
  put_str(out, t->name);
  if (t->final[0]) {
    cwm_buf_puts(out, ",\"final\":");
    put_str(out, t->final);
  }
  cwm_buf_puts(out, ",\"workload\":");
  put_str(out, t->workload);
  cwm_buf_puts(out, ",\"steps\":");
  cwm_steps_print(t->steps, t->nsteps, out);
  cwm_buf_putc(out, '}');
}

static int is_hex16(const char *s) {
  if (strlen(s) != 16) return 0;
  for (int i = 0; i < 16; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

static int parse_traj_json(const char *line, cwm_traj *t, cwm_err *err) {
  cJSON *j = cJSON_Parse(line);
  if (!j) return cwm_fail(err, CWM_EPARSE, "trajectory: not JSON");
  int rc = 0;
  const cJSON *key = cJSON_GetObjectItemCaseSensitive(j, "key");
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
  const cJSON *fin = cJSON_GetObjectItemCaseSensitive(j, "final");
  const cJSON *wl = cJSON_GetObjectItemCaseSensitive(j, "workload");
  const cJSON *steps = cJSON_GetObjectItemCaseSensitive(j, "steps");
  if (!cJSON_IsObject(j) || !cJSON_IsString(key) || !is_hex16(key->valuestring))
    rc = cwm_fail(err, CWM_EPARSE, "trajectory: \"key\" must be 16 hex digits");
  else if (!cJSON_IsArray(steps))
    rc = cwm_fail(err, CWM_EPARSE, "trajectory: \"steps\" must be a list");
  else if (wl && !cJSON_IsString(wl))
    rc = cwm_fail(err, CWM_EPARSE, "trajectory: \"workload\" must be a string");
  else if (fin && (!cJSON_IsString(fin) || (fin->valuestring[0] && !is_hex16(fin->valuestring))))
    rc = cwm_fail(err, CWM_EPARSE, "trajectory: \"final\" must be 16 hex digits");
  else if (name && !cJSON_IsString(name))
    rc = cwm_fail(err, CWM_EPARSE, "trajectory: \"name\" must be a string");
  if (!rc) {
    memcpy(t->key, key->valuestring, 17);
    if (name) snprintf(t->name, sizeof t->name, "%s", name->valuestring);
    if (fin) snprintf(t->final, sizeof t->final, "%s", fin->valuestring);
    if (wl && wl->valuestring[0]) t->workload = cwm_xstrdup(wl->valuestring);
    char *st = cJSON_PrintUnformatted(steps);
    cwm_err e = {0};
    if (!st || cwm_steps_parse(st, &t->steps, &t->nsteps, &e))
      rc = cwm_fail(err, CWM_EPARSE, "trajectory: steps: %s", st ? e.msg : "out of memory");
    else if (t->nsteps > CWM_MAX_STEPS)
      rc = cwm_fail(err, CWM_EPARSE, "trajectory: %d steps (max %d)", t->nsteps, CWM_MAX_STEPS);
    free(st);
  }
  cJSON_Delete(j);
  if (rc) cwm_traj_free(t);
  return rc;
}

int cwm_traj_parse(const char *line, cwm_traj *t, cwm_err *err) {
  memset(t, 0, sizeof *t);
  const char *p = line;
  while (*p == ' ' || *p == '\t') p++;
  if (!strncmp(p, "{\"i\"", 4)) { /* a tuning-log record */
    cwm_record r;
    if (cwm_record_parse(p, &r, err)) return err ? err->code : CWM_EPARSE;
    memcpy(t->key, r.key, sizeof t->key);
    memcpy(t->name, r.name, sizeof t->name);
    t->workload = r.workload && r.workload[0] ? r.workload : NULL;
    if (t->workload != r.workload) free(r.workload);
    r.workload = NULL;
    t->steps = r.steps;
    t->nsteps = r.nsteps;
    r.steps = NULL;
    t->measured = 1;
    t->error = r.error;
    t->cost = cwm_record_cost(&r);
    t->target = r.target && r.target[0] ? r.target : NULL;
    if (t->target != r.target) free(r.target);
    r.target = NULL;
    cwm_record_free(&r);
    return 0;
  }
  return parse_traj_json(p, t, err);
}

int cwm_traj_replay(const cwm_dag *d, const cwm_traj *t, cwm_state **out, cwm_state ***trace, cwm_err *err) {
  cwm_state *s = NULL;
  cwm_err e = {0};
  if (cwm_state_replay(d, t->steps, t->nsteps, &s, trace, &e))
    return cwm_fail(err, e.code, "trajectory %s (%s): %s", t->key, t->name, e.msg);
  if (t->final[0]) {
    char *p = cwm_state_print(s);
    char h[17];
    cwm_hash_hex(cwm_hash64(p, strlen(p)), h);
    free(p);
    if (strcmp(h, t->final)) {
      cwm_state_free(s);
      if (trace) {
        for (int i = 0; i <= t->nsteps; i++) cwm_state_free((*trace)[i]);
        free(*trace);
        *trace = NULL;
      }
      return cwm_fail(err, CWM_ESTEP, "trajectory %s (%s): the replayed final state prints with hash %s, stored %s",
                      t->key, t->name, h, t->final);
    }
  }
  if (out) *out = s;
  else cwm_state_free(s);
  return 0;
}

int cwm_split_part(const char *key, double valid_fraction) {
  char buf[64];
  int n = snprintf(buf, sizeof buf, "split:%s", key ? key : "");
  uint64_t h = cwm_hash64(buf, (size_t)n);
  /* mix, then the top 53 bits as a unit fraction */
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  double u = (double)(h >> 11) / 9007199254740992.0;
  return u < valid_fraction ? CWM_SPLIT_VALID : CWM_SPLIT_TRAIN;
}

int cwm_traj_group_by_key(const cwm_traj *t, int n, const unsigned char *skip, int *gid, int *first) {
  int ng = 0;
  int *f = first ? first : cwm_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) {
    gid[i] = -1;
    if (skip && skip[i]) continue;
    /* the newest groups first: a log holds a workload's records together */
    for (int k = ng - 1; k >= 0 && gid[i] < 0; k--)
      if (!strcmp(t[f[k]].key, t[i].key)) gid[i] = k;
    if (gid[i] < 0) {
      f[ng] = i;
      gid[i] = ng++;
    }
  }
  if (!first) free(f);
  return ng;
}

/* ------------------------------------------------------------------ reader */

struct cwm_traj_iter {
  cwm_lines *src;
  double valid_fraction;
  int part;
};

cwm_traj_iter *cwm_traj_iter_open(const char *path, cwm_err *err) {
  cwm_lines *src = cwm_lines_open(path, "trajectories", MAX_LINE, err);
  if (!src) return NULL;
  cwm_traj_iter *it = cwm_xcalloc(1, sizeof *it);
  it->src = src;
  it->part = CWM_SPLIT_ALL;
  return it;
}

void cwm_traj_iter_set_split(cwm_traj_iter *it, double valid_fraction, int part) {
  it->valid_fraction = valid_fraction;
  it->part = part;
}

/* a line's trajectory; one of the other part of the split is skipped */
static int parse_traj_line(const char *line, void *out, void *ctx, cwm_err *e) {
  const cwm_traj_iter *it = ctx;
  cwm_traj *t = out;
  if (cwm_traj_parse(line, t, e) != 0) return 1;
  if (it->part != CWM_SPLIT_ALL && cwm_split_part(t->key, it->valid_fraction) != it->part) {
    cwm_traj_free(t);
    return -1;
  }
  return 0;
}

int cwm_traj_iter_next(cwm_traj_iter *it, cwm_traj *t, cwm_err *err) {
  memset(t, 0, sizeof *t);
  return it ? cwm_lines_parse(it->src, parse_traj_line, t, it, err) : 0;
}

int cwm_traj_iter_batch(cwm_traj_iter *it, cwm_traj *batch, int max, cwm_err *err) {
  int n = 0;
  while (n < max) {
    int rc = cwm_traj_iter_next(it, &batch[n], err);
    if (rc < 0) {
      for (int i = 0; i < n; i++) cwm_traj_free(&batch[i]);
      return rc;
    }
    if (rc == 0) break;
    n++;
  }
  return n;
}

long cwm_traj_iter_nbad(const cwm_traj_iter *it) { return it ? cwm_lines_nbad(it->src) : 0; }
long cwm_traj_iter_line(const cwm_traj_iter *it) { return it ? cwm_lines_last_good(it->src) : 0; }
const char *cwm_traj_iter_last_bad(const cwm_traj_iter *it) { return it ? cwm_lines_last_bad(it->src) : ""; }
size_t cwm_traj_iter_bufsize(const cwm_traj_iter *it) { return it ? cwm_lines_bufsize(it->src) : 0; }

void cwm_traj_iter_close(cwm_traj_iter *it) {
  if (!it) return;
  cwm_lines_close(it->src);
  free(it);
}

/* ------------------------------------------------------------------ DAG cache */

typedef struct {
  char key[17];
  cwm_dag *dag;
  cwm_workload *w;
} dag_slot;

struct cwm_dag_cache {
  dag_slot *s;
  int n, cap;
};

cwm_dag_cache *cwm_dag_cache_new(void) { return cwm_xcalloc(1, sizeof(cwm_dag_cache)); }

const cwm_dag *cwm_dag_cache_get(cwm_dag_cache *c, const cwm_traj *t, cwm_err *err) {
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->s[i].key, t->key)) return c->s[i].dag;
  if (!t->workload) {
    cwm_fail(err, CWM_EPARSE, "trajectory %s (%s): no workload text", t->key, t->name);
    return NULL;
  }
  cwm_err e = {0};
  cwm_workload *w = cwm_workload_parse(t->workload, &e);
  if (!w) {
    cwm_fail(err, e.code, "trajectory %s (%s): workload: %s", t->key, t->name, e.msg);
    return NULL;
  }
  snprintf(w->name, sizeof w->name, "%s", t->name);
  cwm_dag *d = cwm_dag_new(w, &e);
  if (!d) {
    cwm_workload_free(w);
    cwm_fail(err, e.code, "trajectory %s (%s): %s", t->key, t->name, e.msg);
    return NULL;
  }
  if (c->n == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 16;
    c->s = cwm_xrealloc(c->s, sizeof *c->s * (size_t)c->cap);
  }
  dag_slot *s = &c->s[c->n++];
  memcpy(s->key, t->key, sizeof s->key);
  s->dag = d;
  s->w = w;
  return d;
}

void cwm_dag_cache_free(cwm_dag_cache *c) {
  if (!c) return;
  for (int i = 0; i < c->n; i++) {
    cwm_dag_free(c->s[i].dag);
    cwm_workload_free(c->s[i].w);
  }
  free(c->s);
  free(c);
}

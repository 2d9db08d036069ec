/* record.c: one tuning record <-> one JSON line in Ansor's v0.6 layout plus a "cwm" object.
 * Printing is hand-made so that the steps are exactly cwm_steps_print's text; parsing uses cJSON
 * and validates every field (a log line may be cut short or corrupt), never trusting the input. */
#include "cwm/record.h"

#include <cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEST_MAX 16

void cwm_record_init(cwm_record *r) {
  memset(r, 0, sizeof *r);
  snprintf(r->version, sizeof r->version, "%s", CWM_VERSION);
}

void cwm_record_free(cwm_record *r) {
  if (!r) return;
  free(r->workload);
  free(r->target);
  free(r->steps);
  memset(r, 0, sizeof *r);
}

void cwm_record_copy(cwm_record *dst, const cwm_record *src) {
  if (dst == src) return;
  *dst = *src;
  dst->workload = src->workload ? cwm_xstrdup(src->workload) : NULL;
  dst->target = src->target ? cwm_xstrdup(src->target) : NULL;
  dst->steps = NULL;
  dst->nsteps = 0;
  cwm_record_set_steps(dst, src->steps, src->nsteps);
}

void cwm_record_set_target(cwm_record *r, const cwm_target *t) {
  char buf[1024];
  cwm_target_string(t, buf, sizeof buf);
  free(r->target);
  r->target = cwm_xstrdup(buf);
  memset(r->hw, 0, sizeof r->hw);
  r->hw[0] = t->cores;
  r->hw[1] = t->vec_bytes;
  r->hw[2] = t->cache_line;
}

void cwm_record_set_steps(cwm_record *r, const cwm_step *steps, int n) {
  cwm_step *copy = NULL;
  if (n < 0 || !steps) n = 0;
  if (n > 0) {
    copy = cwm_xmalloc((size_t)n * sizeof *copy);
    memcpy(copy, steps, (size_t)n * sizeof *copy);
  }
  free(r->steps);
  r->steps = copy;
  r->nsteps = n;
}

double cwm_record_cost(const cwm_record *r) {
  if (r->error || r->ncosts <= 0) return CWM_FAILED_COST;
  int n = r->ncosts > CWM_MAX_COSTS ? CWM_MAX_COSTS : r->ncosts;
  double s = 0;
  for (int i = 0; i < n; i++) s += r->costs[i];
  return s / n;
}

/* ---------------------------------------------------------------- printing */

/* A JSON string; bytes that are not valid UTF-8 become '?' so the line stays valid JSON. */
static void put_str(cwm_buf *b, const char *s) { cwm_buf_json_str(b, s, "?"); }

/* a fixed-size field of cap bytes, not necessarily terminated, as a JSON string (at most 255 bytes) */
static void put_fixed(cwm_buf *b, const char *s, size_t cap) {
  char tmp[256];
  snprintf(tmp, sizeof tmp, "%.*s", (int)cap - 1, s);
  put_str(b, tmp);
}

static void put_num(cwm_buf *b, double v) {
  if (!isfinite(v)) v = CWM_FAILED_COST;
  cwm_buf_printf(b, "%.9g", v);
}

int cwm_record_to_json(const cwm_record *r, cwm_buf *out) {
  cwm_buf_puts(out, "{\"i\":[[");
  put_fixed(out, r->key, sizeof r->key);
  cwm_buf_putc(out, ',');
  put_str(out, r->target);
  cwm_buf_putc(out, ',');
  cwm_buf_putc(out, '[');
  for (int i = 0; i < 8; i++) cwm_buf_printf(out, i ? ",%d" : "%d", r->hw[i]);
  cwm_buf_puts(out, "],\"\",0,[]],[[],");
  int ns = r->steps ? r->nsteps : 0;
  cwm_steps_print(r->steps, ns < 0 ? 0 : ns, out);
  cwm_buf_puts(out, "]],\"r\":[[");
  int nc = r->ncosts < 0 ? 0 : r->ncosts > CWM_MAX_COSTS ? CWM_MAX_COSTS : r->ncosts;
  if (nc == 0 && r->error != 0) {
    put_num(out, CWM_FAILED_COST);
  } else {
    for (int i = 0; i < nc; i++) {
      if (i) cwm_buf_putc(out, ',');
      put_num(out, r->costs[i]);
    }
  }
  cwm_buf_printf(out, "],%d,", r->error);
  put_num(out, r->all_cost);
  cwm_buf_printf(out, ",%ld],\"v\":\"v0.6\",\"cwm\":{\"version\":", r->timestamp);
  put_fixed(out, r->version, sizeof r->version);
  cwm_buf_puts(out, ",\"name\":");
  put_fixed(out, r->name, sizeof r->name);
  cwm_buf_puts(out, ",\"workload\":");
  put_str(out, r->workload);
  cwm_buf_puts(out, ",\"msg\":");
  put_fixed(out, r->msg, sizeof r->msg);
  if (r->host[0]) {
    cwm_buf_puts(out, ",\"host\":");
    put_fixed(out, r->host, sizeof r->host);
  }
  cwm_buf_puts(out, "}}");
  return CWM_OK;
}

/* ----------------------------------------------------------------- parsing */

static int bad(cwm_err *err, const char *where, const char *what) {
  return cwm_fail(err, CWM_EPARSE, "record: %s: %s", where, what);
}

static int check_depth(const char *text, cwm_err *err) {
  long col = cwm_json_too_deep(text, NEST_MAX);
  if (col) return cwm_fail(err, CWM_EPARSE, "record: column %ld: nested too deep (more than %d levels)", col, NEST_MAX);
  return CWM_OK;
}

static int get_intv(const cJSON *j, double lo, double hi, double *out) {
  if (!cJSON_IsNumber(j)) return 0;
  double d = j->valuedouble;
  if (!isfinite(d) || d != floor(d) || d < lo || d > hi) return 0;
  *out = d;
  return 1;
}

/* Copies a JSON string into a fixed buffer; 0 if not a string or too long. */
static int get_fixed(const cJSON *j, char *dst, size_t cap) {
  if (!cJSON_IsString(j) || !j->valuestring) return 0;
  size_t n = strlen(j->valuestring);
  if (n >= cap) return 0;
  memcpy(dst, j->valuestring, n + 1);
  return 1;
}

static int is_hex16(const char *s) {
  for (int i = 0; i < 16; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return s[16] == 0;
}

static int parse_tree(const cJSON *root, cwm_record *r, cwm_err *err) {
  if (!cJSON_IsObject(root)) return bad(err, "line", "expected a JSON object");
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "i");
  if (!cJSON_IsArray(in) || cJSON_GetArraySize(in) != 2)
    return bad(err, "\"i\"", "expected [[key, target, hardware, ...], [[], steps]]");
  const cJSON *task = in->child, *st = in->child->next;
  if (!cJSON_IsArray(task) || cJSON_GetArraySize(task) < 3)
    return bad(err, "\"i\"[0]", "expected [key, target, hardware, ...]");
  const cJSON *key = task->child, *target = key->next, *hw = target->next;
  if (!cJSON_IsString(key) || !key->valuestring || strlen(key->valuestring) != 16 ||
      !is_hex16(key->valuestring))
    return bad(err, "\"i\"[0][0] (workload key)", "expected 16 lowercase hex digits");
  memcpy(r->key, key->valuestring, 17);
  if (!cJSON_IsString(target) || !target->valuestring)
    return bad(err, "\"i\"[0][1] (target)", "expected a string");
  if (!cJSON_IsArray(hw) || cJSON_GetArraySize(hw) != 8)
    return bad(err, "\"i\"[0][2] (hardware)", "expected an array of 8 integers");
  int k = 0;
  for (const cJSON *e = hw->child; e; e = e->next, k++) {
    double d;
    if (!get_intv(e, INT_MIN, INT_MAX, &d))
      return bad(err, "\"i\"[0][2] (hardware)", "expected an array of 8 integers");
    r->hw[k] = (int)d;
  }
  if (!cJSON_IsArray(st) || cJSON_GetArraySize(st) != 2 || !cJSON_IsArray(st->child))
    return bad(err, "\"i\"[1]", "expected [[], steps]");
  const cJSON *steps = st->child->next;
  if (!cJSON_IsArray(steps)) return bad(err, "\"i\"[1][1] (steps)", "expected an array of steps");

  const cJSON *res = cJSON_GetObjectItemCaseSensitive(root, "r");
  if (!cJSON_IsArray(res) || cJSON_GetArraySize(res) != 4)
    return bad(err, "\"r\"", "expected [costs, error, all_cost, timestamp]");
  const cJSON *costs = res->child, *error = costs->next, *all = error->next, *ts = all->next;
  if (!cJSON_IsArray(costs)) return bad(err, "\"r\"[0] (costs)", "expected an array of numbers");
  k = 0;
  for (const cJSON *e = costs->child; e; e = e->next, k++) {
    if (k >= CWM_MAX_COSTS) return bad(err, "\"r\"[0] (costs)", "more than 32 costs");
    if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble))
      return bad(err, "\"r\"[0] (costs)", "expected an array of numbers");
    r->costs[k] = e->valuedouble;
  }
  r->ncosts = k;
  double d;
  if (!get_intv(error, 0, INT_MAX, &d)) return bad(err, "\"r\"[1] (error)", "expected a non-negative integer");
  r->error = (int)d;
  /* a latency is a positive number of seconds: a zero or negative one would become the best
   * schedule of a resumed run (and be exported); failed records carry Ansor's 1e10 */
  for (int i = 0; i < r->ncosts && !r->error; i++)
    if (!(r->costs[i] > 0)) return bad(err, "\"r\"[0] (costs)", "a cost is not a positive number of seconds");
  if (!cJSON_IsNumber(all) || !isfinite(all->valuedouble))
    return bad(err, "\"r\"[2] (all_cost)", "expected a number");
  r->all_cost = all->valuedouble;
  if (!get_intv(ts, -9.0e15, 9.0e15, &d) || d < (double)LONG_MIN || d > (double)LONG_MAX)
    return bad(err, "\"r\"[3] (timestamp)", "expected an integer");
  r->timestamp = (long)d;

  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "v");
  if (v && !cJSON_IsString(v)) return bad(err, "\"v\"", "expected a string");

  const cJSON *cw = cJSON_GetObjectItemCaseSensitive(root, "cwm");
  if (cw) {
    if (!cJSON_IsObject(cw)) return bad(err, "\"cwm\"", "expected an object");
    const cJSON *x;
    if ((x = cJSON_GetObjectItemCaseSensitive(cw, "version")) && !get_fixed(x, r->version, sizeof r->version))
      return bad(err, "\"cwm\".version", "expected a string of at most 15 bytes");
    if ((x = cJSON_GetObjectItemCaseSensitive(cw, "name")) && !get_fixed(x, r->name, sizeof r->name))
      return bad(err, "\"cwm\".name", "expected a string of at most 63 bytes");
    if ((x = cJSON_GetObjectItemCaseSensitive(cw, "msg")) && !get_fixed(x, r->msg, sizeof r->msg))
      return bad(err, "\"cwm\".msg", "expected a string of at most 255 bytes");
    if ((x = cJSON_GetObjectItemCaseSensitive(cw, "host")) && !get_fixed(x, r->host, sizeof r->host))
      return bad(err, "\"cwm\".host", "expected a string of at most 63 bytes");
    if ((x = cJSON_GetObjectItemCaseSensitive(cw, "workload"))) {
      if (!cJSON_IsString(x) || !x->valuestring) return bad(err, "\"cwm\".workload", "expected a string");
      r->workload = cwm_xstrdup(x->valuestring);
    }
  }

  /* Steps last: re-printed compactly and handed to the step parser, which owns their rules. */
  char *text = cJSON_PrintUnformatted(steps);
  if (!text) return cwm_fail(err, CWM_EPARSE, "record: steps: cannot re-print");
  cwm_err serr = {0};
  int rc = cwm_steps_parse(text, &r->steps, &r->nsteps, &serr);
  cJSON_free(text);
  if (rc) return cwm_fail(err, CWM_EPARSE, "record: \"i\"[1][1] (steps): %s", serr.msg);
  r->target = cwm_xstrdup(target->valuestring);
  return CWM_OK;
}

int cwm_record_parse(const char *line, cwm_record *r, cwm_err *err) {
  memset(r, 0, sizeof *r);
  if (!line) return cwm_fail(err, CWM_EPARSE, "record: no text");
  if (check_depth(line, err)) return CWM_EPARSE;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithOpts(line, &end, 1);
  if (!root) {
    long col = end && end >= line ? (long)(end - line) + 1 : 1;
    return cwm_fail(err, CWM_EPARSE, "record: column %ld: JSON syntax error%s", col,
                    end && *end ? "" : " (unexpected end of line)");
  }
  int rc = parse_tree(root, r, err);
  cJSON_Delete(root);
  if (rc) cwm_record_free(r);
  return rc;
}

int cwm_record_same_target(const cwm_record *r, const char *target) {
  if (!r->target || !r->target[0] || !target) return 1;
  const char *mine = strstr(target, " -threads="), *theirs = strstr(r->target, " -threads=");
  return mine && theirs && !strcmp(mine, theirs);
}

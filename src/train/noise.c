/* noise.c: noise pairs for the encoder's contrastive training: two printed states that mean the
 * same computation written differently (the same schedule on a shape one larger or smaller, with
 * the axes renamed, or with two independent statements swapped). Built on demand from a workload
 * and a step list; nothing is measured here. */
#include "cwm/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cwm_noise_info_free(cwm_noise_info *info) {
  if (!info) return;
  cwm_workload_free(info->wb);
  free(info->steps_b);
  memset(info, 0, sizeof *info);
}

static cwm_workload *copy_workload(const cwm_workload *w, cwm_err *err) {
  char *t = cwm_workload_print(w);
  cwm_workload *c = cwm_workload_parse(t, err);
  free(t);
  if (c) memcpy(c->name, w->name, sizeof c->name);
  return c;
}

static int replay_on(const cwm_dag *d, const cwm_step *steps, int n, int shrink, cwm_state **out, cwm_err *err) {
  cwm_state *s = cwm_state_init(d);
  for (int i = 0; i < n; i++) {
    cwm_step st = steps[i];
    if (st.kind == CWM_S_SP && st.stage >= 0 && st.stage < s->nstages && st.iter >= 0 &&
        st.iter < s->stages[st.stage].niters) {
      const cwm_stage *sg = &s->stages[st.stage];
      int ext = sg->nodes[sg->iters[st.iter]].extent;
      if (st.extent) st.extent = ext;
      while (shrink) {
        long prod = 1;
        int big = -1;
        for (int k = 0; k < st.n; k++) {
          prod *= st.v[k] ? st.v[k] : 1;
          if (st.v[k] > 1 && (big < 0 || st.v[k] > st.v[big])) big = k;
        }
        if (prod <= ext || big < 0) break;
        st.v[big]--;
      }
    }
    cwm_err e = {0};
    if (cwm_state_apply(s, &st, &e)) {
      cwm_state_free(s);
      return cwm_fail(err, e.code, "step %d: %s", i, e.msg);
    }
  }
  *out = s;
  return 0;
}

int cwm_replay_fit(const cwm_dag *d, const cwm_step *steps, int n, cwm_state **out, cwm_err *err) {
  return replay_on(d, steps, n, 1, out, err);
}

int cwm_replay_retarget(const cwm_dag *d, const cwm_step *steps, int n, cwm_state **out, cwm_err *err) {
  return replay_on(d, steps, n, 0, out, err);
}

static const char *const size_keys[][5] = {
    {"dense", "M", "N", "K", NULL},  {"matmul", "M", "N", "K", NULL},     {"batch_matmul", "B", "M", "N", "K"},
    {"conv2d", "C", "H", "W", "K"},  {"dwconv2d", "C", "H", "W", NULL},   {"softmax", "B", "M", "N", NULL},
    {"layernorm", "M", "N", NULL, NULL},
};

/* spec with key's value changed by delta into out; 0 if the key is absent or would reach 0. */
static int respec(const char *spec, const char *key, int delta, char *out, size_t n, int *from, int *to) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", spec);
  size_t len = 0;
  int found = 0;
  out[0] = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
    char *eq = strchr(tok, '=');
    char piece[96];
    if (eq && (size_t)(eq - tok) == strlen(key) && !strncmp(tok, key, strlen(key))) {
      int v = atoi(eq + 1);
      if (v + delta < 1) return 0;
      *from = v;
      *to = v + delta;
      snprintf(piece, sizeof piece, "%s=%d", key, v + delta);
      found = 1;
    } else {
      snprintf(piece, sizeof piece, "%s", tok);
    }
    len += (size_t)snprintf(out + len, len < n ? n - len : 0, "%s%s", len ? " " : "", piece);
  }
  return found && len < n;
}

static int noise_shape(const cwm_dag *d, const cwm_step *steps, int n, cwm_rng *r, cwm_state **sb,
                       cwm_noise_info *info, cwm_err *err) {
  const cwm_workload *w = cwm_dag_workload(d);
  char spec[512];
  cwm_err e = {0};
  if (cwm_workload_spec(w, spec, sizeof spec, &e)) return cwm_fail(err, e.code, "noise kind 0: %s", e.msg);
  int row = -1;
  for (int i = 0; i < (int)(sizeof size_keys / sizeof size_keys[0]); i++)
    if (!strncmp(spec, size_keys[i][0], strlen(size_keys[i][0])) && spec[strlen(size_keys[i][0])] == ' ') row = i;
  if (row < 0) return cwm_fail(err, CWM_EINTERNAL, "noise kind 0: no size keys for '%s'", spec);
  /* every (key, +-1), in a random order */
  int cand[8][2], nc = 0;
  for (int k = 1; k < 5 && size_keys[row][k]; k++)
    for (int dlt = -1; dlt <= 1; dlt += 2) cand[nc][0] = k, cand[nc][1] = dlt, nc++;
  for (int i = nc - 1; i > 0; i--) {
    int j = cwm_rng_int(r, i + 1), t0 = cand[i][0], t1 = cand[i][1];
    cand[i][0] = cand[j][0], cand[i][1] = cand[j][1];
    cand[j][0] = t0, cand[j][1] = t1;
  }
  cwm_err last = {0};
  cwm_fail(&last, CWM_ESTEP, "no dimension of '%s' can change by one", spec);
  for (int c = 0; c < nc; c++) {
    char spec2[512];
    int from = 0, to = 0;
    const char *key = size_keys[row][cand[c][0]];
    if (!respec(spec, key, cand[c][1], spec2, sizeof spec2, &from, &to)) continue;
    cwm_workload *w2 = cwm_workload_from_spec(spec2, NULL, &last);
    if (!w2) continue;
    snprintf(w2->name, sizeof w2->name, "%.40s.%s%+d", w->name, key, cand[c][1]);
    cwm_dag *d2 = cwm_dag_new(w2, &last);
    cwm_state *s2 = NULL;
    if (d2 && cwm_replay_fit(d2, steps, n, &s2, &last) == 0) {
      info->kind = CWM_NOISE_SHAPE;
      info->wb = w2;
      info->nsteps_b = s2->nsteps;
      info->steps_b = cwm_xmalloc(sizeof *info->steps_b * (size_t)(s2->nsteps ? s2->nsteps : 1));
      memcpy(info->steps_b, s2->steps, sizeof *info->steps_b * (size_t)s2->nsteps);
      snprintf(info->what, sizeof info->what, "%s %d -> %d", key, from, to);
      *sb = s2;
      /* s2 points into d2; the caller frees it with the state (see below) */
      return 0;
    }
    cwm_dag_free(d2);
    cwm_workload_free(w2);
  }
  return cwm_fail(err, last.code, "noise kind 0: %s", last.msg);
}

static int is_reserved(const char *s) {
  static const char *const words[] = {"sum", "max", "min", "select", "exp", "tanh", "erf", "sqrt", "rsqrt", "gelu",
                                      "relu", "input", "output", NULL};
  for (int i = 0; words[i]; i++)
    if (!strcmp(words[i], s)) return 1;
  return 0;
}

static int noise_rename(const cwm_dag *d, const cwm_step *steps, int n, cwm_rng *r, cwm_state **sb,
                        cwm_noise_info *info, cwm_err *err) {
  static const char *const pool[] = {"i", "j", "k", "l", "m", "n", "p", "q", "r", "s", "t", "u", "v", "x", "y", "z",
                                     "ii", "jj", "kk", "ax", "ay", "az", "oc", "ic", "oh", "ow", "kh", "kw", "bi",
                                     "row", "col", "red", "h", "w", "c", "b", "e", "f", "g", "a", "d"};
  const int npool = (int)(sizeof pool / sizeof pool[0]);
  cwm_err e = {0};
  cwm_workload *w2 = copy_workload(cwm_dag_workload(d), &e);
  if (!w2) return cwm_fail(err, e.code, "noise kind 1: %s", e.msg);
  /* distinct old names, and a fresh injective map */
  char old[64][CWM_MAX_NAME], neu[64][CWM_MAX_NAME];
  int nn = 0;
  for (int o = 0; o < w2->nops; o++) {
    const cwm_op *op = &w2->ops[o];
    if (op->is_input) continue;
    for (int a = 0; a < op->ndim + op->nred; a++) {
      const char *nm = a < op->ndim ? op->axis[a] : op->red_axis[a - op->ndim];
      int have = 0;
      for (int i = 0; i < nn && !have; i++) have = !strcmp(old[i], nm);
      if (!have && nn < 64) snprintf(old[nn++], CWM_MAX_NAME, "%s", nm);
    }
  }
  for (int i = 0; i < nn; i++) {
    for (int tries = 0;; tries++) {
      char cand[CWM_MAX_NAME];
      if (tries < 200) snprintf(cand, sizeof cand, "%s", pool[cwm_rng_int(r, npool)]);
      else snprintf(cand, sizeof cand, "v%d", tries);
      if (tries < 400 && tries % 3 == 2) { /* sometimes a numbered name */
        size_t l = strlen(cand);
        snprintf(cand + l, sizeof cand - l, "%d", cwm_rng_int(r, 10));
      }
      int bad = !strcmp(cand, old[i]) || is_reserved(cand) || !cwm_ident_valid(cand);
      for (int o = 0; o < w2->nops && !bad; o++) bad = !strcmp(w2->ops[o].name, cand);
      for (int k = 0; k < i && !bad; k++) bad = !strcmp(neu[k], cand);
      if (!bad) {
        snprintf(neu[i], CWM_MAX_NAME, "%s", cand);
        break;
      }
    }
  }
  for (int o = 0; o < w2->nops; o++) {
    cwm_op *op = &w2->ops[o];
    if (op->is_input) continue;
    for (int a = 0; a < op->ndim + op->nred; a++) {
      char *nm = a < op->ndim ? op->axis[a] : op->red_axis[a - op->ndim];
      for (int i = 0; i < nn; i++)
        if (!strcmp(old[i], nm)) {
          snprintf(nm, CWM_MAX_NAME, "%s", neu[i]);
          break;
        }
    }
  }
  /* through the text, so that the renamed workload is one the parser accepts */
  cwm_workload *w3 = copy_workload(w2, &e);
  cwm_workload_free(w2);
  if (!w3) return cwm_fail(err, e.code, "noise kind 1: renamed workload: %s", e.msg);
  cwm_dag *d3 = cwm_dag_new(w3, &e);
  cwm_state *s3 = NULL;
  if (!d3 || cwm_state_replay(d3, steps, n, &s3, NULL, &e)) {
    cwm_dag_free(d3);
    cwm_workload_free(w3);
    return cwm_fail(err, e.code, "noise kind 1: %s", e.msg);
  }
  info->kind = CWM_NOISE_RENAME;
  info->wb = w3;
  info->nsteps_b = n;
  info->steps_b = cwm_xmalloc(sizeof *info->steps_b * (size_t)(n ? n : 1));
  memcpy(info->steps_b, steps, sizeof *info->steps_b * (size_t)n);
  size_t l = (size_t)snprintf(info->what, sizeof info->what, "axes renamed:");
  for (int i = 0; i < nn && l < sizeof info->what; i++)
    l += (size_t)snprintf(info->what + l, sizeof info->what - l, " %s->%s", old[i], neu[i]);
  *sb = s3;
  return 0;
}

static int stage_by_name(const cwm_state *s, const char *name) {
  for (int i = 0; i < s->nstages; i++)
    if (!strcmp(cwm_stage_name(s, i), name)) return i;
  return -1;
}

static void swap_reads(cwm_expr *e, int a, int b) {
  if (!e) return;
  if (e->kind == CWM_X_READ) e->tensor = e->tensor == a ? b : e->tensor == b ? a : e->tensor;
  for (int i = 0; i < e->nargs; i++) swap_reads(e->args[i], a, b);
}

/* 0 and *sb set: done; CWM_ENOSCHED: no independent pair (caller falls back). */
static int noise_reorder(const cwm_dag *d, const cwm_step *steps, int n, cwm_rng *r, cwm_state **sb,
                         cwm_noise_info *info, cwm_err *err) {
  const cwm_workload *w = cwm_dag_workload(d);
  int pairs[CWM_MAX_OPS], np = 0;
  for (int a = 0; a + 1 < w->nops; a++)
    if (!w->ops[a].is_input && !w->ops[a + 1].is_input && !cwm_expr_reads(w->ops[a + 1].body, a)) pairs[np++] = a;
  if (!np) return CWM_ENOSCHED;
  int a = pairs[cwm_rng_int(r, np)];
  cwm_err e = {0};
  cwm_workload *w2 = copy_workload(w, &e);
  if (!w2) return cwm_fail(err, e.code, "noise kind 2: %s", e.msg);
  cwm_op tmp = w2->ops[a];
  w2->ops[a] = w2->ops[a + 1];
  w2->ops[a + 1] = tmp;
  for (int o = 0; o < w2->nops; o++) swap_reads(w2->ops[o].body, a, a + 1);
  if (w2->output == a) w2->output = a + 1;
  else if (w2->output == a + 1) w2->output = a;
  cwm_workload *w3 = copy_workload(w2, &e);
  cwm_workload_free(w2);
  if (!w3) return cwm_fail(err, e.code, "noise kind 2: reordered workload: %s", e.msg);
  cwm_dag *d3 = cwm_dag_new(w3, &e);
  if (!d3) {
    cwm_workload_free(w3);
    return cwm_fail(err, e.code, "noise kind 2: %s", e.msg);
  }
  /* replay both in lockstep; stage ids map by stage name (derived stages are named after
   * their source, so the names match in both) */
  cwm_state *sa = cwm_state_init(d), *s3 = cwm_state_init(d3);
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    cwm_step st = steps[i];
    int ok = st.stage >= 0 && st.stage < sa->nstages;
    if (ok) st.stage = stage_by_name(s3, cwm_stage_name(sa, steps[i].stage));
    if (ok && st.kind == CWM_S_CA && st.a >= 0 && st.a < sa->nstages)
      st.a = stage_by_name(s3, cwm_stage_name(sa, steps[i].a));
    if (ok && st.kind == CWM_S_CHR) {
      for (int k = 0; k < st.n; k++)
        st.v[k] = steps[i].v[k] >= 0 && steps[i].v[k] < sa->nstages
                      ? stage_by_name(s3, cwm_stage_name(sa, steps[i].v[k])) : -1;
      for (int x = 1; x < st.n; x++) /* readers stay increasing */
        for (int y = x; y > 0 && st.v[y - 1] > st.v[y]; y--) {
          int t = st.v[y];
          st.v[y] = st.v[y - 1];
          st.v[y - 1] = t;
        }
    }
    cwm_err e2 = {0};
    if (cwm_state_apply(sa, &steps[i], &e2) || cwm_state_apply(s3, &st, &e2))
      rc = cwm_fail(err, e2.code, "noise kind 2: step %d: %s", i, e2.msg);
  }
  cwm_state_free(sa);
  if (rc) {
    cwm_state_free(s3);
    cwm_dag_free(d3);
    cwm_workload_free(w3);
    return rc;
  }
  info->kind = CWM_NOISE_REORDER;
  info->wb = w3;
  info->nsteps_b = s3->nsteps;
  info->steps_b = cwm_xmalloc(sizeof *info->steps_b * (size_t)(n ? n : 1));
  memcpy(info->steps_b, s3->steps, sizeof *info->steps_b * (size_t)s3->nsteps);
  snprintf(info->what, sizeof info->what, "swapped %s and %s", w->ops[a].name, w->ops[a + 1].name);
  *sb = s3;
  return 0;
}

int cwm_noise_pair_ex(const cwm_dag *d, const cwm_step *steps, int n, int kind, cwm_rng *r, char **text_a,
                      char **text_b, cwm_noise_info *info, cwm_err *err) {
  memset(info, 0, sizeof *info);
  *text_a = *text_b = NULL;
  if (kind < 0 || kind > 2) return cwm_fail(err, CWM_EUSAGE, "noise: kind %d (0 shape, 1 rename, 2 reorder)", kind);
  cwm_state *sa = NULL, *sb = NULL;
  cwm_err e = {0};
  if (cwm_state_replay(d, steps, n, &sa, NULL, &e)) return cwm_fail(err, e.code, "noise: the steps: %s", e.msg);
  int rc;
  if (kind == CWM_NOISE_SHAPE) rc = noise_shape(d, steps, n, r, &sb, info, err);
  else if (kind == CWM_NOISE_REORDER) {
    rc = noise_reorder(d, steps, n, r, &sb, info, err);
    if (rc == 0) {
      /* a swap the schedule hides (one of the two attached inside a third) prints the same */
      char *x = cwm_state_print(sa), *y = cwm_state_print(sb);
      int same = !strcmp(x, y);
      free(x);
      free(y);
      if (same) {
        cwm_dag *db = (cwm_dag *)sb->dag;
        cwm_state_free(sb);
        cwm_dag_free(db);
        cwm_noise_info_free(info);
        sb = NULL;
        rc = CWM_ENOSCHED;
      }
    }
    if (rc == CWM_ENOSCHED) rc = noise_rename(d, steps, n, r, &sb, info, err);
  } else rc = noise_rename(d, steps, n, r, &sb, info, err);
  if (rc == 0) {
    *text_a = cwm_state_print(sa);
    *text_b = cwm_state_print(sb);
    cwm_dag *db = (cwm_dag *)sb->dag;
    cwm_state_free(sb);
    cwm_dag_free(db);
  }
  cwm_state_free(sa);
  return rc;
}

int cwm_noise_pair(const cwm_dag *d, const cwm_step *steps, int n, int kind, cwm_rng *r, char **text_a,
                   char **text_b, cwm_err *err) {
  cwm_noise_info info;
  int rc = cwm_noise_pair_ex(d, steps, n, kind, r, text_a, text_b, &info, err);
  cwm_noise_info_free(&info);
  return rc;
}

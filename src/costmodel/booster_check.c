/* booster_check.c: checks an XGBoost booster (UBJSON, as XGBoosterSaveModelToBuffer writes it)
 * before XGBoost loads it. XGBoost trusts what it reads: a typed array's count is allocated
 * before its bytes are read, nesting recurses without a bound, and a tree's child indices and
 * split features are used as array indices unchecked (a model file with one child index changed
 * crashes the loader). So a model file's booster is parsed here into a small tree of values and
 * must be the single-output gbtree the Ansor model trains: every length within the blob, every
 * tree a proper binary tree whose children come after their parent, every split feature inside
 * the row width, no categorical splits, no feature names. Fields not named here are left to
 * XGBoost, which reports (not crashes on) what it dislikes in them. */
#include "cwm/costmodel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 32
#define MAX_VALUES (1 << 22) /* parsed values per booster (typed arrays count as one) */

typedef struct val val;
struct val {
  unsigned char type;        /* '{' '[' '$' (typed array) 'S' 'I' (any integer) 'D' (any float) 'B' (T/F/Z) */
  const unsigned char *p;    /* string bytes, typed array elements */
  uint64_t n;                /* string length, element or member count */
  unsigned char et;          /* typed array element marker */
  int64_t i;                 /* integer value */
  val **kids;                /* members (objects: alternating key string, value) */
  int nkids, cap;
};

typedef struct {
  const unsigned char *p;
  size_t n, pos;
  long nvals;
  val **all;                 /* every allocated value, for freeing */
  long nall, capall;
  const char *why;
} parser;

static val *new_val(parser *ps, unsigned char type) {
  if (ps->nvals++ >= MAX_VALUES) return NULL;
  val *v = cwm_xcalloc(1, sizeof *v);
  v->type = type;
  if (ps->nall == ps->capall) {
    ps->capall = ps->capall ? ps->capall * 2 : 256;
    ps->all = cwm_xrealloc(ps->all, sizeof *ps->all * (size_t)ps->capall);
  }
  ps->all[ps->nall++] = v;
  return v;
}

static void add_kid(val *o, val *k) {
  if (o->nkids == o->cap) {
    o->cap = o->cap ? o->cap * 2 : 8;
    o->kids = cwm_xrealloc(o->kids, sizeof *o->kids * (size_t)o->cap);
  }
  o->kids[o->nkids++] = k;
}

static int scalar_size(unsigned char t) {
  switch (t) {
  case 'i': case 'U': case 'C': return 1;
  case 'I': return 2;
  case 'l': case 'd': return 4;
  case 'L': case 'D': return 8;
  default: return -1;
  }
}

static int64_t read_be(const unsigned char *p, unsigned char t) {
  int sz = scalar_size(t);
  uint64_t v = 0;
  for (int i = 0; i < sz; i++) v = v << 8 | p[i];
  switch (t) {
  case 'U': case 'C': return (int64_t)v;
  case 'i': return (int8_t)v;
  case 'I': return (int16_t)v;
  case 'l': return (int32_t)v;
  default: return v > INT64_MAX ? -1 : (int64_t)v;
  }
}

static int fail(parser *ps, const char *why) {
  if (!ps->why) ps->why = why;
  return -1;
}

/* A marker-prefixed non-negative integer (a length or a count). */
static int read_count(parser *ps, uint64_t *out) {
  if (ps->pos >= ps->n) return fail(ps, "truncated");
  unsigned char t = ps->p[ps->pos++];
  int sz = t == 'd' || t == 'D' || t == 'C' ? -1 : scalar_size(t);
  if (sz < 0 || ps->n - ps->pos < (size_t)sz) return fail(ps, "bad length");
  int64_t v = read_be(ps->p + ps->pos, t);
  ps->pos += (size_t)sz;
  if (v < 0) return fail(ps, "negative length");
  *out = (uint64_t)v;
  return 0;
}

static val *parse_str(parser *ps) {
  uint64_t len;
  if (read_count(ps, &len)) return NULL;
  if (len > ps->n - ps->pos) return fail(ps, "string longer than the booster"), NULL;
  val *v = new_val(ps, 'S');
  if (!v) return fail(ps, "too many values"), NULL;
  v->p = ps->p + ps->pos;
  v->n = len;
  ps->pos += (size_t)len;
  return v;
}

static val *parse_value(parser *ps, int depth) {
  if (depth > MAX_DEPTH) return fail(ps, "nested too deeply"), NULL;
  if (ps->pos >= ps->n) return fail(ps, "truncated"), NULL;
  unsigned char t = ps->p[ps->pos++];
  int sz = scalar_size(t);
  if (sz > 0) {
    if (ps->n - ps->pos < (size_t)sz) return fail(ps, "truncated"), NULL;
    val *v = new_val(ps, t == 'd' || t == 'D' ? 'D' : 'I');
    if (!v) return fail(ps, "too many values"), NULL;
    if (v->type == 'I') v->i = read_be(ps->p + ps->pos, t);
    ps->pos += (size_t)sz;
    return v;
  }
  if (t == 'Z' || t == 'T' || t == 'F') {
    val *v = new_val(ps, 'B');
    if (!v) fail(ps, "too many values");
    return v;
  }
  if (t == 'S') return parse_str(ps);
  if (t == '{') {
    val *o = new_val(ps, '{');
    if (!o) return fail(ps, "too many values"), NULL;
    for (;;) {
      if (ps->pos >= ps->n) return fail(ps, "truncated object"), NULL;
      if (ps->p[ps->pos] == '}') {
        ps->pos++;
        return o;
      }
      val *k = parse_str(ps);
      val *x = k ? parse_value(ps, depth + 1) : NULL;
      if (!x) return NULL;
      add_kid(o, k);
      add_kid(o, x);
    }
  }
  if (t == '[') {
    if (ps->pos < ps->n && ps->p[ps->pos] == '$') { /* [$t#n, then n raw elements */
      if (ps->n - ps->pos < 3 || ps->p[ps->pos + 2] != '#') return fail(ps, "bad typed array"), NULL;
      unsigned char et = ps->p[ps->pos + 1];
      int es = scalar_size(et);
      ps->pos += 3;
      uint64_t cnt;
      if (es < 0 || read_count(ps, &cnt)) return fail(ps, "bad typed array"), NULL;
      if (cnt > (ps->n - ps->pos) / (uint64_t)es) return fail(ps, "typed array longer than the booster"), NULL;
      val *a = new_val(ps, '$');
      if (!a) return fail(ps, "too many values"), NULL;
      a->et = et;
      a->p = ps->p + ps->pos;
      a->n = cnt;
      ps->pos += (size_t)cnt * (size_t)es;
      return a;
    }
    val *a = new_val(ps, '[');
    if (!a) return fail(ps, "too many values"), NULL;
    if (ps->pos < ps->n && ps->p[ps->pos] == '#') { /* [#n, then n values */
      ps->pos++;
      uint64_t cnt;
      if (read_count(ps, &cnt)) return NULL;
      if (cnt > ps->n - ps->pos) return fail(ps, "array longer than the booster"), NULL;
      for (uint64_t i = 0; i < cnt; i++) {
        val *x = parse_value(ps, depth + 1);
        if (!x) return NULL;
        add_kid(a, x);
      }
      return a;
    }
    for (;;) {
      if (ps->pos >= ps->n) return fail(ps, "truncated array"), NULL;
      if (ps->p[ps->pos] == ']') {
        ps->pos++;
        return a;
      }
      val *x = parse_value(ps, depth + 1);
      if (!x) return NULL;
      add_kid(a, x);
    }
  }
  return fail(ps, "unknown value type"), NULL;
}

/* ------------------------------------------------------------------ the schema */

static const val *get(const val *o, const char *key) {
  if (!o || o->type != '{') return NULL;
  size_t kl = strlen(key);
  const val *found = NULL;
  for (int i = 0; i + 1 < o->nkids; i += 2)
    if (o->kids[i]->n == kl && !memcmp(o->kids[i]->p, key, kl)) found = o->kids[i + 1]; /* the last wins, as in a map */
  return found;
}

/* A decimal string ("164") within [0, max]; -1 otherwise. */
static int64_t num_str(const val *v, int64_t max) {
  if (!v || v->type != 'S' || v->n == 0 || v->n > 18) return -1;
  int64_t x = 0;
  for (uint64_t i = 0; i < v->n; i++) {
    if (v->p[i] < '0' || v->p[i] > '9') return -1;
    x = x * 10 + (v->p[i] - '0');
  }
  return x <= max ? x : -1;
}

static int str_is(const val *v, const char *s) {
  return v && v->type == 'S' && v->n == strlen(s) && !memcmp(v->p, s, v->n);
}

static const val *typed(const val *o, const char *key, unsigned char et, uint64_t n) {
  const val *a = get(o, key);
  return a && a->type == '$' && a->et == et && a->n == n ? a : NULL;
}

static int32_t i32_at(const val *a, uint64_t i) { return (int32_t)read_be(a->p + 4 * i, 'l'); }

static int empty_list(const val *v) { return v && ((v->type == '[' && v->nkids == 0) || (v->type == '$' && v->n == 0)); }

static const char *check_tree(const val *t, int64_t index, int nfeat, size_t blob) {
  if (!t || t->type != '{') return "a tree is not an object";
  const val *id = get(t, "id");
  if (!id || id->type != 'I' || id->i != index) return "a tree's id is not its position";
  const val *tp = get(t, "tree_param");
  int64_t n = num_str(get(tp, "num_nodes"), (int64_t)blob);
  if (n < 1 || n > INT32_MAX) return "a tree's node count is out of range";
  if (num_str(get(tp, "num_feature"), INT32_MAX) != nfeat) return "a tree's feature count is not the model's";
  if (num_str(get(tp, "num_deleted"), n - 1) < 0) return "a tree's deleted-node count is out of range";
  const val *slv = get(tp, "size_leaf_vector");
  if (slv && num_str(slv, 1) < 0) return "a tree has vector leaves";
  uint64_t un = (uint64_t)n;
  const val *l = typed(t, "left_children", 'l', un), *r = typed(t, "right_children", 'l', un),
            *par = typed(t, "parents", 'l', un), *si = typed(t, "split_indices", 'l', un),
            *st = typed(t, "split_type", 'U', un);
  if (!l || !r || !par || !si || !st || !typed(t, "split_conditions", 'd', un) ||
      !typed(t, "default_left", 'U', un) || !typed(t, "base_weights", 'd', un) ||
      !typed(t, "loss_changes", 'd', un) || !typed(t, "sum_hessian", 'd', un))
    return "a tree's node arrays are missing, mistyped or not num_nodes long";
  const char *cats[] = {"categories", "categories_nodes", "categories_segments", "categories_sizes"};
  for (int c = 0; c < 4; c++)
    if (get(t, cats[c]) && !empty_list(get(t, cats[c]))) return "a tree has categorical splits";
  if ((uint32_t)i32_at(par, 0) != 0x7fffffffu && i32_at(par, 0) != -1) return "a tree's root has a parent";
  for (uint64_t i = 0; i < un; i++) {
    int32_t a = i32_at(l, i), b = i32_at(r, i), f = i32_at(si, i);
    if (st->p[i] != 0) return "a tree has categorical splits";
    /* XGBoost follows every node's parent link, pruned nodes' too */
    if (i > 0 && (uint64_t)(i32_at(par, i) & 0x7fffffff) >= i) return "a tree's parent index is out of range";
    if (a == -1 && b == -1) continue; /* a leaf (or a pruned node): its split index is not read */
    if (f < 0 || f >= nfeat) return "a split feature is outside the feature rows";
    /* children after their parent: no cycles, every walk ends at a leaf */
    if (a <= (int64_t)i || b <= (int64_t)i || a >= n || b >= n || a == b) return "a tree's child index is out of range";
    if ((i32_at(par, (uint64_t)a) & 0x7fffffff) != (int32_t)i || (i32_at(par, (uint64_t)b) & 0x7fffffff) != (int32_t)i)
      return "a tree's parent links do not match its children";
  }
  /* every node is the child of at most one node; the ones no walk from the root reaches (nodes
   * pruned away, which XGBoost keeps as deleted) must be leaves */
  unsigned char *seen = cwm_xcalloc(un, 1), *reach = cwm_xcalloc(un, 1);
  const char *why = NULL;
  reach[0] = 1;
  for (uint64_t i = 0; i < un && !why; i++) {
    int32_t a = i32_at(l, i), b = i32_at(r, i);
    if (a == -1) continue;
    if (seen[a]++ || seen[b]++) why = "a tree node has two parents";
    else if (!reach[i]) why = "a tree has an unreachable split";
    reach[a] = reach[b] = 1;
  }
  free(seen);
  free(reach);
  return why;
}

static const char *check_model(const val *root, int nfeat, size_t blob) {
  const val *lr = get(root, "learner");
  if (!lr || lr->type != '{') return "no learner object";
  const val *lmp = get(lr, "learner_model_param");
  if (num_str(get(lmp, "num_feature"), INT32_MAX) != nfeat) return "the learner's feature count is not the model's";
  const val *nc = get(lmp, "num_class");
  if (nc && num_str(nc, 0) != 0) return "the learner is a classifier";
  const val *nt = get(lmp, "num_target");
  if (nt && num_str(nt, 1) != 1) return "the learner has several targets";
  const val *fn = get(lr, "feature_names"), *ft = get(lr, "feature_types");
  if ((fn && !empty_list(fn)) || (ft && !empty_list(ft))) return "the learner names its features";
  const val *gb = get(lr, "gradient_booster");
  if (!str_is(get(gb, "name"), "gbtree")) return "the booster is not a gbtree";
  const val *model = get(gb, "model");
  const val *gp = get(model, "gbtree_model_param");
  int64_t ntrees = num_str(get(gp, "num_trees"), (int64_t)blob);
  const val *npt = get(gp, "num_parallel_tree");
  if (ntrees < 0 || (npt && num_str(npt, 1) != 1)) return "bad tree count";
  const val *trees = get(model, "trees"), *info = get(model, "tree_info");
  if (!trees || trees->type != '[' || trees->nkids != ntrees) return "the trees do not match the tree count";
  if (!info || (info->type == '[' ? info->nkids : info->type == '$' ? (int64_t)info->n : -1) != ntrees)
    return "the tree info does not match the tree count";
  if (info->type == '[') {
    for (int i = 0; i < info->nkids; i++)
      if (info->kids[i]->type != 'I' || info->kids[i]->i != 0) return "a tree belongs to another output";
  } else if (scalar_size(info->et) < 0 || info->et == 'd' || info->et == 'D') {
    return "bad tree info";
  } else {
    for (uint64_t i = 0; i < info->n; i++)
      if (read_be(info->p + i * (uint64_t)scalar_size(info->et), info->et) != 0) return "a tree belongs to another output";
  }
  for (int64_t i = 0; i < ntrees; i++) {
    const char *why = check_tree(trees->kids[i], i, nfeat, blob);
    if (why) return why;
  }
  return NULL;
}

int cwm_xgb_booster_check(const void *data, size_t n, int nfeat, char *why, size_t whyn) {
  parser ps = {.p = data, .n = n};
  val *root = parse_value(&ps, 0);
  const char *w = NULL;
  if (!root || ps.pos != n) {
    w = !root ? (ps.why ? ps.why : "malformed") : "bytes after its end";
    if (why && whyn) snprintf(why, whyn, "%s at byte %zu of %zu", w, ps.pos, n);
  } else if ((w = check_model(root, nfeat, n)) && why && whyn) {
    snprintf(why, whyn, "%s", w);
  }
  for (long i = 0; i < ps.nall; i++) {
    free(ps.all[i]->kids);
    free(ps.all[i]);
  }
  free(ps.all);
  return w ? -1 : 0;
}

/* tokenizer.c: printed states -> token ids, and the vocabulary (build, save, load).
 * One lexer serves both the builder (it counts token strings) and tokenizing (it looks them
 * up); the rules are in tokenizer.h. The fixed classes (depths, numbers, digits, canonical
 * names) have ids computed arithmetically, so the hot path hashes only words and operators. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/tokenizer.h"

/* ---- the fixed tokens, ids FIXED0 + index ---- */

#define FIXED0 2
#define N_DEPTH 64
#define N_NUM 66 /* <n:0> <n:1> <n:b1>..<n:b63> <n:big> */
#define N_DIG 10
#define N_FLT 66 /* <f:0> <f:b-32>..<f:b32> */
#define N_AX 65  /* <ax:0>..<ax:63> <ax:many> */
#define N_TEN 33 /* <t:0>..<t:31> <t:many> */
#define N_SFX 16 /* .0 .. .15 */
enum {
  F_DEPTH = 0,
  F_NUM = F_DEPTH + N_DEPTH,
  F_DIG = F_NUM + N_NUM,
  F_FLT = F_DIG + N_DIG,
  F_AX = F_FLT + N_FLT,
  F_TEN = F_AX + N_AX,
  F_SFX = F_TEN + N_TEN,
  F_AT = F_SFX + N_SFX,
  F_COUNT = F_AT + 1
};
#define NUM_BIG (F_NUM + 65)
#define FLT_MAXB 32

/* Writes prefix, the integer x and suffix into out (snprintf is the slow part of a load). */
static void put_name(char out[24], const char *prefix, int x, const char *suffix) {
  char digits[12];
  int nd = 0, neg = x < 0;
  unsigned u = neg ? (unsigned)-x : (unsigned)x;
  do digits[nd++] = (char)('0' + u % 10), u /= 10;
  while (u);
  size_t at = 0;
  while (*prefix) out[at++] = *prefix++;
  if (neg) out[at++] = '-';
  while (nd) out[at++] = digits[--nd];
  while (*suffix) out[at++] = *suffix++;
  out[at] = 0;
}

static void fixed_name(int k, char out[24]) {
  if (k < F_NUM) put_name(out, "<d:", k - F_DEPTH, ">");
  else if (k == F_NUM) strcpy(out, "<n:0>");
  else if (k == F_NUM + 1) strcpy(out, "<n:1>");
  else if (k == NUM_BIG) strcpy(out, "<n:big>");
  else if (k < F_DIG) put_name(out, "<n:b", k - F_NUM - 1, ">");
  else if (k < F_FLT) put_name(out, "<#", k - F_DIG, ">");
  else if (k == F_FLT) strcpy(out, "<f:0>");
  else if (k < F_AX) put_name(out, "<f:b", k - F_FLT - 1 - FLT_MAXB, ">");
  else if (k < F_TEN) {
    if (k - F_AX == N_AX - 1) strcpy(out, "<ax:many>");
    else put_name(out, "<ax:", k - F_AX, ">");
  } else if (k < F_SFX) {
    if (k - F_TEN == N_TEN - 1) strcpy(out, "<t:many>");
    else put_name(out, "<t:", k - F_TEN, ">");
  } else if (k < F_AT) put_name(out, ".", k - F_SFX, "");
  else strcpy(out, "@");
}

/* ---- string table: open addressing, string -> value (a count while building, an id after) ---- */

typedef struct {
  char *s; /* NULL: empty slot */
  uint32_t len;
  uint64_t h;
  int64_t val;
} slot;

typedef struct {
  slot *v;
  size_t cap, used; /* cap a power of two */
  int borrowed;     /* the strings live elsewhere (a vocabulary's arena): not freed here */
} strtab;

static slot *tab_find(const strtab *t, const char *s, size_t len, uint64_t h) {
  size_t i = (size_t)h & (t->cap - 1);
  for (;;) {
    slot *e = &t->v[i];
    if (!e->s || (e->h == h && e->len == len && memcmp(e->s, s, len) == 0)) return e;
    i = (i + 1) & (t->cap - 1);
  }
}

static void tab_init(strtab *t, size_t cap) {
  t->cap = 16;
  while (t->cap < cap * 2) t->cap *= 2;
  t->v = cwm_xcalloc(t->cap, sizeof *t->v);
  t->used = 0;
  t->borrowed = 0;
}

static void tab_grow(strtab *t) {
  strtab n;
  tab_init(&n, t->cap);
  for (size_t i = 0; i < t->cap; i++)
    if (t->v[i].s) *tab_find(&n, t->v[i].s, t->v[i].len, t->v[i].h) = t->v[i];
  n.used = t->used;
  n.borrowed = t->borrowed;
  free(t->v);
  *t = n;
}

/* Returns the slot for s, inserting it (with val 0; s copied unless the table borrows its
 * strings, then s must stay valid and NUL-terminated) when absent. */
static slot *tab_intern(strtab *t, const char *s, size_t len, int *inserted) {
  if ((t->used + 1) * 2 > t->cap) tab_grow(t);
  uint64_t h = cwm_hash64(s, len);
  slot *e = tab_find(t, s, len, h);
  *inserted = !e->s;
  if (!e->s) {
    if (t->borrowed) e->s = (char *)s;
    else {
      e->s = cwm_xmalloc(len + 1);
      memcpy(e->s, s, len);
      e->s[len] = 0;
    }
    e->len = (uint32_t)len;
    e->h = h;
    e->val = 0;
    t->used++;
  }
  return e;
}

static void tab_free(strtab *t) {
  if (!t->v) return;
  if (!t->borrowed)
    for (size_t i = 0; i < t->cap; i++) free(t->v[i].s);
  free(t->v);
  t->v = NULL;
  t->cap = t->used = 0;
}

struct cwm_vocab {
  int finished;
  strtab tab;   /* building: token -> count; finished: token -> id */
  int n;        /* finished: number of ids */
  char **names; /* finished: id -> string, in arena */
  char *arena;  /* finished: every token string, NUL-terminated */
  int ch_id[128]; /* finished: id of each one-character token (the hot path skips the hash) */
};

/* ---- the lexer ---- */

typedef struct {
  const char *s;
  uint32_t len;
} name_ref;

typedef struct {
  const cwm_vocab *v; /* tokenizing */
  cwm_vocab *b;       /* building */
  int *ids;
  size_t n, cap;
  name_ref ax[N_AX - 1], ten[N_TEN - 1];
  int nax, nten;
} lexer;

static void push(lexer *lx, int id) {
  if (lx->n == lx->cap) {
    lx->cap = lx->cap ? lx->cap * 2 : 64;
    lx->ids = cwm_xrealloc(lx->ids, lx->cap * sizeof *lx->ids);
  }
  lx->ids[lx->n++] = id;
}

static void emit_fixed(lexer *lx, int k) {
  if (!lx->b) push(lx, FIXED0 + k);
}

static void emit_unk(lexer *lx) {
  if (!lx->b) push(lx, CWM_TOK_UNK);
}

static void emit_lit(lexer *lx, const char *s, size_t len) {
  if (len == 0 || len > CWM_TOKEN_MAX) {
    emit_unk(lx);
    return;
  }
  if (lx->b) {
    int ins;
    tab_intern(&lx->b->tab, s, len, &ins)->val++;
    return;
  }
  if (len == 1 && (unsigned char)s[0] < 128) {
    push(lx, lx->v->ch_id[(unsigned char)s[0]]);
    return;
  }
  const strtab *t = &lx->v->tab;
  slot *e = tab_find(t, s, len, cwm_hash64(s, len));
  push(lx, e->s ? (int)e->val : CWM_TOK_UNK);
}

static int is_ident(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
static int is_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_blank(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* Names are a few bytes: a plain loop beats a memcmp call. */
static int same(const char *a, const char *b, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}

static int word_is(const char *s, size_t len, const char *w) {
  for (size_t i = 0; i < len; i++)
    if (s[i] != w[i]) return 0; /* also stops at w's NUL */
  return w[len] == 0;
}

/* Index of name in map (inserting it while there is room), or -1 when the map is full. */
static int map_index(name_ref *map, int *count, int cap, const char *s, size_t len) {
  for (int i = 0; i < *count; i++)
    if (map[i].len == len && same(map[i].s, s, len)) return i;
  if (*count == cap) return -1;
  map[*count].s = s;
  map[*count].len = (uint32_t)len;
  return (*count)++;
}

static int map_has(const name_ref *map, int count, const char *s, size_t len) {
  for (int i = 0; i < count; i++)
    if (map[i].len == len && same(map[i].s, s, len)) return 1;
  return 0;
}

static size_t base_len(const char *s, size_t len) {
  size_t i = 0;
  while (i < len && s[i] != '.' && s[i] != '@') i++;
  return i;
}

/* A name lexeme: components split at '@', each a base (canonicalized through the map) and
 * '.'-parts (.0 to .15 fixed, others literal). */
static void emit_name(lexer *lx, const char *s, size_t len, int tensor) {
  size_t i = 0;
  while (i < len) {
    if (i) emit_fixed(lx, F_AT); /* s[i-1] was '@' */
    size_t b = base_len(s + i, len - i);
    int k = tensor ? map_index(lx->ten, &lx->nten, N_TEN - 1, s + i, b)
                   : map_index(lx->ax, &lx->nax, N_AX - 1, s + i, b);
    emit_fixed(lx, (tensor ? F_TEN : F_AX) + (k < 0 ? (tensor ? N_TEN : N_AX) - 1 : k));
    i += b;
    while (i < len && s[i] == '.') {
      size_t j = i + 1;
      while (j < len && s[j] != '.' && s[j] != '@') j++;
      size_t pl = j - i - 1;
      int v = -1;
      if (pl == 1 && is_digit((unsigned char)s[i + 1])) v = s[i + 1] - '0';
      else if (pl == 2 && s[i + 1] == '1' && is_digit((unsigned char)s[i + 2])) v = 10 + s[i + 2] - '0';
      if (v >= 0 && v < N_SFX) emit_fixed(lx, F_SFX + v);
      else emit_lit(lx, s + i, j - i);
      i = j;
    }
    if (i < len && s[i] == '@') i++;
  }
}

static void emit_digits(lexer *lx, const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) emit_fixed(lx, F_DIG + (s[i] - '0'));
}

static void emit_int(lexer *lx, const char *s, size_t len) {
  if (len == 1 && s[0] <= '1') {
    emit_fixed(lx, F_NUM + (s[0] - '0'));
    return;
  }
  uint64_t v = 0;
  int big = len > 19;
  for (size_t i = 0; i < len && !big; i++) v = v * 10 + (uint64_t)(s[i] - '0');
  if (v >= ((uint64_t)1 << 62)) big = 1;
  int k;
  if (big) k = NUM_BIG;
  else if (v <= 1) k = F_NUM + (int)v;
  else {
    int b = 63 - __builtin_clzll(v);
    /* round(log2 v): up when v >= 2^(b + 1/2), i.e. v^2 >= 2^(2b + 1) */
    if ((unsigned __int128)v * v >= ((unsigned __int128)1 << (2 * b + 1))) b++;
    k = F_NUM + 1 + b;
  }
  emit_fixed(lx, k);
  emit_digits(lx, s, len);
}

/* s is digits [. digits] [e [+-] digits]; no locale-dependent strtod. */
static void emit_float(lexer *lx, const char *s, size_t len) {
  char sig[17];
  int nsig = 0;
  long e10 = 0; /* value = 0.sig * 10^e10 */
  int seen_point = 0;
  size_t i = 0;
  for (; i < len && s[i] != 'e' && s[i] != 'E'; i++) {
    if (s[i] == '.') { seen_point = 1; continue; }
    if (nsig == 0 && s[i] == '0') {
      if (seen_point) e10--;
      continue;
    }
    if (nsig < (int)sizeof sig) sig[nsig++] = s[i];
    if (!seen_point) e10++;
  }
  if (i < len) {
    i++;
    int neg = 0;
    if (i < len && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    long x = 0;
    for (; i < len; i++)
      if (x < 100000) x = x * 10 + (s[i] - '0');
    e10 += neg ? -x : x;
  }
  if (!nsig) {
    emit_fixed(lx, F_FLT);
    return;
  }
  double m = 0;
  for (int k = 0; k < nsig; k++) m = m * 10 + (sig[k] - '0');
  /* log2(0.sig * 10^e10) = log2(m) + (e10 - nsig) log2(10) */
  double l2 = log2(m) + (double)(e10 - nsig) * 3.321928094887362;
  long b = lround(l2 < -1e6 ? -1e6 : l2 > 1e6 ? 1e6 : l2);
  if (b < -FLT_MAXB) b = -FLT_MAXB;
  if (b > FLT_MAXB) b = FLT_MAXB;
  emit_fixed(lx, F_FLT + 1 + FLT_MAXB + (int)b);
  int nd = nsig < 3 ? nsig : 3;
  while (nd > 1 && sig[nd - 1] == '0') nd--;
  emit_digits(lx, sig, (size_t)nd);
}

enum { LINE_OTHER, LINE_LOOP, LINE_PRAGMA };

static const char *const ops2[] = {"+=", "-=", "*=", "/=", "<=", ">=", "==", "!=", "&&", "||", "<<", ">>"};

/* Lexes one line from *pos (just past its indentation) up to and excluding '\n'. */
static void lex_line(lexer *lx, const char *t, size_t len, size_t *pos) {
  size_t i = *pos;
  int first = 1, kind = LINE_OTHER, decl = 0; /* decl: 1 an iterator comes, 2 a tensor comes */
  while (i < len && t[i] != '\n') {
    unsigned char c = (unsigned char)t[i];
    if (is_blank(c)) {
      i++;
      continue;
    }
    if (is_alpha(c)) {
      size_t s = i;
      i++;
      for (;;) {
        while (i < len && is_ident((unsigned char)t[i])) i++;
        if (i + 1 < len && (t[i] == '.' || t[i] == '@') && is_ident((unsigned char)t[i + 1])) i++;
        else break;
      }
      const char *w = t + s;
      size_t wl = i - s;
      size_t j = i;
      while (j < len && (t[j] == ' ' || t[j] == '\t')) j++;
      char nc = j < len ? t[j] : '\n';
      if (first) {
        if (nc == '[') emit_name(lx, w, wl, 1);
        else {
          emit_lit(lx, w, wl);
          if (word_is(w, wl, "for") || word_is(w, wl, "parallel") || word_is(w, wl, "vectorize") ||
              word_is(w, wl, "unroll")) kind = LINE_LOOP, decl = 1;
          else if (word_is(w, wl, "placeholder") || word_is(w, wl, "allocate")) decl = 2;
          else if (word_is(w, wl, "pragma")) kind = LINE_PRAGMA;
        }
      } else if (decl) {
        emit_name(lx, w, wl, decl == 2);
        decl = 0;
      } else if (kind != LINE_OTHER || word_is(w, wl, "const")) {
        /* loop lines' annotations; the weight marking of a placeholder ("W[..] const layout(..)") */
        emit_lit(lx, w, wl);
      } else if (nc == '[') {
        emit_name(lx, w, wl, 1);
      } else if (map_has(lx->ax, lx->nax, w, base_len(w, wl))) {
        emit_name(lx, w, wl, 0);
      } else if (nc == '(') {
        emit_lit(lx, w, wl);
      } else if ((word_is(w, wl, "max") || word_is(w, wl, "min")) && i < len && t[i] == '=' &&
                 !(i + 1 < len && t[i + 1] == '=')) {
        char op[5] = {w[0], w[1], w[2], '=', 0};
        emit_lit(lx, op, 4);
        i++;
      } else if (word_is(w, wl, "inf") || word_is(w, wl, "nan") || word_is(w, wl, "INFINITY") ||
                 word_is(w, wl, "NAN")) {
        emit_lit(lx, w, wl);
      } else {
        emit_name(lx, w, wl, 0);
      }
      first = 0;
      continue;
    }
    first = 0;
    decl = 0;
    if (is_digit(c)) {
      size_t s = i;
      while (i < len && is_digit((unsigned char)t[i])) i++;
      int flt = 0;
      if (i + 1 < len && t[i] == '.' && is_digit((unsigned char)t[i + 1])) {
        flt = 1;
        i++;
        while (i < len && is_digit((unsigned char)t[i])) i++;
      }
      if (i < len && (t[i] == 'e' || t[i] == 'E')) {
        size_t k = i + 1;
        if (k < len && (t[k] == '+' || t[k] == '-')) k++;
        if (k < len && is_digit((unsigned char)t[k])) {
          flt = 1;
          i = k;
          while (i < len && is_digit((unsigned char)t[i])) i++;
        }
      }
      if (flt) emit_float(lx, t + s, i - s);
      else emit_int(lx, t + s, i - s);
      continue;
    }
    if (c > 0x20 && c < 0x7f) {
      unsigned char c2 = i + 1 < len ? (unsigned char)t[i + 1] : 0;
      if (c2 == '=' || c2 == '&' || c2 == '|' || c2 == '<' || c2 == '>')
        for (size_t k = 0; k < sizeof ops2 / sizeof *ops2; k++)
          if (t[i] == ops2[k][0] && t[i + 1] == ops2[k][1]) {
            emit_lit(lx, t + i, 2);
            i += 2;
            goto next;
          }
      emit_lit(lx, t + i, 1);
      i++;
    next:
      continue;
    }
    /* control bytes and anything outside ASCII: one <unk> per run */
    emit_unk(lx);
    while (i < len && t[i] != '\n' && !is_blank((unsigned char)t[i]) &&
           ((unsigned char)t[i] >= 0x7f || (unsigned char)t[i] < 0x20))
      i++;
  }
  *pos = i;
}

static void lex_text(lexer *lx, const char *t, size_t len) {
  size_t i = 0;
  lx->nax = lx->nten = 0;
  while (i < len) {
    size_t col = 0;
    while (i < len && (t[i] == ' ' || t[i] == '\t')) col += t[i++] == '\t' ? 2 : 1;
    size_t j = i;
    while (j < len && is_blank((unsigned char)t[j])) j++;
    if (j >= len || t[j] == '\n') {
      i = j + 1;
      continue;
    }
    size_t d = col / 2;
    emit_fixed(lx, F_DEPTH + (int)(d >= N_DEPTH ? N_DEPTH - 1 : d));
    lex_line(lx, t, len, &i);
    i++; /* the '\n' (or past the end) */
  }
}

/* ---- public API ---- */

cwm_vocab *cwm_vocab_new_builder(void) {
  cwm_vocab *v = cwm_xcalloc(1, sizeof *v);
  tab_init(&v->tab, 64);
  return v;
}

int cwm_vocab_add_text_n(cwm_vocab *v, const char *text, size_t len, cwm_err *err) {
  if (!v || v->finished) return cwm_fail(err, CWM_EINTERNAL, "vocabulary: add_text on a finished vocabulary");
  lexer lx;
  memset(&lx, 0, sizeof lx);
  lx.b = v;
  lex_text(&lx, text ? text : "", text ? len : 0);
  return CWM_OK;
}

int cwm_vocab_add_text(cwm_vocab *v, const char *text, cwm_err *err) {
  return cwm_vocab_add_text_n(v, text, text ? strlen(text) : 0, err);
}

/* Builds the lookup side from n names (copied). A duplicate fails, or with skip_dups is left
 * out (a learned "@" written as an operator is the fixed "@"). */
static int vocab_index(cwm_vocab *v, char *const *names, const uint32_t *lens, int n, int skip_dups, cwm_err *err) {
  tab_free(&v->tab);
  tab_init(&v->tab, (size_t)n);
  v->tab.borrowed = 1;
  size_t total = 0;
  for (int i = 0; i < n; i++) total += lens[i] + 1;
  v->arena = cwm_xmalloc(total);
  v->names = cwm_xcalloc((size_t)n, sizeof *v->names);
  v->n = 0;
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    int ins;
    char *copy = v->arena + at;
    memcpy(copy, names[i], lens[i]);
    copy[lens[i]] = 0;
    slot *e = tab_intern(&v->tab, copy, lens[i], &ins);
    if (ins) at += lens[i] + 1;
    if (!ins) {
      if (skip_dups) continue;
      return cwm_fail(err, CWM_EMODEL, "vocabulary: token %d \"%s\" repeats token %d", i, e->s, (int)e->val);
    }
    e->val = v->n;
    v->names[v->n++] = e->s;
  }
  for (int c = 0; c < 128; c++) {
    char s1 = (char)c;
    slot *e = tab_find(&v->tab, &s1, 1, cwm_hash64(&s1, 1));
    v->ch_id[c] = e->s ? (int)e->val : CWM_TOK_UNK;
  }
  v->finished = 1;
  return CWM_OK;
}

static int by_count(const void *a, const void *b) {
  const slot *x = *(const slot *const *)a, *y = *(const slot *const *)b;
  if (x->val != y->val) return x->val > y->val ? -1 : 1;
  size_t m = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->s, y->s, m);
  if (c) return c;
  return x->len < y->len ? -1 : x->len > y->len;
}

int cwm_vocab_finish(cwm_vocab *v, int min_count, cwm_err *err) {
  if (!v || v->finished) return cwm_fail(err, CWM_EINTERNAL, "vocabulary: finish on a finished vocabulary");
  if (min_count < 1) min_count = 1;
  size_t nl = 0;
  slot **learned = cwm_xmalloc((v->tab.used + 1) * sizeof *learned);
  for (size_t i = 0; i < v->tab.cap; i++)
    if (v->tab.v[i].s && v->tab.v[i].val >= min_count) learned[nl++] = &v->tab.v[i];
  qsort(learned, nl, sizeof *learned, by_count);
  int n = FIXED0 + F_COUNT + (int)nl;
  char **names = cwm_xmalloc((size_t)n * sizeof *names);
  uint32_t *lens = cwm_xmalloc((size_t)n * sizeof *lens);
  char fixed[FIXED0 + F_COUNT][24];
  snprintf(fixed[0], 24, "<pad>");
  snprintf(fixed[1], 24, "<unk>");
  for (int k = 0; k < F_COUNT; k++) fixed_name(k, fixed[FIXED0 + k]);
  for (int i = 0; i < FIXED0 + F_COUNT; i++) names[i] = fixed[i], lens[i] = (uint32_t)strlen(fixed[i]);
  strtab old = v->tab;
  v->tab.v = NULL;
  for (size_t i = 0; i < nl; i++) names[FIXED0 + F_COUNT + i] = learned[i]->s, lens[FIXED0 + F_COUNT + i] = learned[i]->len;
  int rc = vocab_index(v, names, lens, n, 1, err);
  tab_free(&old);
  free(names);
  free(lens);
  free(learned);
  return rc;
}

void cwm_vocab_free(cwm_vocab *v) {
  if (!v) return;
  tab_free(&v->tab);
  free(v->names);
  free(v->arena);
  free(v);
}

int cwm_vocab_size(const cwm_vocab *v) { return v && v->finished ? v->n : 0; }

int cwm_vocab_lookup(const cwm_vocab *v, const char *token) {
  if (!v || !v->finished || !token) return CWM_TOK_UNK;
  size_t len = strlen(token);
  slot *e = tab_find(&v->tab, token, len, cwm_hash64(token, len));
  return e->s ? (int)e->val : CWM_TOK_UNK;
}

const char *cwm_token_name(const cwm_vocab *v, int id) {
  if (!v || !v->finished || id < 0 || id >= v->n) return "<bad id>";
  return v->names[id];
}

int cwm_tokenize_n(const cwm_vocab *v, const char *text, size_t len, int **ids, int *n, cwm_err *err) {
  *ids = NULL;
  *n = 0;
  if (!v || !v->finished) return cwm_fail(err, CWM_EINTERNAL, "tokenize: the vocabulary is not finished");
  if (len > (size_t)1 << 30) return cwm_fail(err, CWM_EINTERNAL, "tokenize: text of %zu bytes is too long", len);
  lexer lx;
  memset(&lx, 0, sizeof lx);
  lx.v = v;
  lx.cap = len / 2 + 16;
  lx.ids = cwm_xmalloc(lx.cap * sizeof *lx.ids);
  lex_text(&lx, text ? text : "", text ? len : 0);
  *ids = lx.ids;
  *n = (int)lx.n;
  return CWM_OK;
}

int cwm_tokenize(const cwm_vocab *v, const char *text, int **ids, int *n, cwm_err *err) {
  return cwm_tokenize_n(v, text, text ? strlen(text) : 0, ids, n, err);
}

/* ---- serialization ---- */

#define VOCAB_MAGIC "CWMVOCAB"
#define VOCAB_VERSION 1
#define VOCAB_HEADER 20
#define VOCAB_MAX_TOKENS (1 << 18)

static void put_u32(cwm_buf *b, uint32_t x) {
  for (int i = 0; i < 4; i++) cwm_buf_putc(b, (char)(x >> (8 * i)));
}



int cwm_vocab_save(const cwm_vocab *v, cwm_buf *out, cwm_err *err) {
  if (!v || !v->finished) return cwm_fail(err, CWM_EINTERNAL, "vocabulary: save before finish");
  size_t start = out->len;
  for (int i = 0; i < 8; i++) cwm_buf_putc(out, VOCAB_MAGIC[i]);
  put_u32(out, VOCAB_VERSION);
  put_u32(out, CWM_TOKENIZER_SCHEME);
  put_u32(out, (uint32_t)v->n);
  for (int i = 0; i < v->n; i++) {
    size_t l = strlen(v->names[i]);
    cwm_buf_putc(out, (char)l);
    for (size_t k = 0; k < l; k++) cwm_buf_putc(out, v->names[i][k]);
  }
  uint64_t h = cwm_hash64(out->s + start, out->len - start);
  put_u32(out, (uint32_t)h);
  put_u32(out, (uint32_t)(h >> 32));
  return CWM_OK;
}

cwm_vocab *cwm_vocab_load(const void *data, size_t n, cwm_err *err) {
  const unsigned char *p = data;
  if (!p && n) n = 0;
  size_t m = n < 8 ? n : 8;
  if (memcmp(p ? (const void *)p : "", VOCAB_MAGIC, m) != 0) {
    cwm_fail(err, CWM_EMODEL, "vocabulary: not a cwm vocabulary (bad magic)");
    return NULL;
  }
  if (n < VOCAB_HEADER) {
    cwm_fail(err, CWM_EMODEL, "vocabulary: truncated: ends at byte %zu inside the %d-byte header", n, VOCAB_HEADER);
    return NULL;
  }
  uint32_t ver = cwm_get_le32(p + 8), scheme = cwm_get_le32(p + 12), count = cwm_get_le32(p + 16);
  if (ver != VOCAB_VERSION) {
    cwm_fail(err, CWM_EMODEL, "vocabulary: format version %u; this cwm reads version %d", ver, VOCAB_VERSION);
    return NULL;
  }
  if (scheme != CWM_TOKENIZER_SCHEME) {
    cwm_fail(err, CWM_EMODEL, "vocabulary: tokenizer scheme %u; this cwm tokenizes with scheme %d (retrain the model)",
             scheme, CWM_TOKENIZER_SCHEME);
    return NULL;
  }
  if (count < FIXED0 + F_COUNT || count > VOCAB_MAX_TOKENS) {
    cwm_fail(err, CWM_EMODEL, "vocabulary: absurd token count %u (expected %d to %d)", count, FIXED0 + F_COUNT,
             VOCAB_MAX_TOKENS);
    return NULL;
  }
  /* walk the tokens with bounds checks before allocating anything sized by count */
  size_t off = VOCAB_HEADER;
  for (uint32_t k = 0; k < count; k++) {
    if (off >= n) {
      cwm_fail(err, CWM_EMODEL, "vocabulary: truncated: ends at byte %zu before token %u of %u", n, k, count);
      return NULL;
    }
    unsigned l = p[off];
    if (l == 0 || l > CWM_TOKEN_MAX) {
      cwm_fail(err, CWM_EMODEL, "vocabulary: token %u at byte %zu has length %u (1 to %d allowed)", k, off, l,
               CWM_TOKEN_MAX);
      return NULL;
    }
    if (off + 1 + l > n) {
      cwm_fail(err, CWM_EMODEL, "vocabulary: truncated: ends at byte %zu inside token %u of %u", n, k, count);
      return NULL;
    }
    off += 1 + l;
  }
  if (off + 8 > n) {
    cwm_fail(err, CWM_EMODEL, "vocabulary: truncated: ends at byte %zu inside the checksum", n);
    return NULL;
  }
  if (off + 8 < n) {
    cwm_fail(err, CWM_EMODEL, "vocabulary: %zu unexpected bytes after the checksum", n - off - 8);
    return NULL;
  }
  if (cwm_hash64(p, off) != cwm_get_le64(p + off)) {
    cwm_fail(err, CWM_EMODEL, "vocabulary: checksum mismatch (the data was altered)");
    return NULL;
  }
  char **names = cwm_xmalloc(count * sizeof *names);
  uint32_t *lens = cwm_xmalloc(count * sizeof *lens);
  char *arena = cwm_xmalloc(off);
  size_t at = 0;
  off = VOCAB_HEADER;
  int bad = 0;
  for (uint32_t k = 0; k < count && !bad; k++) {
    unsigned l = p[off];
    names[k] = arena + at;
    lens[k] = l;
    memcpy(arena + at, p + off + 1, l);
    arena[at + l] = 0;
    for (unsigned q = 0; q < l; q++)
      if (p[off + 1 + q] <= 0x20 || p[off + 1 + q] >= 0x7f) {
        cwm_fail(err, CWM_EMODEL, "vocabulary: token %u holds byte 0x%02x (printable ASCII only)", k, p[off + 1 + q]);
        bad = 1;
        break;
      }
    at += l + 1;
    off += 1 + l;
  }
  for (int k = 0; k < FIXED0 + F_COUNT && !bad; k++) {
    char want[24];
    if (k == 0) snprintf(want, 24, "<pad>");
    else if (k == 1) snprintf(want, 24, "<unk>");
    else fixed_name(k - FIXED0, want);
    if (strcmp(names[k], want) != 0) {
      cwm_fail(err, CWM_EMODEL, "vocabulary: token %d is \"%s\", expected \"%s\"", k, names[k], want);
      bad = 1;
    }
  }
  cwm_vocab *v = NULL;
  if (!bad) {
    v = cwm_xcalloc(1, sizeof *v);
    if (vocab_index(v, names, lens, (int)count, 0, err)) {
      cwm_vocab_free(v);
      v = NULL;
    }
  }
  free(arena);
  free(names);
  free(lens);
  return v;
}

/* modelfile.c: the versioned model-file container (layout in modelfile.h).
 * The writer encodes every integer byte by byte (no structs on disk); the reader copies the
 * file into one 64-byte aligned block, checks the header, the table and the checksum before it
 * believes any offset, and hands out pointers into that block. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/modelfile.h"

#define MAGIC "CWMMODEL"
#define HEADER 24
#define ENTRY 88
#define ALIGN 64
#define NAME_FIELD 48
/* No model is near this; a header claiming more is damage, not data. */
#define MAX_FILE_SIZE ((uint64_t)1 << 40)

typedef struct {
  char name[NAME_FIELD];
  uint32_t kind, ndims;
  uint32_t dims[CWM_MFILE_MAX_DIMS];
  uint64_t off, len;
} section;

static const char *kind_name(uint32_t k) {
  return k == CWM_MFILE_TEXT ? "text" : k == CWM_MFILE_BYTES ? "bytes" : k == CWM_MFILE_TENSOR ? "a tensor" : "?";
}

static void put_u32(unsigned char *p, uint32_t x) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(x >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t x) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(x >> (8 * i));
}

static int host_is_le(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one == 1;
}

static uint64_t round_up(uint64_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

/* ---- writer ---- */

struct cwm_mfile_writer {
  section *s;
  unsigned char **data; /* owned payload copies */
  int n, cap;
};

cwm_mfile_writer *cwm_mfile_writer_new(void) { return cwm_xcalloc(1, sizeof(cwm_mfile_writer)); }

void cwm_mfile_writer_free(cwm_mfile_writer *w) {
  if (!w) return;
  for (int i = 0; i < w->n; i++) free(w->data[i]);
  free(w->s);
  free(w->data);
  free(w);
}

static int valid_name(const char *name) {
  if (!name) return 0;
  size_t l = strlen(name);
  if (l == 0 || l > CWM_MFILE_NAME_MAX) return 0;
  for (size_t i = 0; i < l; i++)
    if ((unsigned char)name[i] <= 0x20 || (unsigned char)name[i] >= 0x7f) return 0;
  return 1;
}

/* Appends a section whose payload (len bytes) the caller fills through *payload. */
static int add_section(cwm_mfile_writer *w, const char *name, uint32_t kind, size_t len, unsigned char **payload,
                       cwm_err *err) {
  if (!w) return cwm_fail(err, CWM_EINTERNAL, "model writer is NULL");
  if (!valid_name(name))
    return cwm_fail(err, CWM_EINTERNAL, "model section name \"%.60s\" is not 1 to %d printable characters",
                    name ? name : "(null)", CWM_MFILE_NAME_MAX);
  for (int i = 0; i < w->n; i++)
    if (strcmp(w->s[i].name, name) == 0) return cwm_fail(err, CWM_EINTERNAL, "duplicate model section '%s'", name);
  if (w->n == CWM_MFILE_MAX_SECTIONS)
    return cwm_fail(err, CWM_EINTERNAL, "more than %d model sections", CWM_MFILE_MAX_SECTIONS);
  if ((uint64_t)len > MAX_FILE_SIZE / 2) return cwm_fail(err, CWM_EINTERNAL, "model section '%s' is too large", name);
  if (w->n == w->cap) {
    w->cap = w->cap ? w->cap * 2 : 8;
    w->s = cwm_xrealloc(w->s, (size_t)w->cap * sizeof *w->s);
    w->data = cwm_xrealloc(w->data, (size_t)w->cap * sizeof *w->data);
  }
  section *s = &w->s[w->n];
  memset(s, 0, sizeof *s);
  memcpy(s->name, name, strlen(name));
  s->kind = kind;
  s->len = len;
  w->data[w->n] = cwm_xmalloc(len ? len : 1);
  *payload = w->data[w->n];
  w->n++;
  return CWM_OK;
}

int cwm_mfile_add_text(cwm_mfile_writer *w, const char *name, const char *text, cwm_err *err) {
  if (!text) text = "";
  size_t l = strlen(text);
  unsigned char *p;
  int rc = add_section(w, name, CWM_MFILE_TEXT, l + 1, &p, err);
  if (rc) return rc;
  memcpy(p, text, l + 1);
  return CWM_OK;
}

int cwm_mfile_add_bytes(cwm_mfile_writer *w, const char *name, const void *data, size_t n, cwm_err *err) {
  if (n && !data) return cwm_fail(err, CWM_EINTERNAL, "model section '%s': NULL data", name ? name : "(null)");
  unsigned char *p;
  int rc = add_section(w, name, CWM_MFILE_BYTES, n, &p, err);
  if (rc) return rc;
  if (n) memcpy(p, data, n);
  return CWM_OK;
}

int cwm_mfile_add_tensor(cwm_mfile_writer *w, const char *name, const float *data, int ndims, const int *shape,
                         cwm_err *err) {
  const char *nm = name ? name : "(null)";
  if (ndims < 0 || ndims > CWM_MFILE_MAX_DIMS)
    return cwm_fail(err, CWM_EINTERNAL, "tensor '%s': %d dimensions (0 to %d allowed)", nm, ndims, CWM_MFILE_MAX_DIMS);
  uint64_t count = 1;
  for (int d = 0; d < ndims; d++) {
    if (shape[d] < 0) return cwm_fail(err, CWM_EINTERNAL, "tensor '%s': dimension %d is %d", nm, d, shape[d]);
    if (__builtin_mul_overflow(count, (uint64_t)shape[d], &count) || count > MAX_FILE_SIZE / 8)
      return cwm_fail(err, CWM_EINTERNAL, "tensor '%s' is too large", nm);
  }
  if (count && !data) return cwm_fail(err, CWM_EINTERNAL, "tensor '%s': NULL data", nm);
  unsigned char *p;
  int rc = add_section(w, name, CWM_MFILE_TENSOR, (size_t)count * 4, &p, err);
  if (rc) return rc;
  section *s = &w->s[w->n - 1];
  s->ndims = (uint32_t)ndims;
  for (int d = 0; d < ndims; d++) s->dims[d] = (uint32_t)shape[d];
  for (uint64_t i = 0; i < count; i++) {
    uint32_t bits;
    memcpy(&bits, &data[i], 4);
    put_u32(p + 4 * i, bits);
  }
  return CWM_OK;
}

int cwm_mfile_serialize(const cwm_mfile_writer *w, unsigned char **out, size_t *n, cwm_err *err) {
  *out = NULL;
  *n = 0;
  if (!w) return cwm_fail(err, CWM_EINTERNAL, "model writer is NULL");
  uint64_t at = round_up(HEADER + (uint64_t)w->n * ENTRY);
  uint64_t *offs = cwm_xmalloc(((size_t)w->n + 1) * sizeof *offs);
  for (int i = 0; i < w->n; i++) {
    offs[i] = at;
    at = round_up(at + w->s[i].len);
  }
  uint64_t size = at + 8;
  if (size > MAX_FILE_SIZE) {
    free(offs);
    return cwm_fail(err, CWM_EINTERNAL, "model file would be %llu bytes", (unsigned long long)size);
  }
  unsigned char *b = cwm_xcalloc((size_t)size, 1);
  memcpy(b, MAGIC, 8);
  put_u32(b + 8, CWM_MFILE_VERSION);
  put_u32(b + 12, (uint32_t)w->n);
  put_u64(b + 16, size);
  for (int i = 0; i < w->n; i++) {
    unsigned char *e = b + HEADER + (size_t)i * ENTRY;
    const section *s = &w->s[i];
    memcpy(e, s->name, NAME_FIELD);
    put_u32(e + 48, s->kind);
    put_u32(e + 52, s->ndims);
    for (int d = 0; d < CWM_MFILE_MAX_DIMS; d++) put_u32(e + 56 + 4 * d, s->dims[d]);
    put_u64(e + 72, offs[i]);
    put_u64(e + 80, s->len);
    if (s->len) memcpy(b + offs[i], w->data[i], (size_t)s->len);
  }
  put_u64(b + size - 8, cwm_hash64(b, (size_t)size - 8));
  free(offs);
  *out = b;
  *n = (size_t)size;
  return CWM_OK;
}

int cwm_mfile_write(const cwm_mfile_writer *w, const char *path, cwm_err *err) {
  unsigned char *b;
  size_t n;
  int rc = cwm_mfile_serialize(w, &b, &n, err);
  if (rc) return rc;
  rc = cwm_write_file_atomic(path, b, n, err);
  free(b);
  return rc;
}

/* ---- reader ---- */

struct cwm_mfile {
  unsigned char *block; /* the file, 64-byte aligned; payloads point into it */
  size_t size;
  int n;
  section *s;
  char *label;
};

void cwm_mfile_free(cwm_mfile *f) {
  if (!f) return;
  free(f->block);
  free(f->s);
  free(f->label);
  free(f);
}

static int bad(cwm_err *err, const char *label, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(cwm_err *err, const char *label, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return cwm_fail(err, CWM_EMODEL, "%.100s: %s", label, msg);
}

/* Checks one table entry on its own (not against the others). */
static int check_entry(const section *s, uint32_t idx, uint64_t payload_start, uint64_t payload_end,
                       const char *label, cwm_err *err) {
  size_t l = strnlen(s->name, NAME_FIELD);
  if (l == 0 || l > CWM_MFILE_NAME_MAX) return bad(err, label, "section %u has an empty or unterminated name", idx);
  for (size_t i = 0; i < NAME_FIELD; i++) {
    unsigned char c = (unsigned char)s->name[i];
    if (i < l ? (c <= 0x20 || c >= 0x7f) : c != 0)
      return bad(err, label, "section %u has a malformed name (byte %zu is 0x%02x)", idx, i, c);
  }
  if (s->kind < CWM_MFILE_TEXT || s->kind > CWM_MFILE_TENSOR)
    return bad(err, label, "section '%s' has unknown kind %u", s->name, s->kind);
  uint32_t nd = s->kind == CWM_MFILE_TENSOR ? s->ndims : 0;
  if (s->kind == CWM_MFILE_TENSOR && s->ndims > CWM_MFILE_MAX_DIMS)
    return bad(err, label, "tensor '%s' has %u dimensions (at most %d)", s->name, s->ndims, CWM_MFILE_MAX_DIMS);
  if (s->kind != CWM_MFILE_TENSOR && s->ndims)
    return bad(err, label, "section '%s' (%s) has %u dimensions", s->name, kind_name(s->kind), s->ndims);
  for (uint32_t d = 0; d < CWM_MFILE_MAX_DIMS; d++) {
    if (d >= nd && s->dims[d])
      return bad(err, label, "section '%s' has a stray dimension %u = %u", s->name, d, s->dims[d]);
    if (d < nd && s->dims[d] > 0x7fffffffu)
      return bad(err, label, "tensor '%s' has an absurd dimension %u = %u", s->name, d, s->dims[d]);
  }
  if (s->off % ALIGN || s->off < payload_start || s->off > payload_end || s->len > payload_end - s->off)
    return bad(err, label, "section '%s' lies out of bounds (bytes %llu to %llu; payloads lie in %llu to %llu)",
               s->name, (unsigned long long)s->off, (unsigned long long)(s->off + s->len),
               (unsigned long long)payload_start, (unsigned long long)payload_end);
  if (s->kind == CWM_MFILE_TENSOR) {
    uint64_t c = 1;
    int over = 0, zero = 0;
    for (uint32_t d = 0; d < nd; d++) {
      if (s->dims[d] == 0) zero = 1;
      if (__builtin_mul_overflow(c, (uint64_t)s->dims[d], &c) || c > UINT64_MAX / 4) over = 1;
    }
    if (zero) c = 0, over = 0;
    if (over || c * 4 != s->len) {
      char shape[64] = "", need[32];
      size_t at = 0;
      for (uint32_t d = 0; d < nd; d++)
        at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%u", d ? ", " : "", s->dims[d]);
      if (over) snprintf(need, sizeof need, "more than 2^64");
      else snprintf(need, sizeof need, "%llu", (unsigned long long)(c * 4));
      return bad(err, label, "tensor '%s' has %llu bytes; its shape [%s] needs %s", s->name,
                 (unsigned long long)s->len, shape, need);
    }
  }
  return CWM_OK;
}

static int by_offset(const void *a, const void *b) {
  const section *x = *(const section *const *)a, *y = *(const section *const *)b;
  return x->off < y->off ? -1 : x->off > y->off ? 1 : x->len < y->len ? -1 : x->len > y->len;
}

/* The table against itself and the payloads: names unique, no overlaps, texts well formed. */
static int check_table(const cwm_mfile *f, const char *label, cwm_err *err) {
  for (int i = 0; i < f->n; i++)
    for (int j = 0; j < i; j++)
      if (strcmp(f->s[i].name, f->s[j].name) == 0)
        return bad(err, label, "duplicate section '%s' (entries %d and %d)", f->s[i].name, j, i);
  const section **order = cwm_xmalloc(((size_t)f->n + 1) * sizeof *order);
  for (int i = 0; i < f->n; i++) order[i] = &f->s[i];
  qsort(order, (size_t)f->n, sizeof *order, by_offset);
  int rc = CWM_OK;
  for (int i = 1; i < f->n && !rc; i++)
    if (order[i - 1]->len && order[i]->len && order[i]->off < order[i - 1]->off + order[i - 1]->len)
      rc = bad(err, label, "sections '%s' and '%s' overlap", order[i - 1]->name, order[i]->name);
  free(order);
  return rc;
}

static int check_payloads(const cwm_mfile *f, const char *label, cwm_err *err) {
  for (int i = 0; i < f->n; i++) {
    const section *s = &f->s[i];
    if (s->kind != CWM_MFILE_TEXT) continue;
    const unsigned char *p = f->block + s->off;
    if (s->len == 0 || p[s->len - 1] != 0) return bad(err, label, "text section '%s' is not NUL-terminated", s->name);
    const void *z = memchr(p, 0, (size_t)s->len - 1);
    if (z)
      return bad(err, label, "text section '%s' holds a NUL byte at offset %zu", s->name,
                 (size_t)((const unsigned char *)z - p));
  }
  return CWM_OK;
}

/* Where inside the file byte n falls, for a truncation message. */
static void describe_cut(const cwm_mfile *f, size_t n, uint64_t total, char *out, size_t cap) {
  for (int i = 0; i < f->n; i++)
    if (n >= f->s[i].off && n < f->s[i].off + f->s[i].len) {
      snprintf(out, cap, "inside section '%s'", f->s[i].name);
      return;
    }
  if (n >= total - 8) snprintf(out, cap, "inside the checksum");
  else snprintf(out, cap, "in the padding between sections");
}

static cwm_mfile *parse(const void *data, size_t n, const char *label, cwm_err *err) {
  const unsigned char *p = data;
  if (!p) n = 0;
  if (memcmp(p ? (const void *)p : "", MAGIC, n < 8 ? n : 8) != 0) {
    bad(err, label, "not a cwm model file (bad magic)");
    return NULL;
  }
  if (n < HEADER) {
    bad(err, label, "truncated: the file ends at byte %zu inside the %d-byte header", n, HEADER);
    return NULL;
  }
  uint32_t version = cwm_get_le32(p + 8), count = cwm_get_le32(p + 12);
  uint64_t total = cwm_get_le64(p + 16);
  if (version != CWM_MFILE_VERSION) {
    bad(err, label, "model file version %u; this cwm reads version %d", version, CWM_MFILE_VERSION);
    return NULL;
  }
  if (count > CWM_MFILE_MAX_SECTIONS) {
    bad(err, label, "absurd section count %u (at most %d)", count, CWM_MFILE_MAX_SECTIONS);
    return NULL;
  }
  uint64_t table_end = HEADER + (uint64_t)count * ENTRY;
  uint64_t payload_start = round_up(table_end);
  if (total < payload_start + 8 || total > MAX_FILE_SIZE) {
    bad(err, label, "absurd file size %llu in the header (%u sections need at least %llu)", (unsigned long long)total,
        count, (unsigned long long)(payload_start + 8));
    return NULL;
  }
  if (n < table_end) {
    bad(err, label, "truncated: the file ends at byte %zu inside the section table (entry %llu of %u)", n,
        (unsigned long long)((n - HEADER) / ENTRY), count);
    return NULL;
  }
  if (n == total && cwm_hash64(p, n - 8) != cwm_get_le64(p + n - 8)) {
    bad(err, label, "checksum mismatch: the file was altered or damaged");
    return NULL;
  }
  cwm_mfile *f = cwm_xcalloc(1, sizeof *f);
  f->label = cwm_xstrdup(label);
  f->n = (int)count;
  f->s = cwm_xcalloc((size_t)count + 1, sizeof *f->s);
  for (uint32_t i = 0; i < count; i++) {
    const unsigned char *e = p + HEADER + (size_t)i * ENTRY;
    section *s = &f->s[i];
    memcpy(s->name, e, NAME_FIELD);
    s->kind = cwm_get_le32(e + 48);
    s->ndims = cwm_get_le32(e + 52);
    for (int d = 0; d < CWM_MFILE_MAX_DIMS; d++) s->dims[d] = cwm_get_le32(e + 56 + 4 * d);
    s->off = cwm_get_le64(e + 72);
    s->len = cwm_get_le64(e + 80);
    if (check_entry(s, i, payload_start, total - 8, label, err)) goto fail;
  }
  if (check_table(f, label, err)) goto fail;
  if (n < total) {
    char where[120];
    describe_cut(f, n, total, where, sizeof where);
    bad(err, label, "truncated: the file ends at byte %zu %s (the header says %llu bytes)", n, where,
        (unsigned long long)total);
    goto fail;
  }
  if (n > total) {
    bad(err, label, "%zu bytes past the %llu the header announces (altered or appended to)", n - (size_t)total,
        (unsigned long long)total);
    goto fail;
  }
  f->size = n;
  f->block = aligned_alloc(ALIGN, (size_t)round_up(n));
  if (!f->block) {
    bad(err, label, "out of memory for %zu bytes", n);
    goto fail;
  }
  memcpy(f->block, p, n);
  if (check_payloads(f, label, err)) goto fail;
  if (!host_is_le())
    for (int i = 0; i < f->n; i++)
      if (f->s[i].kind == CWM_MFILE_TENSOR)
        for (uint64_t k = 0; k + 4 <= f->s[i].len; k += 4) {
          uint32_t x = cwm_get_le32(f->block + f->s[i].off + k);
          memcpy(f->block + f->s[i].off + k, &x, 4);
        }
  return f;
fail:
  cwm_mfile_free(f);
  return NULL;
}

cwm_mfile *cwm_mfile_parse(const void *data, size_t n, cwm_err *err) { return parse(data, n, "model data", err); }

cwm_mfile *cwm_mfile_load(const char *path, cwm_err *err) {
  cwm_err e = {0};
  size_t n = 0;
  char *data = cwm_read_file_max(path, (size_t)512 << 20, &n, &e); /* models are a few MB */
  if (!data) {
    cwm_fail(err, CWM_EMODEL, "%.100s: cannot read model file (%.300s)", path, e.msg);
    return NULL;
  }
  cwm_mfile *f = parse(data, n, path, err);
  free(data);
  return f;
}

int cwm_mfile_count(const cwm_mfile *f) { return f ? f->n : 0; }

const char *cwm_mfile_section_name(const cwm_mfile *f, int i) {
  return f && i >= 0 && i < f->n ? f->s[i].name : NULL;
}

int cwm_mfile_section_kind(const cwm_mfile *f, int i) { return f && i >= 0 && i < f->n ? (int)f->s[i].kind : 0; }

static const section *find(const cwm_mfile *f, const char *name) {
  if (!f || !name) return NULL;
  for (int i = 0; i < f->n; i++)
    if (strcmp(f->s[i].name, name) == 0) return &f->s[i];
  return NULL;
}

const char *cwm_mfile_text(const cwm_mfile *f, const char *name) {
  const section *s = find(f, name);
  return s && s->kind == CWM_MFILE_TEXT ? (const char *)f->block + s->off : NULL;
}

const void *cwm_mfile_bytes(const cwm_mfile *f, const char *name, size_t *n) {
  const section *s = find(f, name);
  if (n) *n = 0;
  if (!s) return NULL;
  if (n) *n = (size_t)s->len - (s->kind == CWM_MFILE_TEXT);
  return f->block + s->off;
}

const float *cwm_mfile_tensor(const cwm_mfile *f, const char *name, int shape[CWM_MFILE_MAX_DIMS], int *ndims) {
  const section *s = find(f, name);
  if (ndims) *ndims = 0;
  if (!s || s->kind != CWM_MFILE_TENSOR) return NULL;
  if (ndims) *ndims = (int)s->ndims;
  if (shape)
    for (int d = 0; d < CWM_MFILE_MAX_DIMS; d++) shape[d] = d < (int)s->ndims ? (int)s->dims[d] : 0;
  return (const float *)(const void *)(f->block + s->off);
}

int cwm_mfile_need(const cwm_mfile *f, const char *name, cwm_mfile_kind kind, cwm_err *err) {
  if (!f) return cwm_fail(err, CWM_EMODEL, "no model file");
  const section *s = find(f, name);
  if (!s) return bad(err, f->label, "missing section '%s' (%s)", name, kind_name(kind));
  if (s->kind != (uint32_t)kind)
    return bad(err, f->label, "section '%s' is %s, not %s", name, kind_name(s->kind), kind_name(kind));
  return CWM_OK;
}

int cwm_mfile_need_tensor(const cwm_mfile *f, const char *name, int ndims, const int *shape, cwm_err *err) {
  int rc = cwm_mfile_need(f, name, CWM_MFILE_TENSOR, err);
  if (rc) return rc;
  const section *s = find(f, name);
  int ok = (int)s->ndims == ndims;
  for (int d = 0; ok && d < ndims; d++)
    if (shape[d] >= 0 && (uint32_t)shape[d] != s->dims[d]) ok = 0;
  if (ok) return CWM_OK;
  char have[64] = "", want[160] = "";
  size_t a = 0, b = 0;
  for (uint32_t d = 0; d < s->ndims; d++) a += (size_t)snprintf(have + a, sizeof have - a, "%s%u", d ? ", " : "", s->dims[d]);
  for (int d = 0; d < ndims && d < 8; d++) {
    if (shape[d] < 0) b += (size_t)snprintf(want + b, sizeof want - b, "%s*", d ? ", " : "");
    else b += (size_t)snprintf(want + b, sizeof want - b, "%s%d", d ? ", " : "", shape[d]);
  }
  return bad(err, f->label, "tensor '%s' has shape [%s], expected [%s]", name, have, want);
}

/* test_modelfile.c: the world model's file container: round trips of text, bytes and tensors
 * (aligned on load), every truncation and every altered byte of a small file rejected as
 * CWM_EMODEL, crafted defects behind a valid checksum each named, the atomic write leaving the
 * old file and no temporary behind, and writer misuse. With CWM_MFILE_SEED_DIR set it also
 * writes the fuzz target's seed files there. */
#define _GNU_SOURCE
#include "cwm/modelfile.h"
#include "cwm/tokenizer.h"
#include "testlib.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const state_text =
    "placeholder A[128, 768]\n"
    "placeholder W[768, 768]\n"
    "allocate D.local[4, 16]\n"
    "parallel i.0@j.0 (0,384)\n"
    "  for k (0,768)\n"
    "    vectorize j.1 (0,16)\n"
    "      D.local[i.1, j.1] += (A[i, k] * W[j, k])\n"
    "  out[i, j] = gelu(D.local[i, j] + 0.5)\n";

static const char *const config = "{\"width\": 128, \"layers\": 2, \"window\": 256, \"note\": \"test\"}";

/* A writer holding a bit of everything; the vocabulary of state_text as a bytes section. */
static cwm_mfile_writer *sample_writer(int big) {
  cwm_err e = {0};
  cwm_mfile_writer *w = cwm_mfile_writer_new();
  CHECK(cwm_mfile_add_text(w, "config", config, &e) == 0);
  cwm_vocab *v = cwm_vocab_new_builder();
  CHECK(cwm_vocab_add_text(v, state_text, &e) == 0);
  CHECK(cwm_vocab_finish(v, 1, &e) == 0);
  cwm_buf vb;
  cwm_buf_init(&vb);
  CHECK(cwm_vocab_save(v, &vb, &e) == 0);
  if (big) CHECK(cwm_mfile_add_bytes(w, "vocab", vb.s, vb.len, &e) == 0);
  cwm_buf_free(&vb);
  cwm_vocab_free(v);
  float m[3 * 5];
  for (int i = 0; i < 15; i++) m[i] = (float)i * 0.25f - 1.0f;
  int s2[2] = {3, 5};
  CHECK(cwm_mfile_add_tensor(w, "enc.w", m, 2, s2, &e) == 0);
  const unsigned char blob[] = {0, 1, 2, 0xff, 0, 'x'};
  CHECK(cwm_mfile_add_bytes(w, "xgb", blob, sizeof blob, &e) == 0);
  float one = 3.5f;
  CHECK(cwm_mfile_add_tensor(w, "scale", &one, 0, NULL, &e) == 0);
  if (big) {
    float t4[2 * 1 * 3 * 2];
    for (int i = 0; i < 12; i++) t4[i] = 1.0f / (float)(i + 1);
    int s4[4] = {2, 1, 3, 2};
    CHECK(cwm_mfile_add_tensor(w, "t4", t4, 4, s4, &e) == 0);
    int s0[2] = {0, 7};
    CHECK(cwm_mfile_add_tensor(w, "empty", NULL, 2, s0, &e) == 0);
    CHECK(cwm_mfile_add_bytes(w, "nothing", NULL, 0, &e) == 0);
    CHECK(cwm_mfile_add_text(w, "notes", "", &e) == 0);
  }
  return w;
}

static unsigned char *serialize(const cwm_mfile_writer *w, size_t *n) {
  unsigned char *b = NULL;
  cwm_err e = {0};
  CHECK(cwm_mfile_serialize(w, &b, n, &e) == 0);
  return b;
}

static void check_contents(const cwm_mfile *f, int big) {
  CHECK(cwm_mfile_count(f) == (big ? 9 : 4));
  const char *c = cwm_mfile_text(f, "config");
  CHECK(c && !strcmp(c, config));
  size_t n;
  const unsigned char *x = cwm_mfile_bytes(f, "xgb", &n);
  CHECK(x && n == 6 && x[3] == 0xff && x[5] == 'x');
  CHECK(cwm_mfile_bytes(f, "config", &n) && n == strlen(config)); /* text without its NUL */
  int shape[4], nd;
  const float *m = cwm_mfile_tensor(f, "enc.w", shape, &nd);
  CHECK(m && nd == 2 && shape[0] == 3 && shape[1] == 5 && shape[2] == 0);
  CHECK(m && ((uintptr_t)m % 64) == 0);
  for (int i = 0; m && i < 15; i++) CHECK(m[i] == (float)i * 0.25f - 1.0f);
  const float *s = cwm_mfile_tensor(f, "scale", shape, &nd);
  CHECK(s && nd == 0 && *s == 3.5f);
  CHECK(cwm_mfile_tensor(f, "config", shape, &nd) == NULL && nd == 0);
  CHECK(cwm_mfile_text(f, "xgb") == NULL);
  CHECK(cwm_mfile_bytes(f, "no such", &n) == NULL && n == 0);
  CHECK(!strcmp(cwm_mfile_section_name(f, 0), "config") && cwm_mfile_section_kind(f, 0) == CWM_MFILE_TEXT);
  CHECK(cwm_mfile_section_name(f, -1) == NULL && cwm_mfile_section_name(f, 99) == NULL);
  if (!big) return;
  const float *t4 = cwm_mfile_tensor(f, "t4", shape, &nd);
  CHECK(t4 && nd == 4 && shape[0] == 2 && shape[1] == 1 && shape[2] == 3 && shape[3] == 2);
  for (int i = 0; t4 && i < 12; i++) CHECK(t4[i] == 1.0f / (float)(i + 1));
  CHECK(cwm_mfile_tensor(f, "empty", shape, &nd) != NULL && nd == 2 && shape[0] == 0 && shape[1] == 7);
  CHECK(cwm_mfile_bytes(f, "nothing", &n) != NULL && n == 0);
  CHECK(cwm_mfile_text(f, "notes") && !strcmp(cwm_mfile_text(f, "notes"), ""));
  /* the vocabulary inside loads and tokenizes like the original */
  const void *vb = cwm_mfile_bytes(f, "vocab", &n);
  cwm_err e = {0};
  cwm_vocab *v = cwm_vocab_load(vb, n, &e);
  CHECKF(v, "%s", e.msg);
  int *ids, k;
  CHECK(v && cwm_tokenize(v, state_text, &ids, &k, &e) == 0);
  if (v) {
    int unk = 0;
    for (int i = 0; i < k; i++) unk += ids[i] == CWM_TOK_UNK;
    CHECK(k > 50 && unk == 0);
    free(ids);
  }
  cwm_vocab_free(v);
}

static char tmpdir[256];

static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cwm_test_mfile.XXXXXX");
  CHECK(mkdtemp(tmpdir) != NULL);
}

static int temp_files_in(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int k = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (strstr(de->d_name, ".tmp.")) k++;
  closedir(d);
  return k;
}

static void test_roundtrip(void) {
  cwm_err e = {0};
  for (int big = 0; big <= 1; big++) {
    cwm_mfile_writer *w = sample_writer(big);
    char path[512];
    snprintf(path, sizeof path, "%s/model%d.cwm", tmpdir, big);
    CHECK(cwm_mfile_write(w, path, &e) == 0);
    cwm_mfile *f = cwm_mfile_load(path, &e);
    CHECKF(f, "%s", e.msg);
    if (f) check_contents(f, big);
    cwm_mfile_free(f);
    /* the same bytes in memory, from a misaligned copy */
    size_t n;
    unsigned char *b = serialize(w, &n);
    unsigned char *odd = cwm_xmalloc(n + 3);
    memcpy(odd + 3, b, n);
    f = cwm_mfile_parse(odd + 3, n, &e);
    CHECKF(f, "%s", e.msg);
    if (f) check_contents(f, big);
    cwm_mfile_free(f);
    /* the file on disk is exactly the serialized bytes, with every payload 64-aligned */
    size_t dn;
    char *disk = cwm_read_file(path, &dn, &e);
    CHECK(disk && dn == n && !memcmp(disk, b, n) && n % 64 == 8);
    free(disk);
    free(odd);
    free(b);
    cwm_mfile_writer_free(w);
    unlink(path);
  }
  /* an empty model is a valid file too */
  cwm_mfile_writer *w = cwm_mfile_writer_new();
  size_t n;
  unsigned char *b = serialize(w, &n);
  cwm_mfile *f = cwm_mfile_parse(b, n, &e);
  CHECK(f && cwm_mfile_count(f) == 0 && n == 64 + 8);
  cwm_mfile_free(f);
  free(b);
  cwm_mfile_writer_free(w);
  CHECK(temp_files_in(tmpdir) == 0);
}

static void expect_error(const unsigned char *p, size_t n, const char *want, const char *what) {
  cwm_err e = {0};
  cwm_mfile *f = cwm_mfile_parse(p, n, &e);
  CHECKF(!f && e.code == CWM_EMODEL && strstr(e.msg, want), "%s: got %s (code %d), want \"%s\"", what,
         f ? "a model" : e.msg, e.code, want);
  cwm_mfile_free(f);
}

static void test_truncation(void) {
  cwm_mfile_writer *w = sample_writer(0);
  size_t n;
  unsigned char *b = serialize(w, &n);
  int loaded = 0, wrongcode = 0, vague = 0;
  cwm_err e = {0};
  for (size_t cut = 0; cut < n; cut++) {
    e.code = CWM_OK;
    e.msg[0] = 0;
    cwm_mfile *f = cwm_mfile_parse(b, cut, &e);
    if (f) loaded++;
    else if (e.code != CWM_EMODEL) wrongcode++;
    else if (!strstr(e.msg, "truncated")) {
      vague++;
      fprintf(stderr, "cut at %zu: %s\n", cut, e.msg);
    }
    cwm_mfile_free(f);
  }
  CHECKF(loaded == 0 && wrongcode == 0 && vague == 0, "of %zu cuts: %d loaded, %d wrong code, %d not 'truncated'", n,
         loaded, wrongcode, vague);
  /* the message says where: the header, the table, a named section, the checksum */
  expect_error(b, 10, "ends at byte 10 inside the 24-byte header", "cut in header");
  expect_error(b, 30, "ends at byte 30 inside the section table (entry 0 of 4)", "cut in table");
  /* enc.w is the second payload: after the table (24 + 4 * 88 = 376 -> 384) and config */
  size_t enc_off = 384 + 64 * ((strlen(config) + 1 + 63) / 64);
  char want[128];
  snprintf(want, sizeof want, "ends at byte %zu inside section 'enc.w'", enc_off + 7);
  expect_error(b, enc_off + 7, want, "cut in enc.w");
  expect_error(b, n - 3, "inside the checksum", "cut in checksum");
  free(b);
  cwm_mfile_writer_free(w);
}

static void test_altered(void) {
  cwm_mfile_writer *w = sample_writer(0);
  size_t n;
  unsigned char *b = serialize(w, &n);
  int loaded = 0, wrongcode = 0, checksum = 0;
  cwm_err e = {0};
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 3; k++) {
      unsigned char mask = k == 0 ? 0x01 : k == 1 ? 0x80 : 0xff;
      b[i] ^= mask;
      e.code = CWM_OK;
      cwm_mfile *f = cwm_mfile_parse(b, n, &e);
      if (f) loaded++;
      else if (e.code != CWM_EMODEL) wrongcode++;
      else if (strstr(e.msg, "checksum mismatch")) checksum++;
      cwm_mfile_free(f);
      b[i] ^= mask;
    }
  CHECKF(loaded == 0 && wrongcode == 0, "of %zu flips: %d loaded, %d wrong code", 3 * n, loaded, wrongcode);
  /* everything but the magic, version, count and size fields is caught by the checksum */
  CHECKF(checksum >= 3 * ((int)n - 24), "%d of %zu flips reported as a checksum mismatch", checksum, 3 * n);
  free(b);
  cwm_mfile_writer_free(w);
}

static void put_le(unsigned char *p, uint64_t x, int n) {
  for (int i = 0; i < n; i++) p[i] = (unsigned char)(x >> (8 * i));
}
static uint64_t get_le(const unsigned char *p) {
  uint64_t x = 0;
  for (int i = 7; i >= 0; i--) x = x << 8 | p[i];
  return x;
}
static void reseal(unsigned char *p, size_t n) { put_le(p + n - 8, cwm_hash64(p, n - 8), 8); }

static void test_crafted(void) {
  cwm_mfile_writer *w = sample_writer(0);
  size_t n;
  unsigned char *b = serialize(w, &n);
  unsigned char *q = cwm_xmalloc(n + 128);
  /* entries: config (0), enc.w (1), xgb (2), scale (3) at 24 + 88 i */
#define E(i) (q + 24 + 88 * (i))
#define FRESH() memcpy(q, b, n)
  FRESH();
  memcpy(q, "CWMMODEX", 8);
  expect_error(q, n, "not a cwm model file (bad magic)", "magic");
  expect_error((const unsigned char *)"hello", 5, "not a cwm model file", "short text");
  expect_error((const unsigned char *)"{\"json\": 1}", 11, "not a cwm model file", "json");
  FRESH();
  put_le(q + 8, 2, 4);
  expect_error(q, n, "model file version 2; this cwm reads version 1", "version");
  FRESH();
  put_le(q + 8, 0, 4);
  reseal(q, n);
  expect_error(q, n, "version 0", "version 0");
  FRESH();
  put_le(q + 12, 1u << 31, 4);
  expect_error(q, n, "absurd section count", "count");
  FRESH();
  put_le(q + 16, (uint64_t)1 << 50, 8);
  expect_error(q, n, "absurd file size", "size");
  FRESH();
  put_le(q + 16, n - 64, 8);
  reseal(q, n);
  expect_error(q, n, "section 'scale' lies out of bounds", "size smaller than the file");
  FRESH();
  memcpy(E(2), "config", 7);
  reseal(q, n);
  expect_error(q, n, "duplicate section 'config'", "duplicate");
  FRESH();
  put_le(E(1) + 56, 4, 4); /* enc.w 4 x 5, payload of 3 x 5 */
  reseal(q, n);
  expect_error(q, n, "tensor 'enc.w' has 60 bytes; its shape [4, 5] needs 80", "shape");
  FRESH();
  put_le(E(1) + 56, 0x7fffffff, 4);
  put_le(E(1) + 60, 0x7fffffff, 4);
  put_le(E(1) + 52, 4, 4);
  put_le(E(1) + 64, 0x7fffffff, 4);
  put_le(E(1) + 68, 0x7fffffff, 4);
  reseal(q, n);
  expect_error(q, n, "needs more than 2^64", "overflowing shape");
  FRESH();
  put_le(E(1) + 52, 5, 4);
  reseal(q, n);
  expect_error(q, n, "5 dimensions", "ndims");
  FRESH();
  put_le(E(2) + 80, 1u << 20, 8);
  reseal(q, n);
  expect_error(q, n, "section 'xgb' lies out of bounds", "length past the end");
  FRESH();
  put_le(E(2) + 72, 8, 8);
  reseal(q, n);
  expect_error(q, n, "section 'xgb' lies out of bounds", "offset inside the table");
  FRESH();
  put_le(E(2) + 72, get_le(E(2) + 72) + 4, 8);
  reseal(q, n);
  expect_error(q, n, "lies out of bounds", "misaligned offset");
  FRESH();
  memcpy(E(2) + 72, E(1) + 72, 8); /* xgb on top of enc.w */
  reseal(q, n);
  expect_error(q, n, "overlap", "overlap");
  FRESH();
  put_le(E(2) + 48, 7, 4);
  reseal(q, n);
  expect_error(q, n, "section 'xgb' has unknown kind 7", "kind");
  FRESH();
  put_le(E(2) + 52, 1, 4);
  reseal(q, n);
  expect_error(q, n, "section 'xgb' (bytes) has 1 dimensions", "dims on bytes");
  FRESH();
  E(2)[3] = ' ';
  reseal(q, n);
  expect_error(q, n, "malformed name", "space in a name");
  FRESH();
  memset(E(2), 0, 48);
  reseal(q, n);
  expect_error(q, n, "section 2 has an empty or unterminated name", "empty name");
  FRESH();
  memset(E(2), 'a', 48);
  reseal(q, n);
  expect_error(q, n, "unterminated name", "unterminated name");
  FRESH();
  E(2)[10] = 'z'; /* after the NUL of "xgb" */
  reseal(q, n);
  expect_error(q, n, "malformed name", "junk after the name");
  FRESH();
  q[384 + 3] = 0; /* a NUL inside the config text */
  reseal(q, n);
  expect_error(q, n, "text section 'config' holds a NUL byte at offset 3", "NUL in text");
  FRESH();
  q[384 + strlen(config)] = '!';
  reseal(q, n);
  expect_error(q, n, "text section 'config' is not NUL-terminated", "unterminated text");
  FRESH();
  memset(q + n, 0, 64);
  expect_error(q, n + 64, "past the", "appended bytes");
  free(q);
  free(b);
  cwm_mfile_writer_free(w);
}

static void test_need(void) {
  cwm_mfile_writer *w = sample_writer(0);
  size_t n;
  unsigned char *b = serialize(w, &n);
  cwm_err e = {0};
  cwm_mfile *f = cwm_mfile_parse(b, n, &e);
  CHECK(f != NULL);
  CHECK(cwm_mfile_need(f, "config", CWM_MFILE_TEXT, &e) == 0);
  CHECK(cwm_mfile_need(f, "ranker", CWM_MFILE_BYTES, &e) == CWM_EMODEL &&
        strstr(e.msg, "model data: missing section 'ranker' (bytes)"));
  CHECK(cwm_mfile_need(f, "xgb", CWM_MFILE_TENSOR, &e) == CWM_EMODEL && strstr(e.msg, "section 'xgb' is bytes, not a tensor"));
  int ok[2] = {3, 5}, any[2] = {-1, 5}, wrong[2] = {5, 3};
  CHECK(cwm_mfile_need_tensor(f, "enc.w", 2, ok, &e) == 0);
  CHECK(cwm_mfile_need_tensor(f, "enc.w", 2, any, &e) == 0);
  CHECK(cwm_mfile_need_tensor(f, "enc.w", 2, wrong, &e) == CWM_EMODEL &&
        strstr(e.msg, "tensor 'enc.w' has shape [3, 5], expected [5, 3]"));
  CHECK(cwm_mfile_need_tensor(f, "enc.w", 1, any, &e) == CWM_EMODEL && strstr(e.msg, "expected [*]"));
  CHECK(cwm_mfile_need_tensor(f, "scale", 0, NULL, &e) == 0);
  cwm_mfile_free(f);
  free(b);
  cwm_mfile_writer_free(w);
  CHECK(cwm_mfile_need(NULL, "x", CWM_MFILE_TEXT, &e) == CWM_EMODEL);
}

static void test_writer_misuse(void) {
  cwm_err e = {0};
  cwm_mfile_writer *w = cwm_mfile_writer_new();
  float x = 1;
  int neg[1] = {-1}, s1[1] = {1};
  CHECK(cwm_mfile_add_text(w, "", "x", &e) == CWM_EINTERNAL);
  CHECK(cwm_mfile_add_text(w, NULL, "x", &e) == CWM_EINTERNAL);
  CHECK(cwm_mfile_add_text(w, "has space", "x", &e) == CWM_EINTERNAL);
  char longest[49];
  memset(longest, 'n', 48);
  longest[48] = 0;
  CHECK(cwm_mfile_add_text(w, longest, "x", &e) == CWM_EINTERNAL);
  longest[47] = 0;
  CHECK(cwm_mfile_add_text(w, longest, "x", &e) == 0);
  CHECK(cwm_mfile_add_bytes(w, "t", "ab", 2, &e) == 0);
  CHECK(cwm_mfile_add_tensor(w, "t", &x, 1, s1, &e) == CWM_EINTERNAL && strstr(e.msg, "duplicate"));
  CHECK(cwm_mfile_add_tensor(w, "u", &x, 1, neg, &e) == CWM_EINTERNAL);
  CHECK(cwm_mfile_add_tensor(w, "u", &x, 5, s1, &e) == CWM_EINTERNAL);
  CHECK(cwm_mfile_add_tensor(w, "u", NULL, 1, s1, &e) == CWM_EINTERNAL);
  CHECK(cwm_mfile_add_bytes(w, "u", NULL, 3, &e) == CWM_EINTERNAL);
  int huge[4] = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff};
  CHECK(cwm_mfile_add_tensor(w, "u", &x, 4, huge, &e) == CWM_EINTERNAL);
  size_t n;
  unsigned char *b = serialize(w, &n);
  cwm_mfile *f = cwm_mfile_parse(b, n, &e);
  CHECK(f && cwm_mfile_count(f) == 2); /* the failed adds left nothing behind */
  cwm_mfile_free(f);
  free(b);
  cwm_mfile_writer_free(w);
}

static void test_atomic(void) {
  cwm_err e = {0};
  char path[512], sub[512], ro[512], ropath[600];
  snprintf(path, sizeof path, "%s/atomic.cwm", tmpdir);
  cwm_mfile_writer *w1 = sample_writer(0), *w2 = sample_writer(1);
  CHECK(cwm_mfile_write(w1, path, &e) == 0);
  CHECK(cwm_mfile_write(w2, path, &e) == 0); /* replaced whole */
  cwm_mfile *f = cwm_mfile_load(path, &e);
  CHECK(f && cwm_mfile_count(f) == 9);
  cwm_mfile_free(f);
  CHECK(temp_files_in(tmpdir) == 0);

  /* the path is a directory: the write fails, the directory stays, no temporary is left */
  snprintf(sub, sizeof sub, "%s/adir", tmpdir);
  CHECK(mkdir(sub, 0755) == 0);
  CHECK(cwm_mfile_write(w1, sub, &e) == CWM_EIO);
  struct stat st;
  CHECK(stat(sub, &st) == 0 && S_ISDIR(st.st_mode));
  CHECK(temp_files_in(tmpdir) == 0);
  f = cwm_mfile_load(sub, &e);
  CHECK(!f && e.code == CWM_EMODEL);

  /* a directory that cannot be written: the old file is untouched */
  snprintf(ro, sizeof ro, "%s/ro", tmpdir);
  CHECK(mkdir(ro, 0755) == 0);
  snprintf(ropath, sizeof ropath, "%s/model.cwm", ro);
  CHECK(cwm_mfile_write(w1, ropath, &e) == 0);
  CHECK(chmod(ro, 0555) == 0);
  if (geteuid() != 0) {
    CHECK(cwm_mfile_write(w2, ropath, &e) == CWM_EIO);
    f = cwm_mfile_load(ropath, &e);
    CHECK(f && cwm_mfile_count(f) == 4); /* still the first model */
    cwm_mfile_free(f);
    CHECK(temp_files_in(ro) == 0);
  } else {
    /* root writes anywhere; a place nobody can write stands in */
    CHECK(cwm_mfile_write(w2, "/proc/cwm_test_model.cwm", &e) == CWM_EIO);
    CHECK(access("/proc/cwm_test_model.cwm", F_OK) != 0);
  }
  chmod(ro, 0755);
  CHECK(cwm_mfile_write(w1, "/nonexistent-dir/x/model.cwm", &e) == CWM_EIO);

  /* a missing file is a model error naming it */
  f = cwm_mfile_load("/nonexistent-dir/model.cwm", &e);
  CHECK(!f && e.code == CWM_EMODEL && strstr(e.msg, "/nonexistent-dir/model.cwm: cannot read model file"));
  /* an error message names the file */
  char junk[512];
  snprintf(junk, sizeof junk, "%s/junk.cwm", tmpdir);
  CHECK(cwm_write_file_atomic(junk, "CWMMODEL\1\0\0\0", 12, &e) == 0);
  f = cwm_mfile_load(junk, &e);
  CHECK(!f && e.code == CWM_EMODEL && strstr(e.msg, junk) && strstr(e.msg, "truncated"));

  unlink(junk);
  unlink(ropath);
  rmdir(ro);
  rmdir(sub);
  unlink(path);
  cwm_mfile_writer_free(w1);
  cwm_mfile_writer_free(w2);
}

/* Seeds for fuzz/fuzz_modelfile.c: CWM_MFILE_SEED_DIR=fuzz/corpus/modelfile ./test_modelfile */
static void write_seeds(const char *dir) {
  cwm_err e = {0};
  char path[512];
  for (int big = 0; big <= 1; big++) {
    cwm_mfile_writer *w = sample_writer(big);
    snprintf(path, sizeof path, "%s/model_%s.cwm", dir, big ? "full" : "small");
    CHECK(cwm_mfile_write(w, path, &e) == 0);
    cwm_mfile_writer_free(w);
  }
  cwm_mfile_writer *w = cwm_mfile_writer_new();
  snprintf(path, sizeof path, "%s/model_empty.cwm", dir);
  CHECK(cwm_mfile_write(w, path, &e) == 0);
  cwm_mfile_writer_free(w);
  cwm_vocab *v = cwm_vocab_new_builder();
  CHECK(cwm_vocab_add_text(v, state_text, &e) == 0);
  CHECK(cwm_vocab_finish(v, 1, &e) == 0);
  cwm_buf vb;
  cwm_buf_init(&vb);
  CHECK(cwm_vocab_save(v, &vb, &e) == 0);
  snprintf(path, sizeof path, "%s/vocab.bin", dir);
  CHECK(cwm_write_file_atomic(path, vb.s, vb.len, &e) == 0);
  /* a model holding only the vocabulary */
  w = cwm_mfile_writer_new();
  CHECK(cwm_mfile_add_bytes(w, "vocab", vb.s, vb.len, &e) == 0);
  snprintf(path, sizeof path, "%s/model_vocab.cwm", dir);
  CHECK(cwm_mfile_write(w, path, &e) == 0);
  cwm_mfile_writer_free(w);
  cwm_buf_free(&vb);
  cwm_vocab_free(v);
  fprintf(stderr, "seed files written to %s\n", dir);
}

int main(void) {
  make_tmpdir();
  test_roundtrip();
  test_truncation();
  test_altered();
  test_crafted();
  test_need();
  test_writer_misuse();
  test_atomic();
  rmdir(tmpdir);
  const char *seeds = getenv("CWM_MFILE_SEED_DIR");
  if (seeds && *seeds) write_seeds(seeds);
  return test_done();
}

/* fuzz_modelfile.c: libFuzzer target for the model-file reader and the vocabulary loader.
 * Random bytes rarely carry a valid checksum, so each input is also tried with its trailing
 * checksum (and the model header's size field) made to fit: that lets the fuzzer reach the
 * table, payload and vocabulary checks behind them. A file that parses must survive every
 * lookup, and re-serializing it must parse again; a vocabulary that loads must tokenize.
 * The input is also tokenized as text with a vocabulary built from it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cwm/modelfile.h"
#include "cwm/tokenizer.h"

static const char *const sample =
    "placeholder A[64, 64]\n"
    "allocate out.local[4, 8]\n"
    "parallel i.0@j.0 (0,16)\n"
    "  for k (0,64)\n"
    "    vectorize j.1 (0,8) auto_unroll\n"
    "      out.local[i.1, j.1] max= exp(A[i, k] * 0.125) + 1e-05\n";

static volatile float fsink;
static volatile unsigned char bsink;

static void put_u64(unsigned char *p, uint64_t x) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(x >> (8 * i));
}

static void try_vocab(const unsigned char *data, size_t n) {
  cwm_err e;
  cwm_vocab *v = cwm_vocab_load(data, n, &e);
  if (!v) return;
  int *ids, k;
  if (cwm_tokenize(v, sample, &ids, &k, &e)) abort();
  for (int i = 0; i < k; i++)
    if (ids[i] < 0 || ids[i] >= cwm_vocab_size(v) || !cwm_token_name(v, ids[i])[0]) abort();
  free(ids);
  /* the loaded vocabulary saves to the same bytes */
  cwm_buf b;
  cwm_buf_init(&b);
  if (cwm_vocab_save(v, &b, &e) || b.len != n || memcmp(b.s, data, n)) abort();
  cwm_buf_free(&b);
  cwm_vocab_free(v);
}

/* The vocabulary loader on data as is and with a fitting checksum. */
static void try_vocab_both(const unsigned char *data, size_t n) {
  try_vocab(data, n);
  if (n < 8) return;
  unsigned char *c = malloc(n);
  memcpy(c, data, n);
  put_u64(c + n - 8, cwm_hash64(c, n - 8));
  try_vocab(c, n);
  free(c);
}

static void exercise(const cwm_mfile *f) {
  cwm_err e;
  cwm_mfile_writer *w = cwm_mfile_writer_new();
  for (int i = 0; i < cwm_mfile_count(f); i++) {
    const char *name = cwm_mfile_section_name(f, i);
    size_t n;
    const unsigned char *p = cwm_mfile_bytes(f, name, &n);
    if (!p) abort();
    for (size_t k = 0; k < n; k++) bsink ^= p[k]; /* every byte readable */
    int shape[CWM_MFILE_MAX_DIMS], nd;
    switch (cwm_mfile_section_kind(f, i)) {
    case CWM_MFILE_TEXT: {
      const char *t = cwm_mfile_text(f, name);
      if (!t || strlen(t) != n) abort();
      if (cwm_mfile_add_text(w, name, t, &e)) abort();
      break;
    }
    case CWM_MFILE_BYTES:
      try_vocab_both(p, n);
      if (cwm_mfile_add_bytes(w, name, p, n, &e)) abort();
      break;
    case CWM_MFILE_TENSOR: {
      const float *x = cwm_mfile_tensor(f, name, shape, &nd);
      if (!x || ((uintptr_t)x & 63)) abort();
      size_t count = 1;
      for (int d = 0; d < nd; d++) count *= (size_t)shape[d];
      if (count * 4 != n) abort();
      for (size_t k = 0; k < count; k++) fsink += x[k]; /* every float readable */
      if (cwm_mfile_add_tensor(w, name, x, nd, shape, &e)) abort();
      break;
    }
    default:
      abort();
    }
  }
  unsigned char *out;
  size_t n;
  if (cwm_mfile_serialize(w, &out, &n, &e)) abort();
  cwm_mfile *g = cwm_mfile_parse(out, n, &e);
  if (!g || cwm_mfile_count(g) != cwm_mfile_count(f)) abort();
  cwm_mfile_free(g);
  free(out);
  cwm_mfile_writer_free(w);
}

static void try_model(const unsigned char *data, size_t n) {
  cwm_err e;
  cwm_mfile *f = cwm_mfile_parse(data, n, &e);
  if (f) exercise(f);
  else if (e.code != CWM_EMODEL) abort();
  cwm_mfile_free(f);
}

/* The input as state text: a vocabulary built from it saves, loads back equal and tokenizes
 * it the same way; the ids stay in range. */
static void try_text(const unsigned char *data, size_t n) {
  cwm_err e;
  cwm_vocab *v = cwm_vocab_new_builder();
  if (cwm_vocab_add_text_n(v, (const char *)data, n, &e) || cwm_vocab_finish(v, 1, &e)) abort();
  cwm_buf b;
  cwm_buf_init(&b);
  if (cwm_vocab_save(v, &b, &e)) abort();
  cwm_vocab *w = cwm_vocab_load(b.s, b.len, &e);
  if (!w || cwm_vocab_size(w) != cwm_vocab_size(v)) abort();
  int *a, *c, na, nc;
  if (cwm_tokenize_n(v, (const char *)data, n, &a, &na, &e) || cwm_tokenize_n(w, (const char *)data, n, &c, &nc, &e))
    abort();
  if (na != nc || (na && memcmp(a, c, sizeof *a * (size_t)na))) abort();
  for (int i = 0; i < na; i++)
    if (a[i] <= 0 || a[i] >= cwm_vocab_size(v)) abort();
  free(a);
  free(c);
  cwm_buf_free(&b);
  cwm_vocab_free(w);
  cwm_vocab_free(v);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
  /* building a vocabulary costs a millisecond under the sanitizers: only for inputs that are
   * not trying to be a model file or a vocabulary, so those keep their speed */
  if (n < 3 || memcmp(data, "CWM", 3) != 0) try_text(data, n);
  try_model(data, n);
  try_vocab_both(data, n);
  if (n >= 32) {
    unsigned char *c = malloc(n);
    memcpy(c, data, n);
    put_u64(c + n - 8, cwm_hash64(c, n - 8));
    try_model(c, n); /* a fitting checksum */
    put_u64(c + 16, n);
    put_u64(c + n - 8, cwm_hash64(c, n - 8));
    try_model(c, n); /* and a fitting size */
    free(c);
  }
  return 0;
}

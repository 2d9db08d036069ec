/* fuzz_modelcfg.c: libFuzzer target for the world model's config (the "world.config" section
 * that sizes the networks: width, heads, layers, ff, window, overlap, the version and the mode
 * flags) as cwm_world_load reads and checks it. The input is the config text; it goes in front
 * of a valid remainder (vocabulary and weights) in a well-formed container with a fitting
 * checksum, so every input reaches the config checks, which random bytes given to
 * fuzz_modelfile rarely do. When the sizes the input names are small, the remainder is a fresh
 * model of exactly those sizes, so the load can succeed and the fuzzer reaches past the shape
 * checks; otherwise it is a small model's, which a config of other sizes must be refused against
 * without allocating what the config asks for (libFuzzer's -rss_limit_mb and -malloc_limit_mb
 * catch that). A refusal must be CWM_EMODEL naming the file (the CLI exits 9 with it); a loaded
 * model must have the config's width and encode a text to finite numbers. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cwm/modelfile.h"
#include "cwm/world.h"

/* the most floats a remainder made to fit the input may hold: a load stays a millisecond or so */
#define FIT_MAX_FLOATS 300000.0

static const char *const sample =
    "placeholder A[64, 64]\n"
    "for i (0,64)\n"
    "  for j (0,64)\n"
    "    out[i, j] = exp(A[i, j] * 0.125) + 1e-05\n";

static int g_fd = -1;
static char g_path[64];
static cwm_vocab *g_vocab_src; /* a built vocabulary, kept to clone for each fresh model */
static cwm_mfile *g_base;      /* the small model's file: its sections but world.config are the remainder */
static cwm_mfile *g_fit;       /* the last model made to fit an input, and its sizes */
static int g_fit_key[6];

static void die(const char *what, const cwm_err *e) {
  fprintf(stderr, "fuzz_modelcfg: %s: %s\n", what, e ? e->msg : "");
  abort();
}

/* The file's bytes become what g_path reads. */
static void put_file(const unsigned char *p, size_t n) {
  if (ftruncate(g_fd, 0) || pwrite(g_fd, p, n, 0) != (ssize_t)n) die("memfd write", NULL);
}

static cwm_vocab *vocab_clone(void) {
  cwm_err e;
  cwm_buf b;
  cwm_buf_init(&b);
  if (cwm_vocab_save(g_vocab_src, &b, &e)) die("vocab save", &e);
  cwm_vocab *v = cwm_vocab_load(b.s, b.len, &e);
  if (!v) die("vocab load", &e);
  cwm_buf_free(&b);
  return v;
}

/* A fresh model of config c as a parsed file (cwm_world_save writes through a temporary name and a
 * rename, so it goes to a real file); NULL when cwm_world_new refuses c. */
static cwm_mfile *model_file(const cwm_world_config *c) {
  cwm_err e;
  cwm_world *w = cwm_world_new(c, vocab_clone(), 7, &e);
  if (!w) return NULL;
  char tmp[64];
  snprintf(tmp, sizeof tmp, "/tmp/fuzz_modelcfg.%d.cwm", (int)getpid());
  if (cwm_world_save(w, tmp, &e)) die("world save", &e);
  cwm_world_free(w);
  cwm_mfile *f = cwm_mfile_load(tmp, &e);
  if (!f) die("reload", &e);
  unlink(tmp);
  return f;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  cwm_pool_set_threads(1);
  g_fd = memfd_create("fuzz_modelcfg", 0);
  if (g_fd < 0) die("memfd_create", NULL);
  snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
  cwm_err e;
  g_vocab_src = cwm_vocab_new_builder();
  if (cwm_vocab_add_text(g_vocab_src, sample, &e) || cwm_vocab_finish(g_vocab_src, 1, &e)) die("vocab", &e);
  cwm_world_config c;
  cwm_world_config_default(&c);
  c.enc.width = 8, c.enc.heads = 2, c.enc.layers = 1, c.enc.ff = 16, c.enc.window = 16, c.enc.overlap = 4;
  g_base = model_file(&c);
  if (!g_base) die("base model", NULL);
  return 0;
}

/* key=N at the start of a line, the first one, as the loader reads it */
static int key_int(const char *text, const char *key, int *out) {
  size_t kl = strlen(key);
  for (const char *p = text; p && *p;) {
    if (!strncmp(p, key, kl) && p[kl] == '=') {
      char *end;
      long v = strtol(p + kl + 1, &end, 10);
      if (end == p + kl + 1 || v < -1000000000L || v > 1000000000L) return 0;
      *out = (int)v;
      return 1;
    }
    p = strchr(p, '\n');
    if (p) p++;
  }
  return 0;
}

/* The remainder for config text: a model of its sizes when they are all there and small, the base
 * model's otherwise. */
static const cwm_mfile *remainder_for(const char *text) {
  cwm_world_config c;
  cwm_world_config_default(&c);
  int k[6];
  if (!key_int(text, "width", &k[0]) || !key_int(text, "heads", &k[1]) || !key_int(text, "layers", &k[2]) ||
      !key_int(text, "ff", &k[3]) || !key_int(text, "window", &k[4]) || !key_int(text, "overlap", &k[5]))
    return g_base;
  for (int i = 0; i < 5; i++)
    if (k[i] < 1) return g_base;
  /* the encoder's tensors, the transition's and the action table (about 1200 ids) */
  double D = k[0];
  double floats = (cwm_vocab_size(g_vocab_src) + k[4] + 2000.0) * D + 3 * D * D;
  floats += k[2] * (4 * D * D + 2 * k[3] * D + 16 * D);
  if (floats > FIT_MAX_FLOATS || k[1] > k[0]) return g_base;
  if (g_fit && !memcmp(k, g_fit_key, sizeof k)) return g_fit;
  c.enc.width = k[0], c.enc.heads = k[1], c.enc.layers = k[2], c.enc.ff = k[3], c.enc.window = k[4];
  c.enc.overlap = k[5];
  cwm_mfile *f = model_file(&c);
  if (!f) return g_base;
  cwm_mfile_free(g_fit);
  g_fit = f;
  memcpy(g_fit_key, k, sizeof k);
  return g_fit;
}

/* The container: the config text first, then every section of rest but its own config. */
static void build(const char *text, const cwm_mfile *rest, unsigned char **out, size_t *n) {
  cwm_err e;
  cwm_mfile_writer *mw = cwm_mfile_writer_new();
  if (cwm_mfile_add_text(mw, "world.config", text, &e)) die("add config", &e);
  for (int i = 0; i < cwm_mfile_count(rest); i++) {
    const char *name = cwm_mfile_section_name(rest, i);
    if (!strcmp(name, "world.config")) continue;
    int rc;
    if (cwm_mfile_section_kind(rest, i) == CWM_MFILE_TENSOR) {
      int shape[CWM_MFILE_MAX_DIMS], nd;
      const float *x = cwm_mfile_tensor(rest, name, shape, &nd);
      rc = cwm_mfile_add_tensor(mw, name, x, nd, shape, &e);
    } else if (cwm_mfile_section_kind(rest, i) == CWM_MFILE_TEXT) {
      rc = cwm_mfile_add_text(mw, name, cwm_mfile_text(rest, name), &e);
    } else {
      size_t len;
      const void *p = cwm_mfile_bytes(rest, name, &len);
      rc = cwm_mfile_add_bytes(mw, name, p, len, &e);
    }
    if (rc) die("add section", &e);
  }
  if (cwm_mfile_serialize(mw, out, n, &e)) die("serialize", &e);
  cwm_mfile_writer_free(mw);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
  /* a text section holds no NUL: the config is the input up to its first one */
  size_t len = strnlen((const char *)data, n);
  char *text = malloc(len + 1);
  memcpy(text, data, len);
  text[len] = 0;
  unsigned char *file;
  size_t fn;
  build(text, remainder_for(text), &file, &fn);
  put_file(file, fn);
  free(file);

  cwm_err e = {0};
  cwm_world *w = cwm_world_load(g_path, &e);
  if (!w) {
    /* refused: a model-file error that names the file (OpenBLAS missing is the machine's) */
    if (e.code != CWM_EMODEL && e.code != CWM_EDEP) die("refusal is not CWM_EMODEL", &e);
    if (e.code == CWM_EMODEL && !strstr(e.msg, g_path)) die("refusal does not name the file", &e);
  } else {
    int width = 0;
    if (!key_int(text, "width", &width) || cwm_world_width(w) != width) die("loaded width differs", NULL);
    float *z = malloc(sizeof(float) * (size_t)width);
    if (cwm_world_encode(w, &sample, 1, z, &e)) die("encode", &e);
    for (int i = 0; i < width; i++)
      if (!isfinite(z[i])) die("encoding not finite", NULL);
    free(z);
    cwm_world_free(w);
  }
  free(text);
  return 0;
}
